# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kubernetes minor versions: how long upstream supports them, and the path of a K3s upgrade.

K3s and Kubernetes upgrade one minor version per step (1.33 -> 1.34 -> 1.35), never skipping one; an
upgrade plan that would skip is refused with the steps to take instead.
"""

import re

# The date the two tables below were written (and checked against the sources named beside them).
WRITTEN = "2026-12-03"

# Kubernetes minor -> end of upstream support. 1.30-1.32: kubernetes/website data/releases/eol.yaml (final
# patches 1.30.14, 1.31.14, 1.32.13); 1.33-1.37: the dates kubernetes.io/releases lists for each release.
END_OF_SUPPORT = {
    "1.30": "2025-07-15",
    "1.31": "2025-11-11",
    "1.32": "2026-02-28",
    "1.33": "2026-06-28",
    "1.34": "2026-10-27",
    "1.35": "2027-02-28",
    "1.36": "2027-06-28",
    "1.37": "2027-10-28",
}

# The newest K3s release of each minor whose release notes were read (github.com/k3s-io/k3s/releases): the stops
# an upgrade path names. A newer patch of the same minor is as good a stop.
NEWEST_K3S = {
    "1.33": "v1.33.13+k3s2",
    "1.34": "v1.34.9+k3s1",
    "1.35": "v1.35.8+k3s1",
    "1.36": "v1.36.4+k3s1",
    "1.37": "v1.37.2+k3s1",
}

MINOR_RE = re.compile(r"^v?1\.(\d+)\.\d+")


def minor(version):
    """'v1.33.5+k3s1' -> 33; None when the text is not a Kubernetes or K3s version."""
    match = MINOR_RE.match(str(version or ""))
    return int(match.group(1)) if match else None


def end_of_support(version):
    """The end-of-support date (YYYY-MM-DD) of the version's minor, or None when the table does not know it."""
    found = minor(version)
    return END_OF_SUPPORT.get("1.%d" % found) if found is not None else None


def upgrade_path(running, target):
    """{steps, problem} for upgrading nodes running `running` (versions as the nodes report them) to `target`.

    steps: the releases to install in order, the target last; problem: why the plan cannot be run as it is
    (a skipped minor, a downgrade of a minor, an unreadable version), or "".
    """
    to = minor(target)
    if to is None:
        return {"steps": [], "problem": "k3s_version %r is not a K3s release (v1.x.y+k3sN)" % (target,)}
    found = sorted({m for m in (minor(v) for v in running or []) if m is not None})
    if not found:
        return {"steps": [target], "problem": ""}
    oldest, newest = found[0], found[-1]
    if to < newest:
        return {
            "steps": [],
            "problem": "k3s_version %s is older than the 1.%d the cluster runs: K3s does not downgrade a minor "
            "version; set k3s_version to a 1.%d release or newer" % (target, newest, newest),
        }
    steps = [NEWEST_K3S.get("1.%d" % m, "a v1.%d release" % m) for m in range(oldest + 1, to)] + [target]
    if to - oldest <= 1:
        return {"steps": steps, "problem": ""}
    return {
        "steps": steps,
        "problem": "the cluster runs 1.%d and k3s_version is %s: K3s and Kubernetes upgrade one minor version at a "
        "time, so this would skip %s. Upgrade in steps, running playbooks/upgrade.yml once per step with "
        "k3s_version set to: %s"
        % (oldest, target, ", ".join("1.%d" % m for m in range(oldest + 1, to)), " -> ".join(steps)),
    }
