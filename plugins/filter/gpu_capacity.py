# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
name: gpu_capacity
short_description: GPUs and time-slicing replicas of every GPU node of the inventory
version_added: 0.1.0
description:
  - Reads C(aiinfra_gpu_count) (default 1) and C(aiinfra_gpu_class) of each GPU host and the time-slicing
    classes, and returns the capacity the serving preflight counts with, plus the problems found (a host
    naming a class that does not exist).
options:
  _input:
    description: hostvars.
    type: dict
    required: true
  hosts:
    description: The GPU hosts.
    type: list
    elements: str
    required: true
  classes:
    description: Time-slicing class name to replicas per GPU.
    type: dict
    default: {}
  default_class:
    description: Class of GPU hosts that set no C(aiinfra_gpu_class).
    type: str
    default: ""
"""

EXAMPLES = r"""
- name: Capacity of the GPU nodes
  ansible.builtin.set_fact:
    capacity: "{{ hostvars | aiinfra.k3s.gpu_capacity(groups['gpu_nodes'], {'shared': 4}, 'shared') }}"
"""

RETURN = r"""
_value:
  description: C(capacity) (node to C({gpus, replicas})) and C(problems) (list of lines).
  type: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.aiinfra.k3s.plugins.module_utils.serving_plan import gpu_capacity as capacity_of


def gpu_capacity(hostvars, hosts, classes=None, default_class=""):
    nodes = {}
    for host in hosts:
        hv = hostvars[host]
        try:
            gpus = int(hv.get("aiinfra_gpu_count", 1))
        except (TypeError, ValueError) as exc:
            raise AnsibleFilterError("%s: aiinfra_gpu_count must be a whole number (%s)" % (host, exc)) from exc
        nodes[host] = {
            "gpus": gpus,
            "class": hv.get("aiinfra_gpu_class") or "",
            "memory_mib": hv.get("aiinfra_gpu_memory_mib") or 0,
        }
    capacity, problems = capacity_of(nodes, dict(classes or {}), default_class or "")
    return {"capacity": capacity, "problems": problems}


class FilterModule(object):
    def filters(self):
        return {"gpu_capacity": gpu_capacity}
