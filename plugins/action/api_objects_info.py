# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller side of aiinfra.k3s.api_objects_info: reads through module_utils k8s/api_client in this process,
or hands a kubeconfig it does not speak to kubernetes.core.k8s_info."""

from ansible_collections.aiinfra.k3s.plugins.module_utils.k8s.api_client import ARGUMENT_SPEC, ApiError, read_objects
from ansible_collections.aiinfra.k3s.plugins.plugin_utils.controller_action import ApiAction

# The options kubernetes.core.k8s_info takes under the same names.
K8S_INFO_OPTIONS = ("kubeconfig", "context", "api_version", "kind", "name", "namespace", "label_selectors",
                    "field_selectors", "validate_certs")  # fmt: skip


class ActionModule(ApiAction):
    ARGUMENT_SPEC = ARGUMENT_SPEC
    FALLBACK = "kubernetes.core.k8s_info"

    def _hand_on(self, result, args, kubeconfig, task_vars):
        module_args = {key: args[key] for key in K8S_INFO_OPTIONS if args[key] not in (None, [])}
        if args["validate_certs"] is not False:  # only false is passed on: otherwise the kubeconfig decides
            module_args.pop("validate_certs", None)
        module_args["kubeconfig"] = kubeconfig
        result.update(self._execute_module(self.FALLBACK, module_args, task_vars=task_vars))

    def _with_api(self, result, args, conn):
        try:
            found, objects = read_objects(
                conn, args["api_version"], args["kind"], args["name"], args["namespace"],
                args["label_selectors"], args["field_selectors"],
            )  # fmt: skip
        except ApiError as exc:
            raise ApiError("%s %s not read: %s" % (args["api_version"], args["kind"], exc)) from exc
        result.update(resources=objects, api_found=found)
