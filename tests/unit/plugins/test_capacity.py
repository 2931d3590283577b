"""plugins/module_utils/plan/capacity.py and models.py (issue 29, items 7, 12, 13, 14): model-server sizes derived
from the model, the weights-fit check that says what it compared (or that it did not run), tensor parallel against
the attention heads and the nodes, and one finding per cause with numbers an operator can check; the plans refused
outright (more GPUs than the cluster has, unpinned images, a drain longer than the grace period, tensor parallel over
slices of a GPU, NIM's replicas), and what time-slicing and GPU memory can hold."""

import json
from pathlib import Path

import pytest
import yaml
from rendered_sites import NIM_IMAGE

from ansible_collections.aiinfra.k3s.plugins.module_utils.k8s import model_servers as wl
from ansible_collections.aiinfra.k3s.plugins.module_utils.plan import capacity as plan
from ansible_collections.aiinfra.k3s.plugins.module_utils.plan import models as md

IMAGE = "vllm/vllm-openai:v0.34.0"
NEWCOMER = Path(__file__).parents[1] / "data" / "newcomer"
# The newcomer site of issue 29: two nodes of 8 H100 80GB, one of 2 L40S 48GB time-sliced 2 ways.
SITE = {
    "gpu1": {"gpus": 8, "replicas": 1, "memory_mib": 81559},
    "gpu2": {"gpus": 8, "replicas": 1, "memory_mib": 81559},
    "gpu3": {"gpus": 2, "replicas": 2, "memory_mib": 46068},
}
LLAMA = {
    "served_name": "llama-3.1-70b",
    "path": "meta-llama/Llama-3.1-70B-Instruct",
    "tensor_parallel_size": 4,
    "replicas": 2,
    "weights_gib": 131.5,
}
QWEN = {
    "served_name": "qwen2.5-7b",
    "path": "Qwen/Qwen2.5-7B-Instruct",
    "tensor_parallel_size": 1,
    "replicas": 2,
    "weights_gib": 14.2,
}
# config.json of Llama 3.1 70B and Qwen2.5 7B (the attention keys).
CONFIGS = {
    LLAMA["path"]: {"num_attention_heads": 64, "num_key_value_heads": 8},
    QWEN["path"]: {"num_attention_heads": 28, "num_key_value_heads": 4},
}


def findings(models, capacity=None, **kwargs):
    return plan.plan_findings(models, SITE if capacity is None else capacity, IMAGE, severity=True, **kwargs)


def errors(models, capacity=None, **kwargs):
    return [f["problem"] for f in findings(models, capacity, **kwargs) if f["severity"] == "error"]


def warnings(models, capacity=None, **kwargs):
    return [f["problem"] for f in findings(models, capacity, **kwargs) if f["severity"] == "warning"]


# ---------------------------------------------------------------- item 7: sizes derived from the model


@pytest.mark.parametrize(
    ("gpus", "weights", "requests", "limits", "shm"),
    [
        # 7B on one GPU: 4 + 4 + 14.2 = 22.2 -> 23Gi to load; + the other 0 GiB of weights + 2Gi of shm -> 25Gi.
        (1, 14.2, {"cpu": "4", "memory": "23Gi"}, {"cpu": "8", "memory": "25Gi"}, "2Gi"),
        # 70B over 4 GPUs: 4 + 16 + 131.5 / 4 = 52.9 -> 53Gi to load; 4 + 16 + 131.5 + 8 -> 160Gi.
        (4, 131.5, {"cpu": "10", "memory": "53Gi"}, {"cpu": "20", "memory": "160Gi"}, "8Gi"),
        (8, 131.5, {"cpu": "18", "memory": "53Gi"}, {"cpu": "36", "memory": "184Gi"}, "16Gi"),
    ],
)
def test_sizes_follow_the_weights_and_tensor_parallel(gpus, weights, requests, limits, shm):
    size = md.model_sizing(gpus, weights)
    assert size == {"resources": {"requests": requests, "limits": limits}, "shm_size": shm}
    assert md.load_memory_gib(gpus, weights) == int(requests["memory"][:-2])


