# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
name: grafana_secret
short_description: Build the Secret holding Grafana's admin password
version_added: 0.1.0
description:
  - Takes Grafana's admin password and returns its Secret.
options:
  _input:
    description: The admin password.
    type: str
    required: true
  params:
    description: The monitoring role's settings.
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Build the Secret holding Grafana's admin password
  ansible.builtin.set_fact:
    __objects: "{{ monitoring_grafana_admin_password | aiinfra.k3s.grafana_secret(__monitoring_params) }}"
"""

RETURN = r"""
_value:
  description: Kubernetes objects as mappings.
  type: list
  elements: dict
"""


def grafana_secret(password, params):
    from ansible_collections.aiinfra.k3s.plugins.module_utils.k8s import monitoring
    from ansible_collections.aiinfra.k3s.plugins.plugin_utils.manifests import build

    return build("grafana_secret", lambda: [monitoring.grafana_secret(dict(params), password)])


class FilterModule(object):
    def filters(self):
        return {"grafana_secret": grafana_secret}
