# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
name: cluster_problems
short_description: List every problem of the K3s settings of the cluster nodes, each naming host, variable and fix
version_added: 0.1.0
description:
  - List every problem of the K3s settings of the cluster nodes, each naming host, variable and fix.
options:
  _input:
    description: The C(hostvars) of the play.
    type: raw
    required: true
  hosts:
    description: Cluster node name to C(server) or C(agent).
    type: dict
    required: true
  defaults:
    description: Values used where a host does not set a variable (role defaults as seen on the controller).
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Report K3s setting problems
  ansible.builtin.debug:
    msg: "{{ hostvars | aiinfra.k3s.cluster_problems({'cp-1': 'server'}, {'k3s_version': 'v1.33.5+k3s1'}) }}"
"""

RETURN = r"""
_value:
  description: One line per problem; empty when the settings are sound.
  type: list
  elements: str
"""

from ansible.errors import AnsibleFilterError


def cluster_problems(hostvars, hosts, defaults):
    from ansible_collections.aiinfra.k3s.plugins.module_utils.plan.inventory_check import (
        CLUSTER_VARS,
        check_cluster,
        format_problems,
    )

    try:
        own = {h: {v: hostvars[h].get(v) for v in CLUSTER_VARS} for h in hosts}
    except Exception as exc:
        raise AnsibleFilterError("cannot read the variables of the cluster nodes: %s" % exc) from exc
    return format_problems(check_cluster(dict(hosts), own, dict(defaults)))


class FilterModule(object):
    def filters(self):
        return {"cluster_problems": cluster_problems}
