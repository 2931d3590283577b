"""plugins/module_utils/k8s/model_servers.py: the vLLM and NIM model servers and their store, on the rendered test
sites (tests/unit/rendered_sites.py) against the policies kept as data (tests/unit/data/serving_policy.yml), and as
functions: the drain against the grace period, NIM's passthrough arguments, the memory share of a sliced GPU."""

import re

import pytest
import rendered_sites
import yaml
from conftest import DATA
from rendered_sites import NIM_IMAGE, gpu_deployments, of_kind, workloads

from ansible_collections.aiinfra.k3s.plugins.module_utils.k8s import model_servers as wl
from ansible_collections.aiinfra.k3s.plugins.module_utils.k8s import objects as sv
from ansible_collections.aiinfra.k3s.plugins.module_utils.plan import capacity as plan

POLICIES = yaml.safe_load((DATA / "serving_policy.yml").read_text())


IMAGE = "vllm/vllm-openai:v0.34.0"
rendered = rendered_sites.site_fixture()


def dig(obj, path):
    """Follow a dotted path; a backslash keeps a dot inside a key (prometheus\\.io/scrape)."""
    for part in (p.replace("\\.", ".") for p in re.split(r"(?<!\\)\.", path)):
        obj = obj[int(part)] if isinstance(obj, list) else obj[part]
    return obj


def check(policy, pod):
    container = pod["spec"]["containers"][0]
    res = container["resources"]
    if policy.get("check") == "gpu_limits":
        return (
            res["limits"]["nvidia.com/gpu"] == res["requests"]["nvidia.com/gpu"]
            and int(res["limits"]["nvidia.com/gpu"]) >= 1
        )
    if policy.get("check") == "cpu_memory":
        return all(k in res["requests"] for k in ("cpu", "memory")) and "memory" in res["limits"]
    if policy.get("check") == "hf_offline":
        return {"name": "HF_HUB_OFFLINE", "value": "1"} in container["env"]
    if policy.get("check") == "store_read_only":
        return any(m.get("readOnly") for m in container["volumeMounts"] if m["name"] == "models")
    if policy.get("check") == "pinned_image":
        return sv.image_pinned(container["image"])
    if policy.get("check") == "no_surge":
        return True  # checked on the Deployment by test_gpu_rollouts_never_need_a_spare_gpu
    if policy.get("check") == "no_fs_group":
        return "fsGroup" not in pod["spec"].get("securityContext", {})
    if policy.get("check") == "runtime_env":
        env = {e["name"]: e.get("value") for e in container["env"]}
        return (
            all(env.get(name) for name in policy["names_a_user"])
            and all(str(env.get(name)).startswith("/tmp") for name in policy["under_tmp"])
            and all(env.get(name) == value for name, value in policy["equals"].items())
        )
    if policy.get("check") == "drain":
        return drain_fits(pod, container, policy["margin"])
    value = dig(pod, policy["path"])
    if "equals" in policy:
        return value == policy["equals"]
    if "contains" in policy:
        return policy["contains"] in value
    if "at_least" in policy:
        return value >= policy["at_least"]
    return bool(value)


def drain_fits(pod, container, margin):
    """The server's shutdown timeout (vLLM --shutdown-timeout, or NIM's passthrough of it) is above 0 and the grace
    period holds the preStop sleep, the timeout and the margin."""
    args = container["args"] or {e["name"]: e.get("value") for e in container["env"]}["NIM_PASSTHROUGH_ARGS"].split()
    timeout = int(args[args.index("--shutdown-timeout") + 1])
    sleep = int(container["lifecycle"]["preStop"]["exec"]["command"][-1].split()[-1])
    return timeout > 0 and sleep + timeout + margin <= pod["spec"]["terminationGracePeriodSeconds"]


@pytest.mark.parametrize("policy", POLICIES, ids=[p["id"] for p in POLICIES])
def test_gpu_workload_policies(rendered, policy):
    _site, docs, _out, _proc = rendered
    deployments = gpu_deployments(docs)
    assert deployments
    for dep in deployments:
        assert check(policy, dep["spec"]["template"]), (policy["id"], dep["metadata"]["name"])


