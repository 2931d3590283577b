# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
name: etcd_reset_quorum
short_description: Whether a reset of some servers leaves the others their etcd quorum, and where to snapshot
version_added: 0.1.0
description:
  - Takes the server group (in inventory order) and the hosts a reset is about to wipe (the play's hosts, so
    C(--limit) is accounted for), and says which servers are reset and which are kept.
  - With two or more servers (embedded etcd), the servers kept must be at least the quorum, floor(n/2) + 1 of the
    n members, unless every server is reset (the whole cluster); otherwise the result holds a C(QUORUM_LOST)
    problem that names the hosts, the variable (C(ansible_limit)) and the fix. One server (SQLite) has no quorum.
  - Also names the server to snapshot before the reset, the first one kept (else the first server).
  - Contacts no host. The logic is the plain function C(reset_quorum) in module_utils C(etcd_quorum.py).
options:
  _input:
    description: The server group, in inventory order.
    type: list
    elements: str
    required: true
  targeted:
    description: The hosts the reset removes K3s from (C(ansible_play_hosts_all) of a play over every cluster node).
    type: list
    elements: str
    required: true
"""

EXAMPLES = r"""
- name: Refuse a reset that breaks etcd quorum
  ansible.builtin.assert:
    that: check.problems | length == 0
    fail_msg: "{{ check.problems | map('aiinfra.k3s.problem_line') | list }}"
  vars:
    check: "{{ groups['__aiinfra_servers'] | aiinfra.k3s.etcd_reset_quorum(ansible_play_hosts_all) }}"
"""

RETURN = r"""
_value:
  description: >-
    C(members) (etcd members, 0 for one server), C(quorum), C(reset) and C(remaining) (servers, inventory order),
    C(whole_cluster), C(snapshot_host) and C(problems) (C({code, severity, host, variable, problem, fix}), empty when
    the reset may run).
  type: dict
"""

from ansible.errors import AnsibleFilterError


def etcd_reset_quorum(servers, targeted):
    from ansible_collections.aiinfra.k3s.plugins.module_utils.plan.etcd_quorum import reset_quorum

    try:
        return reset_quorum(list(servers or []), list(targeted or []))
    except ValueError as err:
        raise AnsibleFilterError(str(err)) from err


class FilterModule(object):
    def filters(self):
        return {"etcd_reset_quorum": etcd_reset_quorum}
