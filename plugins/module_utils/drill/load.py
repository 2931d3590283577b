# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fault-injection drill: a bounded, paced request stream against the site's own gateway. The availability
arithmetic per phase is in report.py (no network code, so the filter that uses it loads nothing else)."""

import http.client
import json
import socket
import ssl
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from urllib.error import HTTPError, URLError
from urllib.parse import urlsplit

from ansible.module_utils.urls import open_url


def split_address(text, default_port):
    """(host, port) of `host:port`, `[v6]:port` or a bare host (the URL's port then)."""
    text = str(text).strip()
    if text.startswith("["):
        host, _sep, rest = text[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
    elif text.count(":") == 1:
        host, port = text.split(":")
    else:
        host, port = text, ""
    if not host:
        raise ValueError("connect_to %r names no host" % (text,))
    return host, int(port) if port else int(default_port)


def tls_context(ca_file=None, validate_certs=True):
    if not validate_certs:
        return ssl._create_unverified_context()  # nosec B323 - asked for by validate_certs: false, named in the report
    return ssl.create_default_context(cafile=ca_file or None)


class _ConnectToHTTPS(http.client.HTTPSConnection):
    """HTTPS to another address than the URL's host (curl's --connect-to): the URL's host stays the TLS server name
    (SNI, and the name the certificate is checked against) and the Host header."""

    def __init__(self, name, address, port, timeout, context):
        super().__init__(name, port, timeout=timeout, context=context)
        self._address = address

    def connect(self):
        sock = socket.create_connection((self._address, self.port), self.timeout)
        self.sock = self._context.wrap_socket(sock, server_hostname=self.host)


def send_to(url, connect_to, headers, body, timeout, ca_file=None, validate_certs=True):
    """One request to `url` sent to the address `connect_to` instead of the URL's host: (status, error)."""
    parts = urlsplit(url)
    https = parts.scheme == "https"
    address, port = split_address(connect_to, parts.port or (443 if https else 80))
    path = (parts.path or "/") + ("?" + parts.query if parts.query else "")
    data = body.encode() if body else None
    try:
        if https:
            conn = _ConnectToHTTPS(parts.hostname, address, port, timeout, tls_context(ca_file, validate_certs))
        else:
            conn = http.client.HTTPConnection(address, port, timeout=timeout)
        try:
            sent = dict(headers or {}, Host=parts.netloc)
            conn.request("POST" if data else "GET", path, body=data, headers=sent)
            response = conn.getresponse()
            response.read()
            status = response.status
        finally:
            conn.close()
    except (OSError, http.client.HTTPException, ValueError) as exc:
        return 0, str(exc)[:200]
    return status, "" if status < 400 else "HTTP %d" % status


def send(url, headers, body, timeout, ca_file=None, validate_certs=True, connect_to=None):
    """One request: (HTTP status or 0 when nothing came back, error text or empty)."""
    if connect_to:
        return send_to(url, connect_to, headers, body, timeout, ca_file, validate_certs)
    data = body.encode() if body else None
    try:
        response = open_url(
            url,
            data=data,
            headers=dict(headers or {}),
            method="POST" if data else "GET",
            timeout=timeout,
            ca_path=ca_file,
            validate_certs=validate_certs,
            follow_redirects="none",
        )
        response.read()
        return response.status, ""
    except HTTPError as exc:
        return exc.code, "HTTP %d" % exc.code
    except (URLError, OSError, ValueError) as exc:
        return 0, str(getattr(exc, "reason", exc))[:200]


def run_load(
    url,
    rate,
    duration,
    max_requests,
    timeout=10.0,
    headers=None,
    body="",
    ca_file=None,
    sender=None,
    stop=None,
    validate_certs=True,
    connect_to=None,
):
    """Send requests at `rate` per second until `duration` seconds or `max_requests`, whichever comes first, or
    until stop() (checked before each request) is true.

    Every request is bounded by `timeout`; at most rate * timeout + 1 are in flight. Returns one record per
    request: {t (start, epoch s), latency (s), status, ok, error}.
    """
    if rate <= 0 or duration <= 0 or max_requests <= 0:
        raise ValueError("rate, duration and max_requests must be positive")
    sender = sender or (lambda: send(url, headers, body, timeout, ca_file, validate_certs, connect_to))
    records, lock = [], threading.Lock()

    def one(start):
        status, error = sender()
        latency = time.time() - start
        with lock:
            records.append(
                {"t": start, "latency": latency, "status": status, "ok": 200 <= status < 400, "error": error}
            )

    begin = time.time()
    interval = 1.0 / rate
    workers = max(1, int(rate * timeout) + 1)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for i in range(int(max_requests)):
            due = begin + i * interval
            if due - begin >= duration or (stop is not None and stop()):
                break
            delay = due - time.time()
            if delay > 0:
                time.sleep(delay)
            pool.submit(one, time.time())
    return sorted(records, key=lambda r: r["t"])


def write_records(path, records):
    with open(path, "w") as handle:
        json.dump(records, handle)
