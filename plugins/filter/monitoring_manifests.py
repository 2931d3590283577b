# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
name: monitoring_manifests
short_description: Build kube-prometheus-stack, the scrape targets, the rules and the dashboards
version_added: 0.1.0
description:
  - Takes the monitoring role's settings and returns kube-prometheus-stack's namespace and HelmChart, the
    PodMonitors and ServiceMonitors, the PrometheusRule and the dashboard ConfigMaps.
options:
  _input:
    description: The monitoring role's settings.
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Build kube-prometheus-stack, the scrape targets, the rules and the dashboards
  ansible.builtin.set_fact:
    __objects: "{{ __monitoring_params | aiinfra.k3s.monitoring_manifests }}"
"""

RETURN = r"""
_value:
  description: Kubernetes objects as mappings.
  type: list
  elements: dict
"""


def monitoring_manifests(params):
    from ansible_collections.aiinfra.k3s.plugins.module_utils.k8s import monitoring
    from ansible_collections.aiinfra.k3s.plugins.plugin_utils.manifests import build

    return build("monitoring_manifests", lambda: monitoring.monitoring_manifests(dict(params)))


class FilterModule(object):
    def filters(self):
        return {"monitoring_manifests": monitoring_manifests}
