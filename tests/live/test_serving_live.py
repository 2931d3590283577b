"""The serving manifests of each site applied to the live API (server-side apply, not a dry run), and what
the real scheduler and controllers made of them. Simulated: kwok plays the kubelets, so "Running" means
scheduled and admitted, not a container that ran; no image is pulled and no GPU exists."""

import base64
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, failures, helpers, run_playbook, stage_entries

from ansible_collections.aiinfra.k3s.plugins.module_utils.k8s import gateway  # importable once conftest ran
from lab.live import cluster

SITES = yaml.safe_load((Path(__file__).parent / "sites.yml").read_text())
GPU_TAINT_KEY = "nvidia.com/gpu"
MODEL_KEY_SECRET = "litellm-ha-model-api-key"  # the site plan's model_auth.secret (litellm_deployment_name litellm-ha)
SECRETS = {
    "litellm_master_key": "sk-3e8b1d6f9a2c4e7b0d5f8a1c3e6b9d2f4a7c",
    "nim_ngc_api_key": "nvapi-7Hq2Lm9Xw4Rt8Yp3Kd6Fz1Vb5Nc0Gs",
    "monitoring_grafana_admin_password": "Gq8wE3rT6yU1iO4pA7sD",
}


def site_inventory(site, tmp_path_factory):
    if "inventory" in site:
        return cluster.inventory_sources(ROOT / site["inventory"])
    directory = tmp_path_factory.mktemp(site["id"])
    helpers.write_site(directory, site["servers"], site["gpu_nodes"], site["group_vars"], classes=site.get("classes"))
    return ["-i", str(directory)]


@pytest.fixture(scope="module", params=SITES, ids=[s["id"] for s in SITES])
def applied(request, live, tmp_path_factory):
    sources = site_inventory(request.param, tmp_path_factory)
    site = dict(request.param, sources=sources)
    nodes = live.use_site(Path(sources[1])) if len(sources) == 2 else live.use_site(ROOT / site["inventory"])
    extra = [*sources[2:], "-e", json.dumps({**SECRETS, "aiinfra_namespace": site["namespace"]})]
    proc, result = run_playbook("node_labels.yml", sources[1], live, extra=extra)
    assert proc.returncode == 0, proc.stdout[-3000:]
    extra += ["-e", f"manifests_kubeconfig={live.kubeconfig}", "-e", "manifests_rollout_timeout=120"]
    proc, result = run_playbook("apply.yml", sources[1], live, extra=extra)
    assert proc.returncode == 0, proc.stdout[-6000:]
    inventory = cluster.read_inventory(Path(sources[1])) if len(sources) == 2 else None
    gpu_nodes = {
        n["name"]
        for n in cluster.inventory_nodes(inventory or cluster.read_inventory(ROOT / site["inventory"]))
        if n["gpu"]
    }
    yield site, nodes, gpu_nodes, result
    live.remove_site(site["namespace"])


def pods(live, namespace, component):
    return live.items("pods", "-n", namespace, "-l", f"app.kubernetes.io/component={component}")


def test_every_rollout_completes_and_the_stage_says_ran(live, applied):
    site, _nodes, _gpus, result = applied
    assert stage_entries(result)["serving"]["status"] == "ran"
    assert not live.items("statefulsets", "-n", site["namespace"])  # the model servers are Deployments
    for dep in live.items("deployments", "-n", site["namespace"]):
        available = {c["type"]: c["status"] for c in dep["status"].get("conditions", [])}.get("Available")
        assert available == "True", dep["metadata"]["name"]
        assert dep["status"].get("readyReplicas", 0) == dep["spec"]["replicas"], dep["metadata"]["name"]


def test_model_pods_run_on_gpu_nodes_with_the_taint_tolerated(live, applied):
    site, _nodes, gpu_nodes, _result = applied
    model_pods = pods(live, site["namespace"], "vllm") + pods(live, site["namespace"], "nim")
    assert model_pods
    for pod in model_pods:
        node = live.get("node", pod["spec"]["nodeName"])
        assert node["metadata"]["name"] in gpu_nodes
        assert any(t["key"] == GPU_TAINT_KEY for t in node["spec"].get("taints", []))
        assert any(t.get("key") == GPU_TAINT_KEY for t in pod["spec"]["tolerations"])
        assert pod["status"]["phase"] == "Running"


