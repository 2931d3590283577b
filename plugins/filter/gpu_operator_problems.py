# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
name: gpu_operator_problems
short_description: GPU Operator settings that cannot work
version_added: 0.1.0
description:
  - MIG strategy, time-slicing classes and their default, and the chart's install mode and airgap archive.
  - The GPU hosts' classes are checked by the site plan (aiinfra.k3s.site_plan).
options:
  _input:
    description: The gpu_operator role's settings (its variables without the prefix).
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Check the GPU Operator settings
  ansible.builtin.set_fact:
    problems: "{{ __gpu_operator_params | aiinfra.k3s.gpu_operator_problems }}"
"""

RETURN = r"""
_value:
  description: One line per problem; empty when the settings can work.
  type: list
  elements: str
"""


def gpu_operator_problems(params):
    from ansible_collections.aiinfra.k3s.plugins.module_utils.k8s import gpu_operator
    from ansible_collections.aiinfra.k3s.plugins.plugin_utils.manifests import build

    return build("gpu_operator_problems", lambda: gpu_operator.operator_problems(dict(params)))


class FilterModule(object):
    def filters(self):
        return {"gpu_operator_problems": gpu_operator_problems}
