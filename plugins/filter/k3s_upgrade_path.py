# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
name: k3s_upgrade_path
short_description: The steps of a K3s upgrade, and why a plan that skips a minor version is refused
version_added: 0.1.0
description:
  - Takes the versions the nodes run (C(status.nodeInfo.kubeletVersion)) and the target C(k3s_version), and
    returns the releases to install in order. K3s and Kubernetes upgrade one minor version per step; a target
    more than one minor ahead, or a minor below the cluster's, gives a problem that lists the steps.
options:
  _input:
    description: Versions the nodes report.
    type: list
    elements: str
    required: true
  target:
    description: The K3s release to upgrade to.
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Refuse an upgrade that skips a minor version
  ansible.builtin.assert:
    that: path.problem == ''
    fail_msg: "{{ path.problem }}"
  vars:
    path: "{{ ['v1.33.5+k3s1'] | aiinfra.k3s.k3s_upgrade_path('v1.36.4+k3s1') }}"
"""

RETURN = r"""
_value:
  description: C(steps) (releases in order, the target last) and C(problem) (empty when the plan can run).
  type: dict
"""


def k3s_upgrade_path(running, target):
    from ansible_collections.aiinfra.k3s.plugins.module_utils.plan.k8s_support import upgrade_path

    return upgrade_path([str(v) for v in running or []], str(target))


class FilterModule(object):
    def filters(self):
        return {"k3s_upgrade_path": k3s_upgrade_path}
