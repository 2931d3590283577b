# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller side of aiinfra.k3s.supply_chain_info: gathers the values it checks and calls module_utils supply_chain."""

from ansible.plugins.action import ActionBase

from ansible_collections.aiinfra.k3s.plugins.action.site_plan import role_defaults
from ansible_collections.aiinfra.k3s.plugins.module_utils.plan.supply_chain import VARIABLES, supply_chain_problems


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset()
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        env = role_defaults(self._loader)
        env.update(task_vars or {})
        templar = self._templar.copy_with_new_env(available_variables=env)
        values = {name: templar.template(env[name]) for name in VARIABLES if name in env}
        result.update(changed=False, problems=supply_chain_problems(values))
        return result
