# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
name: models_in_use
short_description: The model store paths the pods of one node use
version_added: 0.2.0
description:
  - From Pod objects (as M(kubernetes.core.k8s_info) returns them), the paths relative to the model store that the
    pods scheduled on O(node) (C(spec.nodeName)) and not finished (phase neither Succeeded nor Failed) use, for
    the C(in_use) option of M(aiinfra.k3s.model_store).
  - A pod uses the store through its volume named C(models). Each container that mounts it names its model under the
    mount path in its command, arguments or environment values; vLLM's C(--model <mount>/<path>) and
    C(--model=<mount>/<path>) give C(<path>).
  - A reference to the mount itself is the whole store, V(.) (NIM's builder sets C(NIM_CACHE_PATH) to the mount and
    names no model, so a NIM pod may read any model). A container that mounts the store and names nothing in it
    counts as the whole store too.
  - The logic is in module_utils C(k8s/model_usage.py).
options:
  _input:
    description: Pod objects.
    type: list
    elements: dict
    required: true
  node:
    description: The Kubernetes node name (the inventory host name, as the k3s roles register the nodes).
    type: str
    required: true
  by_pod:
    description: Return a dict of each pod that uses the store (C(<namespace>/<pod>)) to its paths instead of the paths.
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: Keep what the model servers of this node use
  aiinfra.k3s.model_store:
    store: /data/model-registry
    keep: "{{ model_registry_seed_models }}"
    in_use: "{{ pods.resources | aiinfra.k3s.models_in_use(inventory_hostname) }}"
    prune: true
"""

RETURN = r"""
_value:
  description: Sorted store paths (V(.) the whole store), or with O(by_pod) a dict of pod to its paths.
  type: raw
  sample: [Qwen/Qwen2.5-7B-Instruct, meta/llama-3-8b]
"""


def models_in_use(pods, node, by_pod=False):
    from ansible_collections.aiinfra.k3s.plugins.module_utils.k8s.model_usage import models_in_use as usage

    return usage(pods, node, by_pod)


class FilterModule(object):
    def filters(self):
        return {"models_in_use": models_in_use}
