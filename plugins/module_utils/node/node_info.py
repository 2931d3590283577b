# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the prereq role must know about a node before it changes anything, read from the outputs of ufw,
firewall-cmd, dpkg-query and systemctl, and from /proc/swaps. Plain functions on text; the module runs the commands."""

import re

# A plain Debian package name; anything else (version pins, wildcards, architecture qualifiers) is left to apt.
PACKAGE_NAME = re.compile(r"^[a-z0-9][a-z0-9+.-]+$")


def active_firewall(ufw_status, firewalld_state):
    """ufw, firewalld or none, from `ufw status` and `firewall-cmd --state` output (None when not installed)."""
    if ufw_status and re.search(r"^Status: active\s*$", ufw_status, re.M):
        return "ufw"
    if firewalld_state and firewalld_state.strip() == "running":
        return "firewalld"
    return "none"


def missing_packages(names, dpkg_output):
    """The names not installed, from `dpkg-query -W -f '${Package}\\t${Status}\\n' NAMES` output.

    A name dpkg-query cannot answer for exactly (not a plain package name) counts as missing, so that apt decides.
    """
    installed = set()
    for line in dpkg_output.splitlines():
        name, status = line.split("\t", 1) if "\t" in line else (line, "")
        if status.strip() == "install ok installed":
            installed.add(name.split(":", 1)[0])
    return [n for n in names if not PACKAGE_NAME.match(n) or n not in installed]


def unit_state(show_output):
    """{loaded, enabled, active} of one unit from `systemctl show -p LoadState,UnitFileState,ActiveState` output."""
    props = dict(line.split("=", 1) for line in show_output.splitlines() if "=" in line)
    return {
        "loaded": props.get("LoadState") == "loaded",
        "enabled": props.get("UnitFileState") in ("enabled", "enabled-runtime", "static", "alias"),
        "active": props.get("ActiveState") == "active",
    }


def swap_active(proc_swaps):
    """Whether any swap area is in use, from /proc/swaps (a header line, then one line per active area); None (no
    such file) counts as none."""
    return bool(proc_swaps) and any(line.strip() for line in proc_swaps.splitlines()[1:])
