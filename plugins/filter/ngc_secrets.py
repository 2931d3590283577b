# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
name: ngc_secrets
short_description: Build the nvcr.io pull Secret and, when NIM downloads, the NGC key Secret
version_added: 0.1.0
description:
  - Takes the NGC API key and returns the nvcr.io image pull Secret, plus the key's Secret when C(download) is
    set.
options:
  _input:
    description: The NGC API key.
    type: str
    required: true
  params:
    description: namespace, api_secret, pull_secret, download.
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Build the nvcr.io pull Secret and, when NIM downloads, the NGC key Secret
  ansible.builtin.set_fact:
    __objects: "{{ nim_ngc_api_key | aiinfra.k3s.ngc_secrets(__params) }}"
"""

RETURN = r"""
_value:
  description: Kubernetes objects as mappings.
  type: list
  elements: dict
"""


def ngc_secrets(key, params):
    from ansible_collections.aiinfra.k3s.plugins.module_utils.k8s import model_servers
    from ansible_collections.aiinfra.k3s.plugins.plugin_utils.manifests import build

    return build(
        "ngc_secrets",
        lambda: model_servers.ngc_secrets(
            key, params["namespace"], params["api_secret"], params["pull_secret"], bool(params.get("download"))
        ),
    )


class FilterModule(object):
    def filters(self):
        return {"ngc_secrets": ngc_secrets}
