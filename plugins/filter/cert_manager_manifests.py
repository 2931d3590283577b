# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
name: cert_manager_manifests
short_description: Build cert-manager's HelmChart, the ClusterIssuer(s) and the Certificates
version_added: 0.1.0
description:
  - Takes the cert_manager role's settings (with the certificates to issue) and returns cert-manager's namespace
    and HelmChart, the ClusterIssuer(s) and the Certificates.
options:
  _input:
    description: The cert_manager role's settings.
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Build cert-manager's HelmChart, the ClusterIssuer(s) and the Certificates
  ansible.builtin.set_fact:
    __objects: "{{ __cert_manager_params | aiinfra.k3s.cert_manager_manifests }}"
"""

RETURN = r"""
_value:
  description: Kubernetes objects as mappings.
  type: list
  elements: dict
"""


def cert_manager_manifests(params):
    from ansible_collections.aiinfra.k3s.plugins.module_utils.k8s import edge
    from ansible_collections.aiinfra.k3s.plugins.plugin_utils.manifests import build

    return build("cert_manager_manifests", lambda: edge.cert_manager_manifests(dict(params)))


class FilterModule(object):
    def filters(self):
        return {"cert_manager_manifests": cert_manager_manifests}
