# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The NVIDIA GPU Operator as a K3s HelmChart (helm.cattle.io/v1), plus its time-slicing ConfigMap.

K3s's Helm controller installs the chart from the auto-deploy directory; in airgap mode the chart archive is
served by K3s itself from /var/lib/rancher/k3s/server/static/charts through the %{KUBERNETES_API}% URL.
"""

import copy

from ansible_collections.aiinfra.k3s.plugins.module_utils.k8s.objects import (
    chart_problems,
    dump_yaml,
    helm_chart,
    labels_for,
    namespace,
    plain,
)

MIG_STRATEGIES = ("none", "single", "mixed")
# Image repositories of the chart's components: values path -> path kept under a mirror registry. Taken from the
# chart's own values.yaml (deployments/gpu-operator, newest code the Go module proxy serves, v25.3.4) for every key
# that has a `repository`, with two later changes: since v25.10.0 (NVIDIA/gpu-operator#1483) the validator and the
# node status exporter are the operator's image (IMAGES pins the image name), and operator.initContainer left the
# chart in v26.3 (no v26 template reads it; lab/charts.py's DEAD_VALUE_PATHS fails a render that writes it).
REPOSITORIES = {
    "operator": "nvidia",
    "validator": "nvidia",
    "driver": "nvidia",
    "driver.manager": "nvidia/cloud-native",
    "toolkit": "nvidia/k8s",
    "devicePlugin": "nvidia",
    "dcgm": "nvidia/cloud-native",
    "dcgmExporter": "nvidia/k8s",
    "gfd": "nvidia",
    "migManager": "nvidia/cloud-native",
    "nodeStatusExporter": "nvidia",
    "gds": "nvidia/cloud-native",
    "gdrcopy": "nvidia/cloud-native",
    "vgpuManager.driverManager": "nvidia/cloud-native",
    "vgpuDeviceManager": "nvidia/cloud-native",
    "vfioManager": "nvidia",
    "vfioManager.driverManager": "nvidia/cloud-native",
    "kataManager": "nvidia/cloud-native",
    "sandboxDevicePlugin": "nvidia",
    "ccManager": "nvidia/cloud-native",
}
IMAGES = {"validator": "gpu-operator", "nodeStatusExporter": "gpu-operator"}
# The chart's own NFD worker tolerations besides the GPU taint's (values.yaml, node-feature-discovery.worker): NFD
# labels every node, a tainted server too. Our list replaces the chart's, so its control-plane toleration is kept
# next to ours; its node-role.kubernetes.io/master one is not (kubeadm stopped that taint in Kubernetes v1.25, K3s
# never set it).
NFD_CHART_TOLERATIONS = [
    {"key": "node-role.kubernetes.io/control-plane", "operator": "Equal", "value": "", "effect": "NoSchedule"},
]


def mirror_values(registry):
    """Values that point every component's image at the same path under a mirror registry."""
    registry = registry.rstrip("/")
    values = {}
    for path, repository in REPOSITORIES.items():
        node = values
        for part in path.split("."):
            node = node.setdefault(part, {})
        node["repository"] = "%s/%s" % (registry, repository)
        if path in IMAGES:
            node["image"] = IMAGES[path]
    values["node-feature-discovery"] = {"image": {"repository": "%s/nfd/node-feature-discovery" % registry}}
    return values


def merge(base, extra):
    """Deep merge of mappings (extra wins); lists are replaced."""
    out = copy.deepcopy(base)
    for key, value in (extra or {}).items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def time_slicing_config(replicas, mig_strategy):
    """One device-plugin configuration (a key of the time-slicing ConfigMap)."""
    config = {"version": "v1", "flags": {"migStrategy": mig_strategy}}
    if int(replicas) > 1:
        config["sharing"] = {
            "timeSlicing": {
                "renameByDefault": False,
                # A pod asking for two slices would get two slices of one GPU, not two GPUs: refuse such requests
                # (multi-GPU pods are kept off sliced nodes by node affinity, see model_servers.whole_gpus_affinity).
                "failRequestsGreaterThanOne": True,
                "resources": [{"name": "nvidia.com/gpu", "replicas": int(replicas)}],
            }
        }
    return dump_yaml(config)


