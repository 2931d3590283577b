#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
module: stage_report
short_description: Record the outcome of a site.yml stage in the stage report on the controller
version_added: 0.1.0
description:
  - Runs on the controller only (an action plugin); it touches no host.
  - Appends one entry (stage, status, detail) to the C(ansible_facts.aiinfra_stage_report) fact of C(localhost),
    which the last stage of C(site.yml) prints with the P(aiinfra.k3s.stage_report_lines#filter) filter. Nothing
    claims a stage that did not run.
  - "The task must carry C(delegate_to: localhost), C(delegate_facts: true) and C(run_once: true); the module fails
    without them, so the report is kept in one place whatever hosts the play targets."
  - The logic is the plain function C(record) in module_utils C(stage_report.py).
author:
  - aiinfra.k3s developers (@aiinfra)
options:
  stage:
    description: Stage name, as in playbooks/ (C(prereq), C(k3s_nodes), C(serving), ...).
    type: str
    required: true
  status:
    description: What happened to the stage.
    type: str
    default: ran
    choices: [ran, skipped]
  detail:
    description: What was done, or why the stage was skipped and how to make it run. Leading and trailing space is
      dropped.
    type: str
    default: ""
attributes:
  check_mode:
    support: full
    description: Records the same in check mode; it changes no host.
  diff_mode:
    support: none
    description: Changes nothing on a host, so there is nothing to diff.
"""

EXAMPLES = r"""
- name: Record the stage
  aiinfra.k3s.stage_report:
    stage: prereq
    status: ran
    detail: "{{ ansible_play_hosts | length }} node(s) prepared"
  delegate_to: localhost
  delegate_facts: true
  run_once: true

- name: Show the stage report
  ansible.builtin.debug:
    msg: "{{ hostvars['localhost']['ansible_facts']['aiinfra_stage_report'] | default([]) | aiinfra.k3s.stage_report_lines }}"
"""

RETURN = r"""
entry:
  description: The entry recorded.
  returned: always
  type: dict
  sample: {stage: prereq, status: ran, detail: 3 node(s) prepared}
ansible_facts:
  description: Facts set on C(localhost) (with C(delegate_facts)).
  returned: always
  type: dict
  contains:
    aiinfra_stage_report:
      description: Every stage recorded so far in this run, in order, as C({stage, status, detail}).
      type: list
      elements: dict
"""

from ansible.module_utils.basic import AnsibleModule


def main():
    module = AnsibleModule(
        argument_spec={
            "stage": {"type": "str", "required": True},
            "status": {"type": "str", "default": "ran", "choices": ["ran", "skipped"]},
            "detail": {"type": "str", "default": ""},
        },
        supports_check_mode=True,
    )
    module.fail_json(msg="aiinfra.k3s.stage_report runs on the controller as an action plugin; it has no module side")


if __name__ == "__main__":
    main()