def test_a_tp4_70b_pod_no_longer_gets_the_flat_defaults():
    (llama,) = md.filled("vllm", [LLAMA], IMAGE)
    assert llama["resources"]["limits"]["memory"] == "160Gi" and llama["shm_size"] == "8Gi"
    site = {"namespace": "ns", "gpu_node_selector": {}, "gpu_toleration_key": "nvidia.com/gpu"}
    defaults = {
        "image": IMAGE,
        "store_mount": "/data/models",
        "store": {"storage_class": "s", "size": "1Gi"},
        "shm_size": "8Gi",
        "resources": {"requests": {"cpu": "4", "memory": "16Gi"}, "limits": {"cpu": "8", "memory": "24Gi"}},
    }
    llama["memory_utilization"] = 0.9
    (deploy,) = [o for o in wl.vllm_manifests([llama], defaults, site) if o["kind"] == "Deployment"]
    res = deploy["spec"]["template"]["spec"]["containers"][0]["resources"]
    assert res["limits"] == {"cpu": "20", "memory": "160Gi", "nvidia.com/gpu": "4"}
    assert res["requests"] == {"cpu": "10", "memory": "53Gi", "nvidia.com/gpu": "4"}


def test_measured_weights_size_the_model_and_its_own_values_win():
    bare = {"served_name": "m", "path": "org/m", "tensor_parallel_size": 2}
    (measured,) = md.filled("vllm", [bare], IMAGE, weights={"org/m": 30.0})
    assert measured["resources"]["requests"]["memory"] == "27Gi" and measured["shm_size"] == "4Gi"
    (unknown,) = md.filled("vllm", [bare], IMAGE)
    assert "resources" not in unknown and "shm_size" not in unknown  # vllm_resources and vllm_shm_size apply
    own = dict(bare, weights_gib=30, resources={"limits": {"memory": "64Gi"}}, shm_size="1Gi")
    (kept,) = md.filled("vllm", [own], IMAGE, weights={"org/m": 99.0})
    assert kept["resources"] == {"limits": {"memory": "64Gi"}} and kept["shm_size"] == "1Gi"
    assert md.filled("vllm", [measured], IMAGE) == [measured]  # idempotent
    (nim,) = md.filled("nim", [{"served_name": "n", "weights_gib": 10}])
    assert "resources" not in nim


def test_a_memory_limit_below_what_loading_needs_is_refused():
    low = dict(LLAMA, resources={"requests": {"cpu": "8"}, "limits": {"cpu": "8", "memory": "24Gi"}})
    (problem,) = [m for m in errors([low, QWEN]) if "resources.limits.memory" in m]
    assert problem.startswith("llama-3.1-70b: resources.limits.memory 24Gi is below the 53Gi")
    assert "131.5 GiB / tensor_parallel_size 4 = 32.9 GiB" in problem and "at least 53Gi" in problem
    # The site plan names it SERVING_PLAN on vllm_models (plan_findings' variable).
    want = {"code": "SERVING_PLAN", "severity": "error", "variable": "vllm_models", "problem": problem}
    assert want in findings([low, QWEN])
    assert not [m for m in errors([dict(low, resources={"limits": {"memory": "53Gi"}}), QWEN]) if "limits" in m]
    assert any(
        "not a Kubernetes memory quantity" in m for m in errors([dict(low, resources={"limits": {"memory": "lots"}})])
    )
    # Measured weights count as well; an unknown size cannot be checked.
    measured = {"served_name": "m", "path": "org/m", "resources": {"limits": {"memory": "8Gi"}}}
    assert any("below the 19Gi" in m for m in errors([measured], weights={"org/m": 11.0}))
    assert not [m for m in errors([measured]) if "limits" in m]


