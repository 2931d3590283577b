"""upgrade.yml's drain and uncordon (role k3s) on a kwok GPU node of the live cluster: pods leave through
the Eviction API, PodDisruptionBudgets hold (a budget that allows no disruption stops the drain), the node
comes back schedulable. Simulated: the kubelet (kwok), so an evicted pod is gone as soon as it is deleted."""

import json
import subprocess
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, helpers

SITE = next(s for s in yaml.safe_load((Path(__file__).parent / "sites.yml").read_text()) if s["id"] == "full")
NAMESPACE = "live-drain"
SECRETS = {
    "litellm_master_key": "sk-3e8b1d6f9a2c4e7b0d5f8a1c3e6b9d2f4a7c",
    "nim_ngc_api_key": "nvapi-7Hq2Lm9Xw4Rt8Yp3Kd6Fz1Vb5Nc0Gs",
    "monitoring_grafana_admin_password": "Gq8wE3rT6yU1iO4pA7sD",
    "aiinfra_namespace": NAMESPACE,
}
PLAYBOOK = Path(__file__).parent / "playbooks" / "drain_uncordon.yml"


@pytest.fixture(scope="module")
def site(live, tmp_path_factory):
    inventory = helpers.write_site(
        tmp_path_factory.mktemp("drain"),
        SITE["servers"],
        SITE["gpu_nodes"],
        SITE["group_vars"],
        classes=SITE["classes"],
    )
    live.use_site(inventory)
    extra = ["-e", json.dumps(SECRETS), "-e", f"k3s_kubeconfig_dest={live.kubeconfig}"]
    for playbook in ("node_labels.yml", "apply.yml"):
        proc, _result = helpers.run_playbook(
            playbook, inventory, extra=[*extra, "-e", f"manifests_kubeconfig={live.kubeconfig}"]
        )
        assert proc.returncode == 0, proc.stdout[-3000:]
    yield inventory
    live.remove_site(NAMESPACE)


def drain(live, inventory, node, step, timeout=60):
    return subprocess.run(
        [
            helpers.tool("ansible-playbook"),
            str(PLAYBOOK),
            "-i",
            str(inventory),
            "-e",
            f"k3s_kubeconfig_dest={live.kubeconfig}",
            "-e",
            f"drain_nodes={node}",
            "-e",
            f"drain_step={step}",
            "-e",
            f"k3s_upgrade_drain_timeout={timeout}",
            "-e",
            "k3s_upgrade_drain_grace_period=5",
        ],
        capture_output=True,
        text=True,
        env=helpers.ansible_env("default"),
        cwd=ROOT,
        timeout=300,
        check=False,
    )


def on_node(live, node):
    return [
        p
        for p in live.items("pods", "-n", NAMESPACE, "--field-selector", f"spec.nodeName={node}")
        if p["metadata"].get("deletionTimestamp") is None
    ]


def gateway_available(live):
    return live.get("deployment", "-n", NAMESPACE, "litellm-ha")["status"].get("availableReplicas", 0)


def test_drain_evicts_within_the_budgets_and_uncordon_brings_the_node_back(live, site):
    # gpu-b holds the tensor-parallel model (its GPUs are whole; gpu-a's are time-sliced) and gateway replicas.
    # The HorizontalPodAutoscaler (the controller manager's, real) brings the gateway to its minimum of 3.
    live.wait_until("gateway at its minimum", lambda: gateway_available(live) == 3)
    before = {p["metadata"]["name"] for p in on_node(live, "gpu-b")}
    assert before
    proc = drain(live, site, "gpu-b", "drain")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert live.get("node", "gpu-b")["spec"].get("unschedulable") is True
    assert on_node(live, "gpu-b") == []
    # The gateway's replicas from gpu-b came back on gpu-a: it never fell below its budget's minimum.
    live.wait_until("gateway available again", lambda: gateway_available(live) == 3)
    # Model server replicas keep their claim on gpu-b's store: they wait for gpu-b (local volumes).
    waiting = [p for p in live.items("pods", "-n", NAMESPACE) if p["status"]["phase"] == "Pending"]
    assert waiting and all(p["metadata"]["labels"]["app.kubernetes.io/component"] in ("vllm", "nim") for p in waiting)
    proc = drain(live, site, "gpu-b", "uncordon")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert not live.get("node", "gpu-b")["spec"].get("unschedulable")
    live.wait_until(
        "model servers back on gpu-b",
        lambda: not [p for p in live.items("pods", "-n", NAMESPACE) if p["status"]["phase"] != "Running"],
    )


def test_a_budget_that_allows_no_disruption_stops_the_drain(live, site):
    live.wait_until(
        "every pod running",
        lambda: not [p for p in live.items("pods", "-n", NAMESPACE) if p["status"]["phase"] != "Running"],
    )
    gateway_here = [
        p for p in on_node(live, "gpu-a") if p["metadata"]["labels"]["app.kubernetes.io/name"] == "litellm-ha"
    ]
    assert gateway_here
    blocking = {"spec": {"maxUnavailable": 0}}
    live.kubectl("patch", "pdb", "-n", NAMESPACE, "litellm-ha", "--type=merge", "-p", json.dumps(blocking))
    try:
        proc = drain(live, site, "gpu-a", "drain", timeout=10)
        assert proc.returncode != 0
        # The Eviction API refused: the gateway pods are still there.
        still = {p["metadata"]["name"] for p in on_node(live, "gpu-a")}
        assert {p["metadata"]["name"] for p in gateway_here} <= still
    finally:
        live.kubectl(
            "patch",
            "pdb",
            "-n",
            NAMESPACE,
            "litellm-ha",
            "--type=merge",
            "-p",
            json.dumps({"spec": {"maxUnavailable": 1}}),
        )
        drain(live, site, "gpu-a", "uncordon")
    assert not live.get("node", "gpu-a")["spec"].get("unschedulable")
