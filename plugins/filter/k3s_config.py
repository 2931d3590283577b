# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
name: k3s_config
short_description: Build the config.yaml mapping of a K3s server or agent from structured variables
version_added: 0.1.0
description:
  - Build the config.yaml mapping of a K3s server or agent from structured variables.
options:
  _input:
    description:
      - Node parameters C(token_file), C(node_ip), C(labels), C(taints), C(kubelet_args),
        C(protect_kernel_defaults), C(extra) and C(server_url).
      - Servers also take C(first), C(ha), C(tls_san), C(cluster_cidr), C(service_cidr), C(disable),
        C(flannel_backend) and C(secrets_encryption).
    type: dict
    required: true
  role:
    description: C(server) or C(agent).
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Agent configuration
  ansible.builtin.set_fact:
    config: "{{ params | aiinfra.k3s.k3s_config('agent') }}"
  vars:
    params: {token_file: /etc/rancher/k3s/cluster-token, server_url: "https://10.0.0.1:6443"}
"""

RETURN = r"""
_value:
  description: The mapping to write as YAML to /etc/rancher/k3s/config.yaml.
  type: dict
"""

from ansible.errors import AnsibleFilterError


def k3s_config(params, role):
    from ansible_collections.aiinfra.k3s.plugins.module_utils.node.k3s_config import build_config

    try:
        return build_config(role, dict(params))
    except (KeyError, ValueError) as exc:
        raise AnsibleFilterError("cannot build the K3s %s config: %s" % (role, exc)) from exc


class FilterModule(object):
    def filters(self):
        return {"k3s_config": k3s_config}