@pytest.mark.parametrize(
    ("text", "size"),
    [("24Gi", 24 * 2**30), ("512Mi", 512 * 2**20), ("100G", 100e9), ("1e9", 1e9), (1073741824, 2**30), ("x", None)],
)
def test_memory_quantities(text, size):
    assert md.quantity_bytes(text) == size


# ---------------------------------------------------------------- item 12: the weights-fit check says what it did


def test_a_model_of_unknown_size_is_named_not_silently_skipped():
    bare = {"served_name": "mystery", "path": "org/mystery"}
    (warning,) = warnings([bare], {"g": {"gpus": 1, "replicas": 1, "memory_mib": 23034}})
    assert warning.startswith("mystery: the fit of its weights in GPU memory was not checked")
    (finding,) = findings([bare], {"g": {"gpus": 1, "replicas": 1, "memory_mib": 23034}})
    assert (finding["code"], finding["severity"], finding["variable"]) == ("MODEL_SIZE", "warning", "vllm_models")
    assert "weights_gib" in warning
    # Not when the size was measured in the seed directory, and never among the errors (plan_problems).
    assert warnings([bare], {"g": {"gpus": 1, "replicas": 1, "memory_mib": 23034}}, weights={"org/mystery": 5.0}) == []
    assert plan.plan_problems([bare], {"g": {"gpus": 1, "replicas": 1, "memory_mib": 23034}}, IMAGE) == []


def test_unknown_gpu_memory_is_one_warning_for_the_site():
    capacity = {"a": {"gpus": 1, "replicas": 1}, "b": {"gpus": 1, "replicas": 1}}
    (warning,) = warnings([dict(QWEN, replicas=1), dict(QWEN, served_name="q2", replicas=1)], capacity)
    assert "qwen2.5-7b and q2" in warning and "GPU memory of a and b" in warning
    assert [f["code"] for f in findings([QWEN], capacity)] == ["GPU_MEMORY"]


def test_the_fit_check_prints_the_limit_and_the_gpu_it_compared_against():
    capacity = dict(SITE, gpu3=dict(SITE["gpu3"], **{"class": "shared-2"}))
    (problem,) = errors([dict(QWEN, weights_gib=30.0, replicas=1)], capacity)
    assert "30.0 GiB of weights over 1 GPU(s) is 30.0 GiB per GPU" in problem
    assert "more than its share of gpu3 (class shared-2) can hold" in problem
    # 46068 MiB x 0.45 = 20.2 GiB, 90% of it for the weights: 18.2 GiB.
    assert (
        "the limit applied is 18.2 GiB of weights per GPU (46068 MiB x gpu_memory_utilization 0.45 = 20.2 GiB"
        in problem
    )
    assert (
        "smallest GPU of the nodes its pods may land on (gpu1: 81559 MiB, gpu2: 81559 MiB, gpu3: 46068 MiB)" in problem
    )
    # With a multi-GPU model in the plan, one-GPU pods keep to the time-sliced node: the only one it may run on.
    (problem,) = errors([LLAMA, dict(QWEN, weights_gib=30.0)], capacity)
    assert "gpu3 is the only node it may run on" in problem
    measured = errors([{"served_name": "m", "path": "org/m"}], capacity, weights={"org/m": 100.0})
    assert any("(measured in model_registry_seed_dir)" in m for m in measured)


# ---------------------------------------------------------------- item 13: tensor parallel


def test_tensor_parallel_against_the_attention_heads():
    (problem,) = errors([dict(LLAMA, tensor_parallel_size=3, replicas=1)], model_configs=CONFIGS)
    assert "tensor_parallel_size 3 does not fit the model's 64 attention heads and 8 key/value heads" in problem
    assert "use 1, 2, 4 or 8" in problem
    assert errors([LLAMA, QWEN], model_configs=CONFIGS) == []
    # Qwen2.5 7B: 28 heads, 4 KV heads: TP 8 does not divide 28; TP 2 and 4 do.
    assert errors([dict(QWEN, tensor_parallel_size=8, replicas=1)], model_configs=CONFIGS)
    assert errors([dict(QWEN, tensor_parallel_size=4, replicas=1)], model_configs=CONFIGS) == []


