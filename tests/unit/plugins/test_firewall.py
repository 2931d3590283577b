"""Firewall rules limited to the cluster's own addresses (never any source, never VXLAN to the world)."""

import shutil
import subprocess

import pytest

from ansible_collections.aiinfra.k3s.plugins.module_utils.node.firewall import (
    admits,
    firewall_plan,
    firewall_rules,
    nftables_ruleset,
)

RULES = [
    {"port": "6443", "proto": "tcp", "server_only": True, "from": "admin", "comment": "api"},
    {"port": "2379:2380", "proto": "tcp", "server_only": True, "from": "servers", "comment": "etcd"},
    {"port": "10250", "proto": "tcp", "server_only": False, "from": "cluster", "comment": "kubelet"},
    {"port": "8472", "proto": "udp", "server_only": False, "from": "cluster", "comment": "vxlan"},
]
HOSTVARS = {
    "cp-1": {"ansible_host": "192.0.2.10"},
    "cp-2": {"ansible_host": "cp-2.example.org", "k3s_node_ip": "192.0.2.11"},
    "gpu-1": {"ansible_host": "gpu-1.example.org", "ansible_facts": {"default_ipv4": {"address": "192.0.2.20"}}},
}


def sources(plan, port):
    return sorted(r["source"] for r in plan["rules"] if r["port"] == port)


def test_each_port_is_open_only_to_its_sources():
    plan = firewall_rules(HOSTVARS, ["cp-1", "cp-2", "gpu-1"], ["cp-1", "cp-2"], RULES, ["198.51.100.0/24"])
    assert plan["problems"] == []
    nodes = ["192.0.2.10", "192.0.2.11", "192.0.2.20"]
    assert sources(plan, "8472") == nodes  # VXLAN: the nodes only
    assert sources(plan, "10250") == nodes
    assert sources(plan, "2379:2380") == ["192.0.2.10", "192.0.2.11"]  # etcd: the servers only
    assert sources(plan, "6443") == [*nodes, "198.51.100.0/24"]  # API: nodes and the admin networks
    assert all(r["source"] not in ("0.0.0.0/0", "any", "::/0") for r in plan["rules"])


def test_a_host_without_a_known_address_and_a_bad_network_are_problems():
    hostvars = dict(HOSTVARS, **{"gpu-2": {"ansible_host": "gpu-2.example.org"}})
    plan = firewall_rules(hostvars, ["cp-1", "gpu-2"], ["cp-1"], RULES, ["not-a-network"])
    assert any(p.startswith("gpu-2: no address") and "k3s_node_ip" in p for p in plan["problems"])
    assert any("prereq_firewall_admin_networks" in p for p in plan["problems"])
    bad = firewall_rules(HOSTVARS, ["cp-1"], ["cp-1"], [dict(RULES[0], **{"from": "world"})])
    assert "use one of cluster, servers, admin" in bad["problems"][0]


# ---------------------------------------------------------------- the site plan's firewall


# (values, trusted interfaces, node ports, problem variables): the plan decides per flannel backend (the cases leave
# the GPU nodes' weights port out unless they name model_registry_peers).
PLAN_CASES = {
    "vxlan (K3s's default)": ({}, ["cni0", "flannel.1", "flannel-v6.1"], ["8472/udp"], []),
    "vxlan, GPU nodes handing weights on (the role's default)": (
        {"model_registry_peers": True},
        ["cni0", "flannel.1", "flannel-v6.1"],
        ["8472/udp", "8491/tcp"],
        [],
    ),
    "host-gw, the weights peers on another port": (
        {"k3s_flannel_backend": "host-gw", "model_registry_peers": True, "model_registry_peer_port": 9123},
        ["cni0"],
        ["9123/tcp"],
        [],
    ),
    "wireguard-native": (
        {"k3s_flannel_backend": "wireguard-native"},
        ["cni0", "flannel-wg", "flannel-wg-v6"],
        ["51820/udp", "51821/udp"],
        [],
    ),
    "host-gw: the bridge only, no overlay port": ({"k3s_flannel_backend": "host-gw"}, ["cni0"], [], []),
    "the site's own CNI without its interfaces": (
        {"k3s_flannel_backend": "none"},
        ["cni0"],
        [],
        ["prereq_firewall_trusted_interfaces"],
    ),
    "the site's own CNI with its interfaces": (
        {"k3s_flannel_backend": "none", "prereq_firewall_trusted_interfaces": ["cali*", "vxlan.calico"]},
        ["cni0", "cali*", "vxlan.calico"],
        [],
        [],
    ),
    "every IPv4 address as an admin network": (
        {"prereq_firewall_admin_networks": ["0.0.0.0/0"]},
        ["cni0", "flannel.1", "flannel-v6.1"],
        ["8472/udp"],
        ["prereq_firewall_admin_networks"],
    ),
    "every IPv6 address as an admin network": (
        {"prereq_firewall_admin_networks": ["::/0", "198.51.100.0/24"]},
        ["cni0", "flannel.1", "flannel-v6.1"],
        ["8472/udp"],
        ["prereq_firewall_admin_networks"],
    ),
    "an interface name that is not one": (
        {"prereq_firewall_trusted_interfaces": ["eth0; drop"]},
        ["cni0", "flannel.1", "flannel-v6.1", "eth0; drop"],
        ["8472/udp"],
        ["prereq_firewall_trusted_interfaces"],
    ),
    "opted out: a CNI of its own needs no interfaces": (
        {"prereq_firewall_enabled": False, "k3s_flannel_backend": "none"},
        ["cni0"],
        [],
        [],
    ),
}


