"""plugins/module_utils/k8s/model_usage.py (the models_in_use filter): the store paths the pods of one node use, read
from pods made of the Deployments the collection's own builders write (vllm_manifests, nim_manifests), so a change
in how a server names its model shows here."""

import copy

import pytest
import yaml
from conftest import ROOT

from ansible_collections.aiinfra.k3s.plugins.filter.models_in_use import FilterModule
from ansible_collections.aiinfra.k3s.plugins.module_utils.k8s import model_servers as wl
from ansible_collections.aiinfra.k3s.plugins.module_utils.k8s.model_usage import WHOLE_STORE, models_in_use

VLLM_MOUNT = yaml.safe_load((ROOT / "roles" / "vllm" / "defaults" / "main.yml").read_text())["vllm_store_mount"]
NIM_MOUNT = yaml.safe_load((ROOT / "roles" / "nim" / "defaults" / "main.yml").read_text())["nim_store_mount"]
SITE = {"namespace": "ai-serving", "gpu_node_selector": {"ai-workload": "true"}, "gpu_toleration_key": "nvidia.com/gpu"}
STORE = {"storage_class": "nvidia-ai-store", "size": "500Gi"}


def vllm_deployments(paths, mount=VLLM_MOUNT):
    models = [
        {"served_name": "m%d" % i, "path": path, "memory_utilization": 0.9, "port": 8000}
        for i, path in enumerate(paths)
    ]
    params = {
        "image": "vllm/vllm-openai:v0.34.0",
        "store_mount": mount,
        "store": STORE,
        "shm_size": "8Gi",
        "resources": {},
        "log_level": "INFO",
    }
    return [o for o in wl.vllm_manifests(models, params, SITE) if o["kind"] == "Deployment"]


def nim_deployment(env=None):
    nim = {"served_name": "llama-nim", "image": "nvcr.io/nim/meta/llama-3.1-8b-instruct:1.8.4", "env": env or {}}
    params = {
        "store_mount": NIM_MOUNT,
        "store": STORE,
        "shm_size": "16Gi",
        "resources": {},
        "ngc_secret": "ngc-api",
        "pull_secret": "ngc-registry",
        "max_replicas": 4,
        "metric": {"cpu": 70},
        "store_read_only": True,
    }
    (deployment,) = [o for o in wl.nim_manifests([nim], params, SITE) if o["kind"] == "Deployment"]
    return deployment


def pod(deployment, node, phase="Running", suffix="x1"):
    """A pod of the Deployment as the API returns it: the template's spec, scheduled on node."""
    template = copy.deepcopy(deployment["spec"]["template"])
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "%s-%s" % (deployment["metadata"]["name"], suffix),
            "namespace": deployment["metadata"]["namespace"],
            "labels": template["metadata"]["labels"],
        },
        "spec": dict(template["spec"], nodeName=node),
        "status": {"phase": phase},
    }


def test_vllm_pods_use_the_model_they_name_on_their_node_only():
    qwen, llama, other = vllm_deployments(["Qwen/Qwen2.5-7B-Instruct", "meta/llama-3-8b", "org/elsewhere"])
    pods = [pod(qwen, "gpu-1"), pod(llama, "gpu-1", "Pending"), pod(other, "gpu-2")]
    assert models_in_use(pods, "gpu-1") == ["Qwen/Qwen2.5-7B-Instruct", "meta/llama-3-8b"]
    assert models_in_use(pods, "gpu-2") == ["org/elsewhere"]
    assert models_in_use(pods, "gpu-3") == []
    assert models_in_use(pods, "gpu-1", by_pod=True) == {
        "ai-serving/vllm-m0-x1": ["Qwen/Qwen2.5-7B-Instruct"],
        "ai-serving/vllm-m1-x1": ["meta/llama-3-8b"],
    }


@pytest.mark.parametrize("phase, used", [("Succeeded", False), ("Failed", False), ("Unknown", True), (None, True)])
def test_finished_pods_use_nothing(phase, used):
    (deployment,) = vllm_deployments(["meta/llama-3-8b"])
    assert models_in_use([pod(deployment, "gpu-1", phase)], "gpu-1") == (["meta/llama-3-8b"] if used else [])


