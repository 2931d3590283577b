# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller side of aiinfra.k3s.api_objects: server-side apply through module_utils k8s/api_client in this process,
or through kubernetes.core.k8s for a kubeconfig the client here does not speak."""

import yaml

from ansible_collections.aiinfra.k3s.plugins.module_utils.k8s.api_client import (
    APPLY_ARGUMENT_SPEC,
    applied_changed,
    apply_objects,
)
from ansible_collections.aiinfra.k3s.plugins.plugin_utils.controller_action import ApiAction

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def _shown(obj):
    """An object as a diff shows it: without managedFields, and a Secret's values hidden."""
    obj = dict(obj or {})
    if obj.get("metadata"):
        obj["metadata"] = {k: v for k, v in obj["metadata"].items() if k != "managedFields"}
    if obj.get("kind") == "Secret":
        for key in ("data", "stringData"):
            if isinstance(obj.get(key), dict):
                obj[key] = dict.fromkeys(obj[key], "<hidden>")
        annotations = (obj.get("metadata") or {}).get("annotations")
        if isinstance(annotations, dict) and LAST_APPLIED in annotations:  # a client-side apply's copy of the values
            obj["metadata"] = dict(obj["metadata"], annotations=dict(annotations, **{LAST_APPLIED: "<hidden>"}))
    return yaml.safe_dump(obj, sort_keys=True) if obj else ""


class ActionModule(ApiAction):
    ARGUMENT_SPEC = APPLY_ARGUMENT_SPEC
    FALLBACK = "kubernetes.core.k8s"

    def _hand_on(self, result, args, kubeconfig, task_vars):
        module_args = {
            "kubeconfig": kubeconfig,
            "state": "present",
            "apply": True,
            "server_side_apply": {"field_manager": args["field_manager"], "force_conflicts": args["force_conflicts"]},
            "definition": args["definition"],
        }
        if args["validate_certs"] is False:  # otherwise the kubeconfig decides, as for the client here
            module_args["validate_certs"] = False
        if args["context"]:
            module_args["context"] = args["context"]
        answer = self._execute_module(self.FALLBACK, module_args, task_vars=task_vars)
        result.update(answer)
        applied = answer.get("result") or {}
        result["objects"] = [r.get("result") for r in applied["results"]] if "results" in applied else [applied]

    def _with_api(self, result, args, conn):
        dry_run = bool(self._task.check_mode)
        applied = apply_objects(conn, args["definition"], args["field_manager"], args["force_conflicts"], dry_run)
        changed = [(before, after) for before, after in applied if applied_changed(before, after, dry_run)]
        result.update(changed=bool(changed), objects=[pair[1] for pair in applied])
        if self._task.diff and changed:
            result["diff"] = [
                {"before_header": self._name(after), "after_header": self._name(after), "before": _shown(before),
                 "after": _shown(after)}
                for before, after in changed
            ]  # fmt: skip

    @staticmethod
    def _name(obj):
        meta = obj.get("metadata") or {}
        return "%s %s%s" % (
            obj.get("kind"),
            (meta["namespace"] + "/") if meta.get("namespace") else "",
            meta.get("name"),
        )
