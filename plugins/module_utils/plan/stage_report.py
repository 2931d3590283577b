# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Format the site.yml stage report: what ran, what was skipped and why."""

STATUSES = ("ran", "skipped")


def record(entries, stage, status, detail, run):
    """The report of this run with one more entry: the entries of run `run` + [{stage, status, detail, run}] (detail
    stripped). Entries of another run (a persistent fact cache keeps localhost's facts between runs) are dropped,
    so a report never shows a stage that did not run in this run. The list given is not changed. Raises ValueError
    on an empty stage name or a status not in STATUSES."""
    if not stage or status not in STATUSES:
        raise ValueError("a stage needs a name and a status in %s, not %r/%r" % (STATUSES, stage, status))
    kept = [e for e in entries or [] if e.get("run") == run]
    return [*kept, {"stage": stage, "status": status, "detail": (detail or "").strip(), "run": run}]


def report_lines(entries):
    """Lines 'STAGE  STATUS  detail' followed by a summary line; raises ValueError on a malformed entry."""
    lines = []
    width = max([len(e.get("stage", "")) for e in entries] + [5])
    for entry in entries:
        status = entry.get("status")
        if status not in STATUSES or not entry.get("stage"):
            raise ValueError("stage report entry needs a stage name and a status in %s: %r" % (STATUSES, entry))
        lines.append("%s  %-7s  %s" % (entry["stage"].ljust(width), status.upper(), entry.get("detail", "")))
    skipped = [e["stage"] for e in entries if e["status"] == "skipped"]
    summary = "%d stage(s): %d ran, %d skipped" % (len(entries), len(entries) - len(skipped), len(skipped))
    if skipped:
        summary += " (%s): the site is NOT complete" % ", ".join(skipped)
    lines.append(summary)
    return lines


# ---------------------------------------------------------------- the weights stage (model_registry's fetches)


def weight_records(results, host):
    """What one GPU node's aiinfra.k3s.model_weights runs put into its store, as the stage report shows it: one
    {host, path, source, peer, bytes, total, resumed, seconds} per model fetched (a model found current, or a failed
    fetch, is not listed). results: the registered loop's results, each with its loop item (a fetch entry)."""
    out = []
    for result in results or []:
        if not result.get("changed") or result.get("failed") or result.get("problems"):
            continue
        item = result.get("item") or {}
        out.append(
            {
                "host": host,
                "path": item.get("path"),
                "source": item.get("source"),
                "peer": item.get("peer"),
                "bytes": int(result.get("bytes_fetched") or 0),
                "total": int(result.get("bytes_total") or 0),
                "resumed": int(result.get("bytes_resumed") or 0),
                "seconds": float(result.get("seconds") or 0.0),
            }
        )
    return out


def weights_detail(records):
    """The weights stage's detail: per model, the nodes it went to, from where (the source, or the node that handed it
    on), how many bytes and how long; or that every store was current."""
    records = [r for r in records or [] if r]
    if not records:
        return "every GPU node's store held its models: nothing fetched"
    total = sum(r["bytes"] for r in records)
    parts = []
    for path in sorted({r["path"] for r in records}):
        rows = [r for r in records if r["path"] == path]
        hops = ", ".join(
            "%s from %s in %.1f s" % (r["host"], r["peer"] or "the source", r["seconds"])
            for r in sorted(rows, key=lambda r: r["host"])
        )
        parts.append("%s (%s; %.2f GB): %s" % (path, rows[0]["source"], sum(r["bytes"] for r in rows) / 1e9, hops))
    return "%d fetch(es), %.2f GB: %s" % (len(records), total / 1e9, "; ".join(parts))
