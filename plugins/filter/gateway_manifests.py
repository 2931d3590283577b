# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
name: gateway_manifests
short_description: Build the LiteLLM gateway routing to exactly the site plan's model servers
version_added: 0.1.0
description:
  - Takes the site plan's routes and returns the gateway's ConfigMap, Deployment, Service and
    PodDisruptionBudget, routing each model to its Service.
options:
  _input:
    description: The site plan's model routes (C(site_plan_current.model_routes)).
    type: list
    elements: dict
    required: true
  params:
    description: The litellm role's settings, plus C(autoscaled).
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Build the LiteLLM gateway routing to exactly the site plan's model servers
  ansible.builtin.set_fact:
    __objects: "{{ site_plan_current.model_routes | aiinfra.k3s.gateway_manifests(__params) }}"
"""

RETURN = r"""
_value:
  description: Kubernetes objects as mappings.
  type: list
  elements: dict
"""


def gateway_manifests(routes, params):
    from ansible_collections.aiinfra.k3s.plugins.module_utils.k8s import gateway
    from ansible_collections.aiinfra.k3s.plugins.plugin_utils.manifests import build

    return build("gateway_manifests", lambda: gateway.gateway_manifests(list(routes), dict(params)))


class FilterModule(object):
    def filters(self):
        return {"gateway_manifests": gateway_manifests}
