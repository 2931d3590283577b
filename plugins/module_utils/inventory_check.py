# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Checks of a site inventory that run on the controller before any host is touched.

Every check returns problems as dicts ``{host, variable, problem, fix}`` so that the
validate playbook can report all of them at once.
"""

import re

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
