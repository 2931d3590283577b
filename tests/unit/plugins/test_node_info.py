"""plugins/module_utils/node/node_info.py on the real output formats of ufw, firewall-cmd, dpkg-query and systemctl."""

import os
import platform
import shutil
import subprocess

import pytest

from ansible_collections.aiinfra.k3s.plugins.module_utils.node.node_info import (
    active_firewall,
    missing_packages,
    swap_active,
    unit_state,
)


@pytest.mark.parametrize(
    ("ufw", "firewalld", "active"),
    [
        ("Status: active\n\nTo                         Action      From\n", None, "ufw"),
        ("Status: inactive\n", "running\n", "firewalld"),
        (None, "not running\n", "none"),
        (None, None, "none"),
        ("Status: inactive\n", None, "none"),
    ],
)
def test_the_active_firewall(ufw, firewalld, active):
    assert active_firewall(ufw, firewalld) == active


def test_missing_packages_from_dpkg_query():
    out = (
        "ca-certificates\tinstall ok installed\ncurl\tdeinstall ok config-files\niptables:amd64\tinstall ok installed\n"
    )
    names = ["ca-certificates", "curl", "iptables", "nftables", "chrony=4.3-2", "lib*"]
    assert missing_packages(names, out) == ["curl", "nftables", "chrony=4.3-2", "lib*"]


@pytest.mark.parametrize(
    ("show", "state"),
    [
        (
            "LoadState=loaded\nUnitFileState=enabled\nActiveState=active\n",
            {"loaded": True, "enabled": True, "active": True},
        ),
        (
            "LoadState=loaded\nUnitFileState=enabled\nActiveState=inactive\n",
            {"loaded": True, "enabled": True, "active": False},
        ),
        (
            "LoadState=not-found\nUnitFileState=\nActiveState=inactive\n",
            {"loaded": False, "enabled": False, "active": False},
        ),
        ("", {"loaded": False, "enabled": False, "active": False}),
    ],
)
def test_unit_state_from_systemctl_show(show, state):
    assert unit_state(show) == state


@pytest.mark.parametrize(
    ("proc_swaps", "active"),
    [
        ("Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n/dev/sda2 partition\t4194300\t0\t-2\n", True),
        ("Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n", False),
        ("", False),
        (None, False),
    ],
)
def test_swap_in_use_from_proc_swaps(proc_swaps, active):
    assert swap_active(proc_swaps) is active


class _Module:
    """The two AnsibleModule methods host_facts uses, on this machine's real programs."""

    def get_bin_path(self, name):
        return shutil.which(name, path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")

    def run_command(self, argv, **_kwargs):
        proc = subprocess.run(argv, capture_output=True, text=True, check=False)
        return proc.returncode, proc.stdout, proc.stderr


def test_host_facts_are_what_setup_gives_for_the_facts_the_roles_read():
    """node_info's facts (on this machine) against Ansible's own collectors run as setup runs them: the names and
    values the roles read (architecture, OS, virtualization, the default address) are the same."""
    from ansible.module_utils.facts import ansible_collector, default_collectors

    from ansible_collections.aiinfra.k3s.plugins.modules.node_info import host_facts

    module = _Module()
    returned = host_facts(module)
    assert all(name.startswith("ansible_") for name in returned)  # as setup returns them; Ansible strips the prefix
    facts = {name[len("ansible_") :]: value for name, value in returned.items()}
    collector = ansible_collector.get_ansible_collector(
        all_collector_classes=default_collectors.collectors,
        gather_subset=["!all", "!min", "platform", "distribution", "network", "virtual"],
        gather_timeout=10,
    )
    setup = collector.collect(module=module)
    for name in ("architecture", "os_family", "distribution", "distribution_version", "virtualization_type",
                 "virtualization_role"):  # fmt: skip
        assert facts[name] == setup[name], name
    assert facts["architecture"] == platform.machine()
    for key in ("interface", "address", "gateway"):  # both empty on a machine without `ip`
        assert facts.get("default_ipv4", {}).get(key) == setup.get("default_ipv4", {}).get(key), key
    assert "interfaces" not in facts  # the walk over every interface is what it leaves out
