"""GPU Operator values that the pinned chart (v26.7.1) and its operator actually act on.

The values come from the role as a site gets them (playbooks/render.yml on the example inventory, the session's
render of tests/unit/rendered_sites.py), once as the inventory has it and once with every optional value on
(lab/live/charts.py's EVERY_OPTION). What the operator does with them is read from NVIDIA/gpu-operator's
controllers/object_controls.go (TransformToolkit, transformToolkitCtrForCDI, transformForRuntime) and the toolkit
installer's flags; see docs/architecture.md. On every rendered test site: the chart shaped for K3s and the
time-slicing ConfigMap.
"""

import pytest
import rendered_sites
import yaml
from conftest import ROOT, run_playbook
from rendered_sites import CRDS, of_kind

from lab.live import charts

DEFAULTS = ROOT / "roles" / "gpu_operator" / "defaults" / "main.yml"
SPECS = ROOT / "roles" / "gpu_operator" / "meta" / "argument_specs.yml"
CONTROL_PLANE = {
    "key": "node-role.kubernetes.io/control-plane",
    "operator": "Equal",
    "value": "",
    "effect": "NoSchedule",
}
GPU = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


rendered = rendered_sites.site_fixture()


@pytest.fixture
def inventory_values(request):
    """The chart's values in the example site's render (the session's, shared with every test of the example)."""
    return helm_values(rendered_sites.site(request, "example").docs)[1]


@pytest.fixture
def every_option_values(request):
    """The same with every optional value of the role on (rendered once a session too)."""
    inputs = rendered_sites.example_with(charts.EVERY_OPTION["gpu-operator"])
    return helm_values(rendered_sites.site(request, "example-every-gpu-operator-option", inputs).docs)[1]


def toolkit_env(values):
    return {e["name"]: e["value"] for e in values["toolkit"]["env"]}


def test_no_default_runtime_switch_that_cdi_overrides(inventory_values):
    """With CDI (on by default since v25.10) the operator sets NVIDIA_RUNTIME_SET_AS_DEFAULT=false on the toolkit
    and the toolkit reads that variable before CONTAINERD_SET_AS_DEFAULT: our `true` never reached containerd.
    GPUs reach the pods through CDI instead; nothing is written that claims a default runtime."""
    env = toolkit_env(inventory_values)
    assert "CONTAINERD_SET_AS_DEFAULT" not in env
    assert "NVIDIA_RUNTIME_SET_AS_DEFAULT" not in env
    assert "gpu_operator_runtime_default" not in yaml.safe_load(DEFAULTS.read_text())
    assert "gpu_operator_runtime_default" not in yaml.safe_load(SPECS.read_text())["argument_specs"]["main"]["options"]


def test_setting_the_removed_default_runtime_is_refused(tmp_path):
    extra = ["-e", f"render_dir={tmp_path}", "-e", '{"gpu_operator_runtime_default": true}']
    proc, _result = run_playbook("render.yml", ROOT / "inventories" / "example", callback="default", extra=extra)
    assert proc.returncode != 0
    assert "gpu_operator_runtime_default is no longer used" in proc.stdout, proc.stdout[-3000:]


def test_runtime_class_is_the_operators_value(inventory_values, every_option_values):
    """transformForRuntime sets CONTAINERD_RUNTIME_CLASS from operator.runtimeClass after toolkit.env is applied,
    so only operator.runtimeClass names the runtime (and the RuntimeClass the operator creates)."""
    for values in (inventory_values, every_option_values):
        assert values["operator"]["runtimeClass"] == "nvidia"
        assert "CONTAINERD_RUNTIME_CLASS" not in toolkit_env(values)
        # What K3s's containerd needs is still written: its config file and its socket.
        assert set(toolkit_env(values)) == {"CONTAINERD_CONFIG", "CONTAINERD_SOCKET"}


def test_mirror_registry_writes_no_path_the_pinned_chart_dropped(every_option_values):
    """operator.initContainer left the chart in v26.3: the mirror registry must not write it."""
    assert every_option_values["operator"]["repository"] == "registry.example.internal:5000/nvidia"
    assert "initContainer" not in every_option_values["operator"]
    dead = charts.DEAD_VALUE_PATHS["gpu-operator"]
    assert charts.dead_value_paths(every_option_values, dead, "v26.7.1") == []


