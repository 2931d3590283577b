# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fault-injection drill: a bounded, paced request stream against the site's own gateway, and the availability
arithmetic per phase (share of requests answered, p95 latency, longest outage)."""

import json
import math
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


def run_load(url, rate, duration, max_requests, timeout=10.0, headers=None, body="", ca_file=None, sender=None):
    """Send requests at `rate` per second until `duration` seconds or `max_requests`, whichever comes first.

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
            if due - begin >= duration:
                break
            delay = due - time.time()
            if delay > 0:
                time.sleep(delay)
            pool.submit(one, time.time())
    return sorted(records, key=lambda r: r["t"])


def percentile(values, q):
    if not values:
        return None
    ordered = sorted(values)
    rank = max(math.ceil(q * len(ordered)) - 1, 0)  # nearest rank
    return ordered[min(rank, len(ordered) - 1)]


def longest_outage(records):
    """Longest time from the first failed request of a run of failures to the next answered one (or the end)."""
    longest, since = 0.0, None
    for record in records:
        if not record["ok"] and since is None:
            since = record["t"]
        elif record["ok"] and since is not None:
            longest, since = max(longest, record["t"] - since), None
    if since is not None and records:
        longest = max(longest, records[-1]["t"] + records[-1]["latency"] - since)
    return longest


def availability(records, phases):
    """Per phase: requests, answered, availability %, p95 latency of answered requests, longest outage.

    phases: [{name, start}] in time order; a phase lasts until the next one starts (the last until the end).
    A request belongs to the phase in which its answer (or failure) came: one in flight when a fault is
    injected is counted with the fault.
    """
    out = []
    for i, phase in enumerate(phases):
        end = phases[i + 1]["start"] if i + 1 < len(phases) else float("inf")
        inside = [r for r in records if phase["start"] <= r["t"] + r["latency"] < end]
        answered = [r for r in inside if r["ok"]]
        out.append(
            {
                "phase": phase["name"],
                "requests": len(inside),
                "answered": len(answered),
                "availability": round(100.0 * len(answered) / len(inside), 2) if inside else None,
                "p95_latency_s": percentile([r["latency"] for r in answered], 0.95),
                "longest_outage_s": round(longest_outage(inside), 3),
            }
        )
    return out


def failing_phases(report, threshold):
    """Phases whose availability is under `threshold` percent (or that sent nothing)."""
    return [p for p in report if p["availability"] is None or p["availability"] < threshold]


def write_records(path, records):
    with open(path, "w") as handle:
        json.dump(records, handle)