@pytest.mark.parametrize(
    ("tp", "heads", "kv", "fits"),
    [
        (8, 64, 8, True),
        (8, 32, 4, True),  # more ranks than KV heads: each KV head replicated on 2 ranks
        (4, 32, 1, True),  # multi-query attention
        (4, 24, 6, False),  # 6 KV heads over 4 ranks
        (3, 64, 8, False),
        (2, 40, 40, True),
    ],
)
def test_vllm_head_rule(tp, heads, kv, fits):
    assert plan.tp_fits_heads(tp, heads, kv) is fits


def test_attention_heads_of_a_multimodal_config_come_from_its_text_model():
    config = {"architectures": ["X"], "text_config": {"num_attention_heads": 32, "num_key_value_heads": 8}}
    assert plan.attention_heads(config) == (32, 8)
    assert plan.attention_heads({"num_attention_heads": 12}) == (12, 12)
    assert plan.attention_heads({"hidden_size": 4}) is None


def test_model_configs_are_read_from_the_seed_directory(tmp_path):
    (tmp_path / "org" / "m").mkdir(parents=True)
    (tmp_path / "org" / "m" / "config.json").write_text(json.dumps(CONFIGS[LLAMA["path"]]))
    (tmp_path / "org" / "bad").mkdir()
    (tmp_path / "org" / "bad" / "config.json").write_text("{not json")
    assert md.model_configs(str(tmp_path), ["org/m", "org/bad", "org/none", "../etc"]) == {
        "org/m": CONFIGS[LLAMA["path"]]
    }


def test_tensor_parallel_that_strands_gpus_is_a_warning():
    (warning,) = warnings([dict(LLAMA, tensor_parallel_size=3, replicas=1)])
    assert "tensor_parallel_size 3 does not divide the GPUs of gpu1 (8), gpu2 (8)" in warning
    assert "2 GPUs stay idle on gpu1 and gpu2 each" in warning
    # A one-GPU model that may use the leftovers (no time-sliced node keeps it away) takes the warning away.
    whole = {n: c for n, c in SITE.items() if n != "gpu3"}
    assert warnings([dict(LLAMA, tensor_parallel_size=3, replicas=1), QWEN], whole) == []


def test_tensor_parallel_never_spans_nodes():
    (problem,) = errors([dict(LLAMA, tensor_parallel_size=16, replicas=1)])
    assert "tensor_parallel_size 16 is larger than the GPUs of any node (at most 8): gpu1 and gpu2 have 8" in problem
    assert "pipeline parallel is not supported" in problem
    (problem,) = errors([dict(LLAMA, extra_args=["--pipeline-parallel-size", "2"])])
    assert "pipeline parallel (across GPUs or nodes) is not supported" in problem
    assert errors([dict(LLAMA, extra_args=["--pipeline-parallel-size=1"])]) == []
    assert any("is not a whole number of GPUs" in m for m in errors([dict(LLAMA, tensor_parallel_size=0)]))


def test_replicas_that_fit_the_gpus_but_not_the_nodes():
    capacity = {"a": {"gpus": 6, "replicas": 1}, "b": {"gpus": 2, "replicas": 1}}
    (problem,) = errors([dict(LLAMA, weights_gib=None, replicas=2)], capacity)
    assert "2 replicas x 4 GPUs need 2 places of 4 GPUs each on one node" in problem
    assert "a: 6 GPUs hold 1, b: 2 GPUs hold 0" in problem


# ---------------------------------------------------------------- item 14: one finding per cause


def test_one_tensor_parallel_mistake_is_one_finding():
    """TP 16 on 8-GPU nodes with a time-sliced node: once, not as 'larger than any node', 'needs whole GPUs on one
    node', 'the multi-GPU models need N whole GPUs' and 'the models request N GPUs'."""
    found = errors([dict(LLAMA, tensor_parallel_size=16), QWEN], model_configs=CONFIGS)
    assert len(found) == 1, found
    assert "tensor_parallel_size 16 is larger than the GPUs of any node" in found[0]


