"""playbooks/node_labels.yml against the live API: labels and taints reconciled on kwok nodes named like
the inventory's hosts, idempotent, and what the inventory drops is dropped from the node."""

import json

import pytest
from conftest import ROOT, helpers, run_playbook, stage_entries, task_results

from lab.live import cluster

LAB = ROOT / "inventories" / "lab"
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}


def labels_run(live, tmp_path, extra=(), with_proc=False):
    sources = cluster.inventory_sources(LAB)
    proc, result = run_playbook("node_labels.yml", sources[1], live, extra=[*sources[2:], *extra])
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    return (proc, result) if with_proc else result


def node(live, name):
    return live.get("node", name)


@pytest.fixture(scope="module")
def lab_nodes(live):
    names = live.use_site(LAB)
    assert names == ["lab-cp-1", "lab-gpu-1", "lab-gpu-2"]
    return names


def test_labels_and_taints_reach_the_nodes_and_a_second_run_changes_nothing(live, lab_nodes, tmp_path):
    first = labels_run(live, tmp_path)
    for name in ("lab-gpu-1", "lab-gpu-2"):
        n = node(live, name)
        assert n["metadata"]["labels"]["ai-workload"] == "true"
        # The GPU Operator's own per-node switches (nvidia.com/gpu.deploy.<component>).
        for component in ("gpu-feature-discovery", "container-toolkit", "dcgm"):
            assert n["metadata"]["labels"][f"nvidia.com/gpu.deploy.{component}"] == "true"
        assert GPU_TAINT in n["spec"]["taints"]
        assert json.loads(n["metadata"]["annotations"]["aiinfra.k3s/taints"]) == ["nvidia.com/gpu=present:NoSchedule"]
    server = node(live, "lab-cp-1")
    assert "ai-workload" not in server["metadata"]["labels"]
    assert not server["spec"].get("taints")
    assert first["stats"]["localhost"]["changed"] > 0
    second = labels_run(live, tmp_path)
    assert second["stats"]["localhost"]["changed"] == 0, [
        t for t in task_results(second, "Reconcile node labels") if t.get("changed")
    ]
    assert stage_entries(second)["node_labels"]["status"] == "ran"


def test_a_label_or_taint_dropped_from_the_inventory_leaves_the_node(live, lab_nodes, tmp_path):
    labels_run(live, tmp_path)
    # Someone else's taint and label on the same node must survive.
    live.kubectl("taint", "node", "lab-gpu-1", "example.com/maintenance=yes:PreferNoSchedule")
    live.kubectl("label", "node", "lab-gpu-1", "example.com/rack=r1")
    changed = {
        "k3s_gpu_node_taints": ["nvidia.com/gpu=dedicated:NoExecute"],
        "k3s_gpu_node_labels": {"ai-workload": "true"},
    }
    result = labels_run(live, tmp_path, ["-e", json.dumps(changed)])
    n = node(live, "lab-gpu-1")
    taints = n["spec"]["taints"]
    assert GPU_TAINT not in taints
    assert {"key": "nvidia.com/gpu", "value": "dedicated", "effect": "NoExecute"} in taints
    assert {"key": "example.com/maintenance", "value": "yes", "effect": "PreferNoSchedule"} in taints
    labels = n["metadata"]["labels"]
    assert "nvidia.com/gpu.deploy.dcgm" not in labels
    assert labels["example.com/rack"] == "r1"
    assert result["stats"]["localhost"]["changed"] > 0
    again = labels_run(live, tmp_path, ["-e", json.dumps(changed)])
    assert again["stats"]["localhost"]["changed"] == 0
    # Back to the inventory's own values for the tests that follow.
    labels_run(live, tmp_path)
    assert GPU_TAINT in node(live, "lab-gpu-1")["spec"]["taints"]


def test_check_mode_reports_without_touching_the_nodes(live, lab_nodes, tmp_path):
    live.kubectl("taint", "node", "lab-gpu-2", "nvidia.com/gpu-")
    result = labels_run(live, tmp_path, ["--check"])
    assert result["stats"]["localhost"]["changed"] > 0
    assert not node(live, "lab-gpu-2")["spec"].get("taints")
    labels_run(live, tmp_path)
    assert GPU_TAINT in node(live, "lab-gpu-2")["spec"]["taints"]


def test_helpers_are_the_unit_ones():
    assert helpers.ROOT == ROOT


def test_deprecated_gpu_operator_label_names_are_set_under_the_operators_names(live, lab_nodes, tmp_path):
    old = {"k3s_gpu_node_labels": {"ai-workload": "true", "nvidia.com/gpu.deploy-dcgm": "false"}}
    proc, _result = labels_run(live, tmp_path, ["-e", json.dumps(old)], with_proc=True)
    labels = node(live, "lab-gpu-1")["metadata"]["labels"]
    assert labels["nvidia.com/gpu.deploy.dcgm"] == "false"
    assert "nvidia.com/gpu.deploy-dcgm" not in labels
    assert "nvidia.com/gpu.deploy-dcgm, which the GPU Operator does not read" in " ".join(
        (proc.stdout + proc.stderr).split()
    )
    labels_run(live, tmp_path)
    assert node(live, "lab-gpu-1")["metadata"]["labels"]["nvidia.com/gpu.deploy.dcgm"] == "true"


def test_an_upgrade_that_skips_a_minor_version_is_refused_before_any_node(live, lab_nodes, tmp_path):
    """The nodes report K3s v1.33 (as nodes of the old pin would); upgrade.yml to the pinned v1.36 must stop on the
    controller, naming the steps, before it drains or touches a node."""
    old = {"status": {"nodeInfo": {"kubeletVersion": "v1.33.5+k3s1"}}}
    for name in lab_nodes:
        live.kubectl("patch", "node", name, "--subresource=status", "--type=merge", "-p", json.dumps(old))
    sources = cluster.inventory_sources(LAB)
    proc, result = run_playbook(
        "upgrade.yml", sources[1], live, extra=[*sources[2:], "-e", "k3s_upgrade_confirm=yes-upgrade-k3s-on-lab"]
    )
    text = " ".join((proc.stdout + proc.stderr).split())
    assert proc.returncode != 0, text[-3000:]
    assert "would skip 1.34, 1.35" in text, text[-3000:]
    assert "v1.34.9+k3s1 -> v1.35.8+k3s1 -> v1.36.4+k3s1" in text, text[-3000:]
    assert not [n for n in lab_nodes if live.get("node", n)["spec"].get("unschedulable")]  # nothing drained
    # The hosts only went through the in-memory grouping play (group_by) and the controller guard (delegated to
    # localhost, counted for the first host): no connection, nothing changed.
    for host, stats in result["stats"].items():
        if host != "localhost":
            assert stats["ok"] <= 2 and (stats["changed"], stats["unreachable"]) == (0, 0), (host, stats)
