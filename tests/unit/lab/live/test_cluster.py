"""lab/live/cluster.py's pure functions: the inventory's nodes, the kwok Node objects, the token file."""

from lab.live import cluster

INVENTORY = {
    "_meta": {
        "hostvars": {
            "cp-1": {"aiinfra_server_group": "servers", "aiinfra_gpu_group": "gpus", "aiinfra_agent_group": "agents"},
            "gpu-1": {
                "aiinfra_gpu_count": 2,
                "aiinfra_gpu_class": "shared",
                "gpu_operator_time_slicing_classes": {"shared": 4},
            },
            "gpu-2": {"aiinfra_gpu_product": "NVIDIA-H200", "aiinfra_gpu_memory_mib": 143771},
            "cpu-1": {},
        }
    },
    "all": {"children": ["servers", "agents"]},
    "servers": {"hosts": ["cp-1"]},
    "agents": {"hosts": ["gpu-1", "gpu-2", "cpu-1"], "children": ["gpus"]},
    "gpus": {"hosts": ["gpu-1", "gpu-2"]},
}


def test_inventory_nodes_follow_the_group_variables_and_host_vars():
    nodes = {n["name"]: n for n in cluster.inventory_nodes(INVENTORY)}
    assert list(nodes) == ["cp-1", "gpu-1", "gpu-2", "cpu-1"]
    assert nodes["cp-1"] == {"name": "cp-1", "server": True, "gpu": False}
    assert (nodes["gpu-1"]["count"], nodes["gpu-1"]["replicas"]) == (2, 4)
    assert (nodes["gpu-2"]["product"], nodes["gpu-2"]["memory_mib"]) == ("NVIDIA-H200", 143771)
    assert nodes["cpu-1"]["gpu"] is False


def test_kwok_nodes_carry_what_the_gpu_operator_would_set_and_nothing_the_collection_sets():
    nodes = {n["name"]: n for n in cluster.inventory_nodes(INVENTORY)}
    shared = cluster.node_object(nodes["gpu-1"])
    labels = shared["metadata"]["labels"]
    assert shared["metadata"]["annotations"] == {"kwok.x-k8s.io/node": "fake"}
    assert shared["status"]["capacity"]["nvidia.com/gpu"] == "8"  # 2 GPUs x 4 time-slices
    assert (labels["nvidia.com/gpu.count"], labels["nvidia.com/gpu.replicas"]) == ("2", "4")
    assert labels["nvidia.com/gpu.product"].endswith("-SHARED")
    assert "ai-workload" not in labels and "taints" not in shared.get("spec", {})
    server = cluster.node_object(nodes["cp-1"])
    assert "nvidia.com/gpu" not in server["status"]["capacity"]
    assert server["metadata"]["labels"]["node-role.kubernetes.io/control-plane"] == "true"


def test_token_file_gives_groups_only_where_set():
    text = cluster.token_file({"admin": "a" * 8, "system:kube-scheduler": "b" * 8})
    assert text.splitlines() == [
        'aaaaaaaa,admin,admin,"system:masters"',
        "bbbbbbbb,system:kube-scheduler,system:kube-scheduler",
    ]
