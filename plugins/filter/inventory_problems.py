# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
name: inventory_problems
short_description: List every problem of a site inventory, each naming host, variable and fix
version_added: 0.1.0
description:
  - Checks the server, agent and GPU groups (server count 1 or odd, GPU group a subset of the agents,
    no host in both server and agent groups) and that node names are valid RFC 1123 names.
  - "Returns all problems at once, one line each naming host, variable, problem and fix; an empty list when sound."
options:
  _input:
    description: The inventory's C(groups) mapping.
    type: dict
    required: true
  server_group:
    description: Name of the group holding the K3s servers.
    type: str
    required: true
  agent_group:
    description: Name of the group holding the K3s agents.
    type: str
    required: true
  gpu_group:
    description: Name of the group holding the GPU nodes.
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Fail with every inventory problem at once
  ansible.builtin.assert:
    that: __problems | length == 0
    fail_msg: "{{ __problems }}"
  vars:
    __problems: "{{ groups | aiinfra.k3s.inventory_problems('k3s_servers', 'k3s_agents', 'gpu_nodes') }}"
"""

RETURN = r"""
_value:
  description: One line per problem; empty when the inventory is sound.
  type: list
  elements: str
"""


def inventory_problems(groups, server_group, agent_group, gpu_group):
    from ansible_collections.aiinfra.k3s.plugins.module_utils.plan.inventory_check import (
        check_inventory,
        format_problems,
    )

    return format_problems(check_inventory(dict(groups), server_group, agent_group, gpu_group))


class FilterModule(object):
    def filters(self):
        return {"inventory_problems": inventory_problems}
