"""Serving manifests: rendered for every inventory through playbooks/render.yml, then checked with strict
Kubernetes schema validation (the K3s release's Kubernetes version), policies kept as data, and the GPU
verifier run on what the cluster would schedule."""

import pytest
import yaml
from conftest import DATA, ROOT, run_playbook

from ansible_collections.aiinfra.k3s.plugins.module_utils import gpu_allocation as ga
from ansible_collections.aiinfra.k3s.plugins.module_utils import serving as sv

kubernetes_validate = pytest.importorskip("kubernetes_validate")

K8S_VERSION = "1.33"  # K3s v1.33.5+k3s1 (roles/k3s/defaults/main.yml)
POLICIES = yaml.safe_load((DATA / "serving_policy.yml").read_text())
SITES = ["example", "lab"]


@pytest.fixture(scope="module", params=SITES)
def rendered(request, tmp_path_factory):
    out = tmp_path_factory.mktemp(f"render-{request.param}")
    inventory = ROOT / "inventories" / request.param
    if request.param == "lab":  # the lab's hosts.yml is written by labctl; render its default shape
        inventory = tmp_path_factory.mktemp("lab-inv")
        (inventory / "hosts.yml").write_text(
            yaml.safe_dump(
                {
                    "all": {
                        "children": {
                            "k3s_servers": {"hosts": {"lab-cp-1": {}}},
                            "k3s_agents": {"hosts": {"lab-gpu-1": {}, "lab-gpu-2": {}}},
                            "gpu_nodes": {"hosts": {"lab-gpu-1": {}, "lab-gpu-2": {}}},
                        }
                    }
                }
            )
        )
        (inventory / "group_vars").symlink_to(ROOT / "inventories" / "lab" / "group_vars")
    proc = run_playbook("render.yml", inventory, callback="default", extra=["-e", f"render_dir={out}"])[0]
    assert proc.returncode == 0, proc.stdout[-3000:]
    docs = []
    for path in sorted(out.glob("*.yaml")):
        docs.extend(d for d in yaml.safe_load_all(path.read_text()) if d)
    return request.param, docs


def of_kind(docs, kind):
    return [d for d in docs if d["kind"] == kind]


def test_every_manifest_passes_strict_schema_validation(rendered):
    _site, docs = rendered
    assert docs
    for doc in docs:
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


def dig(obj, path):
    for part in path.split("."):
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
    value = dig(pod, policy["path"])
    if "equals" in policy:
        return value == policy["equals"]
    if "contains" in policy:
        return policy["contains"] in value
    if "at_least" in policy:
        return value >= policy["at_least"]
    return bool(value)


@pytest.mark.parametrize("policy", POLICIES, ids=[p["id"] for p in POLICIES])
def test_gpu_workload_policies(rendered, policy):
    _site, docs = rendered
    deployments = [d for d in of_kind(docs, "Deployment") if "vllm" in d["metadata"]["name"]]
    assert deployments
    for dep in deployments:
        assert check(policy, dep["spec"]["template"]), (policy["id"], dep["metadata"]["name"])


def test_tensor_parallel_gpus_and_store_claim(rendered):
    _site, docs = rendered
    claims = {c["metadata"]["name"] for c in of_kind(docs, "PersistentVolumeClaim")}
    for dep in of_kind(docs, "Deployment"):
        args = dep["spec"]["template"]["spec"]["containers"][0]["args"]
        tp = args[args.index("--tensor-parallel-size") + 1]
        assert dep["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == tp
        volumes = {v["name"]: v for v in dep["spec"]["template"]["spec"]["volumes"]}
        assert volumes["models"]["persistentVolumeClaim"]["claimName"] in claims
        assert volumes["dshm"]["emptyDir"]["medium"] == "Memory"
        assert dep["spec"]["strategy"]["type"] == "Recreate"  # never waits for a spare GPU


def test_storage_follows_the_notes(rendered):
    site, docs = rendered
    (sc,) = of_kind(docs, "StorageClass")
    assert sc["metadata"]["name"] == "nvidia-ai-store"
    assert (sc["provisioner"], sc["volumeBindingMode"], sc["reclaimPolicy"]) == (
        "kubernetes.io/no-provisioner",
        "WaitForFirstConsumer",
        "Retain",
    )
    pvs = of_kind(docs, "PersistentVolume")
    nodes = {"example": ["gx10-db4d"], "lab": ["lab-gpu-1", "lab-gpu-2"]}[site]
    pinned = [
        pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] for pv in pvs
    ]
    assert sorted(v[0] for v in pinned) == nodes
    assert all(pv["spec"]["local"]["path"] == "/data/model-registry" for pv in pvs)
    (ns,) = of_kind(docs, "Namespace")
    assert ns["metadata"]["name"] == "ia-services-payed"


