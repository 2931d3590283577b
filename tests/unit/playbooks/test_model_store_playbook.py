"""model_registry's prune (tasks/prune.yml), run for real on this machine (local connection) against a local HTTP
server standing in for the Kubernetes API (loopback only): the pods it serves are made by the collection's vLLM
builder. A model no inventory list names is removed, one a pod of this node uses is held, a second run changes
nothing, check mode touches nothing, and an API that cannot be read, or a node the cluster does not know, stops the
prune before anything is removed."""

import copy
import hashlib
import os
import threading
from http.server import ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import pytest
import yaml
from conftest import JsonHandler, run_playbook, write_inventory

from ansible_collections.aiinfra.k3s.plugins.module_utils.k8s import model_servers as wl
from ansible_collections.aiinfra.k3s.plugins.module_utils.node import model_weights as mw

KEPT, USED, DROPPED = "keep/kept-model", "org/in-use", "org/dropped"
RESOURCES = {
    "kind": "APIResourceList",
    "apiVersion": "v1",
    "groupVersion": "v1",
    "resources": [
        {"name": "nodes", "singularName": "node", "namespaced": False, "kind": "Node", "verbs": ["get", "list"]},
        {"name": "pods", "singularName": "pod", "namespaced": True, "kind": "Pod", "verbs": ["get", "list"]},
    ],
}


def publish(store, path):
    """A published model as model_weights leaves it (its own functions write SHA256SUMS and the manifest)."""
    model = os.path.join(str(store), path)
    os.makedirs(model)
    data = path.encode() * 4096
    with open(os.path.join(model, "model.safetensors"), "wb") as handle:
        handle.write(data)
    entries = [{"path": "model.safetensors", "sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}]
    recs = {"model.safetensors": mw.record(entries[0], os.lstat(os.path.join(model, "model.safetensors")), "now")}
    mw.write_file_atomic(os.path.join(model, mw.SUMS), mw.sums_text(entries).encode())
    mw.write_json(os.path.join(model, mw.MANIFEST), mw.manifest_data(entries, recs, "url http://m/" + path, "r1"))


def vllm_pod(path, node, name):
    """A running pod of the vLLM Deployment the collection builds for a model of `path`, scheduled on node."""
    model = {"served_name": name, "path": path, "memory_utilization": 0.9, "port": 8000}
    params = {
        "image": "vllm/vllm-openai:v0.34.0",
        "store_mount": "/data/models",
        "store": {"storage_class": "nvidia-ai-store", "size": "1Gi"},
        "shm_size": "1Gi",
        "resources": {},
    }
    site = {"namespace": "ai-serving", "gpu_node_selector": {}, "gpu_toleration_key": "nvidia.com/gpu"}
    (deployment,) = [o for o in wl.vllm_manifests([model], params, site) if o["kind"] == "Deployment"]
    template = copy.deepcopy(deployment["spec"]["template"])
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name + "-abc12", "namespace": "ai-serving", "labels": template["metadata"]["labels"]},
        "spec": dict(template["spec"], nodeName=node),
        "status": {"phase": "Running"},
    }


class FakeApi(JsonHandler):
    """Discovery, GET of a Node, and the Pod list with its spec.nodeName field selector, as the API server answers."""

    nodes = {}
    pods = []
    requests = []

    def do_GET(self):
        url = urlparse(self.path)
        query = parse_qs(url.query)
        FakeApi.requests.append((url.path, query))
        if url.path == "/api":
            return self.answer(200, {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []})
        if url.path == "/apis":
            return self.answer(200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": []})
        if url.path == "/api/v1":
            return self.answer(200, RESOURCES)
        if url.path == "/version":
            return self.answer(200, {"major": "1", "minor": "36", "gitVersion": "v1.36.0"})
        if url.path.startswith("/api/v1/nodes/"):
            name = url.path.rsplit("/", 1)[1]
            if name in FakeApi.nodes:
                return self.answer(200, FakeApi.nodes[name])
            return self.answer(
                404, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404}
            )
        if url.path == "/api/v1/pods":
            items = FakeApi.pods
            for selector in query.get("fieldSelector", []):
                key, _eq, value = selector.partition("=")
                assert key == "spec.nodeName", selector
                items = [p for p in items if p["spec"].get("nodeName") == value]
            return self.answer(200, {"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": items})
        return self.answer(404, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 404})


@pytest.fixture
def api(tmp_path):
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeApi)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    FakeApi.nodes = {"gpu-1": {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-1"}}}
    FakeApi.pods = [vllm_pod(USED, "gpu-1", "used"), vllm_pod(DROPPED, "gpu-2", "elsewhere")]
    FakeApi.requests = []
    yield kubeconfig(tmp_path, server.server_address[1])
    server.shutdown()
    server.server_close()


def kubeconfig(tmp_path, port):
    path = tmp_path / ("kubeconfig-%d" % port)
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "test",
                "clusters": [{"name": "test", "cluster": {"server": "http://127.0.0.1:%d" % port}}],
                "users": [{"name": "test", "user": {"token": "not-a-secret"}}],
                "contexts": [{"name": "test", "context": {"cluster": "test", "user": "test"}}],
            }
        )
    )
    return path


