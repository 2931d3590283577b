# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Read whole Kubernetes collections with paginated LISTs (limit/continue), or from `kubectl get -o json` files."""

import json

MAX_PAGES = 100000


class ListError(Exception):
    """A list could not be read; the message says which and why."""


def iter_all(fetch_page, limit=500, stats=None):
    """Items of one collection, page by page. fetch_page(limit, continue_token) -> parsed List; one LIST per
    page. `stats` (a dict) receives the page count."""
    token, pages = None, 0
    while True:
        page = fetch_page(limit, token)
        pages += 1
        if stats is not None:
            stats["pages"] = pages
        yield from page.get("items") or []
        token = (page.get("metadata") or {}).get("continue")
        if not token:
            return
        if pages >= MAX_PAGES:
            raise ListError("more than %d pages; the continue token never ended" % MAX_PAGES)


def list_all(fetch_page, limit=500):
    """All items of one collection and the number of pages read."""
    stats = {}
    items = list(iter_all(fetch_page, limit, stats))
    return items, stats.get("pages", 0)


_WS = " \t\n\r"


def _skip(text, idx, chars=_WS):
    while idx < len(text) and text[idx] in chars:
        idx += 1
    return idx


def iter_list_text(text, where="input"):
    """Yield the items of a JSON List one by one without building the whole document.

    Only one item is alive at a time (plus the text itself), so a caller that keeps a slim copy of each
    item needs a fraction of the memory json.loads of the whole List would.
    """
    decoder = json.JSONDecoder()
    idx = _skip(text, 0)
    if text[idx : idx + 1] != "{":
        raise ListError("%s is not a JSON object" % where)
    idx += 1
    found = False
    kind = None
    while True:
        idx = _skip(text, idx, _WS + ",")
        if text[idx : idx + 1] == "}":
            break
        key, idx = decoder.raw_decode(text, idx)
        idx = _skip(text, idx)
        if text[idx : idx + 1] != ":":
            raise ListError("%s: expected ':' after key %r at offset %d" % (where, key, idx))
        idx = _skip(text, idx + 1)
        if key == "items":
            found = True
            if text[idx : idx + 1] == "n":  # "items": null
                idx += 4
                continue
            if text[idx : idx + 1] != "[":
                raise ListError("%s: 'items' is not an array" % where)
            idx += 1
            while True:
                idx = _skip(text, idx, _WS + ",")
                if text[idx : idx + 1] == "]":
                    idx += 1
                    break
                item, idx = decoder.raw_decode(text, idx)
                yield item
        else:
            value, idx = decoder.raw_decode(text, idx)
            if key == "kind":
                kind = value
    if not found:
        if kind and kind != "List":
            # a single object (kubectl get node NAME -o json)
            yield json.loads(text)
            return
        raise ListError("%s is not the JSON of `kubectl get -o json` (no items)" % where)


def iter_list_file(path):
    """Items of a `kubectl get -o json` file, decoded one at a time (see iter_list_text)."""
    try:
        with open(path) as handle:
            text = handle.read()
    except OSError as exc:
        raise ListError("cannot read %s: %s" % (path, exc)) from exc
    try:
        yield from iter_list_text(text, path)
    except ValueError as exc:
        raise ListError("cannot parse %s: %s" % (path, exc)) from exc