def test_nfd_worker_keeps_the_charts_control_plane_toleration(inventory_values, every_option_values):
    """A list value replaces the chart's list: the NFD worker runs on every node, a tainted server too, so the
    chart's control-plane toleration is kept next to the GPU taint's."""
    for values in (inventory_values, every_option_values):
        tolerations = values["node-feature-discovery"]["worker"]["tolerations"]
        assert tolerations == [CONTROL_PLANE, GPU]
        assert values["daemonsets"]["tolerations"] == [GPU]


def test_mig_strategy_none_is_written_not_left_to_the_charts_single(inventory_values, every_option_values):
    """The chart's default is mig.strategy: single; the ClusterPolicy takes none (MIG off), which the device
    plugin and GPU Feature Discovery then get. No MIG manager without MIG."""
    assert inventory_values["mig"] == {"strategy": "none"}
    assert inventory_values["migManager"] == {"enabled": False}
    assert every_option_values["mig"] == {"strategy": "mixed"}
    assert every_option_values["migManager"]["enabled"] is True


def helm_values(docs):
    (chart,) = [c for c in of_kind(docs, "HelmChart") if c["metadata"]["name"] == "gpu-operator"]
    return chart, yaml.safe_load(chart["spec"]["valuesContent"])


def test_gpu_operator_chart_is_shaped_for_k3s(rendered):
    site, docs, _out, _proc = rendered
    chart, values = helm_values(docs)
    assert (chart["metadata"]["namespace"], chart["spec"]["targetNamespace"]) == ("kube-system", "gpu-operator")
    assert chart["spec"]["version"] == "v26.7.1" and chart["spec"]["repo"].startswith("https://")
    known = set(CRDS[("helm.cattle.io/v1", "HelmChart")]["x-gpu-operator-values"])
    assert set(values) <= known, set(values) - known
    env = {e["name"]: e["value"] for e in values["toolkit"]["env"]}
    assert env["CONTAINERD_SOCKET"] == "/run/k3s/containerd/containerd.sock"
    assert env["CONTAINERD_CONFIG"].startswith("/var/lib/rancher/k3s/agent/etc/containerd/")
    assert values["driver"]["enabled"] is False  # drivers on the host, as in the notes
    assert values["devicePlugin"]["enabled"] and values["dcgmExporter"]["enabled"]
    toleration = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    assert toleration in values["daemonsets"]["tolerations"]
    (ns,) = [d for d in of_kind(docs, "Namespace") if d["metadata"]["name"] == "gpu-operator"]
    assert ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"
    if site == "full":
        assert values["mig"] == {"strategy": "single"}
        assert values["devicePlugin"]["config"] == {"name": "time-slicing-config", "default": "exclusive"}
        assert values["toolkit"]["repository"] == "registry.site.internal:5000/nvidia/k8s"
        assert values["node-feature-discovery"]["image"]["repository"].startswith("registry.site.internal:5000/")
        # Since v25.10 the validator and the node status exporter are the operator's own image.
        for component in ("validator", "nodeStatusExporter"):
            assert values[component]["repository"] == values["operator"]["repository"]
            assert values[component]["image"] == "gpu-operator"
        assert values["operator"]["repository"] == "registry.site.internal:5000/nvidia"
        assert values["driver"]["manager"]["repository"] == "registry.site.internal:5000/nvidia/cloud-native"
    else:
        # MIG off is written as such: the chart's own default is mig.strategy single.
        assert "config" not in values["devicePlugin"] and values["mig"] == {"strategy": "none"}


def test_time_slicing_configmap_has_one_config_per_class(rendered):
    site, docs, _out, _proc = rendered
    maps = [d for d in of_kind(docs, "ConfigMap") if d["metadata"]["name"] == "time-slicing-config"]
    if site != "full":
        assert maps == []
        return
    (cm,) = maps
    assert sorted(cm["data"]) == ["exclusive", "shared"]
    shared = yaml.safe_load(cm["data"]["shared"])
    assert shared["flags"]["migStrategy"] == "single"
    assert shared["sharing"]["timeSlicing"]["resources"] == [{"name": "nvidia.com/gpu", "replicas": 2}]
    assert "sharing" not in yaml.safe_load(cm["data"]["exclusive"])