def test_the_counts_name_what_each_model_needs_and_what_each_node_has():
    (problem,) = errors([dict(LLAMA, tensor_parallel_size=8, replicas=3), QWEN])
    assert problem.startswith(
        "the multi-GPU models need 24 whole GPUs in all but the nodes without time-slicing have 16"
    )
    assert "llama-3.1-70b: 3 replicas x 8 GPUs" in problem
    assert "the site has 16 whole GPUs (gpu1: 8, gpu2: 8) and 2 GPUs shared by time-slicing, 4 slices" in problem
    assert "(gpu3: 2 GPUs x 2 slices)" in problem
    assert "time-slicing)" not in problem.split("the site has")[0]  # no "cluster has 20 (18 GPU(s) with ..."
    (problem,) = errors([LLAMA, dict(QWEN, replicas=5)])
    assert problem.startswith("the one-GPU models need 5 GPU slices but the time-sliced nodes have 4")
    one_gpu = {"a": {"gpus": 1, "replicas": 2}, "b": {"gpus": 1, "replicas": 1}}
    (problem,) = errors([dict(QWEN, replicas=4)], one_gpu)
    assert problem.startswith("the models request 4 GPUs in all but the cluster has 3 GPU units")
    assert "1 whole GPU (b: 1) and 1 GPU shared by time-slicing, 2 slices (a: 1 GPU x 2 slices)" in problem


def test_the_newcomer_site_plans_cleanly():
    if not (NEWCOMER / "group_vars" / "all" / "main.yml").exists():
        pytest.skip("the newcomer site is not in this tree")
    values = yaml.safe_load((NEWCOMER / "group_vars" / "all" / "main.yml").read_text())
    capacity = {}
    for host in ("gpu1", "gpu2", "gpu3"):
        hv = yaml.safe_load((NEWCOMER / "host_vars" / f"{host}.yml").read_text())
        shared = 2 if hv.get("aiinfra_gpu_class") else 1
        capacity[host] = {
            "gpus": hv["aiinfra_gpu_count"],
            "replicas": shared,
            "memory_mib": hv["aiinfra_gpu_memory_mib"],
        }
    models = [{k: v for k, v in m.items() if k != "placement"} for m in values["vllm_models"]]
    assert plan.plan_findings(models, capacity, IMAGE, severity=True, model_configs=CONFIGS) == []
    sized = {m["served_name"]: m for m in md.filled("vllm", models, IMAGE)}
    assert sized["llama-3.1-70b"]["resources"]["limits"]["memory"] == "160Gi"
    assert sized["qwen2.5-7b"]["shm_size"] == "2Gi"


def test_a_head_count_mistake_does_not_hide_a_gpu_shortage():
    """Two causes, two findings: TP 3 does not fit Llama's heads, and 3 replicas x 3 GPUs exceed the whole GPUs."""
    small = {"a": {"gpus": 4, "replicas": 1}, "b": {"gpus": 4, "replicas": 1}, "s": {"gpus": 1, "replicas": 2}}
    found = errors([dict(LLAMA, tensor_parallel_size=3, replicas=3, weights_gib=None)], small, model_configs=CONFIGS)
    assert len(found) == 2, found
    assert "does not fit the model's 64 attention heads" in found[0]
    assert found[1].startswith(
        "the multi-GPU models need 9 whole GPUs in all but the nodes without time-slicing have 8"
    )


