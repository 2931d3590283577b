"""The newcomer site of issue 29 (tests/unit/data/newcomer): where each model may run (items 4, 5, 15), the gateway's
spread (item 6), and the manifests rendered from that plan."""

import copy
import json
from pathlib import Path

import pytest
import yaml
from conftest import DATA, run_playbook

from ansible_collections.aiinfra.k3s.plugins.module_utils.k8s import model_servers
from ansible_collections.aiinfra.k3s.plugins.module_utils.k8s.objects import dns_name
from ansible_collections.aiinfra.k3s.plugins.module_utils.plan import site_plan

SITE = DATA / "newcomer"
GPU_HOSTS = ("gpu1", "gpu2", "gpu3")
BASE = yaml.safe_load((DATA / "site_plan.yml").read_text())["base"]
VLLM = {
    "image": "vllm/vllm-openai:v0.34.0",
    "store_mount": "/data/models",
    "store": {"storage_class": "nvidia-ai-store", "size": "500Gi"},
    "shm_size": "8Gi",
    "resources": {"requests": {"cpu": "4", "memory": "16Gi"}, "limits": {"cpu": "8", "memory": "24Gi"}},
}
LLAMA, QWEN = dns_name("vllm-llama-3.1-70b"), dns_name("vllm-qwen2.5-7b")
SITE_PARAMS = {
    "namespace": "ai-serving",
    "gpu_node_selector": {"ai-workload": "true"},
    "gpu_toleration_key": "nvidia.com/gpu",
}


def newcomer_plan(**override):
    """The plan of the newcomer site from its files (the plan's base values where the site sets none)."""
    values = dict(copy.deepcopy(BASE), **yaml.safe_load((SITE / "group_vars" / "all" / "main.yml").read_text()))
    values.update(override)
    gpu = {h: yaml.safe_load((SITE / "host_vars" / f"{h}.yml").read_text()) for h in GPU_HOSTS}
    hosts = yaml.safe_load((SITE / "hosts.yml").read_text())["all"]["children"]
    cluster = list(hosts["k3s_servers"]["hosts"]) + list(hosts["k3s_agents"]["hosts"])
    return site_plan.site_plan(values, gpu, {}, False, cluster)


def model(plan, name):
    return next(m for m in plan["models"] if m["served_name"] == name)


def test_llama_runs_only_on_the_h100_nodes_spread_hard_and_qwen_only_on_the_l40s():
    plan = newcomer_plan()
    llama, qwen = model(plan, "llama-3.1-70b"), model(plan, "qwen2.5-7b")
    assert llama["nodes"] == ["gpu1", "gpu2"] and llama["spread"] == "hard"
    assert {"key": model_servers.GPU_TYPE_LABEL, "operator": "In", "values": ["H100-80GB"]} in llama["node_affinity"]
    assert qwen["nodes"] == ["gpu3"] and qwen["spread"] == "soft"
    assert {"key": model_servers.GPU_TYPE_LABEL, "operator": "In", "values": ["L40S-48GB"]} in qwen["node_affinity"]
    assert {n: c.get("gpu_type") for n, c in plan["nodes"].items()} == {
        "gpu1": "H100-80GB",
        "gpu2": "H100-80GB",
        "gpu3": "L40S-48GB",
    }
    placement = [p for p in plan["problems"] if p["code"] in ("PLACEMENT", "SPREAD", "GATEWAY", "NODE_LOSS")]
    # Qwen's two replicas share the only L40S node; the gateway's three the only non-GPU node. Nothing else.
    assert [(p["code"], p["severity"], p["problem"].split(":")[0]) for p in placement] == [
        ("SPREAD", "warning", "qwen2.5-7b"),
        (
            "GATEWAY",
            "warning",
            "the gateway's 3 replicas all run on cp1, the only non-GPU node litellm_placement cpu allows",
        ),
    ], placement
    assert [w["nodes"] for w in plan["workloads"] if w["server"] == "litellm"] == [["cp1"]]


def test_without_a_placement_qwen_could_land_on_an_h100():
    """What the issue saw: time-slicing alone keeps one-GPU pods on sliced nodes only while multi-GPU models are in
    the plan; with the L40S node unsliced, Qwen may use any GPU node."""
    values = yaml.safe_load((SITE / "group_vars" / "all" / "main.yml").read_text())
    models = copy.deepcopy(values["vllm_models"])
    for entry in models:
        entry.pop("placement")
    plan = newcomer_plan(vllm_models=models, gpu_operator_time_slicing_classes={})
    assert model(plan, "qwen2.5-7b")["nodes"] == ["gpu1", "gpu2", "gpu3"]
    assert model(plan, "llama-3.1-70b")["nodes"] == ["gpu1", "gpu2"]  # gpu3's 2 GPUs cannot hold 4


