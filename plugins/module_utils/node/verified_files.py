# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Large files on a node whose sha256 the controller knows (the K3s binary, the airgap image tarball): proven once by
hashing, then recorded with what the file system says about them, so a later run learns that they are unchanged from
one stat instead of hashing them again.

A record holds the file's sha256, size, mtime, ctime and inode. Writing to a file, replacing it, or changing its
mode or owner changes its ctime, which no user can set back: a file whose stat still equals its record is the file
that was hashed. Plain functions; the module (verified_files) adds the record's atomic write."""

import grp
import hashlib
import json
import os
import pwd
import tempfile

RECORD_VERSION = 1
CHUNK = 1 << 20


def sha256_file(path):
    """sha256 hex digest of a file, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def stat_entry(st):
    """What a record keeps of os.stat()."""
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "ctime_ns": st.st_ctime_ns, "ino": st.st_ino}


def load_record(path):
    """The record file's entries ({path: entry}); {} when it is missing, unreadable or of another version (every
    file is then hashed once more)."""
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("version") != RECORD_VERSION or not isinstance(data.get("files"), dict):
        return {}
    return data["files"]


def proven(entry, want, st):
    """Whether a record entry proves the file of stat `st` holds the wanted sha256."""
    return (
        isinstance(entry, dict)
        and entry.get("sha256") == want["sha256"]
        and entry == dict(stat_entry(st), sha256=want["sha256"])
    )


def attributes_differ(want, st):
    """Whether the file of stat `st` lacks the mode, owner or group a wanted file names (each optional)."""
    if want.get("mode") is not None and (st.st_mode & 0o7777) != int(str(want["mode"]), 8):
        return True
    if want.get("owner") is not None and st.st_uid != _id(want["owner"], pwd.getpwnam, "pw_uid"):
        return True
    return want.get("group") is not None and st.st_gid != _id(want["group"], grp.getgrnam, "gr_gid")


def _id(name, lookup, field):
    """A user's or group's number from its name or number (as copy takes either)."""
    name = str(name)
    return int(name) if name.isdigit() else getattr(lookup(name), field)


def inspect(files, record, hash_file=sha256_file):
    """Sort the wanted files ({path: {"sha256", "size"}}) by what the node holds.

    Returns {"current": [...], "stale": [...], "hashed": {path: sha256}, "bytes_hashed": n, "entries": {path: entry}}:
    current files are proven by the record or, when not, by hashing them (only a file of the wanted size is hashed);
    stale ones are missing or hold other bytes. `entries` is the record to keep: every current file's, and those
    of paths not asked about left as they were.
    """
    out = {"current": [], "stale": [], "hashed": {}, "bytes_hashed": 0, "entries": dict(record)}
    for path in sorted(files):
        want = files[path]
        try:
            st = os.stat(path)
        except OSError:
            out["stale"].append(path)
            out["entries"].pop(path, None)
            continue
        if attributes_differ(want, st):  # the copy that follows sets them (the content may be right)
            out["stale"].append(path)
            continue
        if proven(record.get(path), want, st):
            out["current"].append(path)
            continue
        if want.get("size") is not None and st.st_size != int(want["size"]):
            out["stale"].append(path)
            out["entries"].pop(path, None)
            continue
        digest = hash_file(path)
        out["hashed"][path] = digest
        out["bytes_hashed"] += st.st_size
        after = os.stat(path)
        if digest == want["sha256"].lower() and stat_entry(after) == stat_entry(st):
            out["current"].append(path)
            out["entries"][path] = dict(stat_entry(after), sha256=want["sha256"])
        else:
            out["stale"].append(path)
            out["entries"].pop(path, None)
    return out


def check(files, record_path, keep=True):
    """inspect() the files against the record at record_path, and keep the record it returns (unless keep is false:
    check mode). Raises OSError when the record cannot be written."""
    record = load_record(record_path)
    found = inspect(files, record)
    if keep and found["entries"] != record:
        write_record(record_path, found["entries"])
    return found


def bad_files(files):
    """Problems of the module's `files` argument, as text (the module fails on any)."""
    problems = []
    for path, want in sorted(files.items()):
        if not os.path.isabs(path) or ".." in path.split(os.sep):
            problems.append("%s: not an absolute path without '..'" % path)
        sha = str((want or {}).get("sha256") or "")
        if len(sha) != 64 or any(c not in "0123456789abcdefABCDEF" for c in sha):
            problems.append("%s: sha256 must be 64 hex digits, got %r" % (path, sha))
        mode = (want or {}).get("mode")
        if mode is not None and (not isinstance(mode, str) or len(mode) != 4 or any(c not in "01234567" for c in mode)):
            problems.append("%s: mode must be four octal digits as a string ('0600'), got %r" % (path, mode))
        for key, lookup in (("owner", pwd.getpwnam), ("group", grp.getgrnam)):
            name = (want or {}).get(key)
            if name is not None and not str(name).isdigit():
                try:
                    lookup(str(name))
                except KeyError:
                    problems.append("%s: %s %r does not exist on the node" % (path, key, name))
    return problems


def write_record(path, entries):
    """Write the record atomically (a temporary file in the same directory, then rename), mode 0600, its directory
    created 0700."""
    directory = os.path.dirname(path)
    os.makedirs(directory, mode=0o700, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".verified-", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump({"version": RECORD_VERSION, "files": entries}, handle, indent=1, sort_keys=True)
            handle.write("\n")
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
