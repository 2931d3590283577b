# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Checks of a site inventory that run on the controller before any host is touched.

Every check returns problems as dicts ``{host, variable, problem, fix}`` so that the
validate playbook can report all of them at once.
"""

import ipaddress
import re

from ansible_collections.aiinfra.k3s.plugins.module_utils.node import k3s_config, k3s_release

# Per-host variables the cluster checks read (from hostvars, falling back to defaults).
CLUSTER_VARS = (
    "ansible_host",
    "k3s_node_ip",
    "k3s_cluster_cidr",
    "k3s_service_cidr",
    "k3s_token",
    "k3s_agent_token",
    "k3s_version",
    "k3s_server_extra_config",
    "k3s_agent_extra_config",
    "k3s_install_mode",
    "k3s_airgap_dir",
)
RFC1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


def problem(host, variable, what, fix):
    return {"host": host, "variable": variable, "problem": what, "fix": fix}


def is_rfc1123_name(name):
    """True for a lower-case RFC 1123 DNS subdomain (what Kubernetes accepts as a node name)."""
    if not name or len(name) > 253:
        return False
    return all(RFC1123_LABEL.match(label) for label in name.split("."))


def check_groups(groups, server_group, agent_group, gpu_group):
    """Group membership: servers present, 1 or an odd number, GPU nodes among the agents."""
    problems = []
    servers = list(groups.get(server_group) or [])
    agents = list(groups.get(agent_group) or [])
    gpus = list(groups.get(gpu_group) or [])
    if server_group not in groups or not servers:
        problems.append(
            problem(
                "all",
                "aiinfra_server_group",
                "server group '%s' is missing or empty in the inventory" % server_group,
                "add the control-plane hosts to group '%s' or set aiinfra_server_group to the group that holds them"
                % server_group,
            )
        )
    elif len(servers) > 1 and len(servers) % 2 == 0:
        problems.append(
            problem(
                ",".join(servers),
                "aiinfra_server_group",
                "%d servers in '%s': embedded etcd needs 1 or an odd number (3, 5, 7) to keep quorum"
                % (len(servers), server_group),
                "add or remove one server",
            )
        )
    for host in sorted(set(servers) & set(agents)):
        problems.append(
            problem(
                host,
                "aiinfra_agent_group",
                "host is in both the server group '%s' and the agent group '%s'" % (server_group, agent_group),
                "keep each host in one of the two groups",
            )
        )
    for host in gpus:
        if host not in agents:
            problems.append(
                problem(
                    host,
                    "aiinfra_gpu_group",
                    "GPU node is not in the agent group '%s' (GPU group '%s' must be a subset of it)"
                    % (agent_group, gpu_group),
                    "add the host to group '%s' as well, or remove it from '%s'" % (agent_group, gpu_group),
                )
            )
    return problems


def check_hostnames(hosts):
    problems = []
    for host in hosts:
        if not is_rfc1123_name(host):
            problems.append(
                problem(
                    host,
                    "inventory_hostname",
                    "'%s' is not a valid Kubernetes node name (RFC 1123: lower-case letters, digits, '-' and '.')"
                    % host,
                    "rename the host in the inventory (keep the real address in ansible_host)",
                )
            )
    return problems


def check_inventory(groups, server_group, agent_group, gpu_group):
    """All inventory checks; returns the list of problems (empty when the inventory is sound)."""
    cluster = list(groups.get(server_group) or []) + list(groups.get(agent_group) or [])
    problems = check_groups(groups, server_group, agent_group, gpu_group)
    problems.extend(check_hostnames(sorted(set(cluster))))
    return problems


def format_problems(problems):
    """One line per problem: host, variable, what is wrong and the fix."""
    return ["%s: %s: %s. Fix: %s" % (p["host"], p["variable"], p["problem"], p["fix"]) for p in problems]


def _network(value, host, variable, problems):
    try:
        return ipaddress.ip_network(str(value), strict=True)
    except ValueError as exc:
        problems.append(
            problem(
                host,
                variable,
                "%r is not a valid CIDR (%s)" % (value, exc),
                "use a network address with its prefix, e.g. 10.42.0.0/16",
            )
        )
        return None


def _node_ip(hvars):
    """The address K3s will use for the node: k3s_node_ip, else ansible_host when it is an IP."""
    for key in ("k3s_node_ip", "ansible_host"):
        value = hvars.get(key)
        if value:
            try:
                return key, ipaddress.ip_address(str(value))
            except ValueError:
                if key == "k3s_node_ip":
                    return key, str(value)
    return None, None


def check_cluster(hosts, hostvars, defaults):
    """Per-host K3s settings: node IPs, CIDRs, token, version, free-form config.

    hosts: {name: 'server' or 'agent'}; hostvars: {name: {var: value}} (the host's own values);
    defaults: values that apply when a host does not set a variable (role defaults and group_vars/all).
    """
    problems = []
    seen_ips = {}
    for host in sorted(hosts):
        role = hosts[host]
        hv = dict(defaults)
        hv.update({k: v for k, v in (hostvars.get(host) or {}).items() if v is not None})
        key, ip = _node_ip(hv)
        if isinstance(ip, str):
            ip = None  # not an address: the argument-spec check (inventory_spec.py) names it
        if ip is not None:
            if ip in seen_ips:
                problems.append(
                    problem(
                        host,
                        key,
                        "node IP %s is also used by %s" % (ip, seen_ips[ip]),
                        "give every node its own address",
                    )
                )
            seen_ips.setdefault(ip, host)
        cidrs = {var: _network(hv.get(var), host, var, problems) for var in ("k3s_cluster_cidr", "k3s_service_cidr")}
        pod, svc = cidrs["k3s_cluster_cidr"], cidrs["k3s_service_cidr"]
        if pod and svc and pod.version == svc.version and pod.overlaps(svc):
            problems.append(
                problem(
                    host,
                    "k3s_service_cidr",
                    "service CIDR %s overlaps cluster CIDR %s" % (svc, pod),
                    "choose non-overlapping ranges (defaults 10.42.0.0/16 and 10.43.0.0/16)",
                )
            )
        for var, net in cidrs.items():
            if ip is not None and net is not None and ip.version == net.version and ip in net:
                problems.append(
                    problem(
                        host,
                        var,
                        "node IP %s lies inside %s %s" % (ip, var, net),
                        "move %s away from the node network" % var,
                    )
                )
        token = hv.get("k3s_token") or ""
        if not token:
            problems.append(
                problem(
                    host,
                    "k3s_token",
                    "no cluster token is set",
                    "set k3s_token (at least 32 characters) in a vault-encrypted group_vars file",
                )
            )
        agent_token = hv.get("k3s_agent_token") or ""
        if not agent_token:
            problems.append(
                problem(
                    host,
                    "k3s_agent_token",
                    "no agent token is set: agents would have to hold the server token, which grants cluster-admin",
                    "set k3s_agent_token (at least 32 characters, not k3s_token) in a vault-encrypted group_vars file",
                )
            )
        elif agent_token == token:
            problems.append(
                problem(
                    host,
                    "k3s_agent_token",
                    "the agent token is the server token: every agent would hold a cluster-admin credential",
                    "generate a separate k3s_agent_token with `openssl rand -hex 32` and keep it in ansible-vault",
                )
            )
        version = hv.get("k3s_version")
        if not k3s_release.is_k3s_version(version):
            problems.append(
                problem(
                    host,
                    "k3s_version",
                    "%r is not a K3s version of the form v1.x.y+k3sN" % version,
                    "use a release tag such as v1.36.4+k3s1",
                )
            )
        extra_var = "k3s_server_extra_config" if role == "server" else "k3s_agent_extra_config"
        for _key, message in k3s_config.extra_config_problems(role, hv.get(extra_var)):
            problems.append(problem(host, extra_var, message, "remove or correct the key"))
        # A mode other than online or airgap is the argument-spec check's (choices); a token too short or not
        # random is its too (inventory_spec.secret_strength_error). Here: what only the effective values show.
        mode = hv.get("k3s_install_mode")
        if mode == "airgap" and not hv.get("k3s_airgap_dir"):
            problems.append(
                problem(
                    host,
                    "k3s_airgap_dir",
                    "airgap mode needs a directory of K3s artifacts",
                    "set k3s_airgap_dir to a controller directory holding the release files",
                )
            )
    return merge_problems(problems)


def merge_problems(problems):
    """One problem per (variable, problem, fix), naming every host it applies to, in first-seen order."""
    merged = {}
    for p in problems:
        key = (p["variable"], p["problem"], p["fix"])
        if key in merged:
            merged[key]["host"] += "," + p["host"]
        else:
            merged[key] = dict(p)
    return list(merged.values())
