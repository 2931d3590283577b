# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
name: gpu_operator_manifests
short_description: Build the NVIDIA GPU Operator's namespace, time-slicing ConfigMap and K3s HelmChart
version_added: 0.1.0
description:
  - Takes the gpu_operator role's settings and returns the namespace, the time-slicing ConfigMap and the
    HelmChart of the NVIDIA GPU Operator (values mapped from the chart at the pinned version).
options:
  _input:
    description: The gpu_operator role's settings.
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Build the NVIDIA GPU Operator's namespace, time-slicing ConfigMap and K3s HelmChart
  ansible.builtin.set_fact:
    __objects: "{{ __gpu_operator_params | aiinfra.k3s.gpu_operator_manifests }}"
"""

RETURN = r"""
_value:
  description: Kubernetes objects as mappings.
  type: list
  elements: dict
"""


def gpu_operator_manifests(params):
    from ansible_collections.aiinfra.k3s.plugins.module_utils.k8s import gpu_operator
    from ansible_collections.aiinfra.k3s.plugins.plugin_utils.manifests import build

    return build("gpu_operator_manifests", lambda: gpu_operator.gpu_operator_manifests(dict(params)))


class FilterModule(object):
    def filters(self):
        return {"gpu_operator_manifests": gpu_operator_manifests}
