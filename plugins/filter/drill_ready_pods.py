# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
name: drill_ready_pods
short_description: Names of the pods that serve, optionally off one node
version_added: 0.1.0
description:
  - From Pod objects (as M(kubernetes.core.k8s_info) returns them), the names of those that are Running and Ready
    and not being deleted, leaving out the pods of O(off_node). The drill's node-loss fault counts with it the
    model-server replicas that run again elsewhere; a pod of a node that stopped answering stays Running but loses
    its Ready condition.
options:
  _input:
    description: Pod objects.
    type: list
    elements: dict
    required: true
  off_node:
    description: Leave out the pods of this node; none when empty.
    type: str
    default: ""
"""

EXAMPLES = r"""
- name: Model servers that still serve off the lost node
  ansible.builtin.set_fact:
    serving: "{{ pods.resources | aiinfra.k3s.drill_ready_pods('gpu-2') }}"
"""

RETURN = r"""
_value:
  description: Sorted pod names.
  type: list
  elements: str
"""


def drill_ready_pods(pods, off_node=""):
    from ansible_collections.aiinfra.k3s.plugins.module_utils.drill.report import ready_pods

    return ready_pods(pods, off_node)


class FilterModule(object):
    def filters(self):
        return {"drill_ready_pods": drill_ready_pods}
