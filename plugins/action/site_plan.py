# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller side of aiinfra.k3s.site_plan: gathers the plan's inputs and calls module_utils site_plan."""

import fnmatch
import os

from ansible.errors import AnsibleActionFail
from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase

from ansible_collections.aiinfra.k3s.plugins.module_utils.plan.models import (
    ADDRESS_VARIABLES,
    model_configs,
    store_path_error,
)
from ansible_collections.aiinfra.k3s.plugins.module_utils.plan.site_plan import (
    SECRET_VARIABLES,
    SOURCE_VARIABLES,
    STORE_PATH_VARIABLES,
    VARIABLES,
    site_plan,
)

ROLES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "roles")
WEIGHT_FILES = ("*.safetensors", "*.bin", "*.pt", "*.pth", "*.gguf")
GPU_HOST_VARIABLES = (
    "aiinfra_gpu_count",
    "aiinfra_gpu_class",
    "aiinfra_gpu_memory_mib",
    "aiinfra_gpu_type",
    "aiinfra_node_group",
)


def role_defaults(loader, roles_dir=ROLES):
    """Every role's defaults: what a variable is when the inventory does not set it."""
    out = {}
    for role in sorted(os.listdir(roles_dir)):
        path = os.path.join(roles_dir, role, "defaults", "main.yml")
        if os.path.isfile(path):
            out.update(loader.load_from_file(path, trusted_as_template=True) or {})
    return out


def weight_bytes(seed_dir, paths):
    """Bytes of the weight files under each model directory of the seed directory."""
    out = {}
    for path in paths:
        total = 0
        for root, _dirs, files in os.walk(os.path.join(seed_dir, path)):
            for name in files:
                if any(fnmatch.fnmatch(name, pattern) for pattern in WEIGHT_FILES):
                    total += os.path.getsize(os.path.join(root, name))
        out[path] = total
    return out


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("gpu_hosts", "cluster_hosts", "secrets"))
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        secrets = boolean(self._task.args.get("secrets", True), strict=False)
        gpu_hosts = self._task.args.get("gpu_hosts")
        if not isinstance(gpu_hosts, list):
            raise AnsibleActionFail("gpu_hosts must be the list of GPU hosts, e.g. groups['__aiinfra_gpu']")
        # Every cluster node (servers and agents): where the gateway may run. Unknown (no check) when not given.
        cluster_hosts = self._task.args.get("cluster_hosts") or []
        if not isinstance(cluster_hosts, list):
            raise AnsibleActionFail("cluster_hosts must be the list of cluster hosts, e.g. groups['__aiinfra_cluster']")
        env = role_defaults(self._loader)
        env.update(task_vars)
        templar = self._templar.copy_with_new_env(available_variables=env)
        values = {}
        for name in VARIABLES + (SECRET_VARIABLES if secrets else ()):
            if name in env:
                values[name] = templar.template(env[name])
        hostvars = task_vars.get("hostvars") or {}
        gpu_nodes = {}
        for host in gpu_hosts:
            hv = hostvars[host]
            # The model store's paths too: the model_registry role copies with each GPU host's own values.
            own = GPU_HOST_VARIABLES + STORE_PATH_VARIABLES + SOURCE_VARIABLES + ADDRESS_VARIABLES
            gpu_nodes[host] = {name: hv[name] for name in own if name in hv}
        seed_dir = values.get("model_registry_seed_dir") or ""
        weights, configs = {}, {}
        if seed_dir:
            seeded = set(values.get("model_registry_seed_models") or [])
            paths = [m.get("path") for m in values.get("vllm_models") or [] if isinstance(m, dict)]
            # Only paths inside the seed directory are measured and read (the plan refuses the others).
            inside = [p for p in paths if p in seeded and not store_path_error(p)]
            weights = weight_bytes(seed_dir, inside)
            configs = model_configs(seed_dir, inside)
        plan = site_plan(values, gpu_nodes, weights, secrets, [str(h) for h in cluster_hosts], model_configs=configs)
        result.update(changed=False, plan=plan)
        return result
