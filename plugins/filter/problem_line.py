# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
name: problem_line
short_description: One line for a problem dict (severity, code, host, variable, problem, fix)
version_added: 0.1.0
description:
  - Formats a problem as the checks return it, C({code, severity, host, variable, problem, fix}), as one line
    for a failure message or a warning.
options:
  _input:
    description: A problem.
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Print the warnings
  ansible.builtin.debug:
    msg: "{{ __problems | selectattr('severity', '==', 'warning') | map('aiinfra.k3s.problem_line') }}"
"""

RETURN = r"""
_value:
  description: C(SEVERITY CODE [host] variable - problem; fix - fix).
  type: str
"""


def problem_line(problem):
    from ansible_collections.aiinfra.k3s.plugins.module_utils.plan.inventory_spec import render

    return render(problem)


class FilterModule(object):
    def filters(self):
        return {"problem_line": problem_line}
