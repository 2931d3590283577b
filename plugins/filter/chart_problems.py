# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
name: chart_problems
short_description: A role's chart install settings that cannot work
version_added: 0.1.0
description:
  - The install mode is online or airgap; in airgap mode the chart archive has a name and a sha256.
options:
  _input:
    description: The role's variable prefix (cert_manager, monitoring, autoscaling).
    type: str
    required: true
  install_mode:
    description: The role's install mode.
    type: str
    required: true
  chart_file:
    description: Name of the chart archive (airgap).
    type: str
    required: true
  chart_sha256:
    description: sha256 of the chart archive (airgap).
    type: str
    default: ""
"""

EXAMPLES = r"""
- name: Check the chart settings
  ansible.builtin.set_fact:
    problems: >-
      {{ 'monitoring' | aiinfra.k3s.chart_problems(monitoring_install_mode, monitoring_chart_file,
         monitoring_chart_sha256) }}
"""

RETURN = r"""
_value:
  description: One line per problem, naming the variable; empty when the settings can work.
  type: list
  elements: str
"""


def chart_problems(prefix, install_mode, chart_file, chart_sha256=""):
    from ansible_collections.aiinfra.k3s.plugins.module_utils.k8s import objects

    return objects.chart_problems(prefix, install_mode, chart_file, chart_sha256)


class FilterModule(object):
    def filters(self):
        return {"chart_problems": chart_problems}
