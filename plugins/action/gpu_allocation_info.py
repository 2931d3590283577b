# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller side of aiinfra.k3s.gpu_allocation_info: on the controller's own connection without become the analysis
runs in this process (the bundle files, or the API through module_utils k8s/api_client, with the task's environment);
elsewhere, with become, or for a kubeconfig that needs the kubernetes client, the module runs as any module does."""

from ansible_collections.aiinfra.k3s.plugins.module_utils.gpu.allocation_info import (
    ARGUMENT_SPEC,
    REQUIRED_TOGETHER,
    api_lists,
    connect,
    connection_pager,
    file_lists,
    report,
    unreadable,
)
from ansible_collections.aiinfra.k3s.plugins.module_utils.k8s.api_client import Unsupported
from ansible_collections.aiinfra.k3s.plugins.plugin_utils.controller_action import InProcessAction, task_environment


class ActionModule(InProcessAction):
    ARGUMENT_SPEC = ARGUMENT_SPEC
    REQUIRED_TOGETHER = REQUIRED_TOGETHER

    def _in_process(self, params, result, task_vars):
        result["changed"] = False
        conn = None
        try:
            if params["nodes_file"]:
                nodes, pods, source = file_lists(params)
            else:
                try:
                    conn = connect(params, task_environment(self))
                except Unsupported:  # the module's kubernetes client reads it
                    return self._module(result, task_vars)
                nodes, pods, source = api_lists(connection_pager(conn), params["page_size"])
            analysis, failure = report(params, nodes, pods, source)
        except Exception as exc:  # one error path, as the module's: what could not be read, and why
            result.update(failed=True, msg=unreadable(params, exc))
            return result
        finally:
            if conn is not None:
                conn.close()
        result.update(analysis)
        if failure:
            result.update(failed=True, msg=failure)
        return result
