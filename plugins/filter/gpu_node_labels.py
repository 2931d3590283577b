# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
name: gpu_node_labels
short_description: GPU node labels with the GPU Operator's own component names
version_added: 0.1.0
description:
  - Returns the labels with the names earlier releases used (C(nvidia.com/gpu.deploy-gpu-feature),
    C(nvidia.com/gpu.deploy-container-engine-launcher), C(nvidia.com/gpu.deploy-dcgm)), which the GPU Operator
    never read, replaced by the names it reads (C(nvidia.com/gpu.deploy.gpu-feature-discovery),
    C(nvidia.com/gpu.deploy.container-toolkit), C(nvidia.com/gpu.deploy.dcgm)), and prints a deprecation warning
    for each old name.
options:
  _input:
    description: Label name to value.
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Labels as the GPU Operator reads them
  ansible.builtin.debug:
    msg: "{{ k3s_gpu_node_labels | aiinfra.k3s.gpu_node_labels }}"
"""

RETURN = r"""
_value:
  description: The labels, deprecated names replaced.
  type: dict
"""

from ansible.utils.display import Display


def gpu_node_labels(labels):
    from ansible_collections.aiinfra.k3s.plugins.module_utils.node.k3s_config import gpu_node_labels as translate

    out, warnings = translate(dict(labels or {}))
    for warning in warnings:
        Display().deprecated(warning, version="2.0.0", collection_name="aiinfra.k3s")
    return out


class FilterModule(object):
    def filters(self):
        return {"gpu_node_labels": gpu_node_labels}
