# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
name: nim_manifests
short_description: Build the NVIDIA NIM model servers
version_added: 0.1.0
description:
  - Takes the nim_models list and returns, per model, a StatefulSet and a Service from the shared GPU workload
    builder, a PodDisruptionBudget and a HorizontalPodAutoscaler.
options:
  _input:
    description: The nim_models list.
    type: list
    required: true
  params:
    description: The nim role's settings (store, shm size, resources, secrets, autoscaling, user).
    type: dict
    required: true
  site:
    description: Placement (namespace, GPU node selector and toleration, runtime class, sliced replicas, reserve_whole).
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Build the NVIDIA NIM model servers
  ansible.builtin.set_fact:
    __objects: "{{ nim_models | aiinfra.k3s.nim_manifests(__params, __site) }}"
"""

RETURN = r"""
_value:
  description: Kubernetes objects as mappings.
  type: list
  elements: dict
"""


def nim_manifests(models, params, site):
    from ansible_collections.aiinfra.k3s.plugins.module_utils.k8s import model_servers
    from ansible_collections.aiinfra.k3s.plugins.plugin_utils.manifests import build

    return build("nim_manifests", lambda: model_servers.nim_manifests(list(models), dict(params), dict(site)))


class FilterModule(object):
    def filters(self):
        return {"nim_manifests": nim_manifests}
