#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
module: node_info
short_description: Read what node preparation needs to know about a host, in one module run
version_added: 0.1.0
description:
  - Reports whether the kernel loads modules, which firewall is active (ufw, firewalld or none), which of
    O(packages) are not installed, the state of each unit of O(units), and whether swap is in use.
  - Reads only; the prereq role changes a host only where this says it differs. The parsing is in module_utils
    C(node_info.py).
author:
  - aiinfra.k3s developers (@aiinfra)
options:
  packages:
    description: Debian package names to look up with dpkg-query.
    type: list
    elements: str
    default: []
  units:
    description: systemd units to report on.
    type: list
    elements: str
    default: []
attributes:
  check_mode:
    support: full
    description: Reads only, in check mode as in a normal run.
  diff_mode:
    support: none
    description: Nothing changes, so there is nothing to show.
"""

EXAMPLES = r"""
- name: Read the node
  aiinfra.k3s.node_info:
    packages: [ca-certificates, curl, iptables]
    units: [systemd-timesyncd.service]
  register: node
"""

RETURN = r"""
loadable_modules:
  description: Whether /proc/modules exists (the kernel loads modules).
  returned: always
  type: bool
firewall:
  description: The active firewall.
  returned: always
  type: str
  sample: none
missing_packages:
  description: The names of O(packages) that are not installed (or that dpkg-query cannot answer for exactly).
  returned: always
  type: list
  elements: str
units:
  description: Unit name to its C(loaded), C(enabled) and C(active) booleans.
  returned: always
  type: dict
swap_active:
  description: Whether a swap area is in use (C(/proc/swaps) lists one).
  returned: always
  type: bool
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.aiinfra.k3s.plugins.module_utils.node.node_info import (
    active_firewall,
    missing_packages,
    swap_active,
    unit_state,
)


def output(module, argv):
    """stdout of a command, or None when its program is not installed."""
    path = module.get_bin_path(argv[0])
    if path is None:
        return None
    _rc, out, _err = module.run_command([path, *argv[1:]])
    return out


def read_text(path):
    """A file's text, or None when it cannot be read."""
    try:
        with open(path) as handle:
            return handle.read()
    except OSError:
        return None


def main():
    module = AnsibleModule(
        argument_spec={
            "packages": {"type": "list", "elements": "str", "default": []},
            "units": {"type": "list", "elements": "str", "default": []},
        },
        supports_check_mode=True,
    )
    p = module.params
    dpkg = (
        output(module, ["dpkg-query", "-W", "-f", "${Package}\t${Status}\n"] + p["packages"]) if p["packages"] else ""
    )
    units = {}
    for unit in p["units"]:
        shown = output(module, ["systemctl", "show", "-p", "LoadState,UnitFileState,ActiveState", unit])
        units[unit] = unit_state(shown or "")
    module.exit_json(
        changed=False,
        loadable_modules=os.path.exists("/proc/modules"),
        firewall=active_firewall(output(module, ["ufw", "status"]), output(module, ["firewall-cmd", "--state"])),
        missing_packages=missing_packages(p["packages"], dpkg or ""),
        units=units,
        swap_active=swap_active(read_text("/proc/swaps")),
    )


if __name__ == "__main__":
    main()
