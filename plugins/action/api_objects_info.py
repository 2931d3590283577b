# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller side of aiinfra.k3s.api_objects_info: reads through module_utils k8s/api_client in this process,
or hands a kubeconfig it does not speak to kubernetes.core.k8s_info."""

import os

from ansible.errors import AnsibleError
from ansible.plugins.action import ActionBase

from ansible_collections.aiinfra.k3s.plugins.module_utils.k8s.api_client import (
    ARGUMENT_SPEC,
    ApiError,
    Unsupported,
    connect,
    default_kubeconfig,
    read_objects,
)

# The options kubernetes.core.k8s_info takes under the same names.
K8S_INFO_OPTIONS = ("kubeconfig", "context", "api_version", "kind", "name", "namespace", "label_selectors",
                    "field_selectors", "validate_certs")  # fmt: skip


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False
    _supports_check_mode = True

    def _controller_path(self, path):
        """The kubeconfig as kubernetes.core's k8s_info action finds it: in the play's search path, and a readable copy
        when it is vault-encrypted (a temporary file, removed by run() when it is done)."""
        try:
            path = self._find_needle("files", path)
        except AnsibleError:
            return path  # not found: the reader says so, naming the path
        return self._loader.get_real_file(path, decrypt=True)

    def _environment(self):
        """The controller's environment with the task's `environment:` over it (k8s_info's module process sees it)."""
        env = dict(os.environ)
        for entry in self._task.environment or []:
            entry = self._templar.template(entry)
            if isinstance(entry, dict):
                env.update({str(k): str(v) for k, v in entry.items()})
        return env

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)[1]
        given = args["kubeconfig"] or default_kubeconfig()
        result["changed"] = False
        try:
            real = self._controller_path(given)
        except AnsibleError as exc:
            result.update(failed=True, reader="api_client", msg="cannot read the kubeconfig %s: %s" % (given, exc))
            return result
        try:
            return self._read(result, args, given, real, task_vars)
        finally:
            if real != given:
                self._loader.cleanup_tmp_file(real)  # a decrypted copy lives no longer than the read

    def _read(self, result, args, given, real, task_vars):
        try:
            conn = connect(real, args["context"], args["timeout"], args["validate_certs"], self._environment(),
                           base_dir=os.path.dirname(os.path.abspath(os.path.expanduser(given))))  # fmt: skip
        except Unsupported as why:
            # kubernetes.core.k8s_info runs where the task runs: only on the controller is the path the same file.
            if self._connection.transport not in ("local", "ansible.builtin.local", "ansible.legacy.local"):
                where = self._connection.transport
                msg = "%s needs kubernetes.core.k8s_info (%s), which would read it on the %s connection's host" % (
                    given, why, where)  # fmt: skip
                result.update(failed=True, reader="api_client", msg=msg + ": run the task with delegate_to: localhost")
                return result
            module_args = {key: args[key] for key in K8S_INFO_OPTIONS if args[key] not in (None, [])}
            module_args["kubeconfig"] = real
            result.update(self._execute_module("kubernetes.core.k8s_info", module_args, task_vars=task_vars))
            result["reader"] = "kubernetes.core.k8s_info"
            return result
        except ApiError as exc:
            result.update(failed=True, reader="api_client", msg="cannot use %s: %s" % (given, exc))
            return result
        try:
            found, objects = read_objects(
                conn, args["api_version"], args["kind"], args["name"], args["namespace"],
                args["label_selectors"], args["field_selectors"],
            )  # fmt: skip
        except ApiError as exc:
            result.update(
                failed=True, reader="api_client", msg="%s %s not read: %s" % (args["api_version"], args["kind"], exc)
            )
            return result
        finally:
            conn.close()
        result.update(resources=objects, api_found=found, reader="api_client")
        return result
