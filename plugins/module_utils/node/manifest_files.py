# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The files of K3s's auto-deploy directory in one pass: each wanted file written only when its content differs,
each unwanted one read (so that its objects can be deleted through the API) and removed. Plain functions on a
directory; the module adds ownership, mode and Ansible's atomic move."""

import os


def read(path):
    """The text of a file, or None when there is none."""
    try:
        with open(path, "rb") as handle:
            return handle.read().decode("utf-8")
    except FileNotFoundError:
        return None


def changes(directory, files, absent):
    """What converging the directory takes, without touching it.

    files: {file name: wanted text}; absent: file names that must not exist. Returns {"write": {name: (old text or
    None, new text)}, "remove": {name: old text}} for the files that differ or exist.
    """
    out = {"write": {}, "remove": {}}
    for name, text in sorted(files.items()):
        old = read(os.path.join(directory, name))
        if old != text:
            out["write"][name] = (old, text)
    for name in sorted(set(absent) - set(files)):
        old = read(os.path.join(directory, name))
        if old is not None:
            out["remove"][name] = old
    return out


def bad_names(names):
    """File names that would leave the directory or hide a file (path separators, '..', leading dots)."""
    return [n for n in names if not n or "/" in n or "\\" in n or n.startswith(".")]
