# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
name: serving_manifests
short_description: Build the Kubernetes manifests of a serving component (model registry, vLLM)
version_added: 0.1.0
description:
  - C(model_registry) takes the GPU node names and returns the StorageClass, one local PersistentVolume per
    node pinned to it, and the claim.
  - C(vllm) takes the model list and returns a Deployment and a Service per model, built by the shared GPU
    workload builder (GPU limits equal to the tensor-parallel size, GPU toleration and node selector, probes
    sized for slow model loads, graceful shutdown, read-only model store, memory-backed /dev/shm).
options:
  _input:
    description: GPU node names (C(model_registry)) or the model list (C(vllm)).
    type: list
    elements: raw
    required: true
  component:
    description: C(model_registry) or C(vllm).
    type: str
    required: true
  params:
    description: Settings of the component (see the roles' defaults).
    type: dict
    required: true
  site:
    description: Namespace, GPU node selector, GPU toleration key and runtime class (C(vllm) only).
    type: dict
    default: {}
"""

EXAMPLES = r"""
- name: vLLM manifests
  ansible.builtin.set_fact:
    manifests: "{{ vllm_models | aiinfra.k3s.serving_manifests('vllm', vllm_defaults, site) }}"
"""

RETURN = r"""
_value:
  description: Kubernetes objects.
  type: list
  elements: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.aiinfra.k3s.plugins.module_utils.serving import model_registry_manifests, vllm_manifests


def serving_manifests(items, component, params, site=None):
    try:
        if component == "model_registry":
            return model_registry_manifests(list(items), dict(params))
        if component == "vllm":
            return vllm_manifests(list(items), dict(site or {}), dict(params))
    except (KeyError, TypeError, ValueError) as exc:
        raise AnsibleFilterError("cannot build the %s manifests: missing or bad %s" % (component, exc)) from exc
    raise AnsibleFilterError("unknown serving component %r: use model_registry or vllm" % component)


class FilterModule(object):
    def filters(self):
        return {"serving_manifests": serving_manifests}
