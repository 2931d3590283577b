# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fault-injection drill: a bounded, paced request stream against the site's own gateway. The availability
arithmetic per phase is in drill_report.py (no network code, so the filter that uses it loads nothing else)."""

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from urllib.error import HTTPError, URLError

from ansible.module_utils.urls import open_url


def send(url, headers, body, timeout, ca_file=None):
    """One request: (HTTP status or 0 when nothing came back, error text or empty)."""
    data = body.encode() if body else None
    try:
        response = open_url(
            url,
            data=data,
            headers=dict(headers or {}),
            method="POST" if data else "GET",
            timeout=timeout,
            ca_path=ca_file,
            follow_redirects="none",
        )
        response.read()
        return response.status, ""
    except HTTPError as exc:
        return exc.code, "HTTP %d" % exc.code
    except (URLError, OSError, ValueError) as exc:
        return 0, str(getattr(exc, "reason", exc))[:200]


def run_load(
    url, rate, duration, max_requests, timeout=10.0, headers=None, body="", ca_file=None, sender=None, stop=None
):
    """Send requests at `rate` per second until `duration` seconds or `max_requests`, whichever comes first, or
    until stop() (checked before each request) is true.

    Every request is bounded by `timeout`; at most rate * timeout + 1 are in flight. Returns one record per
    request: {t (start, epoch s), latency (s), status, ok, error}.
    """
    if rate <= 0 or duration <= 0 or max_requests <= 0:
        raise ValueError("rate, duration and max_requests must be positive")
    sender = sender or (lambda: send(url, headers, body, timeout, ca_file))
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
