# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The configuration files of a node in one pass: directories, files with their text, symbolic links and paths that
must not exist. Plain read-only functions; the module adds ownership, mode and Ansible's atomic move."""

import grp
import os
import pwd

from ansible_collections.aiinfra.k3s.plugins.module_utils.node.file_ops import octal_mode
from ansible_collections.aiinfra.k3s.plugins.module_utils.node.manifest_files import read

# The options of aiinfra.k3s.node_files (its module and its controller-side action share them).
ARGUMENT_SPEC = {
    "directories": {"type": "dict", "default": {}},
    "files": {
        "type": "list",
        "elements": "dict",
        "default": [],
        "options": {
            "path": {"type": "path", "required": True},
            "content": {"type": "str", "required": True},
            "mode": {"type": "str", "default": "0644"},
        },
    },
    "secret_files": {"type": "dict", "default": {}, "no_log": True},
    "links": {"type": "dict", "default": {}},
    "absent": {"type": "list", "elements": "str", "default": []},
    "probe": {"type": "list", "elements": "str", "default": []},
    "free_space": {"type": "list", "elements": "str", "default": []},
    "verified": {"type": "dict", "default": {}},
    "verified_record": {"type": "path", "default": "/var/lib/aiinfra/verified-files.json"},
    "owner": {"type": "str"},
    "group": {"type": "str"},
}


def wanted(params):
    """The options as the module acts on them: {texts: {path: text}, secrets: set of paths, modes: {path: mode},
    dirs: {path: mode}, links, absent, probe: {given: expanded}, measure: {given: expanded}, bad: refused paths}."""
    texts = {f["path"]: f["content"] for f in params["files"]}
    secrets = {expand(str(k)): str(v) for k, v in params["secret_files"].items()}
    texts.update(secrets)
    modes = {f["path"]: f["mode"] for f in params["files"]}
    modes.update({path: "0600" for path in secrets})
    dirs = {expand(str(k)): v if isinstance(v, int) else str(v or "0755") for k, v in params["directories"].items()}
    links = {expand(str(k)): str(v) for k, v in params["links"].items()}
    absent = [expand(path) for path in params["absent"]]
    probe = {path: expand(path) for path in params["probe"]}
    measure = {path: expand(path) for path in params["free_space"]}
    bad = bad_paths(list(dirs) + list(texts) + list(links) + absent + list(probe.values()) + list(measure.values()))
    return {"texts": texts, "secrets": set(secrets), "modes": modes, "dirs": dirs, "links": links, "absent": absent,
            "probe": probe, "measure": measure, "bad": bad}  # fmt: skip


def _id(name, table):
    if name is None:
        return None
    if str(name).isdigit():
        return int(name)
    try:
        return table(str(name))
    except KeyError:
        return -1  # no such user or group here: never equal, so the module decides (and says so)


def attributes_hold(path, mode=None, owner=None, group=None):
    """Whether an existing path already has mode, owner and group (each when given); a symbolic mode cannot be told
    without applying it, so it never holds here."""
    if mode is not None and octal_mode(mode) is None:
        return False
    if (owner is not None or group is not None) and os.path.islink(path):
        return False  # the module sets a link's own owner, which os.stat would not show
    stat = os.stat(path)
    return (
        (mode is None or (stat.st_mode & 0o7777) == octal_mode(mode))
        and (owner is None or stat.st_uid == _id(owner, lambda n: pwd.getpwnam(n).pw_uid))
        and (group is None or stat.st_gid == _id(group, lambda n: grp.getgrnam(n).gr_gid))
    )


def converged(params):
    """The module's result when it would change nothing (read in this process), else None: the module must run."""
    want = wanted(params)
    if want["bad"] or want["links"] or params.get("verified"):
        return None
    todo = changes(list(want["dirs"]), want["texts"], want["links"], want["absent"])
    if todo["directories"] or todo["write"] or todo["links"] or todo["remove"]:
        return None
    for path, mode in list(want["dirs"].items()) + [(path, want["modes"][path]) for path in want["texts"]]:
        if not attributes_hold(path, mode, params["owner"], params["group"]):
            return None
    return {
        "changed": False,
        "written": [],
        "present": [path for path in want["probe"] if present([want["probe"][path]])],
        "free_space": {path: free_space(want["measure"][path]) for path in want["measure"]},
    }


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