def chart_values(params):
    """Helm values of the GPU Operator for K3s."""
    toleration = {"key": params["gpu_toleration_key"], "operator": "Exists", "effect": "NoSchedule"}
    values = {
        # The name of the NVIDIA runtime: the operator creates the RuntimeClass and sets the toolkit's
        # CONTAINERD_RUNTIME_CLASS from it, after toolkit.env (a CONTAINERD_RUNTIME_CLASS there is overwritten).
        "operator": {"runtimeClass": params["runtime_class"]},
        "driver": {"enabled": bool(params["driver_enabled"])},
        "toolkit": {
            "enabled": bool(params["toolkit_enabled"]),
            # K3s runs its own containerd: its socket, and the config file K3s regenerates on every start.
            # K3s also detects the toolkit's runtime under /usr/local/nvidia/toolkit when it (re)starts and
            # ships the nvidia RuntimeClass, so the runtime survives the regeneration. No *_SET_AS_DEFAULT: with
            # CDI (on by default since v25.10) the operator sets NVIDIA_RUNTIME_SET_AS_DEFAULT=false, which the
            # toolkit reads before CONTAINERD_SET_AS_DEFAULT, and GPUs reach the pods through CDI (the device
            # plugin names CDI devices, K3s's containerd injects them) under the node's default runtime.
            "env": [
                {"name": "CONTAINERD_CONFIG", "value": params["containerd_config"]},
                {"name": "CONTAINERD_SOCKET", "value": params["containerd_socket"]},
            ],
        },
        "devicePlugin": {"enabled": True},
        "dcgm": {"enabled": bool(params["dcgm_enabled"])},
        "dcgmExporter": {"enabled": True, "serviceMonitor": {"enabled": bool(params["service_monitor"])}},
        "daemonsets": {"tolerations": [toleration]},
        "node-feature-discovery": {"worker": {"tolerations": [*copy.deepcopy(NFD_CHART_TOLERATIONS), toleration]}},
        # Always written: the chart's default is single. The ClusterPolicy takes none (MIG off), which the
        # operator passes to the device plugin and GPU Feature Discovery as MIG_STRATEGY; no MIG manager then.
        "mig": {"strategy": params["mig_strategy"]},
        "migManager": {"enabled": params["mig_strategy"] != "none"},
    }
    if params["time_slicing_classes"]:
        values["devicePlugin"]["config"] = {
            "name": params["time_slicing_configmap"],
            "default": params["time_slicing_default"] or "",
        }
    if params["registry"]:
        values = merge(values, mirror_values(params["registry"]))
    return merge(values, params.get("extra_values") or {})


def gpu_operator_manifests(params):
    """Namespace (privileged: the operator's pods load drivers and mount host paths), the time-slicing
    ConfigMap when classes are defined, and the HelmChart."""
    params = plain(params)
    ns = params["namespace"]
    out = [
        # The operator's pods load drivers and mount host paths: privileged.
        namespace(ns, "privileged")
    ]
    if params["time_slicing_classes"]:
        out.append(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    "name": params["time_slicing_configmap"],
                    "namespace": ns,
                    "labels": labels_for("gpu-operator", "time-slicing"),
                },
                "data": {
                    name: time_slicing_config(replicas, params["mig_strategy"])
                    for name, replicas in sorted(params["time_slicing_classes"].items())
                },
            }
        )
    out.append(
        helm_chart(
            "gpu-operator",
            params["chart_name"],
            params["chart_repo"],
            params["chart_version"],
            ns,
            chart_values(params),
            params["chart_file"] if params["airgap"] else "",
        )
    )
    return out


def operator_problems(params):
    """Settings that cannot work (the hosts' classes are the site plan's to check)."""
    problems = []
    if params.get("runtime_default_set"):
        problems.append(
            "gpu_operator_runtime_default is no longer used: with CDI (on by default since GPU Operator v25.10) the "
            "operator keeps the NVIDIA runtime from being containerd's default, and GPUs reach the pods through CDI "
            "without it; remove the variable (a pod that needs the NVIDIA runtime itself sets runtimeClassName "
            "to gpu_operator_runtime_class)"
        )
    if params["mig_strategy"] not in MIG_STRATEGIES:
        problems.append(
            "gpu_operator_mig_strategy is %r: use one of %s" % (params["mig_strategy"], ", ".join(MIG_STRATEGIES))
        )
    classes = params["time_slicing_classes"] or {}
    for name, replicas in sorted(classes.items()):
        if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 1:
            problems.append(
                "gpu_operator_time_slicing_classes[%s] is %r: give a whole number of replicas per GPU, 1 or more"
                % (name, replicas)
            )
        if not name or not all(c.isalnum() or c in "-_." for c in name):
            problems.append(
                "gpu_operator_time_slicing_classes has the class name %r: use letters, digits, - _ ." % name
            )
    default = params["time_slicing_default"]
    if default and default not in classes:
        problems.append(
            "gpu_operator_time_slicing_default is %r but gpu_operator_time_slicing_classes has %s: add it or "
            "pick one of them" % (default, ", ".join(sorted(classes)) or "no class")
        )
    return problems + chart_problems(
        "gpu_operator", params.get("install_mode", "online"), params["chart_file"], params.get("chart_sha256")
    )
