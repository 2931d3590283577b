# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
name: model_registry_manifests
short_description: Build the model store's StorageClass and local PersistentVolumes
version_added: 0.1.0
description:
  - Takes the GPU nodes of the site plan (C(site_plan_current.nodes)) and returns the StorageClass and
    one local PersistentVolume per GPU unit, each pinned to its node.
options:
  _input:
    description: GPU capacity per node.
    type: dict
    required: true
  params:
    description: The model_registry role's settings (path, storage class, size, namespace).
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Build the model store's StorageClass and local PersistentVolumes
  ansible.builtin.set_fact:
    __objects: "{{ __capacity | aiinfra.k3s.model_registry_manifests(__params) }}"
"""

RETURN = r"""
_value:
  description: Kubernetes objects as mappings.
  type: list
  elements: dict
"""


def model_registry_manifests(capacity, params):
    from ansible_collections.aiinfra.k3s.plugins.module_utils.k8s import model_store
    from ansible_collections.aiinfra.k3s.plugins.plugin_utils.manifests import build

    return build("model_registry_manifests", lambda: model_store.model_registry_manifests(dict(capacity), dict(params)))


class FilterModule(object):
    def filters(self):
        return {"model_registry_manifests": model_registry_manifests}
