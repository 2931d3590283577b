# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The collection's own nftables table on a node (the host_firewall module's decisions, as plain functions).

The table lives in three places: its ruleset file, the systemd unit that loads that file at boot (before K3s), and
the kernel. A digest of the table as the kernel listed it right after the last load is kept beside the file; the
table is loaded again (the unit restarted: one nft transaction, the old table replaced, never absent in between)
when the file or the unit was written, when the kernel has no such table, or when its listing no longer hashes to
that digest (changed by hand since)."""

import hashlib
import os
import re

DIGEST_NAME = "loaded.sha256"
TABLE_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,63}$")

# Why the table is loaded again, as codes (the result's load_reasons).
RULESET_WRITTEN = "ruleset_written"
UNIT_WRITTEN = "unit_written"
TABLE_MISSING = "table_missing"
TABLE_CHANGED = "table_changed"


def unit_text(table, ruleset_path, nft):
    """The oneshot unit that loads ruleset_path with nft at boot, before the network and K3s come up."""
    return (
        "# Managed by aiinfra.k3s (role prereq).\n"
        "[Unit]\n"
        "Description=aiinfra.k3s host firewall (nftables table inet %(table)s)\n"
        "DefaultDependencies=no\n"
        "Wants=network-pre.target\n"
        "Before=network-pre.target shutdown.target k3s.service k3s-agent.service\n"
        "Conflicts=shutdown.target\n"
        "\n"
        "[Service]\n"
        "Type=oneshot\n"
        "RemainAfterExit=yes\n"
        "ExecStart=%(nft)s -f %(path)s\n"
        "ExecReload=%(nft)s -f %(path)s\n"
        "\n"
        "[Install]\n"
        "WantedBy=sysinit.target\n"
    ) % {"table": table, "nft": nft, "path": ruleset_path}


def digest(listing):
    """The sha256 (hex) of the kernel's listing of the table, as recorded after a load: of the listing without its
    final line ends, as the role's command task gave it before this module (a digest it recorded still matches)."""
    return hashlib.sha256(listing.rstrip("\r\n").encode("utf-8")).hexdigest()


def digest_path(ruleset_path):
    return os.path.join(os.path.dirname(ruleset_path), DIGEST_NAME)


def load_reasons(ruleset_written, unit_written, list_rc, listing, recorded):
    """Why the table must be loaded again (codes, in this order), [] when the kernel holds what was loaded last.

    list_rc and listing: `nft list table inet <table>`'s exit code and output; recorded: the digest file's text
    (None when there is none)."""
    reasons = []
    if ruleset_written:
        reasons.append(RULESET_WRITTEN)
    if unit_written:
        reasons.append(UNIT_WRITTEN)
    if list_rc != 0:
        reasons.append(TABLE_MISSING)
    elif (recorded or "").strip() != digest(listing):
        reasons.append(TABLE_CHANGED)
    return reasons


def bad_params(table, ruleset_path, unit_path):
    """Problems of the parameters, as messages (the module fails on the first)."""
    out = []
    if not isinstance(table, str) or not TABLE_NAME.match(table):
        out.append("table is %r, not an nftables table name (a letter, then letters, digits or _)" % (table,))
    for name, path in (("path", ruleset_path), ("unit", unit_path)):
        if not isinstance(path, str) or not os.path.isabs(path):
            out.append("%s is %r, not an absolute path" % (name, path))
    if isinstance(unit_path, str) and not unit_path.endswith(".service"):
        out.append("unit is %r, not the path of a .service file" % (unit_path,))
    return out
