# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
name: k3s_secret_keys
short_description: The keys of a K3s config.yaml mapping whose values are credentials
version_added: 0.1.0
description:
  - Returns, sorted, the keys of the mapping that carry credentials (C(token), C(agent-token),
    C(etcd-s3-access-key), C(etcd-s3-secret-key), C(etcd-s3-session-token), C(datastore-endpoint), C(vpn-auth)).
  - The k3s role writes a config.yaml with any of them as a secret file, whose text never appears in C(--diff).
options:
  _input:
    description: The config.yaml mapping, as M(aiinfra.k3s.k3s_config) builds it.
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Say whether config.yaml holds a credential
  ansible.builtin.debug:
    msg: "{{ config | aiinfra.k3s.k3s_secret_keys | length > 0 }}"
"""

RETURN = r"""
_value:
  description: The credential-bearing keys, sorted; empty when there is none.
  type: list
  elements: str
"""


def k3s_secret_keys(config):
    from ansible_collections.aiinfra.k3s.plugins.module_utils.node.k3s_config import secret_keys

    return secret_keys(dict(config or {}))


class FilterModule(object):
    def filters(self):
        return {"k3s_secret_keys": k3s_secret_keys}