def test_a_pod_being_deleted_still_uses_its_model():
    (deployment,) = vllm_deployments(["meta/llama-3-8b"])
    terminating = pod(deployment, "gpu-1")
    terminating["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert models_in_use([terminating], "gpu-1") == ["meta/llama-3-8b"]


def test_the_builders_model_argument_is_what_is_found():
    """vllm_args' --model value, and the --model=X form of the same, give the model's path relative to the mount,
    wherever the role mounts the store."""
    for mount in (VLLM_MOUNT, "/models/", "/srv/store"):
        (deployment,) = vllm_deployments(["meta/llama-3-8b"], mount)
        args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        assert args[args.index("--model") + 1].startswith(mount.rstrip("/") + "/")
        assert models_in_use([pod(deployment, "n")], "n") == ["meta/llama-3-8b"]
        joined = pod(deployment, "n")
        container = joined["spec"]["containers"][0]
        at = container["args"].index("--model")
        container["args"][at : at + 2] = ["--model=" + container["args"][at + 1]]
        assert models_in_use([joined], "n") == ["meta/llama-3-8b"]


@pytest.mark.parametrize(
    "args, expected",
    [
        (["--model", "{m}/org/a/"], ["org/a"]),  # a trailing slash
        (["--model", "{m}//org//a"], ["org/a"]),
        (["--model", "{m}/org/a", "--tokenizer", "{m}/org/tok"], ["org/a", "org/tok"]),
        (["--model", "{m}/org/a", "--chat-template={m}/org/b/template.jinja"], ["org/a", "org/b/template.jinja"]),
        (["--model", "{m}/../etc/a"], [WHOLE_STORE]),  # leaves the mount: names nothing there, so all of it
        (["--model", "{m}-other/org/a"], [WHOLE_STORE]),  # another directory that starts with the same name
        (["--model", "org/a"], [WHOLE_STORE]),  # relative: cannot be told
        (["--download-dir", "{m}"], [WHOLE_STORE]),
    ],
)
def test_what_a_container_names_under_the_mount(args, expected):
    (deployment,) = vllm_deployments(["x"])
    p = pod(deployment, "gpu-1")
    p["spec"]["containers"][0]["args"] = [a.format(m=VLLM_MOUNT) for a in args]
    assert models_in_use([p], "gpu-1") == expected


def test_a_shell_command_line_names_its_model():
    (deployment,) = vllm_deployments(["x"])
    p = pod(deployment, "gpu-1")
    p["spec"]["containers"][0]["args"] = []
    p["spec"]["containers"][0]["command"] = ["/bin/sh", "-c", "exec vllm serve '%s/org/a' --port 8000" % VLLM_MOUNT]
    assert models_in_use([p], "gpu-1") == ["org/a"]


def test_a_sub_path_mount_is_relative_to_its_directory():
    (deployment,) = vllm_deployments(["x"])
    p = pod(deployment, "gpu-1")
    container = p["spec"]["containers"][0]
    mount = next(m for m in container["volumeMounts"] if m["name"] == "models")
    mount.update(mountPath="/model", subPath="org/a")
    container["args"] = ["--model", "/model", "--tokenizer", "/model/tokenizer"]
    assert models_in_use([p], "gpu-1") == ["org/a", "org/a/tokenizer"]
    mount["subPathExpr"] = "$(POD_NAME)"
    assert models_in_use([p], "gpu-1") == [WHOLE_STORE]


def test_nim_reads_the_whole_store_as_its_cache():
    """nim_manifests sets NIM_CACHE_PATH to the mount and names no model: NIM may read any directory of the store."""
    deployment = nim_deployment()
    env = {e["name"]: e.get("value") for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["NIM_CACHE_PATH"] == NIM_MOUNT
    pods = [pod(deployment, "gpu-1", suffix="a"), pod(deployment, "gpu-2", suffix="b")]
    assert models_in_use(pods, "gpu-1") == [WHOLE_STORE]
    assert models_in_use(pods, "gpu-1", by_pod=True) == {"ai-serving/nim-llama-nim-a": [WHOLE_STORE]}


def test_a_model_named_in_the_environment_counts():
    """A NIM given a model directory of the store (NIM_MODEL_NAME, through the model's env) uses that one too."""
    deployment = nim_deployment({"NIM_MODEL_NAME": NIM_MOUNT + "/meta/llama-3-8b"})
    assert models_in_use([pod(deployment, "gpu-1")], "gpu-1") == [WHOLE_STORE, "meta/llama-3-8b"]


def test_pods_without_the_store_and_containers_that_do_not_mount_it_use_nothing():
    (deployment,) = vllm_deployments(["org/a"])
    p = pod(deployment, "gpu-1")
    sidecar = {"name": "sidecar", "image": "busybox", "args": ["sleep", "infinity"], "volumeMounts": []}
    p["spec"]["containers"].append(sidecar)
    assert models_in_use([p], "gpu-1") == ["org/a"]  # the sidecar names nothing and does not mount the store
    gateway = {
        "metadata": {"name": "litellm-1", "namespace": "ai-serving"},
        "spec": {"nodeName": "gpu-1", "containers": [{"name": "l", "args": ["--model", VLLM_MOUNT + "/org/b"]}]},
        "status": {"phase": "Running"},
    }
    assert models_in_use([gateway, None, "junk"], "gpu-1") == []
    assert models_in_use(None, "gpu-1") == []


def test_a_container_that_mounts_the_store_and_names_nothing_may_read_all_of_it():
    (deployment,) = vllm_deployments(["org/a"])
    p = pod(deployment, "gpu-1")
    p["spec"]["containers"][0]["args"] = ["--port", "8000"]
    assert models_in_use([p], "gpu-1") == [WHOLE_STORE]


def test_the_filter_is_the_function():
    (deployment,) = vllm_deployments(["org/a"])
    usage = FilterModule().filters()["models_in_use"]
    assert usage([pod(deployment, "gpu-1")], "gpu-1") == ["org/a"]
    assert usage([pod(deployment, "gpu-1")], "gpu-1", True) == {"ai-serving/vllm-m0-x1": ["org/a"]}