@pytest.mark.parametrize("case", sorted(PLAN_CASES))
def test_the_plan_trusts_the_cni_interfaces_and_opens_the_overlay_to_the_nodes_only(case):
    values, interfaces, ports, problem_variables = PLAN_CASES[case]
    plan, problems = firewall_plan(dict({"model_registry_peers": False}, **values))
    assert plan["trusted_interfaces"] == interfaces
    assert ["%s/%s" % (p["port"], p["proto"]) for p in plan["node_ports"]] == ports
    assert all(p["from"] == "cluster" and not p["server_only"] for p in plan["node_ports"])
    assert sorted({p["variable"] for p in problems}) == problem_variables
    assert all(p["code"] == "FIREWALL" and p["severity"] == "error" for p in problems)
    assert "0.0.0.0/0" not in plan["admin_networks"] and "::/0" not in plan["admin_networks"]


def test_the_plan_takes_the_ranges_from_the_k3s_settings_not_the_defaults():
    plan, problems = firewall_plan(
        {"k3s_cluster_cidr": "10.244.0.0/16,2001:db8:42::/56", "k3s_service_cidr": "10.96.0.0/12", "x": 1}
    )
    assert problems == []
    assert plan["cluster_cidr"] == ["10.244.0.0/16", "2001:db8:42::/56"]
    assert plan["service_cidr"] == ["10.96.0.0/12"]
    assert plan["enabled"] is True


def test_every_address_is_refused_in_the_host_rules_too():
    plan = firewall_rules(HOSTVARS, ["cp-1"], ["cp-1"], RULES, ["0.0.0.0/0", "198.51.100.0/24"])
    assert any("every address" in p for p in plan["problems"])
    assert sources(plan, "6443") == ["192.0.2.10", "198.51.100.0/24"]


SSH = {"port": "22", "proto": "tcp", "server_only": False, "from": "admin", "comment": "ssh"}
CLIENT_CASES = {
    "from an admin network": ("198.51.100.7", 22, True),
    "from a node": ("192.0.2.20", 22, True),
    "from elsewhere": ("203.0.113.9", 22, False),
    "on a port no rule opens": ("198.51.100.7", 2222, False),
}


@pytest.mark.parametrize("case", sorted(CLIENT_CASES))
def test_a_run_that_the_new_rules_would_shut_out_is_told(case):
    address, port, admitted = CLIENT_CASES[case]
    plan = firewall_rules(
        HOSTVARS,
        ["cp-1", "cp-2", "gpu-1"],
        ["cp-1", "cp-2"],
        [*RULES, SSH],
        ["198.51.100.0/24"],
        host="gpu-1",
        client={"address": address, "port": port},
    )
    assert plan["client_admitted"] is admitted
    assert admits(plan["rules"], address, port) is admitted


def test_a_node_that_is_not_a_server_gets_no_server_only_rule():
    agent = firewall_rules(HOSTVARS, ["cp-1", "gpu-1"], ["cp-1"], RULES, host="gpu-1")
    server = firewall_rules(HOSTVARS, ["cp-1", "gpu-1"], ["cp-1"], RULES, host="cp-1")
    assert sorted({r["port"] for r in agent["rules"]}) == ["10250", "8472"]
    assert sorted({r["port"] for r in server["rules"]}) == ["10250", "2379:2380", "6443", "8472"]
    assert agent["client_admitted"] is None


def ruleset():
    plan = firewall_rules(HOSTVARS, ["cp-1", "cp-2", "gpu-1"], ["cp-1", "cp-2"], [*RULES, SSH], ["2001:db8::/64"])
    return nftables_ruleset(plan["rules"], ["cni0", "flannel.1", "cali*"])


def test_the_ruleset_drops_by_default_and_opens_each_port_to_its_sources_only():
    text = ruleset()
    lines = [line.strip() for line in text.splitlines()]
    # Replaced in one transaction: created if missing, deleted, written again, in one file.
    assert lines[3:6] == ["table inet aiinfra_k3s", "delete table inet aiinfra_k3s", "table inet aiinfra_k3s {"]
    assert "type filter hook input priority filter; policy drop;" in lines
    assert 'iifname { "cni0", "flannel.1", "cali*" } accept comment "pod networks"' in lines
    assert 'ip saddr { 192.0.2.10, 192.0.2.11 } tcp dport 2379-2380 accept comment "etcd"' in lines
    assert 'ip saddr { 192.0.2.10, 192.0.2.11, 192.0.2.20 } udp dport 8472 accept comment "vxlan"' in lines
    assert 'ip6 saddr 2001:db8::/64 tcp dport 6443 accept comment "api"' in lines
    assert "hook forward" not in text and "hook output" not in text  # pods' and Services' traffic is K3s's
    assert "0.0.0.0/0" not in text and "::/0" not in text


@pytest.mark.skipif(shutil.which("nft") is None, reason="nft (Debian's nftables) is not installed")
def test_nft_itself_accepts_the_ruleset(tmp_path):
    path = tmp_path / "firewall.nft"
    path.write_text(ruleset())
    proc = subprocess.run(["nft", "-c", "-f", str(path)], capture_output=True, text=True, timeout=30, check=False)
    if proc.returncode != 0 and "Operation not permitted" in proc.stderr:
        pytest.skip("nft -c needs CAP_NET_ADMIN here: %s" % proc.stderr.strip())
    assert proc.returncode == 0, proc.stderr
