# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kernel parameters in one pass: the persistent file under /etc/sysctl.d rendered from a mapping, and the live
values under /proc/sys compared with it. Plain functions; the module writes."""

import os

HEADER = "# Written by aiinfra.k3s: edits are overwritten on the next run.\n"


def normal(value):
    """A sysctl value as the kernel prints it: booleans as 0/1, fields separated by one space."""
    if isinstance(value, bool):
        value = int(value)
    return " ".join(str(value).split())


def render(values):
    """The text of the persistent file: one key=value line per parameter, sorted."""
    return HEADER + "".join("%s=%s\n" % (key, normal(values[key])) for key in sorted(values))


def proc_path(key, root="/proc/sys"):
    """/proc/sys path of a key; dots separate levels (a slash-separated key is taken as is)."""
    return os.path.join(root, *(key.split("/") if "/" in key else key.split(".")))


def bad_keys(values):
    """Keys that are not sysctl names (empty, with whitespace, '=' or a '..' level)."""
    return sorted(k for k in values if not k or any(c.isspace() or c == "=" for c in k) or ".." in k or "//" in k)


def live_changes(values, root="/proc/sys"):
    """{key: (live value or None when the kernel has no such parameter, wanted value)} for each value that differs."""
    out = {}
    for key in sorted(values):
        want = normal(values[key])
        try:
            with open(proc_path(key, root)) as handle:
                live = normal(handle.read())
        except OSError:
            live = None
        if live != want:
            out[key] = (live, want)
    return out
