# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
name: gpu_table
short_description: Render a gpu_allocation_info result as a per-node table and a list of findings
version_added: 0.1.0
description:
  - One row per GPU node (ready, hardware GPUs, expected devices, capacity, allocatable, requested, free, GPU pods,
    worst findings), a totals line, then every finding, errors first.
options:
  _input:
    description: The registered result of M(aiinfra.k3s.gpu_allocation_info).
    type: dict
    required: true
  hardware:
    description: Node name to the GPU count nvidia-smi reported (from M(aiinfra.k3s.gpu_facts)).
    type: dict
    default: {}
"""

EXAMPLES = r"""
- name: Show the GPU table
  ansible.builtin.debug:
    msg: "{{ gpu | aiinfra.k3s.gpu_table({'gx10-db4d': 1}) }}"
"""

RETURN = r"""
_value:
  description: Table lines.
  type: list
  elements: str
"""

from ansible.errors import AnsibleFilterError


def gpu_table(result, hardware=None):
    from ansible_collections.aiinfra.k3s.plugins.module_utils.gpu.allocation import table

    try:
        return table(result, hardware or {})
    except (KeyError, TypeError) as exc:
        raise AnsibleFilterError("not a gpu_allocation_info result: missing %s" % exc) from exc


class FilterModule(object):
    def filters(self):
        return {"gpu_table": gpu_table}
