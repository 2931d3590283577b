import subprocess
import sys

import pytest

from lab.live import cluster, kubebuild

GOMOD = """module k8s.io/kubernetes

go 1.24.0

require (
\tgithub.com/blang/semver/v4 v4.0.0
\tgo.etcd.io/etcd/client/v3 v3.5.21
\tk8s.io/api v0.0.0
)

require go.etcd.io/etcd/server/v3 v3.5.21 // indirect

replace (
\tk8s.io/api => ./staging/src/k8s.io/api
\tgithub.com/some/fork => github.com/other/fork v1.2.3
)

replace go.etcd.io/etcd => ./FORBIDDEN_DEPENDENCY
"""


@pytest.mark.parametrize(
    ("k3s", "kube", "staging"),
    [("v1.33.5+k3s1", "v1.33.5", "v0.33.5"), ("v1.36.3+k3s2", "v1.36.3", "v0.36.3")],
)
def test_kubernetes_version_of_a_k3s_tag(k3s, kube, staging):
    assert kubebuild.kubernetes_version(k3s) == kube
    assert kubebuild.staging_version(kube) == staging


@pytest.mark.parametrize("bad", ["v1.33.5", "1.33.5+k3s1", "latest", "v1.33+k3s1", ""])
def test_a_non_k3s_tag_is_refused_by_name(bad):
    with pytest.raises(kubebuild.BuildError, match="not a K3s release tag"):
        kubebuild.kubernetes_version(bad)


def test_gomod_blocks_and_single_lines_are_read():
    go, requires, replaces = kubebuild.parse_gomod(GOMOD)
    assert go == "1.24.0"
    assert requires["go.etcd.io/etcd/server/v3"] == "v3.5.21"
    assert requires["k8s.io/api"] == "v0.0.0"
    assert replaces["k8s.io/api"] == "./staging/src/k8s.io/api"


def test_local_replaces_become_published_versions():
    out = kubebuild.published_replaces(GOMOD, "v0.33.5")
    assert out == {"k8s.io/api": "k8s.io/api v0.33.5", "github.com/some/fork": "github.com/other/fork v1.2.3"}
    with pytest.raises(kubebuild.BuildError, match="no version known"):
        kubebuild.published_replaces(GOMOD)


def test_the_version_flags_name_the_release():
    flags = kubebuild.version_ldflags("v1.33.5")
    assert "-X k8s.io/component-base/version.gitVersion=v1.33.5" in flags
    assert "-X k8s.io/client-go/pkg/version.gitMinor=33" in flags


def test_the_cache_key_follows_versions_and_recipe():
    key = kubebuild.recipe_key("v1.33.5", "v3.5.21", "go1.26.8")
    assert key.startswith("v1.33.5-")
    assert key == kubebuild.recipe_key("v1.33.5", "v3.5.21", "go1.26.8")
    assert key != kubebuild.recipe_key("v1.33.5", "v3.5.22", "go1.26.8")


@pytest.mark.parametrize(
    ("stderr", "line"),
    [
        (
            "go: k8s.io/kubernetes@v1.99.0: reading https://proxy.golang.org/...: 403 Forbidden\n"
            "\tserver response: This module version is not available.\n",
            "This module version is not available.",
        ),
        ("go: downloading x\ngo: unknown revision v9\n", "go: unknown revision v9"),
    ],
)
def test_one_line_of_a_go_failure(stderr, line):
    assert kubebuild.proxy_error(stderr) == line


@pytest.mark.parametrize("version", ["not-a-tag", "v1.99.0+k3s1"])
def test_bad_versions_give_one_clear_error_and_no_stack(root, version):
    proc = subprocess.run(
        [sys.executable, "-m", "lab.live.kubebuild", "build", "--k3s-version", version],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 1
    assert proc.stderr.startswith("[kubebuild] ERROR:") and proc.stderr.count("\n") == 1, proc.stderr
    assert "Traceback" not in proc.stderr and "goroutine" not in proc.stderr


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
