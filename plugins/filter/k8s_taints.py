# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
name: k8s_taints
short_description: Turn K3s node-taint strings into Kubernetes taint objects
version_added: 0.1.0
description:
  - Converts C(key=value:Effect) or C(key:Effect) strings, as K3s's C(node-taint) takes them, into the
    C({key, value, effect}) objects of the Kubernetes API (for M(kubernetes.core.k8s_taint)).
options:
  _input:
    description: Taint strings.
    type: list
    elements: str
    required: true
"""

EXAMPLES = r"""
- name: GPU taint as an API object
  ansible.builtin.debug:
    msg: "{{ ['nvidia.com/gpu=present:NoSchedule'] | aiinfra.k3s.k8s_taints }}"
"""

RETURN = r"""
_value:
  description: Taint objects with C(key), C(effect) and, when given, C(value).
  type: list
  elements: dict
"""

from ansible.errors import AnsibleFilterError


def k8s_taints(taints):
    from ansible_collections.aiinfra.k3s.plugins.module_utils.plan.inventory_spec import parse_taint

    try:
        return [parse_taint(t) for t in taints]
    except ValueError as exc:
        raise AnsibleFilterError(str(exc)) from exc


class FilterModule(object):
    def filters(self):
        return {"k8s_taints": k8s_taints}
