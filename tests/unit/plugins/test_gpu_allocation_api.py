"""gpu_allocation_info reading the API for real: a local HTTP server (loopback only) serves recorded
List responses page by page with `continue` tokens; the module runs as Ansible runs it."""

import json
import os
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import pytest
import yaml
from conftest import DATA, ansible_env, exec_credential_user, run_module, tool

MODULE = "aiinfra.k3s.gpu_allocation_info"
SNAPSHOT = next(
    c for c in yaml.safe_load((DATA / "gpu_cluster.yml").read_text())["cases"] if c["id"] == "non-gpu-pod-on-gpu-node"
)


class RecordedApi(BaseHTTPRequestHandler):
    """Serves /api/v1/nodes and /api/v1/pods in pages of `limit`, like the API server does."""

    requests = []

    def do_GET(self):
        url = urlparse(self.path)
        query = parse_qs(url.query)
        RecordedApi.requests.append((url.path, query))
        items = {"/api/v1/nodes": SNAPSHOT["nodes"]["items"], "/api/v1/pods": SNAPSHOT["pods"]["items"]}.get(url.path)
        if items is None:
            self.send_error(404)
            return
        limit = int(query.get("limit", ["500"])[0])
        start = int(query.get("continue", ["0"])[0])
        page = items[start : start + limit]
        meta = {"resourceVersion": "4242"}
        if start + limit < len(items):
            meta["continue"] = str(start + limit)
        body = json.dumps({"apiVersion": "v1", "kind": "List", "metadata": meta, "items": page}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def api_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), RecordedApi)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    RecordedApi.requests = []
    yield server
    server.shutdown()
    server.server_close()


def kubeconfig(tmp_path, port):
    path = tmp_path / "kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "test",
                "clusters": [{"name": "test", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
                "users": [{"name": "test", "user": {"token": "not-a-secret"}}],
                "contexts": [{"name": "test", "context": {"cluster": "test", "user": "test"}}],
            }
        )
    )
    return path


@pytest.mark.slow
def test_api_pagination_one_list_per_kind(api_server, tmp_path):
    port = api_server.server_address[1]
    rc, result = run_module(
        MODULE,
        {
            "kubeconfig": str(kubeconfig(tmp_path, port)),
            "page_size": 1,
            "expected_gpus": {"gx10-db4d": 1},
            "fail_on": [],
        },
    )
    assert rc == 0, result.get("msg")
    assert result["source"] == {"type": "api", "pages": {"nodes": 2, "pods": 3}}
    paths = [request[0] for request in RecordedApi.requests]
    assert paths == ["/api/v1/nodes"] * 2 + ["/api/v1/pods"] * 3  # never one call per node
    assert [q.get("continue") for p, q in RecordedApi.requests if p == "/api/v1/pods"] == [None, ["1"], ["2"]]
    assert all(query["limit"] == ["1"] for _path, query in RecordedApi.requests)
    assert [f["code"] for f in result["findings"]] == ["NON_GPU_POD_ON_GPU_NODE"]


@pytest.mark.slow
def test_fail_on_warning_fails_and_still_returns_results(api_server, tmp_path):
    port = api_server.server_address[1]
    rc, result = run_module(
        "aiinfra.k3s.gpu_allocation_info",
        {"kubeconfig": str(kubeconfig(tmp_path, port)), "fail_on": ["error", "warning"]},
    )
    assert rc != 0 and result["failed"]
    assert result["msg"].startswith("1 GPU finding(s) at severity error/warning: NON_GPU_POD_ON_GPU_NODE")
    assert result["summary"]["nodes"] == 1 and result["nodes"][0]["name"] == "gx10-db4d"


@pytest.mark.slow
def test_unreachable_api_is_one_clear_error(tmp_path):
    rc, result = run_module(MODULE, {"kubeconfig": str(kubeconfig(tmp_path, 1))})
    assert rc != 0
    assert result["msg"].startswith("GPU allocation could not be analysed (Kubernetes API):")


@pytest.mark.slow
def test_files_path(tmp_path):
    (tmp_path / "nodes.json").write_text(json.dumps(SNAPSHOT["nodes"]))
    (tmp_path / "pods.json").write_text(json.dumps(SNAPSHOT["pods"]))
    rc, result = run_module(
        MODULE, {"nodes_file": str(tmp_path / "nodes.json"), "pods_file": str(tmp_path / "pods.json"), "fail_on": []}
    )
    assert rc == 0 and result["source"]["type"] == "files"
    assert [f["code"] for f in result["findings"]] == ["NON_GPU_POD_ON_GPU_NODE"]


@pytest.mark.slow
def test_a_kubeconfig_with_an_exec_plugin_is_read_by_the_modules_kubernetes_client(api_server, tmp_path):
    """The action analyses in the controller's process what api_client speaks; a kubeconfig whose user runs an exec
    credential plugin goes to the module, whose kubernetes client runs the plugin: the same pages, the same findings."""
    port = api_server.server_address[1]
    path = kubeconfig(tmp_path, port)
    config = yaml.safe_load(path.read_text())
    config["users"][0]["user"] = exec_credential_user(tmp_path, "not-a-secret")
    path.write_text(yaml.safe_dump(config))
    rc, result = run_module(MODULE, {"kubeconfig": str(path), "page_size": 1, "fail_on": []})
    assert rc == 0, result.get("msg")
    assert result["source"] == {"type": "api", "pages": {"nodes": 2, "pods": 3}}
    assert [f["code"] for f in result["findings"]] == ["NON_GPU_POD_ON_GPU_NODE"]


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="becomes root with su, which asks no password of root only")
def test_with_become_the_module_reads_as_the_become_user(api_server, tmp_path):
    """With become the module runs (as the user become gives, who may be the only one to read the kubeconfig); without
    it the action analyses in the controller's process and Ansible executes nothing. Both find the same."""
    args = json.dumps({"kubeconfig": str(kubeconfig(tmp_path, api_server.server_address[1])), "fail_on": []})
    found = []
    for extra in ([], ["--become", "--become-method", "su"]):
        argv = [tool("ansible"), "localhost", "-m", MODULE, "-a", args, "-vvv", *extra]
        proc = subprocess.run(
            argv, capture_output=True, text=True, env=ansible_env("default"), timeout=120, check=False
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        found.append(("EXEC " in proc.stdout, "NON_GPU_POD_ON_GPU_NODE" in proc.stdout))
    assert found == [(False, True), (True, True)]
