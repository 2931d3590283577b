# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Read whole Kubernetes collections with paginated LISTs (limit/continue), or from `kubectl get -o json` files."""

import json

MAX_PAGES = 100000


class ListError(Exception):
    """A list could not be read; the message says which and why."""


def list_all(fetch_page, limit=500):
    """All items of one collection. fetch_page(limit, continue_token) -> parsed List; one LIST per page."""
    items, token, pages = [], None, 0
    while True:
        page = fetch_page(limit, token)
        pages += 1
        items.extend(page.get("items") or [])
        token = (page.get("metadata") or {}).get("continue")
        if not token:
            return items, pages
        if pages >= MAX_PAGES:
            raise ListError("more than %d pages; the continue token never ended" % MAX_PAGES)


def load_list_file(path):
    """Items of a `kubectl get ... -o json` file (a List, or a single object)."""
    try:
        with open(path) as handle:
            data = json.load(handle)
    except (OSError, ValueError) as exc:
        raise ListError("cannot read %s: %s" % (path, exc)) from exc
    if isinstance(data, dict) and "items" in data:
        return data["items"] or []
    if isinstance(data, dict) and data.get("kind"):
        return [data]
    raise ListError("%s is not the JSON of `kubectl get -o json` (no items)" % path)
