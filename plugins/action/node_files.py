# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller side of aiinfra.k3s.node_files: on the controller's own connection without become, files that already
hold their content, mode and owner are found so in this process (module_utils node/node_files.py converged), and
nothing runs; any change, and any other host, runs the module, which alone writes."""

from ansible_collections.aiinfra.k3s.plugins.module_utils.node.node_files import ARGUMENT_SPEC, converged
from ansible_collections.aiinfra.k3s.plugins.plugin_utils.controller_action import InProcessAction


class ActionModule(InProcessAction):
    ARGUMENT_SPEC = ARGUMENT_SPEC

    def _in_process(self, params, result, task_vars):
        try:
            done = converged(params)
        except OSError:
            done = None  # what cannot be read here is the module's to report
        if done is None:
            return self._module(result, task_vars)
        result.update(done)
        return result
