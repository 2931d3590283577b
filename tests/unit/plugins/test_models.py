"""plugins/module_utils/plan/models.py: per-model defaults and the model paths the store accepts."""

import pytest

from ansible_collections.aiinfra.k3s.plugins.module_utils.plan import models

# Issue 28, item 8: a model path is joined to the store on the nodes and to the seed directory on the controller.
REFUSED = [
    "",
    "  ",
    None,
    3,
    "/etc",
    "/data/model-registry/org/m",
    "~root/m",
    "..",
    "../x",
    "org/../../x",
    "org/..",
    "./org/m",
    "org/./m",
    "org/m/.",
    "org\\..\\x",
    "org/m\n",
    "org/m\x00",
]
ACCEPTED = ["org/m", "Qwen/Qwen2.5-7B-Instruct", "org/m.v2", "org/..m", "m..", "...", "org/m/", "a/b/c"]


@pytest.mark.parametrize("path", REFUSED, ids=repr)
def test_paths_outside_the_store_are_refused(path):
    assert models.store_path_error(path)


@pytest.mark.parametrize("path", ACCEPTED)
def test_paths_inside_the_store_pass(path):
    assert models.store_path_error(path) is None


def test_filling_is_idempotent():
    once = models.filled("vllm", [{"served_name": "m", "path": "p"}], "img:1")
    assert models.filled("vllm", once, "other:2") == once


def test_sizes_are_filled_once_from_the_weights():
    """Issue 29, item 7: a model of known size gets resources and /dev/shm from its weights and tensor parallel."""
    once = models.filled("vllm", [{"served_name": "m", "path": "p", "tensor_parallel_size": 2}], "img:1", {"p": 30.0})
    assert once[0]["resources"] == {
        "requests": {"cpu": "6", "memory": "27Gi"},
        "limits": {"cpu": "12", "memory": "46Gi"},
    }
    assert once[0]["shm_size"] == "4Gi"
    assert models.filled("vllm", once, "img:1", {"p": 99.0}) == once


@pytest.mark.parametrize("value", [None, "lots", True, -1, float("nan")])
def test_a_size_that_is_no_size_derives_nothing(value):
    (model,) = models.filled("vllm", [{"served_name": "m", "path": "p", "weights_gib": value}], "img:1")
    assert "resources" not in model and "shm_size" not in model


def test_the_memory_share_follows_the_slices_of_a_shared_gpu():
    assert models.memory_utilization({}, 1) == 0.9
    assert models.memory_utilization({}, 2) == 0.45
    assert models.memory_utilization({}, 3) == 0.3
    assert models.memory_utilization({"gpu_memory_utilization": 0.8}, 4) == 0.8
    assert models.gpu_share(1, [1, 2, 4]) == 4
    assert models.gpu_share(2, [1, 2, 4]) == 1
