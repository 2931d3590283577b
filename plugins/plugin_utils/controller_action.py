# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the controller-side actions share. InProcessAction (gpu_allocation_info, k3s_release_info, node_files): run
the module's work in the controller's process where a task may (in_controller_process). ApiAction (api_objects_info,
api_objects): the kubeconfig found and decrypted as kubernetes.core's actions find it, the task's proxy environment, a
Connection of module_utils k8s/api_client, or the kubernetes.core module to hand the task to when the kubeconfig needs
the kubernetes client."""

import os

from ansible.errors import AnsibleError
from ansible.plugins.action import ActionBase

from ansible_collections.aiinfra.k3s.plugins.module_utils.k8s.api_client import (
    ApiError,
    Unsupported,
    connect,
    default_kubeconfig,
)

LOCAL = ("local", "ansible.builtin.local", "ansible.legacy.local")


def task_environment(action):
    """The controller's environment with the task's `environment:` over it, as a module process on the controller
    would see it (action: the running ActionBase)."""
    env = dict(os.environ)
    for entry in action._task.environment or []:
        entry = action._templar.template(entry)
        if isinstance(entry, dict):
            env.update({str(k): str(v) for k, v in entry.items()})
    return env


def in_controller_process(action):
    """Whether an action may do its module's work in its own process: on the controller's own connection, without
    become (a module would run as another user)."""
    return action._connection.transport in LOCAL and not action._play_context.become


class InProcessAction(ActionBase):
    """An action whose module's work can run in the controller's process: run() validates the task's arguments, runs
    the module where in_controller_process() says no, and otherwise calls self._in_process(params, result, task_vars),
    which returns the result (or calls self._module(result, task_vars) to run the module after all)."""

    TRANSFERS_FILES = False
    _supports_check_mode = True
    ARGUMENT_SPEC = {}
    REQUIRED_TOGETHER = None

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        if not in_controller_process(self):
            return self._module(result, task_vars)
        params = self.validate_argument_spec(
            argument_spec=self.ARGUMENT_SPEC, required_together=self.REQUIRED_TOGETHER
        )[1]
        return self._in_process(params, result, task_vars)

    def _module(self, result, task_vars):
        result.update(self._execute_module(task_vars=task_vars))
        return result

    def _in_process(self, params, result, task_vars):
        raise NotImplementedError


class ApiAction(ActionBase):
    """run() calls self._with_api(result, args, conn) with an open Connection, or self._hand_on(result, args,
    kubeconfig, task_vars) when the kubeconfig needs the kubernetes client (only on the controller's own connection)."""

    TRANSFERS_FILES = False
    _requires_connection = False
    _supports_check_mode = True
    ARGUMENT_SPEC = {}
    FALLBACK = ""  # the kubernetes.core module a kubeconfig this reader does not speak goes to

    def _controller_path(self, path):
        """The kubeconfig as kubernetes.core's actions find it: in the play's search path, and a readable copy when it
        is vault-encrypted (a temporary file, removed by run() when it is done)."""
        try:
            path = self._find_needle("files", path)
        except AnsibleError:
            return path  # not found: the reader says so, naming the path
        return self._loader.get_real_file(path, decrypt=True)

    def _environment(self):
        return task_environment(self)

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = self.validate_argument_spec(argument_spec=self.ARGUMENT_SPEC)[1]
        given = args["kubeconfig"] or default_kubeconfig()
        result["changed"] = False
        try:
            real = self._controller_path(given)
        except AnsibleError as exc:
            result.update(failed=True, reader="api_client", msg="cannot read the kubeconfig %s: %s" % (given, exc))
            return result
        try:
            return self._open(result, args, given, real, task_vars)
        finally:
            if real != given:
                self._loader.cleanup_tmp_file(real)  # a decrypted copy lives no longer than the task

    def _open(self, result, args, given, real, task_vars):
        try:
            conn = connect(real, args["context"], args["timeout"], args["validate_certs"], self._environment(),
                           base_dir=os.path.dirname(os.path.abspath(os.path.expanduser(given))))  # fmt: skip
        except Unsupported as why:
            # The kubernetes.core module runs where the task runs: only on the controller is the path the same file.
            if self._connection.transport not in LOCAL:
                msg = "%s needs %s (%s), which would read it on the %s connection's host" % (
                    given, self.FALLBACK, why, self._connection.transport)  # fmt: skip
                result.update(failed=True, reader="api_client", msg=msg + ": run the task with delegate_to: localhost")
                return result
            self._hand_on(result, args, real, task_vars)
            result["reader"] = self.FALLBACK
            return result
        except ApiError as exc:
            result.update(failed=True, reader="api_client", msg="cannot use %s: %s" % (given, exc))
            return result
        try:
            self._with_api(result, args, conn)
        except ApiError as exc:
            result.update(failed=True, msg=str(exc))
        finally:
            conn.close()
        result["reader"] = "api_client"
        return result

    def _with_api(self, result, args, conn):
        raise NotImplementedError

    def _hand_on(self, result, args, kubeconfig, task_vars):
        raise NotImplementedError