def test_gpu_verifier_finds_no_error_in_what_the_site_would_schedule(rendered):
    """Schedule the rendered Deployments onto the inventory's GPU nodes and run the verifier on it."""
    site, docs = rendered
    node_names = {"example": ["gx10-db4d"], "lab": ["lab-gpu-1", "lab-gpu-2"]}[site]
    nodes = [
        {
            "metadata": {"name": n, "labels": {"ai-workload": "true", "nvidia.com/gpu.count": "1"}},
            "spec": {"taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]},
            "status": {
                "capacity": {"nvidia.com/gpu": "1"},
                "allocatable": {"nvidia.com/gpu": "1"},
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        }
        for n in node_names
    ]
    pods = []
    slots = list(node_names)
    for dep in of_kind(docs, "Deployment"):
        for replica in range(dep["spec"]["replicas"]):
            template = dep["spec"]["template"]
            pods.append(
                {
                    "metadata": {
                        "name": f"{dep['metadata']['name']}-{replica}",
                        "namespace": dep["metadata"]["namespace"],
                    },
                    "spec": dict(template["spec"], nodeName=slots.pop(0)),
                    "status": {"phase": "Running"},
                }
            )
    result = ga.analyze(nodes, pods, {n: 1 for n in node_names})
    assert [f for f in result["findings"] if f["severity"] == "error"] == []
    assert result["summary"]["requested"] == len(pods)


@pytest.mark.parametrize(
    ("models", "nodes", "problem"),
    [
        (
            [{"served_name": "big", "path": "m", "tensor_parallel_size": 4}],
            {"g1": 2, "g2": 2},
            "tensor_parallel_size 4 is larger than the GPUs of any node (at most 2)",
        ),
        (
            [{"served_name": "a", "path": "m", "replicas": 2}, {"served_name": "b", "path": "m"}],
            {"g1": 2},
            "the models request 3 GPUs in all but the cluster has 2",
        ),
        ([{"served_name": "a", "path": "m", "image": "vllm/vllm-openai:latest"}], {"g1": 1}, "is not pinned"),
        ([{"served_name": "a", "path": "m", "image": "vllm/vllm-openai"}], {"g1": 1}, "is not pinned"),
        ([{"served_name": "a", "path": "m"}, {"served_name": "a", "path": "n"}], {"g1": 2}, "used twice"),
        ([{"served_name": "a", "path": "missing/model"}], {"g1": 1}, "'missing/model' is not in the model store"),
        ([{"served_name": "a", "path": "m"}], {}, "no GPU node in the inventory"),
    ],
)
def test_impossible_plans_are_rejected(models, nodes, problem):
    problems = sv.plan_problems(models, nodes, "vllm/vllm-openai:v0.6.3", store_paths={"m", "n"})
    assert any(problem in p for p in problems), problems


def test_time_slicing_counts_in_the_capacity():
    models = [{"served_name": "a", "path": "m", "replicas": 4}]
    assert sv.plan_problems(models, {"g1": 1}, "vllm/vllm-openai:v0.6.3", replicas_per_gpu=4) == []
    assert sv.plan_problems(models, {"g1": 1}, "vllm/vllm-openai:v0.6.3", replicas_per_gpu=2)


@pytest.mark.parametrize(
    ("image", "ok"),
    [
        ("vllm/vllm-openai:v0.6.3", True),
        ("vllm/vllm-openai:latest", False),
        ("vllm/vllm-openai", False),
        ("reg.local:5000/vllm/vllm-openai", False),
        ("reg.local:5000/vllm/vllm-openai:v1", True),
        ("vllm/vllm-openai@sha256:" + "a" * 64, True),
    ],
)
def test_image_pinned(image, ok):
    assert sv.image_pinned(image) is ok


def test_manifests_do_not_depend_on_node_order():
    """Group order can vary between runs; the written file must not, or every run reports a change."""
    params = {
        "storage_class": "nvidia-ai-store",
        "path": "/data/model-registry",
        "size": "500Gi",
        "namespace": "ia-services-payed",
        "claim_name": "model-registry-pvc",
        "pv_prefix": "model-registry",
    }
    assert sv.model_registry_manifests(["gpu-b", "gpu-a"], params) == sv.model_registry_manifests(
        ["gpu-a", "gpu-b"], params
    )
