# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whether a reset that removes K3s from some servers leaves the others their etcd quorum.

K3s runs embedded etcd when the server group has more than one member (the first server starts with cluster-init);
one server keeps its datastore in SQLite and has no quorum to lose. Resetting a server stops its etcd member and
deletes its data without removing it from the member list, so the members left must still be a majority of all
members: floor(n/2) + 1 of n. Problems are data, ``{code, severity, host, variable, problem, fix}``.
"""


def quorum(members):
    """Members etcd needs up to keep serving: floor(n/2) + 1 of n (0 for no member)."""
    members = int(members)
    if members < 0:
        raise ValueError("a member count cannot be negative: %d" % members)
    return members // 2 + 1 if members else 0


def reset_quorum(servers, targeted):
    """What a reset of `targeted` (the hosts in scope of reset.yml) does to the control plane of `servers` (the
    inventory's server group, in order: the etcd members when there are two or more).

    Returns {members, quorum, reset, remaining, whole_cluster, snapshot_host, problems}: reset and remaining are the
    servers reset and kept (inventory order); whole_cluster is true when every server is reset (allowed: nothing is
    left to lose quorum); snapshot_host is the first server kept (its snapshot survives the reset), else the first
    server, else ''; problems holds one QUORUM_LOST error when the servers kept are fewer than the quorum."""
    servers = [str(s) for s in servers or []]
    if len(set(servers)) != len(servers):
        raise ValueError("the server group names a host twice: %s" % ", ".join(servers))
    wanted = {str(t) for t in targeted or []}
    reset = [s for s in servers if s in wanted]
    remaining = [s for s in servers if s not in wanted]
    members = len(servers) if len(servers) > 1 else 0
    need = quorum(members)
    problems = []
    if reset and remaining and members and len(remaining) < need:
        at_once = members - need
        problems.append(
            {
                "code": "QUORUM_LOST",
                "severity": "error",
                "host": ",".join(reset),
                "variable": "ansible_limit",
                "problem": (
                    "the --limit resets %d of the %d etcd members (%s): only %d would be left (%s), fewer than the "
                    "quorum of %d, so etcd stops and the cluster with it"
                    % (len(reset), members, ", ".join(reset), len(remaining), ", ".join(remaining), need)
                ),
                "fix": "%s, or reset the whole cluster: no --limit, or one that holds every server (%s)"
                % (
                    "reset at most %d server(s) at a time, each removed from the cluster first (kubectl delete node "
                    "<node> removes its etcd member)" % at_once
                    if at_once
                    else "%d etcd members cannot lose one: add a server first (keep the count odd)" % members,
                    ", ".join(servers),
                ),
            }
        )
    return {
        "members": members,
        "quorum": need,
        "reset": reset,
        "remaining": remaining,
        "whole_cluster": bool(servers) and not remaining,
        "snapshot_host": (remaining or servers or [""])[0],
        "problems": problems,
    }
