# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
name: vectoradd_objects
short_description: Build the vectorAdd check's namespace and its Job on each GPU node
version_added: 0.1.0
description:
  - Takes the GPU nodes to check and returns the check's Namespace (labelled as the check's own, Pod Security
    baseline enforced) followed by one CUDA vectorAdd Job per node (non-root, no service-account token, no
    privilege escalation, no capability, RuntimeDefault seccomp).
options:
  _input:
    description: Names of the GPU nodes.
    type: list
    elements: str
    required: true
  params:
    description: C(namespace), C(image) and C(timeout) (seconds the role waits for each Job).
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Build the vectorAdd objects
  ansible.builtin.set_fact:
    __objects: >-
      {{ ['gpu-1'] | aiinfra.k3s.vectoradd_objects({'namespace': 'aiinfra-gpu-verify', 'image': 'i:1',
         'timeout': 300}) }}
"""

RETURN = r"""
_value:
  description: The Namespace, then one Job per node, as mappings.
  type: list
  elements: dict
"""


def vectoradd_objects(nodes, params):
    from ansible_collections.aiinfra.k3s.plugins.module_utils.k8s import vectoradd

    params = dict(params)
    return [vectoradd.namespace_manifest(str(params["namespace"]))] + [
        vectoradd.job_manifest(str(node), params) for node in nodes
    ]


class FilterModule(object):
    def filters(self):
        return {"vectoradd_objects": vectoradd_objects}
