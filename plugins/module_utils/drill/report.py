# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The drill's availability arithmetic per phase: share of requests answered, p50/p95/p99 latency, longest outage.
Plain functions over the request records that drill.run_load returns."""

import math


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
    """Per phase: requests, answered, availability %, p50/p95/p99 latency of answered requests, longest outage.

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
                "p50_latency_s": percentile([r["latency"] for r in answered], 0.50),
                "p95_latency_s": percentile([r["latency"] for r in answered], 0.95),
                "p99_latency_s": percentile([r["latency"] for r in answered], 0.99),
                "longest_outage_s": round(longest_outage(inside), 3),
            }
        )
    return out


def failing_phases(report, threshold):
    """Phases whose availability is under `threshold` percent (or that sent nothing)."""
    return [p for p in report if p["availability"] is None or p["availability"] < threshold]


def ready_pods(pods, off_node=""):
    """Names of the pods (Kubernetes Pod objects) that are Running and Ready, not being deleted, and not on off_node:
    what still serves after a node loss. A pod on a node that stopped answering keeps its Running phase until it is
    deleted, but the node lifecycle controller turns its Ready condition False."""
    out = []
    for pod in pods or []:
        meta, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
        ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
        serving = ready and status.get("phase") == "Running" and not meta.get("deletionTimestamp")
        if serving and (not off_node or spec.get("nodeName") != off_node):
            out.append(meta.get("name"))
    return sorted(out)