def test_each_model_claim_is_bound_to_a_volume_on_its_pods_node(live, applied):
    """Each model server pod's own claim (a generic ephemeral volume: named <pod>-models, owned by the pod) is
    bound to a store volume of the node the pod runs on."""
    site, _nodes, _gpus, _result = applied
    for pod in pods(live, site["namespace"], "vllm") + pods(live, site["namespace"], "nim"):
        claims = [v["name"] for v in pod["spec"]["volumes"] if "ephemeral" in v]
        assert claims == ["models"], pod["metadata"]["name"]
        claim = live.get("pvc", "-n", site["namespace"], "%s-models" % pod["metadata"]["name"])
        assert [o["uid"] for o in claim["metadata"]["ownerReferences"]] == [pod["metadata"]["uid"]]
        assert claim["status"]["phase"] == "Bound"
        pv = live.get("pv", claim["spec"]["volumeName"])
        hosts = pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"]
        assert hosts == [pod["spec"]["nodeName"]], (pod["metadata"]["name"], pv["metadata"]["name"])


def may_run_on(pod_spec, node):
    """The node matches the pod's nodeSelector and the pod tolerates its scheduling taints."""
    labels = node["metadata"]["labels"]
    if any(labels.get(k) != v for k, v in pod_spec.get("nodeSelector", {}).items()):
        return False
    tolerated = {t.get("key") for t in pod_spec.get("tolerations", [])}
    return all(t["key"] in tolerated for t in node["spec"].get("taints", []) if t["effect"] != "PreferNoSchedule")


def test_gateway_replicas_spread_over_the_nodes_they_may_use(live, applied):
    site, _nodes, _gpu_nodes, _result = applied
    gateway = pods(live, site["namespace"], "gateway")
    assert gateway
    spec = gateway[0]["spec"]
    eligible = [n for n in live.items("nodes") if may_run_on(spec, n)]
    used = {p["spec"]["nodeName"] for p in gateway}
    assert len(used) == min(len(gateway), len(eligible)), (used, [n["metadata"]["name"] for n in eligible])


def test_a_second_apply_changes_nothing(live, applied, tmp_path_factory):
    site = applied[0]
    sources = site_inventory(site, tmp_path_factory)
    extra = [*sources[2:], "-e", json.dumps({**SECRETS, "aiinfra_namespace": site["namespace"]})]
    extra += ["-e", f"manifests_kubeconfig={live.kubeconfig}", "-e", "manifests_rollout_timeout=120"]
    proc, result = run_playbook("apply.yml", sources[1], live, extra=extra)
    assert proc.returncode == 0, proc.stdout[-3000:]
    changed = [
        (task["task"]["name"], r.get("item", {}).get("kind") if isinstance(r.get("item"), dict) else None)
        for play in result["plays"]
        for task in play["tasks"]
        for h in task["hosts"].values()
        for r in (h.get("results") or [h])
        if r.get("changed")
    ]
    assert result["stats"]["localhost"]["changed"] == 0, changed


def test_the_gpu_verifier_finds_no_error_in_what_the_scheduler_placed(live, applied, tmp_path_factory):
    """The site's own placements (the gateway on GPU nodes where the site says so) are not findings."""
    site = applied[0]
    sources = site_inventory(site, tmp_path_factory)
    extra = [*sources[2:], "-e", json.dumps({"aiinfra_namespace": site["namespace"]})]
    extra += ["-e", f"gpu_verify_kubeconfig={live.kubeconfig}", "-e", "gpu_verify_vectoradd=false"]
    proc, result = run_playbook("gpu_allocation.yml", sources[1], live, extra=extra)
    assert proc.returncode == 0, proc.stdout[-3000:]
    detail = stage_entries(result)["gpu_allocation"]["detail"]
    assert "; 0 error(s), 0 warning(s)" in detail, detail


