# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
name: gateway_secret
short_description: Build the Secret holding the gateway's master key
version_added: 0.1.0
description:
  - Takes the LiteLLM master key and returns its Secret.
options:
  _input:
    description: The master key.
    type: str
    required: true
  params:
    description: The litellm role's settings (secret name, namespace, deployment name).
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Build the Secret holding the gateway's master key
  ansible.builtin.set_fact:
    __objects: "{{ litellm_master_key | aiinfra.k3s.gateway_secret(__params) }}"
"""

RETURN = r"""
_value:
  description: Kubernetes objects as mappings.
  type: list
  elements: dict
"""


def gateway_secret(key, params):
    from ansible_collections.aiinfra.k3s.plugins.module_utils.k8s import gateway
    from ansible_collections.aiinfra.k3s.plugins.plugin_utils.manifests import build

    return build("gateway_secret", lambda: gateway.gateway_secret(dict(params), key))


class FilterModule(object):
    def filters(self):
        return {"gateway_secret": gateway_secret}
