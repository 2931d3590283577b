# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Host firewall rules for K3s, limited to the cluster's own addresses.

Each rule of prereq_firewall_rules names who may reach its port: `cluster` (every node of the cluster),
`servers` (the server nodes: embedded etcd), or `admin` (every node plus the operator's admin networks: the API
server). Nothing is opened to any source: K3s's docs say flannel's VXLAN port must never be exposed.
"""

import ipaddress

SCOPES = ("cluster", "servers", "admin")


def node_address(hostvars):
    """A node's address as the inventory or its facts give it: k3s_node_ip, an IP ansible_host, the default IPv4."""
    for key in ("k3s_node_ip", "ansible_host"):
        value = hostvars.get(key)
        try:
            return str(ipaddress.ip_address(str(value)))
        except ValueError:
            continue
    facts = hostvars.get("ansible_facts") or {}
    address = (facts.get("default_ipv4") or {}).get("address")
    return str(address) if address else None


def firewall_rules(hostvars, cluster, servers, rules, admin_networks=()):
    """{rules: [{port, proto, source, comment, server_only}], problems: [...]} for these cluster hosts."""
    problems = []
    addresses = {}
    for host in cluster:
        address = node_address(hostvars.get(host) or {})
        if address is None:
            problems.append(
                "%s: no address to allow in the firewall (k3s_node_ip is unset and ansible_host is not an IP): "
                "set k3s_node_ip for this host" % host
            )
        else:
            addresses[host] = address
    networks = []
    for network in admin_networks or []:
        try:
            networks.append(str(ipaddress.ip_network(str(network), strict=False)))
        except ValueError:
            problems.append(
                "prereq_firewall_admin_networks has %r: give networks in CIDR form, e.g. 192.0.2.0/24" % (network,)
            )
    sources = {
        "cluster": sorted(set(addresses.values())),
        "servers": sorted({addresses[h] for h in servers if h in addresses}),
    }
    sources["admin"] = sources["cluster"] + [n for n in networks if n not in sources["cluster"]]
    out = []
    for rule in rules or []:
        scope = rule.get("from", "cluster")
        if scope not in SCOPES:
            problems.append(
                "prereq_firewall_rules: port %s has from=%r: use one of %s"
                % (rule.get("port"), scope, ", ".join(SCOPES))
            )
            continue
        for source in sources[scope]:
            out.append(
                {
                    "port": str(rule["port"]),
                    "proto": rule["proto"],
                    "source": source,
                    "comment": rule.get("comment", ""),
                    "server_only": bool(rule.get("server_only")),
                }
            )
    return {"rules": out, "problems": problems}