def test_the_serving_stage_alone_asks_the_api_itself(live, applied, tmp_path):
    """serving.yml run on its own (as --tags serving does): nothing before it reached the API, so the stage must ask
    for itself. The hosts are this machine (local connection), the auto-deploy directory a temporary one."""
    site, _nodes, _gpus, _result = applied
    if site["id"] != "three-gpu-nodes":
        pytest.skip("one site is enough")
    sources = site["sources"]
    local = {
        "ansible_connection": "local",
        "ansible_python_interpreter": "{{ ansible_playbook_python }}",
        "ansible_become": False,
        "manifests_server_dir": str(tmp_path / "manifests"),
        "model_registry_path": str(tmp_path / "store"),
        "model_registry_owner": str(os.getuid()),
        "model_registry_group": str(os.getgid()),
        "model_registry_min_free_gib": 0,
        "manifests_kubeconfig": str(live.kubeconfig),
        "manifests_rollout_timeout": 120,
        **SECRETS,
        "aiinfra_namespace": site["namespace"],
    }
    (tmp_path / "manifests").mkdir()
    # A secrets file an earlier run wrote before K3s answered: with the API up it must go.
    stale = tmp_path / "manifests" / "aiinfra-serving-secrets.yaml"
    stale.write_text("# written before the API answered\n")
    proc, result = run_playbook("serving.yml", sources[1], live, extra=[*sources[2:], "-e", json.dumps(local)])
    assert proc.returncode == 0, proc.stdout[-4000:]
    entry = stage_entries(result)["serving"]
    assert entry["status"] == "ran", entry
    assert "rollouts complete" in entry["detail"], entry
    assert (tmp_path / "manifests" / "aiinfra-monitoring.yaml").exists()
    # Secrets went through the API, not into a plain file.
    assert not stale.exists()
    assert not [p for p in (tmp_path / "manifests").iterdir() if "secret" in p.name]
    secret = live.get("secret", "-n", site["namespace"], "litellm-master-key")
    assert secret["metadata"]["name"] == "litellm-master-key"
    monitoring = local.get("monitoring_namespace", "monitoring")
    assert live.items("podmonitors", "-n", monitoring)
    # Monitoring switched off: its file goes, and so do its objects (K3s would leave them running); its namespace,
    # which another component may share, stays.
    proc, result = run_playbook(
        "serving.yml", sources[1], live, extra=[*sources[2:], "-e", json.dumps(dict(local, monitoring_enabled=False))]
    )
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert not (tmp_path / "manifests" / "aiinfra-monitoring.yaml").exists()
    assert live.items("podmonitors", "-n", monitoring) == []
    charts = live.items("helmcharts.helm.cattle.io", "-n", "kube-system")
    assert "kube-prometheus-stack" not in [c["metadata"]["name"] for c in charts]
    assert live.get("namespace", monitoring)["metadata"]["name"] == monitoring


def test_tensor_parallel_pods_land_on_whole_gpus_only(live, applied):
    """The real scheduler, with the node affinity the plan renders: the two-GPU model goes to the node whose GPUs
    are not time-sliced (gpu-b); kwok nodes carry GPU Feature Discovery's nvidia.com/gpu.replicas label."""
    site, _nodes, _gpus, _result = applied
    if site["id"] != "full":
        pytest.skip("the full site is the one with time-slicing and tensor parallelism")
    assert live.get("node", "gpu-a")["metadata"]["labels"]["nvidia.com/gpu.replicas"] == "2"
    (tp,) = live.items("pods", "-n", site["namespace"], "-l", "app.kubernetes.io/name=vllm-nemotron-35b")
    assert tp["spec"]["nodeName"] == "gpu-b"
    assert tp["status"]["phase"] == "Running"


def test_the_serving_namespace_enforces_restricted_and_every_pod_was_admitted(live, applied):
    """The API server's Pod Security admission (real) enforces "restricted" on the serving namespace: every pod
    the controllers created passed it, and a root pod is refused."""
    site, _nodes, _gpus, _result = applied
    labels = live.get("namespace", site["namespace"])["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"
    assert live.items("pods", "-n", site["namespace"])
    root = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "root-probe", "namespace": site["namespace"]},
        "spec": {"containers": [{"name": "c", "image": "registry.invalid/none:1"}]},
    }
    proc = live.kubectl("apply", "--dry-run=server", "-f", "-", stdin=json.dumps(root), check=False)
    assert proc.returncode != 0 and "violates PodSecurity" in proc.stderr, proc.stderr