def test_gpu_rollouts_never_need_a_spare_gpu(rendered):
    """Model servers are Deployments that replace a pod the old one first: a rollout never asks for a GPU nobody
    has."""
    _site, docs, _out, _proc = rendered
    for dep in gpu_deployments(docs):
        assert dep["kind"] == "Deployment", dep["metadata"]["name"]
        assert dep["spec"]["strategy"] == {
            "type": "RollingUpdate",
            "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1},
        }


def test_model_servers_leave_a_lost_node_and_claim_the_store_where_they_land(rendered):
    """A node that stops answering: the model server is evicted after its own tolerationSeconds (not the
    default 300 s) and its replacement binds a store volume on the node it lands on (a claim per pod)."""
    _site, docs, _out, _proc = rendered
    for dep in gpu_deployments(docs):
        pod = dep["spec"]["template"]["spec"]
        lost = {t["key"]: t for t in pod["tolerations"] if t.get("effect") == "NoExecute"}
        assert set(lost) == {"node.kubernetes.io/unreachable", "node.kubernetes.io/not-ready"}
        assert all(0 < t["tolerationSeconds"] <= 60 for t in lost.values()), lost
        (store,) = [v for v in pod["volumes"] if v["name"] == "models"]
        claim = store["ephemeral"]["volumeClaimTemplate"]["spec"]
        assert claim["storageClassName"] == "nvidia-ai-store" and claim["accessModes"] == ["ReadWriteOnce"]
        assert "volumeClaimTemplates" not in dep["spec"]


