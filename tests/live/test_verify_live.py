"""GPU allocation through the live API: the three-GPU-node site applied for real, then faults planted
through kwok and the API. Simulated: the GPUs (kwok nodes advertise the inventory's counts) and nvidia-smi
(the expected counts are given to the module as the hardware facts would give them)."""

import json
from pathlib import Path

import pytest
import yaml
from conftest import helpers, run_playbook, stage_entries

SITE = next(
    s for s in yaml.safe_load((Path(__file__).parent / "sites.yml").read_text()) if s["id"] == "three-gpu-nodes"
)
NAMESPACE = "live-verify"
SECRETS = {
    "litellm_master_key": "sk-3e8b1d6f9a2c4e7b0d5f8a1c3e6b9d2f4a7c",
    "monitoring_grafana_admin_password": "Gq8wE3rT6yU1iO4pA7sD",
    "aiinfra_namespace": NAMESPACE,
}
EXPECTED = {"gpu-1": {"physical": 1}, "gpu-2": {"physical": 1}, "gpu-3": {"physical": 1}}


@pytest.fixture(scope="module")
def site(live, tmp_path_factory):
    inventory = helpers.write_site(
        tmp_path_factory.mktemp("verify"), SITE["servers"], SITE["gpu_nodes"], SITE["group_vars"]
    )
    live.use_site(inventory)
    extra = ["-e", json.dumps(SECRETS)]
    for playbook in ("node_labels.yml", "apply.yml"):
        proc, _result = run_playbook(
            playbook, inventory, live, extra=[*extra, "-e", f"manifests_kubeconfig={live.kubeconfig}"]
        )
        assert proc.returncode == 0, proc.stdout[-3000:]
    yield inventory
    live.remove_site(NAMESPACE)


def analyse(live, expected=None):
    rc, result = helpers.run_module(
        "aiinfra.k3s.gpu_allocation_info",
        {"kubeconfig": str(live.kubeconfig), "expected_gpus": expected or EXPECTED, "fail_on": []},
    )
    assert rc == 0, result
    return result


def codes(result):
    return {(f["code"], f["node"], (f["pod"] or "").split("/")[-1]) for f in result["findings"]}


def test_a_healthy_site_has_no_error_finding(live, site):
    result = analyse(live)
    assert result["summary"]["nodes"] == 3
    assert result["summary"]["allocatable"] == 3
    assert result["summary"]["requested"] == 3  # the model's three replicas, one GPU each
    assert [f for f in result["findings"] if f["severity"] == "error"] == []


def test_the_allocation_playbook_reports_ran_through_the_api(live, site):
    proc, result = run_playbook(
        "gpu_allocation.yml",
        site,
        live,
        extra=["-e", f"gpu_verify_kubeconfig={live.kubeconfig}", "-e", "gpu_verify_vectoradd=false"],
    )
    assert proc.returncode == 0, proc.stdout[-3000:]
    stages = stage_entries(result)
    assert stages["gpu_allocation"]["status"] == "ran"
    assert "3 GPU node(s), 3 allocatable, 3 requested; 0 error(s)" in stages["gpu_allocation"]["detail"]
    # kwok would "complete" a vectorAdd Job without any GPU: the CUDA stage must not claim a pass here.
    assert stages["gpu_cuda"]["status"] == "skipped"


def test_a_vectoradd_that_cannot_run_fails_and_says_why(live, site):
    """Every GPU of the site is taken by the model's replicas, so each vectorAdd Job stays Pending: the run must
    fail (not report PASS), and print the scheduler's reason before the namespace is removed."""
    proc, _result = run_playbook(
        "gpu_allocation.yml",
        site,
        live,
        extra=["-e", f"gpu_verify_kubeconfig={live.kubeconfig}", "-e", "gpu_verify_vectoradd_timeout=5"],
    )
    assert proc.returncode != 0, proc.stdout[-3000:]
    assert "vectorAdd failed on gpu-1, gpu-2, gpu-3" in " ".join(proc.stdout.split()), proc.stdout[-3000:]
    assert "Insufficient nvidia.com/gpu" in proc.stdout, proc.stdout[-3000:]
    assert live.items("namespaces", "--field-selector", "metadata.name=aiinfra-gpu-verify") == []


