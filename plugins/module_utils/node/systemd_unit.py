# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a systemd unit needs, from what `systemctl show` says of it: plain functions; the module systemd_unit runs
the commands."""

import re

# The properties the decisions read (`systemctl show -p ...`).
PROPERTIES = ("LoadState", "ActiveState", "UnitFileState", "NeedDaemonReload")
# ActiveStates in which a unit counts as started (as ansible.builtin.systemd_service counts them): a Type=notify
# unit such as K3s's is `activating` until it says it is ready.
RUNNING = frozenset(("active", "activating", "reloading"))
# UnitFileStates in which a unit counts as enabled.
ENABLED = frozenset(("enabled", "enabled-runtime", "static", "alias", "indirect", "generated"))
UNIT_NAME = re.compile(r"^[A-Za-z0-9:_.\\@-]+\.(service|socket|timer|target|path|mount)$")


def parse_show(text):
    """{property: value} of `systemctl show` output (KEY=VALUE lines)."""
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            out[key.strip()] = value.strip()
    return out


def actions(status, enabled=None, started=None):
    """The systemctl actions, in order, that bring a unit of `status` (parse_show) to what is asked: daemon-reload
    when systemd holds an older text of the unit (NeedDaemonReload) or has not loaded it, enable, start. Asked for
    nothing (a verification only), it does nothing, not even a reload."""
    todo = []
    if enabled is None and started is None:
        return todo
    if status.get("NeedDaemonReload") == "yes" or status.get("LoadState") != "loaded":
        todo.append("daemon-reload")
    if enabled is True and status.get("UnitFileState") not in ENABLED:
        todo.append("enable")
    if enabled is False and status.get("UnitFileState") in ("enabled", "enabled-runtime"):
        todo.append("disable")
    if started is True and status.get("ActiveState") not in RUNNING:
        todo.append("start")
    if started is False and status.get("ActiveState") in RUNNING:
        todo.append("stop")
    return todo


def bad_name(name):
    """Why a unit name is refused, or None."""
    if not UNIT_NAME.match(name or ""):
        return "name %r is not a systemd unit name (such as k3s.service)" % (name,)
    return None
