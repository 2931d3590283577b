# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
name: autoscaler_manifests
short_description: Build the autoscalers of the site plan's workloads
version_added: 0.1.0
description:
  - With C(engine=keda), KEDA's namespace and HelmChart, a ScaledObject on the gateway's request rate and one per
    vLLM model on its queue depth (C(vllm:num_requests_waiting)). With C(engine=hpa), a CPU
    HorizontalPodAutoscaler on the gateway. The replica bounds and targets are the site plan's workloads
    (the builders leave the replica count out of every workload an autoscaler owns).
options:
  _input:
    description: The site plan's workloads (C(site_plan_current.workloads)).
    type: list
    elements: dict
    required: true
  params:
    description: The autoscaling role's settings (engine, chart, Prometheus address, thresholds, cooldown).
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Build the autoscalers
  ansible.builtin.set_fact:
    __objects: "{{ site_plan_current.workloads | aiinfra.k3s.autoscaler_manifests(__params) }}"
"""

RETURN = r"""
_value:
  description: Kubernetes objects as mappings.
  type: list
  elements: dict
"""


def autoscaler_manifests(workloads, params):
    from ansible_collections.aiinfra.k3s.plugins.module_utils.k8s import autoscaling
    from ansible_collections.aiinfra.k3s.plugins.plugin_utils.manifests import build

    return build("autoscaler_manifests", lambda: autoscaling.autoscaling_manifests(list(workloads), dict(params)))


class FilterModule(object):
    def filters(self):
        return {"autoscaler_manifests": autoscaler_manifests}
