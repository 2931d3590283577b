# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
name: serving_autoscaling
short_description: Autoscalers of the serving stack, and the objects they take over
version_added: 0.1.0
description:
  - With C(engine=keda), KEDA's namespace and HelmChart, a ScaledObject on the gateway's request rate and one per
    vLLM model on its queue depth (C(vllm:num_requests_waiting)), each model's maximum bounded by the GPUs left
    when every other workload keeps its minimum. With C(engine=hpa), a CPU HorizontalPodAutoscaler on the gateway.
  - The input objects come back with the C(replicas) field removed from every Deployment an autoscaler now owns.
options:
  _input:
    description: Rendered objects (vLLM, gateway) whose Deployments may become autoscaler targets.
    type: list
    elements: dict
    required: true
  params:
    description: Settings (see roles/autoscaling/defaults/main.yml) plus vllm_models, nim_models and capacity.
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Autoscale the gateway and the models
  ansible.builtin.set_fact:
    result: "{{ __vllm_manifests | aiinfra.k3s.serving_autoscaling(params) }}"
"""

RETURN = r"""
_value:
  description: C(objects) (the input, targets without replicas) and C(autoscalers).
  type: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.aiinfra.k3s.plugins.module_utils.autoscaling import autoscaling_manifests


def serving_autoscaling(objects, params):
    try:
        objects, autoscalers = autoscaling_manifests(list(objects), dict(params))
    except (KeyError, TypeError, ValueError) as exc:
        raise AnsibleFilterError("cannot build the autoscalers: missing or bad %s" % exc) from exc
    return {"objects": objects, "autoscalers": autoscalers}


class FilterModule(object):
    def filters(self):
        return {"serving_autoscaling": serving_autoscaling}
