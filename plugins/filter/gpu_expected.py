# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
name: gpu_expected
short_description: Build gpu_allocation_info's expected_gpus from the gpu_facts of GPU hosts
version_added: 0.1.0
description:
  - For each host whose C(aiinfra_gpus) fact has status C(ok), maps its node name (kernel host name, else the
    inventory name) to C({physical, mig_slices}). Hosts whose GPUs could not be read are left out.
options:
  _input:
    description: C(hostvars).
    type: raw
    required: true
  hosts:
    description: GPU hosts to read.
    type: list
    elements: str
    required: true
"""

EXAMPLES = r"""
- name: Expected GPUs per node
  ansible.builtin.debug:
    msg: "{{ hostvars | aiinfra.k3s.gpu_expected(groups['gpu_nodes']) }}"
"""

RETURN = r"""
_value:
  description: Node name to C({physical, mig_slices}).
  type: dict
"""


def gpu_expected(hostvars, hosts):
    from ansible_collections.aiinfra.k3s.plugins.module_utils.gpu.facts import expected_from_facts

    facts = {}
    for host in hosts:
        if host in hostvars:
            facts[host] = hostvars[host].get("ansible_facts") or {}
    return expected_from_facts(facts)


class FilterModule(object):
    def filters(self):
        return {"gpu_expected": gpu_expected}
