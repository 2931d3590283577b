# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller side of aiinfra.k3s.k3s_release_info: on the controller's own connection, without become, the release
is verified in this process (module_utils node/k3s_release.py, as the module does); anywhere else the module runs."""

from ansible.utils.display import Display

from ansible_collections.aiinfra.k3s.plugins.module_utils.node.k3s_release import (
    RELEASE_INFO_SPEC,
    ArtifactError,
    release_info,
)
from ansible_collections.aiinfra.k3s.plugins.plugin_utils.controller_action import InProcessAction


class ActionModule(InProcessAction):
    ARGUMENT_SPEC = RELEASE_INFO_SPEC

    def _in_process(self, params, result, task_vars):
        try:
            artifacts, warning = release_info(params, self._task.check_mode)
        except (ArtifactError, OSError) as exc:
            result.update(failed=True, msg="K3s artifacts in %s cannot be used: %s" % (params["path"], exc))
            return result
        if warning:  # captured into the task's result, as a module's warn() is
            Display().warning(warning)
        result.update(changed=False, artifacts=artifacts)
        return result
