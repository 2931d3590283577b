# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
name: serving_plan_problems
short_description: Reject a model-serving plan that cannot work, before anything is touched
version_added: 0.1.0
description:
  - Tensor-parallel size (or NIM GPUs) larger than the GPUs of any node, more GPUs requested than the cluster
    has (GPUs from the inventory times the time-slicing replicas of each node's class), NIM backends with fewer
    than 2 replicas or an autoscaler maximum the cluster cannot hold, unpinned images, duplicate served names,
    model paths missing from the store.
  - Time-slicing. A multi-GPU model needs a node without time-slicing with that many GPUs (sliced nodes refuse
    requests for more than one slice). An explicit C(gpu_memory_utilization) that, times the slices of a shared
    GPU, asks for more than the GPU's memory is refused.
  - Weights that do not fit the GPU memory share of the model.
options:
  _input:
    description: The vLLM model list.
    type: list
    elements: dict
    required: true
  capacity:
    description: GPU node name to C({gpus, replicas}) (the C(gpu_capacity) filter), or to a bare GPU count.
    type: dict
    required: true
  default_image:
    description: Image of vLLM models that do not set one.
    type: str
    required: true
  nim_models:
    description: The NIM model list.
    type: list
    elements: dict
    default: []
  store_paths:
    description: Model paths present in the store; null when unknown.
    type: list
    elements: str
  weights_bytes:
    description:
      - Model path to the bytes of its weight files (measured in the seed directory). A model's own
        C(weights_gib) wins. With the GPU memory of the nodes (host variable C(aiinfra_gpu_memory_mib)), a model
        whose weights per GPU leave less than 10% of its memory share for the KV cache is refused.
    type: dict
    default: {}
"""

EXAMPLES = r"""
- name: Refuse an impossible plan
  ansible.builtin.assert:
    that: problems | length == 0
    fail_msg: "{{ problems }}"
  vars:
    problems: "{{ vllm_models | aiinfra.k3s.serving_plan_problems({'gx10-db4d': 1}, vllm_image, nim_models) }}"
"""

RETURN = r"""
_value:
  description: One line per problem; empty when the plan fits.
  type: list
  elements: str
"""

from ansible_collections.aiinfra.k3s.plugins.module_utils.serving_plan import plan_problems


def serving_plan_problems(models, capacity, default_image, nim_models=None, store_paths=None, weights_bytes=None):
    return plan_problems(
        list(models),
        dict(capacity),
        default_image,
        list(nim_models or []),
        None if store_paths is None else set(store_paths),
        {path: int(size) / 1073741824.0 for path, size in (weights_bytes or {}).items()},
    )


class FilterModule(object):
    def filters(self):
        return {"serving_plan_problems": serving_plan_problems}
