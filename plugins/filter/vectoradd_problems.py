# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
name: vectoradd_problems
short_description: Why the vectorAdd check may not use (and delete) a namespace
version_added: 0.1.0
description:
  - Takes the check's namespace name and returns problems (C({code, severity, host, variable, problem, fix})) when
    it is a system namespace, one of the site's (the site plan's namespaces and what else it places), or an existing
    namespace without the labels the check gives the namespaces it creates.
options:
  _input:
    description: The namespace (C(gpu_verify_vectoradd_namespace)).
    type: str
    required: true
  host:
    description: The host the check runs from.
    type: str
    required: true
  plan:
    description: The site plan (C(site_plan_current)); without it only system namespaces are refused.
    type: dict
    default: {}
  existing:
    description: The Namespace objects of that name read from the API (none or one); omitted, ownership is not checked.
    type: list
    elements: dict
    default: []
"""

EXAMPLES = r"""
- name: Refuse a namespace the check may not use
  ansible.builtin.assert:
    that: __problems | length == 0
    fail_msg: "{{ __problems | map('aiinfra.k3s.problem_line') | list }}"
  vars:
    __problems: >-
      {{ gpu_verify_vectoradd_namespace | aiinfra.k3s.vectoradd_problems(inventory_hostname, site_plan_current) }}
"""

RETURN = r"""
_value:
  description: Problems, none when the namespace may be used.
  type: list
  elements: dict
"""


def vectoradd_problems(name, host, plan=None, existing=None):
    from ansible_collections.aiinfra.k3s.plugins.module_utils.k8s import vectoradd

    host = str(host)
    return vectoradd.namespace_problems(name, host, dict(plan or {})) + (
        vectoradd.ownership_problems(name, list(existing or []), host)
    )


class FilterModule(object):
    def filters(self):
        return {"vectoradd_problems": vectoradd_problems}
