# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
name: model_path_problems
short_description: Problems of model paths that would leave the model store or the seed directory
version_added: 0.1.0
description:
  - Takes lists of model paths by variable name and returns a problem (C({code, severity, host, variable, problem,
    fix})) for each path that is absolute or has a C(.) or C(..) segment.
options:
  _input:
    description: Lists of model paths by variable name.
    type: dict
    required: true
  host:
    description: The host whose values these are.
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Refuse model paths that would leave the store
  ansible.builtin.assert:
    that: __problems | length == 0
    fail_msg: "{{ __problems | map('aiinfra.k3s.problem_line') | list }}"
  vars:
    __problems: "{{ {'model_registry_seed_models': model_registry_seed_models}
                    | aiinfra.k3s.model_path_problems(inventory_hostname) }}"
"""

RETURN = r"""
_value:
  description: Problems, one per refused path.
  type: list
  elements: dict
"""


def model_path_problems(lists, host):
    from ansible_collections.aiinfra.k3s.plugins.module_utils.plan.site_plan import model_path_problems as problems

    return problems(str(host), dict(lists))


class FilterModule(object):
    def filters(self):
        return {"model_path_problems": model_path_problems}
