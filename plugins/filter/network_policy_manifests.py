# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
name: network_policy_manifests
short_description: Build the serving namespace's NetworkPolicies
version_added: 0.1.0
description:
  - Takes the network_policies role's settings and returns the NetworkPolicies (default deny, then ingress
    controller to gateway, gateway to model servers, Prometheus scrapes, DNS and cert-manager's HTTP-01 solver).
options:
  _input:
    description: The network_policies role's settings.
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Build the serving namespace's NetworkPolicies
  ansible.builtin.set_fact:
    __objects: "{{ __params | aiinfra.k3s.network_policy_manifests }}"
"""

RETURN = r"""
_value:
  description: Kubernetes objects as mappings.
  type: list
  elements: dict
"""


def network_policy_manifests(params):
    from ansible_collections.aiinfra.k3s.plugins.module_utils.k8s import network_policies
    from ansible_collections.aiinfra.k3s.plugins.plugin_utils.manifests import build

    return build("network_policy_manifests", lambda: network_policies.network_policies(dict(params)))


class FilterModule(object):
    def filters(self):
        return {"network_policy_manifests": network_policy_manifests}
