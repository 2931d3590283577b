# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The configuration files of a node in one pass: directories, files with their text, symbolic links and paths that
must not exist. Plain read-only functions; the module adds ownership, mode and Ansible's atomic move."""

import os

from ansible_collections.aiinfra.k3s.plugins.module_utils.node.manifest_files import read


def changes(directories, files, links, absent):
    """What converging the node's files takes, without touching anything.

    directories: paths that must be directories; files: {path: wanted text}; links: {path: target};
    absent: paths that must not exist. Returns {"directories": [missing ones and their missing parents, parents
    first], "write": {path: (old text or None, new)},
    "links": {path: (old target or None, target)}, "remove": [existing paths]} (each sorted).
    """
    out = {"directories": [], "write": {}, "links": {}, "remove": []}
    missing = set()
    for path in set(directories):
        while not os.path.isdir(path):  # the directory and each missing parent, as `file` creates them
            missing.add(path)
            path = os.path.dirname(path)
    out["directories"] = sorted(missing)  # a parent sorts before its children
    for path, text in sorted(files.items()):
        old = None if os.path.islink(path) else read(path)
        if old != text:
            out["write"][path] = (old, text)
    for path, target in sorted(links.items()):
        old = os.readlink(path) if os.path.islink(path) else None
        if old != target:
            out["links"][path] = (old, target)
    for path in sorted(set(absent) - set(files) - set(links)):
        if os.path.lexists(path):
            out["remove"].append(path)
    return out


def present(paths):
    """The paths that exist, in the order given (a link counts when its target exists)."""
    return [p for p in paths if os.path.exists(p)]


def expand(path):
    """A path as Ansible's `path` type gives it to a module: ~ and environment variables expanded."""
    return os.path.expanduser(os.path.expandvars(path))


def wanted_mode(path, directories):
    """The mode a directory created by changes() gets: its own in `directories` ({path: mode}), else (a missing
    parent) that of the wanted directory below it, as `file` gives created parents the mode asked for."""
    if path in directories:
        return directories[path]
    below = sorted(d for d in directories if d.startswith(path.rstrip(os.sep) + os.sep))
    return directories[below[0]] if below else None


def free_space(path):
    """The file system that holds `path`, or will hold it once created: {"mount": its mount point, "available": bytes
    an unprivileged user may still write}, as `df --output=avail,target -B1` reports them, read at the nearest
    existing ancestor (in check mode the path may not exist yet)."""
    probe = os.path.abspath(path)
    while not os.path.exists(probe):
        probe = os.path.dirname(probe)
    stat = os.statvfs(probe)
    mount = probe
    while not os.path.ismount(mount):
        mount = os.path.dirname(mount)
    return {"mount": mount, "available": stat.f_bavail * stat.f_frsize}


def bad_paths(paths):
    """Paths the module refuses: relative ones and ones with a '..' component."""
    return [p for p in paths if not p or not os.path.isabs(p) or ".." in p.split(os.sep)]


def diff_entries(todo, secret_paths):
    """Ansible diff entries for a plan from changes(); the text of secret paths is never shown."""

    def shown(path, text, which):
        if path in secret_paths and text:
            return "(secret content not shown: %s)\n" % which
        return text or ""

    entries = []
    for path in todo["directories"]:
        entries.append({"before_header": path, "after_header": path, "before": "", "after": "(directory)\n"})
    for path, (old, new) in todo["write"].items():
        entries.append(
            {
                "before_header": path,
                "after_header": path,
                "before": shown(path, old, "old"),
                "after": shown(path, new, "new"),
            }
        )
    for path, (old, target) in todo["links"].items():
        before = "-> %s\n" % old if old else ""
        entries.append({"before_header": path, "after_header": path, "before": before, "after": "-> %s\n" % target})
    for path in todo["remove"]:
        entries.append(
            {"before_header": path, "after_header": path, "before": shown(path, "(exists)\n", "old"), "after": ""}
        )
    return entries
