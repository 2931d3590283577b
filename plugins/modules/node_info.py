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
  - With O(facts), also the host facts the collection's roles read, in the same module run, so that a play need not
    gather facts first (M(ansible.builtin.setup) costs a module run of its own on every host).
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
  facts:
    description:
      - Also return host facts under the names M(ansible.builtin.setup) gives them, from Ansible's own fact
        collectors - platform (C(architecture)), distribution (C(os_family), C(distribution_version)) and
        virtualization (C(virtualization_type), C(virtualization_role)) whole; of the network only the default
        routes (C(default_ipv4), C(default_ipv6), each with C(interface), C(address) and C(gateway)), not every
        interface.
    type: bool
    default: false
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

- name: Read the node and the facts the roles need, without gathering facts first
  aiinfra.k3s.node_info:
    facts: true
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
ansible_facts:
  description: The host facts of O(facts), set on the host as gathered facts are.
  returned: when O(facts) is true
  type: dict
  sample: {architecture: x86_64, os_family: Debian, distribution_version: "12.15", virtualization_type: podman,
           virtualization_role: guest, default_ipv4: {interface: eth0, address: 10.89.0.11, gateway: 10.89.0.1}}
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


def host_facts(module):
    """The facts the roles read, named as ansible.builtin.setup names them: Ansible's platform, distribution and Linux
    virtualization collectors, and its Linux network collector's default-route lookup (not its walk over every
    interface, which is most of the network subset's time on a node with many pod interfaces)."""
    from ansible.module_utils.facts.network.linux import LinuxNetwork
    from ansible.module_utils.facts.system.distribution import DistributionFactCollector
    from ansible.module_utils.facts.system.platform import PlatformFactCollector
    from ansible.module_utils.facts.virtual.linux import LinuxVirtualCollector

    facts = {}
    for collector in (PlatformFactCollector, DistributionFactCollector, LinuxVirtualCollector):
        facts.update(collector().collect(module=module, collected_facts=facts))
    ip_path = module.get_bin_path("ip")
    if ip_path:
        facts["default_ipv4"], facts["default_ipv6"] = LinuxNetwork(module).get_default_interfaces(ip_path, facts)
    # Named as setup names them (ansible_*): Ansible files them under ansible_facts without the prefix, and where
    # facts are also injected as variables (inject_facts_as_vars, true by default) they never shadow an inventory
    # variable such as `hostname` or `domain`.
    return {"ansible_" + name: value for name, value in facts.items()}


def main():
    module = AnsibleModule(
        argument_spec={
            "packages": {"type": "list", "elements": "str", "default": []},
            "units": {"type": "list", "elements": "str", "default": []},
            "facts": {"type": "bool", "default": False},
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
    extra = {"ansible_facts": host_facts(module)} if p["facts"] else {}
    module.exit_json(
        changed=False,
        loadable_modules=os.path.exists("/proc/modules"),
        firewall=active_firewall(output(module, ["ufw", "status"]), output(module, ["firewall-cmd", "--state"])),
        missing_packages=missing_packages(p["packages"], dpkg or ""),
        units=units,
        swap_active=swap_active(read_text("/proc/swaps")),
        **extra,
    )


if __name__ == "__main__":
    main()