def test_the_nodes_a_model_is_placed_on_are_the_ones_compared():
    """The site plan's models[].nodes (placement) narrow the nodes whose GPU memory the weights are checked against."""
    capacity = dict(SITE, gpu3=dict(SITE["gpu3"], replicas=1))
    placed = dict(QWEN, weights_gib=40.0, replicas=1, nodes=["gpu1", "gpu2"])
    assert errors([placed], capacity) == []
    assert errors([dict(placed, nodes=["gpu3"])], capacity)


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
        (
            [{"served_name": "a", "path": "m", "shutdown_timeout": 0}],
            {"g1": 1},
            "a: shutdown_timeout is 0: a stopping server would abort every request in flight",
        ),
        (
            [{"served_name": "a", "path": "m", "shutdown_timeout": 300, "termination_grace_period": 120}],
            {"g1": 1},
            "a: termination_grace_period 120 is shorter than the preStop sleep (15 s) + shutdown_timeout (300 s)",
        ),
        (
            [{"served_name": "a", "path": "m", "extra_args": ["--shutdown-timeout=5"]}],
            {"g1": 1},
            "a: --shutdown-timeout is set in extra_args or NIM_PASSTHROUGH_ARGS",
        ),
        (
            [{"served_name": "a", "path": "m", "termination_grace_period": 20}],
            {"g1": 1},
            "a: shutdown_timeout is -10",
        ),
    ],
)
def test_impossible_plans_are_rejected(models, nodes, problem):
    problems = plan.plan_problems(models, nodes, "vllm/vllm-openai:v0.6.3", store_paths={"m", "n"})
    assert any(problem in p for p in problems), problems


def test_time_slicing_classes_count_in_the_capacity():
    models = [{"served_name": "a", "path": "m", "replicas": 4}]
    shared, problems = plan.gpu_capacity({"g1": {"gpus": 1, "class": "shared"}}, {"shared": 4})
    assert problems == [] and shared == {"g1": {"gpus": 1, "replicas": 4}}
    assert plan.plan_problems(models, shared, "vllm/vllm-openai:v0.6.3") == []
    half, _problems = plan.gpu_capacity({"g1": {"gpus": 1, "class": ""}}, {"shared": 2}, "shared")
    assert plan.plan_problems(models, half, "vllm/vllm-openai:v0.6.3")
    _cap, problems = plan.gpu_capacity({"g1": {"gpus": 1, "class": "nope"}}, {"shared": 2})
    assert problems and "'nope' is not in gpu_operator_time_slicing_classes" in problems[0]


def test_tensor_parallel_counts_physical_gpus_not_slices():
    """Two slices of one GPU are not two GPUs for tensor parallelism."""
    capacity, _problems = plan.gpu_capacity({"g1": {"gpus": 1, "class": "s"}}, {"s": 4})
    problems = plan.plan_problems([{"served_name": "tp2", "path": "m", "tensor_parallel_size": 2}], capacity, "i:1")
    assert any("tensor_parallel_size 2 is larger than the GPUs of any node (at most 1)" in p for p in problems)


def test_nim_plan_rules():
    nim = {"served_name": "n", "image": NIM_IMAGE, "gpus": 1, "replicas": 2, "max_replicas": 5}
    problems = plan.plan_problems([], {"g1": 2, "g2": 2}, "i:1", nim_models=[nim])
    assert any("max_replicas 5 x 1 GPU(s) is more than the cluster's 4" in p for p in problems)
    assert plan.plan_problems([], {"g1": 2, "g2": 2}, "i:1", nim_models=[dict(nim, max_replicas=4)]) == []
    single = plan.plan_problems([], {"g1": 2}, "i:1", nim_models=[dict(nim, replicas=1, max_replicas=1)])
    assert any("needs at least 2 replicas" in p for p in single)


SLICED = {"gpu-a": {"gpus": 2, "replicas": 2}, "gpu-b": {"gpus": 2, "replicas": 1}}


