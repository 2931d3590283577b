# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller side of aiinfra.k3s.stage_report: appends one entry to the report kept as a fact of localhost."""

import hashlib

from ansible import constants as C
from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.aiinfra.k3s.plugins.module_utils.plan.stage_report import STATUSES, record

FACT = "aiinfra_stage_report"
ARGUMENT_SPEC = {
    "stage": {"type": "str", "required": True},
    "status": {"type": "str", "default": "ran", "choices": list(STATUSES)},
    "detail": {"type": "str", "default": ""},
}


def run_id():
    """Names this ansible-playbook run: its private temporary directory (ansible-local-<pid><random>), which the
    forked workers share and no other run has."""
    return hashlib.sha256(str(C.DEFAULT_LOCAL_TMP).encode()).hexdigest()[:16]


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        task = self._task
        if task.delegate_to != "localhost" or not task.delegate_facts or not task.run_once:
            raise AnsibleActionFail(
                "aiinfra.k3s.stage_report keeps the report on localhost: give the task "
                "delegate_to: localhost, delegate_facts: true and run_once: true"
            )
        _validation, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        # A module's facts live under ansible_facts (the project sets inject_facts_as_vars=false).
        localhost = (task_vars.get("hostvars") or {}).get("localhost") or {}
        current = (localhost.get("ansible_facts") or {}).get(FACT) or []
        try:
            entries = record(current, args["stage"], args["status"], args["detail"], run_id())
        except ValueError as err:
            raise AnsibleActionFail(str(err)) from err
        result.update(changed=False, ansible_facts={FACT: entries}, entry=entries[-1])
        return result