def test_the_manifests_carry_the_plans_placement_and_spread():
    plan = newcomer_plan()
    site = dict(SITE_PARAMS, **plan["placement"])
    objects = model_servers.vllm_manifests([m for m in plan["models"] if m["server"] == "vllm"], VLLM, site)
    deployments = {o["metadata"]["name"]: o["spec"]["template"]["spec"] for o in objects if o["kind"] == "Deployment"}
    llama, qwen = deployments[LLAMA], deployments[QWEN]

    def terms(pod):
        return pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]

    # One term: time-slicing and the GPU type must both hold (two terms would be either).
    assert terms(llama) == [
        {
            "matchExpressions": [
                {"key": model_servers.SHARED_LABEL, "operator": "NotIn", "values": ["2"]},
                {"key": "aiinfra.io/gpu-type", "operator": "In", "values": ["H100-80GB"]},
            ]
        }
    ]
    assert terms(qwen) == [
        {
            "matchExpressions": [
                {"key": model_servers.SHARED_LABEL, "operator": "In", "values": ["2"]},
                {"key": "aiinfra.io/gpu-type", "operator": "In", "values": ["L40S-48GB"]},
            ]
        }
    ]
    (hard,) = llama["topologySpreadConstraints"]
    assert hard["topologyKey"] == "kubernetes.io/hostname" and hard["whenUnsatisfiable"] == "DoNotSchedule"
    # A lost or cordoned node (tainted) is no spread domain: its replica's replacement may join the other node.
    assert hard["nodeTaintsPolicy"] == "Honor"
    (soft,) = qwen["topologySpreadConstraints"]
    assert soft["whenUnsatisfiable"] == "ScheduleAnyway" and "nodeTaintsPolicy" not in soft


def test_nim_models_get_the_same_placement_and_only_their_hostname_spread_is_hard():
    values = {
        "vllm_models": [],
        "nim_models": [
            {"served_name": "n1", "image": "nvcr.io/nim/meta/llama:2.0.0", "placement": {"gpu_types": ["H100-80GB"]}}
        ],
    }
    plan = newcomer_plan(**values)
    (nim,) = plan["models"]
    assert nim["nodes"] == ["gpu1", "gpu2"] and nim["spread"] == "hard"
    defaults = dict(
        VLLM, ngc_secret="ngc", pull_secret="pull", max_replicas=4, metric={"cpu": 80}, store_read_only=True
    )
    objects = model_servers.nim_manifests(plan["models"], defaults, dict(SITE_PARAMS, **plan["placement"]))
    pod = next(o for o in objects if o["kind"] == "Deployment")["spec"]["template"]["spec"]
    spread = {c["topologyKey"]: c["whenUnsatisfiable"] for c in pod["topologySpreadConstraints"]}
    assert spread == {"kubernetes.io/hostname": "DoNotSchedule", "topology.kubernetes.io/zone": "ScheduleAnyway"}
    expressions = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert {"key": "aiinfra.io/gpu-type", "operator": "In", "values": ["H100-80GB"]} in (
        expressions["nodeSelectorTerms"][0]["matchExpressions"]
    )


def test_a_model_entry_resources_and_shm_size_reach_the_pod():
    """The serving plan's per-model resources and /dev/shm (derived from the weights) win over the role's."""
    plan = newcomer_plan()
    models = copy.deepcopy([m for m in plan["models"] if m["server"] == "vllm"])
    models[0].update(resources={"requests": {"memory": "80Gi"}, "limits": {"memory": "96Gi"}}, shm_size="16Gi")
    models[1].update(resources={}, shm_size="")  # empty: the role's defaults
    objects = model_servers.vllm_manifests(models, VLLM, dict(SITE_PARAMS, **plan["placement"]))
    pods = {o["metadata"]["name"]: o["spec"]["template"]["spec"] for o in objects if o["kind"] == "Deployment"}
    big, small = pods[LLAMA], pods[QWEN]
    assert big["containers"][0]["resources"]["limits"] == {"memory": "96Gi", "nvidia.com/gpu": "4"}
    assert [v["emptyDir"]["sizeLimit"] for v in big["volumes"] if v["name"] == "dshm"] == ["16Gi"]
    assert small["containers"][0]["resources"]["limits"] == {"cpu": "8", "memory": "24Gi", "nvidia.com/gpu": "1"}
    assert [v["emptyDir"]["sizeLimit"] for v in small["volumes"] if v["name"] == "dshm"] == ["8Gi"]


