# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The gateway's auth hook: LiteLLM's ``general_settings.custom_auth``, run by the LiteLLM proxy in each gateway pod.

The litellm role ships this file in the gateway's ConfigMap (as aiinfra_auth.py, next to config.yaml, where
LiteLLM loads the hook from). It must not import the collection: the standard library, and LiteLLM only inside
the hook. What it does:

- a presented key is hashed (SHA-256) and compared, in constant time, with every consumer's hash in the
  consumers file (the Secret the role renders from the site plan; re-read when the kubelet updates it);
- a consumer's key becomes LiteLLM's ``UserAPIKeyAuth`` with its alias, team, models and rpm/tpm limits, which
  LiteLLM enforces (the config turns on its checks after custom auth), labels its metrics with and, given a
  Redis, counts across gateway replicas;
- the master key (LITELLM_MASTER_KEY) is the admin; any other key, or none, is refused with 401;
- each accepted request gets an X-Request-ID (the client's, else a new one), which LiteLLM forwards to the model
  server, and one JSON log line with that id, the consumer and the route, never the key.
"""

import hashlib
import hmac
import json
import logging
import os
import uuid

CONSUMERS_NAME = "consumers.json"
CONSUMERS_ENV = "AIINFRA_CONSUMERS_FILE"
REQUEST_ID = "x-request-id"
# LiteLLM takes its call id (the x-litellm-call-id response header, its error logs) from this request header.
CALL_ID = "x-litellm-call-id"
MAX_REQUEST_ID = 128
# What a consumer key may call: inference and the model list. Everything else (key, user, team and model
# management, /health which calls every model, /metrics, settings, spend logs, the UI) is the admin's: 403.
CONSUMER_ROUTES = frozenset(
    (
        "/v1/chat/completions",
        "/chat/completions",
        "/v1/completions",
        "/completions",
        "/v1/embeddings",
        "/embeddings",
        "/v1/models",
        "/models",
    )
)
# A child of LiteLLM's proxy logger: its JSON handler writes the line (JSON_LOGS), at INFO whatever LITELLM_LOG.
LOG = logging.getLogger("LiteLLM Proxy.aiinfra_auth")
LOG.setLevel(logging.INFO)


def key_hash(key):
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def bearer(value):
    """The key of an Authorization header value (or of a bare key)."""
    value = (value or "").strip()
    if value.lower().startswith("bearer "):
        value = value[7:].strip()
    return value


class Consumers(object):
    """The consumers file ({"consumers": [{key_sha256, alias, team, models, rpm_limit, tpm_limit}]}), re-read when
    it changes (the kubelet swaps a Secret volume's files when the Secret changes)."""

    def __init__(self, path):
        self.path = path
        self.stamp = None
        self.records = []

    def current(self):
        try:
            info = os.stat(self.path)
        except OSError:
            self.stamp, self.records = None, []
            return self.records
        stamp = (info.st_mtime_ns, info.st_ino, info.st_size)
        if stamp != self.stamp:
            with open(self.path) as handle:
                data = json.load(handle)
            self.records = [r for r in data.get("consumers", []) if r.get("key_sha256")]
            self.stamp = stamp
        return self.records

    def find(self, key):
        """The record whose hash matches the key's, comparing against every record (no early exit)."""
        digest = key_hash(key)
        found = None
        for record in self.current():
            if hmac.compare_digest(record["key_sha256"], digest) and found is None:
                found = record
        return found


def identify(key, consumers, master_key):
    """("admin", None), ("consumer", record) or (None, None) for a presented key."""
    if not key:
        return None, None
    # Compare the master key by digest too, so its length leaks nothing.
    if master_key and hmac.compare_digest(key_hash(key), key_hash(master_key)):
        return "admin", None
    record = consumers.find(key)
    if record is not None:
        return "consumer", record
    return None, None


def request_id(headers):
    """The client's X-Request-ID when it is a printable token of sane length, else a new one."""
    given = (headers.get(REQUEST_ID) or "").strip()
    if given and len(given) <= MAX_REQUEST_ID and all(33 <= ord(c) < 127 for c in given):
        return given, False
    return uuid.uuid4().hex, True


def set_request_id(scope, value, replace=False):
    """Put X-Request-ID (and LiteLLM's call id) into the ASGI request's headers, before LiteLLM reads them to
    forward the x- headers to the model server. The list is changed in place: Starlette's Headers of this request
    read that same list."""
    headers = scope.setdefault("headers", [])
    for name in (REQUEST_ID, CALL_ID):
        raw = name.encode()
        present = [i for i, (k, _value) in enumerate(headers) if k.lower() == raw]
        if present and not replace:
            continue
        for i in reversed(present):
            del headers[i]
        headers.append((raw, value.encode()))


def log_line(role, record, rid, path, outcome):
    """One JSON line per request: the request id, the consumer (or admin), the route, the outcome; never a key."""
    line = {
        "event": "aiinfra_auth",
        "request_id": rid,
        "consumer": record["alias"] if record else role or "unknown",
        "team": record["team"] if record else "",
        "route": path,
        "outcome": outcome,
    }
    LOG.info(json.dumps(line, sort_keys=True))
    return line


CONSUMERS = Consumers(os.environ.get(CONSUMERS_ENV, os.path.join(os.path.dirname(__file__), CONSUMERS_NAME)))


async def user_api_key_auth(request, api_key):
    """LiteLLM's custom_auth entry point."""
    from fastapi import HTTPException
    from litellm.proxy._types import LitellmUserRoles, UserAPIKeyAuth  # inside the gateway only

    key = bearer(api_key)
    role, record = identify(key, CONSUMERS, os.environ.get("LITELLM_MASTER_KEY", ""))
    rid, generated = request_id(request.headers)
    set_request_id(request.scope, rid, replace=generated)
    path = request.url.path
    if role is None:
        log_line(None, None, rid, path, "unknown key")
        raise HTTPException(status_code=401, detail="invalid API key")
    if role == "consumer" and path.rstrip("/") not in CONSUMER_ROUTES:
        log_line(role, record, rid, path, "admin route refused")
        raise HTTPException(status_code=403, detail="a consumer key may call inference routes only")
    log_line(role, record, rid, path, "ok")
    if role == "admin":
        return UserAPIKeyAuth(api_key=key_hash(key), user_role=LitellmUserRoles.PROXY_ADMIN, key_alias="admin")
    return UserAPIKeyAuth(
        api_key=record["key_sha256"],
        key_alias=record["alias"],
        team_id=record["team"],
        team_alias=record["team"],
        models=list(record["models"]),
        rpm_limit=int(record["rpm_limit"]),
        tpm_limit=int(record["tpm_limit"]),
    )