def test_a_new_master_key_rolls_the_gateway_without_a_digest_of_the_key(live, applied, tmp_path_factory):
    """Issue 28, item 9: the gateway's pod template carried sha256(master key:Redis password), which anyone who may
    read Deployments could test guesses against. It now carries the resourceVersions of the Secrets (set after they
    are applied): unchanged on a second apply (test_a_second_apply_changes_nothing), new with a new key, so the
    gateway and its Redis roll. Item 5: the model servers' key (derived from the master key) is in its Secret, and
    the vLLM servers, which read it at start, roll with the gateway."""
    site = applied[0]
    if site["id"] != "three-gpu-nodes":
        pytest.skip("one site is enough")
    ns = site["namespace"]

    def annotations(name):
        return live.get("deployment", "-n", ns, name)["spec"]["template"]["metadata"].get("annotations") or {}

    def versions():
        return {
            n: live.get("secret", "-n", ns, n)["metadata"]["resourceVersion"]
            for n in ("litellm-master-key", "litellm-redis", MODEL_KEY_SECRET)
        }

    def model_servers():
        return {
            d["metadata"]["name"]: (d["spec"]["template"]["metadata"].get("annotations") or {}).get(
                "aiinfra.io/secret-versions"
            )
            for d in live.items("deployment", "-n", ns, "-l", "app.kubernetes.io/component=vllm")
        }

    def gateway_versions(rv):
        return "%s=%s,litellm-master-key=%s,litellm-redis=%s" % (
            MODEL_KEY_SECRET,
            rv[MODEL_KEY_SECRET],
            rv["litellm-master-key"],
            rv["litellm-redis"],
        )

    before, redis_before = annotations("litellm-ha"), annotations("litellm-ha-redis")
    rv = versions()
    assert before["aiinfra.io/secret-versions"] == gateway_versions(rv)
    servers_before = model_servers()
    assert servers_before and set(servers_before.values()) == {"%s=%s" % (MODEL_KEY_SECRET, rv[MODEL_KEY_SECRET])}
    data = live.get("secret", "-n", ns, MODEL_KEY_SECRET)["data"]
    assert base64.b64decode(data["api-key"]).decode() == gateway.model_api_key(SECRETS["litellm_master_key"])
    assert redis_before["aiinfra.io/secret-versions"] == "litellm-redis=%s" % rv["litellm-redis"]
    assert "aiinfra.io/secret-sha256" not in before and "aiinfra.io/secret-sha256" not in redis_before
    text = json.dumps(live.get("deployment", "-n", ns, "litellm-ha"))
    assert (
        SECRETS["litellm_master_key"] not in text
        and hashlib.sha256(SECRETS["litellm_master_key"].encode()).hexdigest() not in text
    )

    sources = site_inventory(site, tmp_path_factory)
    base = ["-e", f"manifests_kubeconfig={live.kubeconfig}", "-e", "manifests_rollout_timeout=240"]
    rotated = dict(SECRETS, litellm_master_key="sk-5d2a8f1c7e4b9a0d3f6c8e1b4a7d0f2c9e5b")
    # Each rolled model server pod takes a fresh local volume on its node and releases its old one; on a site the
    # servers' recycler unit (the collection's model_store_recycler.py) makes the released ones Available again. kwok
    # nodes run no unit, so the test runs that same script against the live API while the rotation rolls the pods.
    recycler = subprocess.Popen(
        [sys.executable, str(ROOT / "roles" / "model_registry" / "files" / "model_store_recycler.py"),
         "--kubectl", str(live.bin / "kubectl"), "--storage-class", "nvidia-ai-store", "--interval", "1"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=dict(os.environ, KUBECONFIG=str(live.kubeconfig)),
    )  # fmt: skip
    try:
        extra = [*sources[2:], "-e", json.dumps({**rotated, "aiinfra_namespace": ns}), *base]
        proc, result = run_playbook("apply.yml", sources[1], live, extra=extra)
        assert proc.returncode == 0, failures(result) or proc.stdout[-3000:]
        after, redis_after = annotations("litellm-ha"), annotations("litellm-ha-redis")
        assert after["aiinfra.io/secret-versions"] != before["aiinfra.io/secret-versions"]
        assert redis_after["aiinfra.io/secret-versions"] != redis_before["aiinfra.io/secret-versions"]
        rv = versions()
        assert after["aiinfra.io/secret-versions"] == gateway_versions(rv)
        servers_after = model_servers()
        assert set(servers_after.values()) == {"%s=%s" % (MODEL_KEY_SECRET, rv[MODEL_KEY_SECRET])}
        assert servers_after != servers_before
        data = live.get("secret", "-n", ns, MODEL_KEY_SECRET)["data"]
        assert base64.b64decode(data["api-key"]).decode() == gateway.model_api_key(rotated["litellm_master_key"])
    finally:  # the next tests expect the site as applied
        extra = [*sources[2:], "-e", json.dumps({**SECRETS, "aiinfra_namespace": ns}), *base]
        proc, result = run_playbook("apply.yml", sources[1], live, extra=extra)
        recycler.terminate()
        recycler.wait(timeout=30)
        assert proc.returncode == 0, failures(result) or proc.stdout[-3000:]