@pytest.mark.slow
def test_render_shows_the_nodes_each_model_may_use_and_renders_them(tmp_path):
    """render.yml on the newcomer inventory as written (the action plugin reads the GPU hosts' aiinfra_gpu_type and
    the cluster's hosts): the plan file lists each model's nodes, the manifests carry the affinity and spread."""
    out, plan_file = tmp_path / "rendered", tmp_path / "plan.yml"
    proc = run_playbook(
        "render.yml",
        SITE,
        callback="default",
        extra=["-e", f"render_dir={out}", "-e", f"render_plan_file={plan_file}"],
    )[0]
    assert proc.returncode == 0, proc.stdout[-4000:]
    plan = yaml.safe_load(plan_file.read_text())
    assert {m["served_name"]: (m["nodes"], m["spread"]) for m in plan["models"]} == {
        "llama-3.1-70b": (["gpu1", "gpu2"], "hard"),
        "qwen2.5-7b": (["gpu3"], "soft"),
    }
    assert [w["nodes"] for w in plan["workloads"] if w["server"] == "litellm"] == [["cp1"]]
    assert {p["code"] for p in plan["problems"] if p["severity"] == "warning"} >= {"SPREAD", "GATEWAY"}
    docs = [d for path in sorted(out.glob("*.yaml")) for d in yaml.safe_load_all(path.read_text()) if d]
    pods = {d["metadata"]["name"]: d["spec"]["template"]["spec"] for d in docs if d["kind"] == "Deployment"}
    llama = pods[LLAMA]
    assert llama["topologySpreadConstraints"][0]["whenUnsatisfiable"] == "DoNotSchedule"
    expressions = llama["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert {"key": "aiinfra.io/gpu-type", "operator": "In", "values": ["H100-80GB"]} in (
        expressions["nodeSelectorTerms"][0]["matchExpressions"]
    )
    assert pods[QWEN]["topologySpreadConstraints"][0]["whenUnsatisfiable"] == "ScheduleAnyway"


def test_the_k3s_roles_label_the_nodes_with_the_labels_the_workloads_select_on():
    k3s_vars = yaml.safe_load((Path(__file__).parents[3] / "roles" / "k3s" / "vars" / "main.yml").read_text())
    assert k3s_vars["__k3s_gpu_type_label"] == model_servers.GPU_TYPE_LABEL
    assert k3s_vars["__k3s_node_group_label"] == model_servers.NODE_GROUP_LABEL


@pytest.mark.slow
def test_the_k3s_placement_labels_of_a_host_are_the_ones_it_sets(tmp_path):
    """roles/k3s vars/main.yml's __k3s_placement_labels, as the agent registration and the label reconciler read it:
    a label per variable the host sets (a number as text), none for one it leaves out."""
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(
        yaml.safe_dump(
            {
                "all": {
                    "hosts": {
                        "h100": {"aiinfra_gpu_type": "H100-80GB", "aiinfra_node_group": "pool-a"},
                        "l4": {"aiinfra_gpu_type": 4090},
                        "plain": {},
                    }
                }
            }
        )
    )
    playbook = tmp_path / "labels.yml"
    playbook.write_text(
        yaml.safe_dump(
            [
                {
                    "hosts": "localhost",
                    "gather_facts": False,
                    "vars_files": [str(Path(__file__).parents[3] / "roles" / "k3s" / "vars" / "main.yml")],
                    "tasks": [
                        {
                            "ansible.builtin.copy": {
                                "content": "{{ __k3s_placement_labels | to_json }}",
                                "dest": str(tmp_path) + "/{{ item }}.json",
                                "mode": "0644",
                            },
                            "vars": {"__k3s_placement_host": "{{ item }}"},
                            "loop": ["h100", "l4", "plain"],
                        }
                    ],
                }
            ]
        )
    )
    proc = run_playbook(str(playbook), inventory, callback="default")[0]
    assert proc.returncode == 0, proc.stdout[-3000:]
    found = [json.loads((tmp_path / f"{host}.json").read_text()) for host in ("h100", "l4", "plain")]
    assert found == [
        {"aiinfra.io/gpu-type": "H100-80GB", "aiinfra.io/node-group": "pool-a"},
        {"aiinfra.io/gpu-type": "4090"},
        {},
    ]
