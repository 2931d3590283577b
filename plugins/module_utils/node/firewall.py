# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Host firewall rules for K3s, limited to the cluster's own addresses.

Each rule of prereq_firewall_rules names who may reach its port: `cluster` (every node of the cluster),
`servers` (the server nodes: embedded etcd), or `admin` (every node plus the operator's admin networks: the API
server). Nothing is opened to any source: K3s's docs say flannel's VXLAN port must never be exposed.
"""

import ipaddress
import re

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


def firewall_rules(hostvars, cluster, servers, rules, admin_networks=(), host=None, client=None):
    """{rules: [{port, proto, source, comment, server_only}], problems: [...]} for these cluster hosts.

    host: only the rules of that host (a server gets every rule, another node those not server_only).
    client: {address, port} of the connection this run uses: `client_admitted` says whether the rules still let it
    in (None without a client).
    """
    problems = []
    addresses = {}
    for node in cluster:
        address = node_address(hostvars.get(node) or {})
        if address is None:
            problems.append(
                "%s: no address to allow in the firewall (k3s_node_ip is unset and ansible_host is not an IP): "
                "set k3s_node_ip for this host" % node
            )
        else:
            addresses[node] = address
    networks = []
    for network in admin_networks or []:
        why = admin_network_problem(network)
        if why:
            problems.append("prereq_firewall_admin_networks has %s: list only the operators' networks" % why)
        else:
            networks.append(str(ipaddress.ip_network(str(network), strict=False)))
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
    if host is not None and host not in servers:
        out = [r for r in out if not r["server_only"]]
    admitted = None
    if client and client.get("address"):
        admitted = admits(out, client["address"], client.get("port") or 22)
    return {"rules": out, "problems": problems, "client_admitted": admitted}


def _port_range(port):
    low, _sep, high = str(port).partition(":")
    return int(low), int(high or low)


def admits(rules, address, port, proto="tcp"):
    """Whether these expanded rules let `address` reach `port`/`proto` (the check that a run keeps its SSH)."""
    try:
        client = ipaddress.ip_address(str(address))
    except ValueError:
        return False
    for rule in rules:
        low, high = _port_range(rule["port"])
        if rule["proto"] != proto or not low <= int(port) <= high:
            continue
        try:
            if client in ipaddress.ip_network(rule["source"], strict=False):
                return True
        except ValueError:
            continue
    return False


# ---------------------------------------------------------------- the site's firewall plan (site_plan's "firewall")

# What the plan reads: the prereq role's firewall settings and K3s's network settings.
PLAN_VARIABLES = (
    "prereq_firewall_enabled",
    "prereq_firewall_admin_networks",
    "prereq_firewall_trusted_interfaces",
    "k3s_cluster_cidr",
    "k3s_service_cidr",
    "k3s_flannel_backend",
    "model_registry_peers",
    "model_registry_peer_port",
)
# The bridge K3s's flannel CNI puts every pod on: traffic from local pods comes in through it.
CNI_BRIDGE = "cni0"
# Per flannel backend: the interfaces traffic from other nodes' pods arrives on, and the ports between the nodes
# (flannel v0.28: vxlan names its devices flannel.<VNI> and flannel-v6.<VNI>, VNI 1, on the kernel's VXLAN port
# 8472; wireguard-native creates flannel-wg and flannel-wg-v6 listening on 51820 and 51821; host-gw routes over the
# node's own interface). `none` means the site brings its own CNI: its interfaces must be named.
FLANNEL_BACKENDS = {
    "vxlan": {
        "interfaces": ["flannel.1", "flannel-v6.1"],
        "ports": [{"port": "8472", "proto": "udp", "comment": "flannel VXLAN"}],
    },
    "wireguard-native": {
        "interfaces": ["flannel-wg", "flannel-wg-v6"],
        "ports": [
            {"port": "51820", "proto": "udp", "comment": "flannel WireGuard (IPv4)"},
            {"port": "51821", "proto": "udp", "comment": "flannel WireGuard (IPv6)"},
        ],
    },
    "host-gw": {"interfaces": [], "ports": []},
    "none": {"interfaces": [], "ports": []},
}
INTERFACE_NAME = re.compile(r"^[A-Za-z0-9_.:+-]{1,15}\*?$")


def _networks(text):
    """The networks of a K3s CIDR setting (dual stack: comma separated), None when one does not parse."""
    out = []
    for part in str(text or "").split(","):
        try:
            out.append(str(ipaddress.ip_network(part.strip(), strict=False)))
        except ValueError:
            return None
    return out


def admin_network_problem(network):
    """Why an admin network cannot be allowed (None when it can)."""
    try:
        net = ipaddress.ip_network(str(network), strict=False)
    except ValueError:
        return "%r is not a network in CIDR form (e.g. 192.0.2.0/24)" % (network,)
    if net.prefixlen == 0:
        return "%s is every address: the API server and SSH would be open to the world" % net
    return None


def firewall_plan(values):
    """(plan, problems): the host firewall every cluster node gets, decided once for the site.

    plan: {enabled, admin_networks, trusted_interfaces, node_ports, cluster_cidr, service_cidr}. node_ports: what
    every node opens to the others besides prereq_firewall_rules: the overlay's ports, and the port on which GPU
    nodes hand model weights to one another (model_registry_peers, token-guarded, listening only during a fetch).
    Traffic from pods is trusted by the interface it arrives on (the CNI bridge and the overlay's devices), never by
    a source range, which a host on the node network could forge. The pod and service ranges come from the inventory's
    K3s settings; they are in the plan for the report and for firewalls that can only match addresses.
    """
    from ansible_collections.aiinfra.k3s.plugins.module_utils.plan.inventory_spec import problem, truthy

    problems = []
    enabled = truthy(values.get("prereq_firewall_enabled", True))
    admin = []
    for network in values.get("prereq_firewall_admin_networks") or []:
        why = admin_network_problem(network)
        if why:
            problems.append(
                problem(
                    "FIREWALL",
                    "all",
                    "prereq_firewall_admin_networks",
                    why,
                    "list only the networks of the operators and tools that use SSH and the API server",
                )
            )
        else:
            net = str(ipaddress.ip_network(str(network), strict=False))
            if net not in admin:
                admin.append(net)
    backend = str(values.get("k3s_flannel_backend") or "vxlan")
    known = FLANNEL_BACKENDS.get(backend, FLANNEL_BACKENDS["none"])
    extra = [str(i) for i in values.get("prereq_firewall_trusted_interfaces") or []]
    for name in extra:
        if not INTERFACE_NAME.match(name):
            problems.append(
                problem(
                    "FIREWALL",
                    "all",
                    "prereq_firewall_trusted_interfaces",
                    "%r is not an interface name (at most 15 characters, a trailing * for a prefix)" % (name,),
                    "give the CNI's interface names, e.g. cali* or cilium_host",
                )
            )
    if enabled and backend == "none" and not extra:
        problems.append(
            problem(
                "FIREWALL",
                "all",
                "prereq_firewall_trusted_interfaces",
                "k3s_flannel_backend is none (the site's own CNI), so the firewall does not know which interfaces "
                "carry pod traffic and would drop pods' traffic to the nodes",
                "list the CNI's interfaces in prereq_firewall_trusted_interfaces, or set prereq_firewall_enabled: false",
            )
        )
    cidrs = {}
    for variable, key in (("k3s_cluster_cidr", "cluster_cidr"), ("k3s_service_cidr", "service_cidr")):
        nets = _networks(values.get(variable, ""))
        cidrs[key] = nets or []
    peers = []
    port = values.get("model_registry_peer_port", 8491)
    if values.get("model_registry_peers", True) is True and not isinstance(port, bool) and str(port).isdigit():
        peers = [{"port": str(port), "proto": "tcp", "comment": "model weights between GPU nodes"}]
    interfaces = [CNI_BRIDGE] + known["interfaces"] + [i for i in extra if i not in known["interfaces"]]
    return (
        {
            "enabled": enabled,
            "admin_networks": admin,
            "trusted_interfaces": interfaces,
            "node_ports": [dict(p, **{"from": "cluster", "server_only": False}) for p in known["ports"] + peers],
            "cluster_cidr": cidrs["cluster_cidr"],
            "service_cidr": cidrs["service_cidr"],
        },
        problems,
    )


# ---------------------------------------------------------------- nftables

TABLE = "aiinfra_k3s"


def _nft_port(port):
    return str(port).replace(":", "-")


def _nft_set(items):
    return items[0] if len(items) == 1 else "{ %s }" % ", ".join(items)


def nftables_ruleset(rules, trusted_interfaces, table=TABLE):
    """The nftables file of one host: its own table, replaced atomically, with a default-drop input chain.

    rules: this host's expanded rules ({port, proto, source, comment}), as firewall_rules gives them. Only the
    input hook is filtered: forwarded traffic (pods, Services, NodePorts, hostPorts) stays with K3s's own rules,
    and other tables (kube-proxy's, flannel's) are left alone. Loading the file never leaves a moment without
    the table: nft applies the whole file as one transaction.
    """
    grouped = {}
    order = []
    for rule in rules:
        key = (rule["proto"], _nft_port(rule["port"]), rule.get("comment", ""))
        if key not in grouped:
            grouped[key] = {"ip": [], "ip6": []}
            order.append(key)
        family = "ip6" if ":" in rule["source"] else "ip"
        if rule["source"] not in grouped[key][family]:
            grouped[key][family].append(rule["source"])
    lines = [
        "#!/usr/sbin/nft -f",
        "# Managed by aiinfra.k3s (role prereq); changes here are overwritten. The host firewall of a K3s node:",
        "# nothing comes in unless a rule below allows it. Pods are trusted by interface, nodes by address.",
        "table inet %s" % table,
        "delete table inet %s" % table,
        "table inet %s {" % table,
        "  chain input {",
        "    type filter hook input priority filter; policy drop;",
        "    ct state established,related accept",
        "    ct state invalid drop",
        '    iifname "lo" accept',
        '    iifname %s accept comment "pod networks"' % _nft_set(['"%s"' % i for i in trusted_interfaces]),
        "    meta l4proto icmp accept",
        "    meta l4proto ipv6-icmp accept",
        '    udp sport 67 udp dport 68 accept comment "DHCP client"',
        '    udp sport 547 udp dport 546 accept comment "DHCPv6 client"',
    ]
    for proto, port, comment in order:
        for family in ("ip", "ip6"):
            sources = grouped[(proto, port, comment)][family]
            if sources:
                note = (' comment "%s"' % comment.replace('"', "'")) if comment else ""
                lines.append("    %s saddr %s %s dport %s accept%s" % (family, _nft_set(sources), proto, port, note))
    lines += ["  }", "}", ""]
    return "\n".join(lines)
