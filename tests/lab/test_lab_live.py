"""The site on REAL kubelets: `make lab` converged playbooks/site.yml on the podman lab nodes, whose K3s is the
lab's stand-in bundle (lab/k3sbundle.py: kubelet, containerd, flannel, kube-proxy and the control plane from their
Go modules; not K3s). Containers really run here: the real LiteLLM proxy, Debian's Redis and the STAND-IN model
server (lab/node/model_server_standin.py) in place of vLLM; GPUs come from the STAND-IN device plugin (no GPU).

Run by `make lab-live` after `make lab`; every wait is bounded, traffic stays on the lab network.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
KUBECONFIG = Path(os.environ.get("LAB_KUBECONFIG", Path.home() / ".kube" / "aiinfra-lab.yaml"))
NAMESPACE = "ai-serving"
CLIENT_NS = "aiinfra-lab-client"
HOSTS = ROOT / "inventories" / "lab" / "hosts.yml"
ENV = dict(os.environ, CONTAINERS_CONF=str(ROOT / "lab" / "containers.conf"))


def kubectl_bin() -> str:
    out = subprocess.run(
        [str(ROOT / ".venv" / "bin" / "python"), str(ROOT / "lab" / "nodebuild.py"), "path"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return str(Path(out.stdout.strip().splitlines()[-1]) / "kubectl")


KUBECTL = [kubectl_bin(), "--kubeconfig", str(KUBECONFIG)]

pytestmark = pytest.mark.skipif(not KUBECONFIG.exists(), reason=f"no lab cluster ({KUBECONFIG}): run `make lab`")


def kubectl(*args: str, stdin: str | None = None, check: bool = True, timeout: float = 120):
    return subprocess.run([*KUBECTL, *args], input=stdin, capture_output=True, text=True, check=check, timeout=timeout)


def get(*args: str) -> dict:
    return json.loads(kubectl("get", *args, "-o", "json").stdout)


def lab_nodes() -> dict[str, str]:
    inv = yaml.safe_load(HOSTS.read_text())["all"]["children"]
    kinds = {}
    for group, kind in (("k3s_servers", "server"), ("k3s_agents", "gpu")):
        for name in (inv.get(group, {}).get("hosts") or {}):
            kinds[name] = kind
    return kinds


def test_every_node_is_a_real_kubelet_with_containerd():
    nodes = {n["metadata"]["name"]: n for n in get("nodes")["items"]}
    assert set(nodes) == set(lab_nodes())
    for name, node in nodes.items():
        info = node["status"]["nodeInfo"]
        ready = {c["type"]: c["status"] for c in node["status"]["conditions"]}["Ready"]
        assert ready == "True", name
        assert info["kubeletVersion"] == "v1.36.4", name
        assert info["containerRuntimeVersion"].startswith("containerd://2."), name
        assert "kwok.x-k8s.io/node" not in node["metadata"].get("annotations", {}), name
        assert node["spec"].get("podCIDR", "").startswith("10.42."), name


def test_gpu_nodes_advertise_the_inventorys_gpus_through_the_device_plugin_api():
    nodes = {n["metadata"]["name"]: n for n in get("nodes")["items"]}
    for name, kind in lab_nodes().items():
        gpus = nodes[name]["status"].get("allocatable", {}).get("nvidia.com/gpu")
        assert (gpus == "1") if kind == "gpu" else (gpus in (None, "0")), (name, gpus)


def test_serving_pods_run_on_real_kubelets_under_enforced_restricted():
    ns = get("namespace", NAMESPACE)
    assert ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    pods = get("pods", "-n", NAMESPACE)["items"]
    kinds = {ref["kind"] for p in pods for ref in p["metadata"].get("ownerReferences", [])}
    assert {"ReplicaSet", "StatefulSet"} <= kinds
    for pod in pods:
        name = pod["metadata"]["name"]
        assert pod["status"]["phase"] == "Running", name
        for status in pod["status"]["containerStatuses"]:
            assert status["ready"] and "running" in status["state"], (name, status["name"])
            assert status["containerID"].startswith("containerd://"), name


def test_a_root_pod_is_refused_by_pod_security():
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "aiinfra-lab-root-probe", "namespace": NAMESPACE},
        "spec": {
            "containers": [{"name": "c", "image": image_of("litellm"), "securityContext": {"runAsUser": 0}}],
        },
    }
    proc = kubectl("create", "-f", "-", stdin=json.dumps(pod), check=False)
    assert proc.returncode != 0
    assert "violates PodSecurity" in proc.stderr and "restricted" in proc.stderr


def image_of(component: str) -> str:
    for pod in get("pods", "-n", NAMESPACE)["items"]:
        for container in pod["spec"]["containers"]:
            if component in container["image"]:
                return container["image"]
    raise AssertionError(f"no pod runs a {component} image")


def pods_of(component: str) -> list[dict]:
    return [
        p
        for p in get("pods", "-n", NAMESPACE)["items"]
        if p["metadata"].get("labels", {}).get("app.kubernetes.io/component") == component
    ]


@pytest.mark.parametrize("component", ["gateway", "vllm", "rate-limit-store"])
def test_writes_to_a_containers_root_fail(component):
    pod = pods_of(component)[0]["metadata"]["name"]
    proc = kubectl("exec", "-n", NAMESPACE, pod, "--", "/bin/sh", "-c", "echo x > /aiinfra-probe", check=False)
    assert proc.returncode != 0
    assert "Read-only file system" in proc.stderr + proc.stdout


def test_the_model_store_keeps_its_owner_and_mode_after_the_model_pods_start():
    """fsGroup or a chown in an image must not change the store the model servers mount."""
    for name, kind in lab_nodes().items():
        if kind != "gpu":
            continue
        out = subprocess.run(
            ["podman", "exec", name, "stat", "-c", "%U:%G %a", "/data/model-registry"],
            capture_output=True, text=True, check=True, env=ENV,
        ).stdout.strip()  # fmt: skip
        assert out == "root:root 755", (name, out)


CLIENT = r"""
import json, os, urllib.request, urllib.error
base = os.environ["GATEWAY"]
backend = os.environ["BACKEND"]
def call(path, body=None, key=None, url=None):
    req = urllib.request.Request((url or base) + path, data=json.dumps(body).encode() if body else None)
    req.add_header("Content-Type", "application/json")
    if key:
        req.add_header("Authorization", "Bearer " + key)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read().decode(), dict(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(), dict(e.headers)
def served():
    text = call("/metrics", url=backend)[1]
    return sum(float(l.split()[-1]) for l in text.splitlines() if l.startswith("vllm:request_success_total"))
out = {}
chat = {"model": os.environ["MODEL"], "messages": [{"role": "user", "content": "hello"}], "max_tokens": 8}
out["with_key"] = call("/v1/chat/completions", chat, os.environ["KEY"])[:2]
out["without_key"] = call("/v1/chat/completions", chat)[0]
before = served()
out["unknown_model"] = call("/v1/chat/completions", dict(chat, model="no-such-model"), os.environ["KEY"])[0]
out["backend_calls_for_unknown"] = served() - before
print("RESULT " + json.dumps(out))
"""


def test_a_request_through_the_gateway_service_dns_name():
    svc = next(s for s in get("services", "-n", NAMESPACE)["items"] if s["metadata"]["labels"].get("app.kubernetes.io/component") == "gateway")
    backend = next(s for s in get("services", "-n", NAMESPACE)["items"] if s["metadata"]["labels"].get("app.kubernetes.io/component") == "vllm")
    model = served_model()
    key = (ROOT / ".cache" / "lab" / "litellm-master-key").read_text().strip()
    name = f"client-{uuid.uuid4().hex[:6]}"
    kubectl("create", "namespace", CLIENT_NS, check=False)
    kubectl("label", "namespace", CLIENT_NS, "pod-security.kubernetes.io/enforce=restricted", "--overwrite")
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": CLIENT_NS}, "stringData": {"key": key}}
    kubectl("apply", "-f", "-", stdin=json.dumps(secret))
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": CLIENT_NS},
        "spec": {
            "restartPolicy": "Never",
            "securityContext": {"runAsNonRoot": True, "runAsUser": 65534, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [
                {
                    "name": "client",
                    "image": image_of("model-server-standin"),
                    "imagePullPolicy": "IfNotPresent",
                    "command": ["python3", "-c", CLIENT],
                    "env": [
                        {"name": "GATEWAY", "value": f"http://{svc['metadata']['name']}.{NAMESPACE}.svc.cluster.local:{svc['spec']['ports'][0]['port']}"},
                        {"name": "BACKEND", "value": f"http://{backend['metadata']['name']}.{NAMESPACE}.svc.cluster.local:{backend['spec']['ports'][0]['port']}"},
                        {"name": "MODEL", "value": model},
                        {"name": "KEY", "valueFrom": {"secretKeyRef": {"name": name, "key": "key"}}},
                    ],
                    "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}, "readOnlyRootFilesystem": True},
                }
            ],
        },
    }  # fmt: skip
    try:
        kubectl("apply", "-f", "-", stdin=json.dumps(pod))
        deadline = time.monotonic() + 120
        phase = ""
        while time.monotonic() < deadline:
            phase = get("pod", "-n", CLIENT_NS, name)["status"].get("phase", "")
            if phase in ("Succeeded", "Failed"):
                break
            time.sleep(2)
        logs = kubectl("logs", "-n", CLIENT_NS, name).stdout
        assert phase == "Succeeded", logs
        result = json.loads(next(line for line in logs.splitlines() if line.startswith("RESULT "))[7:])
    finally:
        kubectl("delete", "namespace", CLIENT_NS, "--wait=false", check=False)
    status, body = result["with_key"]
    assert status == 200, body
    assert json.loads(body)["choices"][0]["message"]["content"]
    assert result["without_key"] == 401
    assert result["unknown_model"] in (400, 404)
    assert result["backend_calls_for_unknown"] == 0


def served_model() -> str:
    pod = pods_of("vllm")[0]
    args = pod["spec"]["containers"][0].get("args", [])
    if "--served-model-name" in args:
        return args[args.index("--served-model-name") + 1]
    raise AssertionError(f"no --served-model-name in {args}")