@pytest.mark.parametrize("namespace", ["live-verify-team", NAMESPACE])
def test_vectoradd_neither_uses_nor_deletes_a_namespace_it_did_not_create(live, site, namespace):
    """Issue 28, item 12: the check ran its Jobs in, then deleted, whatever namespace it was given. An existing
    namespace without the check's labels, and the site's serving namespace, are refused and stay."""
    created = namespace != NAMESPACE
    if created:
        live.kubectl("create", "namespace", namespace)
    try:
        proc, _result = run_playbook(
            "gpu_allocation.yml",
            site,
            live,
            extra=[
                "-e",
                f"gpu_verify_kubeconfig={live.kubeconfig}",
                "-e",
                f"gpu_verify_vectoradd_namespace={namespace}",
                "-e",
                "gpu_verify_vectoradd_timeout=5",
                "-e",
                json.dumps({"aiinfra_namespace": NAMESPACE}),  # the serving namespace, as the site was applied
            ],
        )
        out = " ".join(proc.stdout.split())
        assert proc.returncode != 0, out[-3000:]
        why = (
            f"namespace {namespace} exists and was not created by the vectorAdd check"
            if created
            else f"gpu_verify_vectoradd_namespace is {namespace}, a namespace of the site"
        )
        assert f"ERROR GPU_VERIFY [localhost] gpu_verify_vectoradd_namespace - {why}" in out, out[-3000:]
        assert live.get("namespace", namespace)["status"]["phase"] == "Active"
        assert live.items("jobs", "-n", namespace, "-l", "app.kubernetes.io/name=gpu-vectoradd") == []
    finally:
        if created:
            live.kubectl("delete", "namespace", namespace, "--ignore-not-found", "--wait=false")


def test_a_node_advertising_fewer_gpus_than_its_hardware_is_a_mismatch(live, site):
    # Runs before the faults below are planted. nvidia-smi would count two GPUs on gpu-3; its node advertises one.
    found = codes(analyse(live, dict(EXPECTED, **{"gpu-3": {"physical": 2}})))
    assert ("GPU_CAPACITY_MISMATCH", "gpu-3", "") in found, found


GPU_POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"namespace": NAMESPACE},
    # The serving namespace enforces Pod Security "restricted": the planted pods meet it too.
    "spec": {
        "securityContext": {"runAsNonRoot": True, "runAsUser": 1000, "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [
            {
                "name": "c",
                "image": "registry.invalid/none:1",
                "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
            }
        ],
    },
}


def pod(name, node, gpus=0, tolerate=False):
    doc = json.loads(json.dumps(GPU_POD))
    doc["metadata"]["name"] = name
    doc["spec"]["nodeName"] = node  # placed by hand, as a misconfigured controller would
    if gpus:
        doc["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": str(gpus)}}
    if tolerate:
        doc["spec"]["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    return doc


def test_planted_faults_give_their_codes(live, site):
    k = live.kubectl
    # A GPU node advertising no GPU although its hardware has one: the device plugin lost it.
    k("scale", "deployment", "-n", NAMESPACE, "vllm-qwen-7b", "--replicas=2")
    live.wait_until(
        "replica 3 gone",
        lambda: len(live.items("pods", "-n", NAMESPACE, "-l", "app.kubernetes.io/component=vllm")) == 2,
    )
    free = (
        {"gpu-1", "gpu-2", "gpu-3"}
        - {p["spec"]["nodeName"] for p in live.items("pods", "-n", NAMESPACE, "-l", "app.kubernetes.io/component=vllm")}
    ).pop()
    status = {"status": {"capacity": {"nvidia.com/gpu": "0"}, "allocatable": {"nvidia.com/gpu": "0"}}}
    k("patch", "node", free, "--subresource=status", "--type=merge", "-p", json.dumps(status))
    busy = sorted({"gpu-1", "gpu-2", "gpu-3"} - {free})
    # A GPU pod without the toleration, and a pod without GPUs on a GPU node.
    live.apply([pod("no-toleration", busy[0], gpus=0), pod("cpu-on-gpu", busy[1], tolerate=True)])
    k("delete", "pod", "-n", NAMESPACE, "no-toleration", "--wait=false")
    live.apply([pod("gpu-no-toleration", free, gpus=1)])
    # An untainted GPU node.
    k("taint", "node", busy[1], "nvidia.com/gpu-")
    # A NotReady GPU node: kwok lets go of it and its kubelet stops reporting.
    k("annotate", "node", busy[0], "kwok.x-k8s.io/node-")
    ready = {
        "status": {
            "conditions": [
                {"type": "Ready", "status": "False", "reason": "KubeletNotReady", "message": "planted by the live test"}
            ]
        }
    }
    k("patch", "node", busy[0], "--subresource=status", "--type=strategic", "-p", json.dumps(ready))
    live.wait_until("pods placed", lambda: all(p["spec"].get("nodeName") for p in live.items("pods", "-n", NAMESPACE)))
    found = codes(analyse(live))
    assert ("GPU_NOT_ADVERTISED", free, "") in found, found
    assert ("GPU_POD_NO_TOLERATION", free, "gpu-no-toleration") in found, found
    assert ("NON_GPU_POD_ON_GPU_NODE", busy[1], "cpu-on-gpu") in found, found
    assert ("GPU_NODE_NOT_TAINTED", busy[1], "") in found, found
    assert ("GPU_NODE_NOT_READY", busy[0], "") in found, found