def test_tensor_parallel_gpus_and_store_claim(rendered):
    _site, docs, _out, _proc = rendered
    pv_size = {pv["spec"]["capacity"]["storage"] for pv in of_kind(docs, "PersistentVolume")}
    assert not of_kind(docs, "PersistentVolumeClaim")  # no claim shared by every replica
    for dep in workloads(docs):
        if dep["metadata"]["labels"]["app.kubernetes.io/component"] != "vllm":
            continue
        args = dep["spec"]["template"]["spec"]["containers"][0]["args"]
        tp = args[args.index("--tensor-parallel-size") + 1]
        assert dep["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == tp
        container = dep["spec"]["template"]["spec"]["containers"][0]
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            assert container[probe]["httpGet"]["path"] == "/health", probe  # vLLM's health endpoint
        volumes = {v["name"]: v for v in dep["spec"]["template"]["spec"]["volumes"]}
        template = volumes["models"]["ephemeral"]["volumeClaimTemplate"]
        assert template["spec"]["storageClassName"] == "nvidia-ai-store"
        assert {template["spec"]["resources"]["requests"]["storage"]} == pv_size
        assert volumes["dshm"]["emptyDir"]["medium"] == "Memory"


def test_nim_backends_follow_the_nim_notes(rendered):
    site, docs, _out, _proc = rendered
    nims = [d for d in workloads(docs) if d["metadata"]["labels"]["app.kubernetes.io/component"] == "nim"]
    if site != "full":
        assert nims == []
        return
    (dep,) = nims
    name = dep["metadata"]["name"]
    assert "replicas" not in dep["spec"]  # the autoscaler owns it
    pod = dep["spec"]["template"]["spec"]
    assert pod["imagePullSecrets"] == [{"name": "ngc-registry"}]
    assert {c["topologyKey"] for c in pod["topologySpreadConstraints"]} == {
        "kubernetes.io/hostname",
        "topology.kubernetes.io/zone",
    }
    container = pod["containers"][0]
    assert container["readinessProbe"]["httpGet"]["path"] == "/v1/health/ready"
    assert container["livenessProbe"]["httpGet"]["path"] == "/v1/health/live"
    # NVIDIA's air-gap mode: the cache is pre-seeded, so the pods get no NGC key (only the pull secret uses it).
    assert not [e for e in container["env"] if e["name"] == "NGC_API_KEY"]
    assert dep["spec"]["template"]["metadata"]["annotations"]["prometheus.io/path"] == "/v1/metrics"
    (hpa,) = [h for h in of_kind(docs, "HorizontalPodAutoscaler") if h["metadata"]["name"] == name]
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (2, 3)
    assert hpa["spec"]["scaleTargetRef"]["name"] == name
    assert any(p["metadata"]["name"] == name for p in of_kind(docs, "PodDisruptionBudget"))


def test_time_sliced_site_keeps_tensor_parallel_pods_off_shared_gpus(rendered):
    site, docs, _out, _proc = rendered
    if site != "full":
        return
    by_name = {d["metadata"]["name"]: d for d in workloads(docs)}
    tp = by_name["vllm-nemotron-35b"]["spec"]["template"]["spec"]
    (term,) = tp["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert term["matchExpressions"] == [{"key": "nvidia.com/gpu.replicas", "operator": "NotIn", "values": ["2"]}]
    args = tp["containers"][0]["args"]
    assert args[args.index("--gpu-memory-utilization") + 1] == "0.9"
    single = by_name["vllm-qwen-7b"]["spec"]["template"]["spec"]
    args = single["containers"][0]["args"]
    assert args[args.index("--gpu-memory-utilization") + 1] == "0.45"  # it may share a GPU two ways
    (config,) = [d for d in of_kind(docs, "ConfigMap") if d["metadata"]["name"] == "time-slicing-config"]
    shared = yaml.safe_load(config["data"]["shared"])
    assert shared["sharing"]["timeSlicing"]["failRequestsGreaterThanOne"] is True


def test_one_gpu_pods_keep_to_sliced_nodes_when_multi_gpu_pods_need_the_whole_ones(rendered):
    site, docs, _out, _proc = rendered
    if site != "full":
        return
    for dep in workloads(docs):
        name = dep["metadata"]["name"]
        if name in ("vllm-qwen-7b", "nim-llama-8b"):
            term = dep["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
                "requiredDuringSchedulingIgnoredDuringExecution"
            ]["nodeSelectorTerms"][0]
            assert term["matchExpressions"] == [{"key": "nvidia.com/gpu.replicas", "operator": "In", "values": ["2"]}]


@pytest.mark.parametrize(
    ("model", "shutdown", "grace"),
    [
        ({}, 90, 120),  # neither given: vLLM's drain of 90 s in the 120 s the pods always had
        ({"shutdown_timeout": 600}, 600, 630),  # long generations: the grace period follows
        ({"termination_grace_period": 300}, 270, 300),  # or the shutdown timeout follows the grace period
        ({"shutdown_timeout": 60, "termination_grace_period": 300}, 60, 300),
    ],
)
def test_the_drain_fits_the_grace_period(model, shutdown, grace):
    (filled,) = wl.filled("vllm", [dict({"served_name": "a", "path": "m"}, **model)], IMAGE)
    assert (filled["shutdown_timeout"], filled["termination_grace_period"]) == (shutdown, grace)
    assert plan.drain_problems("a", filled) == []
    sts, _svc = wl.gpu_workload(
        {
            **filled,
            "name": "a",
            "component": "vllm",
            "args": wl.vllm_args(dict(filled, memory_utilization=0.9), "/data/models"),
            "env": {},
            "resources": {},
            "store": {"storage_class": "s", "size": "1Gi"},
        },
        {"namespace": "ns", "gpu_node_selector": {}, "gpu_toleration_key": "nvidia.com/gpu"},
    )
    pod = sts["spec"]["template"]
    assert drain_fits(pod, pod["spec"]["containers"][0], 15)
    assert pod["spec"]["terminationGracePeriodSeconds"] == grace


def test_nim_keeps_its_own_passthrough_arguments_and_drains():
    nim = {"served_name": "n", "image": NIM_IMAGE, "env": {"NIM_PASSTHROUGH_ARGS": "--max-num-seqs 8"}}
    defaults = {
        "store_mount": "/opt/nim/.cache",
        "store": {"storage_class": "s", "size": "1Gi"},
        "shm_size": "1Gi",
        "resources": {},
        "ngc_secret": "ngc-api",
        "pull_secret": "ngc-registry",
        "max_replicas": 4,
        "metric": {"cpu": 70},
        "store_read_only": True,
    }
    site = {"namespace": "ns", "gpu_node_selector": {}, "gpu_toleration_key": "nvidia.com/gpu"}
    (sts,) = [o for o in wl.nim_manifests([nim], defaults, site) if o["kind"] == "Deployment"]
    env = {e["name"]: e.get("value") for e in sts["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["NIM_PASSTHROUGH_ARGS"] == "--max-num-seqs 8 --shutdown-timeout 90"
