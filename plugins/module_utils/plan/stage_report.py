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
