# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
name: vllm_manifests
short_description: Build the vLLM model servers (a Deployment and a Service per model)
version_added: 0.1.0
description:
  - Takes the site plan's vLLM models and returns, per model, a Deployment (each replica's store claim from an
    ephemeral volume) and a Service built by the shared GPU workload builder (GPU limits equal to the
    tensor-parallel size, the GPU toleration and node selector, probes sized for slow model loads, graceful
    shutdown, a read-only model store, a memory-backed /dev/shm and JSON logs).
options:
  _input:
    description:
      - The site plan's vLLM models (C(site_plan_current.models), server vllm), each with its defaults, placement
        and memory share filled in.
    type: list
    required: true
  params:
    description: The vllm role's settings (image, store, shm size, resources, log level, user).
    type: dict
    required: true
  site:
    description: Placement (namespace, GPU node selector and toleration, runtime class, sliced replicas, reserve_whole).
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Build the vLLM model servers (a Deployment and a Service per model)
  ansible.builtin.set_fact:
    __objects: >-
      {{ site_plan_current.models | selectattr('server', '==', 'vllm')
         | aiinfra.k3s.vllm_manifests(__params, __site) }}
"""

RETURN = r"""
_value:
  description: Kubernetes objects as mappings.
  type: list
  elements: dict
"""


def vllm_manifests(models, params, site):
    from ansible_collections.aiinfra.k3s.plugins.module_utils.k8s import model_servers
    from ansible_collections.aiinfra.k3s.plugins.plugin_utils.manifests import build

    return build("vllm_manifests", lambda: model_servers.vllm_manifests(list(models), dict(params), dict(site)))


class FilterModule(object):
    def filters(self):
        return {"vllm_manifests": vllm_manifests}
