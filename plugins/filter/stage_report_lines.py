# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
name: stage_report_lines
short_description: Format the stage report of a site run
version_added: 0.1.0
description:
  - Turns the recorded stages (name, status, detail) into aligned lines and a summary line that names
    every skipped stage.
options:
  _input:
    description: Entries with keys C(stage), C(status) (C(ran) or C(skipped)) and C(detail).
    type: list
    elements: dict
    required: true
"""

EXAMPLES = r"""
- name: Print the report
  ansible.builtin.debug:
    msg: "{{ entries | aiinfra.k3s.stage_report_lines }}"
"""

RETURN = r"""
_value:
  description: One line per stage, then the summary.
  type: list
  elements: str
"""

from ansible.errors import AnsibleFilterError


def stage_report_lines(entries):
    from ansible_collections.aiinfra.k3s.plugins.module_utils.plan.stage_report import report_lines

    try:
        return report_lines(list(entries))
    except ValueError as exc:
        raise AnsibleFilterError(str(exc)) from exc


class FilterModule(object):
    def filters(self):
        return {"stage_report_lines": stage_report_lines}