@pytest.fixture
def store(tmp_path):
    root = tmp_path / "store"
    for path in (KEPT, USED, DROPPED):
        publish(root, path)
    return root


def prune(tmp_path, store, kubeconfig, check=False, host="gpu-1"):
    inventory = write_inventory(
        tmp_path / "inv",
        {
            "all": {
                "hosts": {
                    host: {"ansible_connection": "local", "ansible_python_interpreter": "{{ ansible_playbook_python }}"}
                }
            }
        },
        {
            "model_registry_path": str(store),
            "model_registry_kubeconfig": str(kubeconfig),
            "model_registry_prune": True,
            "model_registry_seed_models": [KEPT],
            "model_registry_sources": [],
            "model_registry_preseeded": [],
            "model_registry_expected_models": [],
        },
    )
    playbook = tmp_path / "prune.yml"
    playbook.write_text(
        yaml.safe_dump(
            [
                {
                    "hosts": "all",
                    "gather_facts": False,
                    "tasks": [
                        {
                            "name": "Prune the model store",
                            "ansible.builtin.include_role": {
                                "name": "aiinfra.k3s.model_registry",
                                "tasks_from": "prune",
                            },
                        }
                    ],
                }
            ]
        )
    )
    return run_playbook(str(playbook), inventory, extra=["--check"] if check else [])


def task_result(result, host, name):
    for play in result["plays"]:
        for task in play["tasks"]:
            if name in task["task"]["name"] and host in task["hosts"]:
                return task["hosts"][host]
    raise AssertionError("no task %r ran" % name)


def snapshot(root):
    return sorted(
        os.path.relpath(os.path.join(top, n), root) for top, dirs, names in os.walk(root) for n in dirs + names
    )


@pytest.mark.slow
def test_prune_removes_the_dropped_model_holds_the_used_one_and_is_idempotent(tmp_path, store, api):
    before = snapshot(store)
    proc, result = prune(tmp_path, store, api, check=True)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert snapshot(store) == before
    checked = task_result(result, "gpu-1", "Remove the models")
    assert [r["path"] for r in checked["removed"]] == [DROPPED] and checked["held"] == [USED]
    assert "would remove 1 model(s)" in task_result(result, "gpu-1", "Report what was removed")["msg"][0]

    proc, result = prune(tmp_path, store, api)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert result["stats"]["gpu-1"]["changed"] == 1
    assert not (store / DROPPED).exists()  # another node's pod uses it: this node's store does not need it
    assert (store / USED / mw.MANIFEST).is_file() and (store / KEPT / mw.MANIFEST).is_file()
    report = task_result(result, "gpu-1", "Report what was removed")["msg"]
    assert report[0].startswith("gpu-1: model store %s: removed 1 model(s)" % store) and DROPPED in report[0]
    assert report[1] == "held, a pod on this node uses them: %s (pods: ai-serving/used-abc12)" % USED
    # The pods were asked for with the node's field selector (in pages), never all of them.
    pod_lists = [query for path, query in FakeApi.requests if path == "/api/v1/pods"]
    assert pod_lists and all(query.get("fieldSelector") == ["spec.nodeName=gpu-1"] for query in pod_lists)

    proc, result = prune(tmp_path, store, api)
    assert proc.returncode == 0 and result["stats"]["gpu-1"]["changed"] == 0, proc.stdout[-3000:]

    FakeApi.pods = []  # the pod is gone: its model goes too
    proc, result = prune(tmp_path, store, api)
    assert proc.returncode == 0 and result["stats"]["gpu-1"]["changed"] == 1, proc.stdout[-3000:]
    assert not (store / "org").exists() and (store / KEPT).is_dir()


@pytest.mark.slow
def test_an_api_that_cannot_be_read_stops_the_prune(tmp_path, store, api):
    closed = kubeconfig(tmp_path, 1)  # nothing listens on port 1
    before = snapshot(store)
    proc, result = prune(tmp_path, store, closed)
    assert proc.returncode != 0
    msg = " ".join(str(task_result(result, "gpu-1", "Refuse to prune")["msg"]).split())
    assert "gpu-1: the model store was NOT pruned" in msg and "model_registry_kubeconfig (%s)" % closed in msg
    assert "refused" in msg.lower() and "Fix:" in msg  # the API client's own reason
    assert snapshot(store) == before

    # A node the cluster does not know by this name: its pods cannot be listed, so nothing is removed.
    proc, result = prune(tmp_path, store, api, host="gpu-9")
    assert proc.returncode != 0
    msg = " ".join(str(task_result(result, "gpu-9", "Refuse to prune")["msg"]).split())
    assert "the cluster has no node named gpu-9" in msg
    assert snapshot(store) == before
