"""plugins/module_utils/node/node_info.py on the real output formats of ufw, firewall-cmd, dpkg-query and systemctl."""

import pytest

from ansible_collections.aiinfra.k3s.plugins.module_utils.node.node_info import (
    active_firewall,
    missing_packages,
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
