"""Firewall rules limited to the cluster's own addresses (never any source, never VXLAN to the world)."""

from ansible_collections.aiinfra.k3s.plugins.module_utils.firewall import firewall_rules

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
