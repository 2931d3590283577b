# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Classify a managed host from its Ansible facts: bare metal, virtual machine or container.

Roles use this to skip what must never be done inside a container (swapoff, vm.* and
kernel.* sysctls, module loading act on the shared host kernel) while doing all of it
on real hosts.
"""

CONTAINER_TECHS = frozenset(
    ["container", "docker", "podman", "lxc", "lxc-user", "openvz", "systemd-nspawn", "containerd", "wsl"]
)
HOST_KINDS = ("bare-metal", "vm", "container")


def host_kind(facts, override="auto"):
    """Return 'container', 'vm' or 'bare-metal' for a dict of gathered facts.

    ``override`` is the operator's word ('auto' to detect); it wins when it names a kind.
    Facts may be given with or without the ``ansible_`` prefix.
    """
    if override not in ("auto", *HOST_KINDS):
        raise ValueError("host kind override must be one of auto, %s; got %r" % (", ".join(HOST_KINDS), override))
    if override != "auto":
        return override
    facts = facts or {}

    def fact(name, default=None):
        return facts.get(name, facts.get("ansible_" + name, default))

    guest_techs = set(fact("virtualization_tech_guest", []) or [])
    vtype = fact("virtualization_type", "") or ""
    vrole = fact("virtualization_role", "") or ""
    if guest_techs & CONTAINER_TECHS:
        return "container"
    if vrole == "guest" and vtype in CONTAINER_TECHS:
        return "container"
    if vrole == "guest" or guest_techs:
        return "vm"
    return "bare-metal"