@pytest.mark.parametrize(
    ("models", "capacity", "fragment"),
    [
        # A tensor-parallel model fits the node without time-slicing...
        ([{"served_name": "tp", "path": "m", "tensor_parallel_size": 2}], SLICED, None),
        # ...but not when every node slices its GPUs: the device plugin would refuse two slices.
        (
            [{"served_name": "tp", "path": "m", "tensor_parallel_size": 2}],
            {"gpu-a": {"gpus": 2, "replicas": 2}},
            "needs 2 whole GPUs on one node",
        ),
        # Two tensor-parallel replicas need four whole GPUs; the unsliced node has two.
        (
            [{"served_name": "tp", "path": "m", "tensor_parallel_size": 2, "replicas": 2}],
            SLICED,
            "need 4 whole GPUs in all but the nodes without time-slicing have 2",
        ),
        # An explicit 0.9 on a GPU shared two ways: the second pod on the GPU fails at start.
        ([{"served_name": "q", "path": "m", "gpu_memory_utilization": 0.9}], SLICED, "set it to at most 0.5"),
        ([{"served_name": "q", "path": "m", "gpu_memory_utilization": 0.45}], SLICED, None),
        ([{"served_name": "q", "path": "m", "gpu_memory_utilization": "lots"}], SLICED, "not a number between"),
        # Weights against the memory share: the notes' 35B model (65 GiB in bf16) on a 24 GB L4 at TP 1.
        (
            [{"served_name": "n", "path": "m", "weights_gib": 65.2}],
            {"l4": {"gpus": 1, "replicas": 1, "memory_mib": 23034}},
            "65.2 GiB of weights over 1 GPU(s) is 65.2 GiB per GPU",
        ),
        (
            [{"served_name": "n", "path": "m", "weights_gib": 14.2}],
            {"l4": {"gpus": 1, "replicas": 1, "memory_mib": 23034}},
            None,
        ),
        # The same 14.2 GiB on an L4 sliced two ways: its share is 0.45 x 22.5 GiB.
        (
            [{"served_name": "n", "path": "m", "weights_gib": 14.2}],
            {"l4": {"gpus": 1, "replicas": 2, "memory_mib": 23034}},
            "more than its share of l4 can hold",
        ),
        # Split over 4 A100s it fits.
        (
            [{"served_name": "n", "path": "m", "weights_gib": 65.2, "tensor_parallel_size": 4}],
            {"a100": {"gpus": 4, "replicas": 1, "memory_mib": 81920}},
            None,
        ),
        # Unknown GPU memory: nothing to compare with, no refusal.
        ([{"served_name": "n", "path": "m", "weights_gib": 65.2}], {"x": {"gpus": 1, "replicas": 1}}, None),
    ],
)
def test_plans_that_time_slicing_or_gpu_memory_cannot_hold_are_refused(models, capacity, fragment):
    problems = plan.plan_problems(models, capacity, IMAGE)
    if fragment is None:
        assert problems == []
    else:
        assert any(fragment in p for p in problems), problems


def test_weights_measured_in_the_seed_directory_are_checked():
    l4 = {"l4": {"gpus": 1, "replicas": 1, "memory_mib": 23034}}
    models = [{"served_name": "n", "path": "nvidia/big"}]
    assert plan.plan_problems(models, l4, IMAGE, weights={"nvidia/big": 30.0})
    assert plan.plan_problems(models, l4, IMAGE, weights={"nvidia/big": 10.0}) == []
    # A declared size wins over the measured one.
    assert plan.plan_problems([dict(models[0], weights_gib=10)], l4, IMAGE, weights={"nvidia/big": 30.0}) == []


def test_one_gpu_demand_beyond_the_slices_is_refused_when_whole_gpus_are_reserved():
    capacity = {"gpu-a": {"gpus": 1, "replicas": 2}, "gpu-b": {"gpus": 2, "replicas": 1}}
    models = [
        {"served_name": "tp", "path": "m", "tensor_parallel_size": 2},
        {"served_name": "one", "path": "n", "replicas": 3},
    ]
    problems = plan.plan_problems(models, capacity, IMAGE)
    assert any("the one-GPU models need 3 GPU slices but the time-sliced nodes have 2" in p for p in problems)
    assert plan.plan_problems([models[0], dict(models[1], replicas=2)], capacity, IMAGE) == []
