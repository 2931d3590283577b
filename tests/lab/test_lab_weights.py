"""Model weights on the lab's real GPU nodes (podman, SSH): a seed directory handed by the controller's model_mirror
to one node and by the nodes' own model_mirror to the others, and a model on an HTTP mirror (nginx from Debian on
this machine's lab address), reach every GPU node's store through model_weights, verified, and a re-run reads
nothing. Issue 25. Runs against `make lab`."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from lab.live import cluster

ROOT = Path(__file__).resolve().parents[2]
ENV = dict(os.environ, CONTAINERS_CONF=str(ROOT / "lab" / "nodes" / "containers.conf"))
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
STORE = "/data/model-registry-weights-test"
SEEDED = "lab-test/seeded-model"
MIRRORED = "lab-test/mirrored-model"
BIG = 48 * 1024 * 1024

pytestmark = pytest.mark.skipif(
    not (ROOT / "inventories" / "lab" / "hosts.yml").exists() and os.environ.get("LAB_LIVE_REQUIRED") != "1",
    reason="no lab (make lab)",
)


def gpu_nodes() -> list[str]:
    """The lab's GPU nodes that are running: test_lab_live's node-loss test removes one for good before this file
    runs."""
    names = [
        n["name"] for n in cluster.inventory_nodes(cluster.read_inventory(ROOT / "inventories" / "lab")) if n["gpu"]
    ]
    running = []
    for name in names:
        state = subprocess.run(["podman", "inspect", "-f", "{{.State.Running}}", name], env=ENV, capture_output=True,
                               text=True, timeout=30, check=False)  # fmt: skip
        if state.returncode == 0 and state.stdout.strip() == "true":
            running.append(name)
    assert running, "no lab GPU node runs"
    return running


def lab_address() -> str:
    """This machine's address on the lab network (the nodes' default gateway), where the test's mirror listens."""
    route = subprocess.run(["podman", "exec", gpu_nodes()[0], "ip", "-4", "route", "show", "default"], env=ENV,
                           capture_output=True, text=True, timeout=30, check=True).stdout.split()  # fmt: skip
    return route[route.index("via") + 1]


def make_model(directory: Path, big: int) -> Path:
    directory.mkdir(parents=True)
    (directory / "config.json").write_text('{"architectures": ["aiinfra.k3s lab test artifact, not a model"]}\n')
    (directory / "tokenizer").mkdir()
    (directory / "tokenizer" / "tokenizer.json").write_text('{"version": "test"}\n')
    with open(directory / "model.safetensors", "wb") as out:
        for _mib in range(big // (1 << 20)):
            out.write(os.urandom(1 << 20))
    lines = []
    for path in sorted(p for p in directory.rglob("*") if p.is_file()):
        lines.append("%s  %s" % (hashlib.sha256(path.read_bytes()).hexdigest(), path.relative_to(directory)))
    (directory / "SHA256SUMS").write_text("\n".join(lines) + "\n")
    return directory


@pytest.fixture(scope="module")
def mirror(tmp_path_factory):
    """nginx on this machine's lab address serving a model directory (stopped after the module's tests)."""
    root = tmp_path_factory.mktemp("weights")
    make_model(root / "seed" / SEEDED, BIG)
    make_model(root / "www" / MIRRORED, BIG)
    address = lab_address()
    conf = root / "nginx.conf"
    conf.write_text(
        # user root: pytest's temporary directories are the user's own (0700), and the lab runs as root.
        f"""daemon off; user root; worker_processes 1; pid {root}/nginx.pid; error_log {root}/error.log;
events {{ worker_connections 64; }}
http {{ access_log {root}/access.log; client_body_temp_path {root}; proxy_temp_path {root};
  fastcgi_temp_path {root}; uwsgi_temp_path {root}; scgi_temp_path {root};
  server {{ listen {address}:18097; root {root}/www; }} }}
"""
    )
    proc = subprocess.Popen([NGINX, "-c", str(conf), "-p", str(root)], start_new_session=True)
    time.sleep(1)
    assert proc.poll() is None, (root / "error.log").read_text()
    yield {"root": root, "url": f"http://{address}:18097/{MIRRORED}"}
    os.killpg(proc.pid, signal.SIGTERM)
    proc.wait(10)
    for node in gpu_nodes():
        subprocess.run(["podman", "exec", node, "rm", "-rf", STORE], env=ENV, timeout=120, check=False)


def converge(mirror: dict, tmp: Path, *extra: str) -> tuple[subprocess.CompletedProcess, list[dict]]:
    """The model_registry role on the lab's GPU nodes with a seed directory and a URL source; the model_weights
    results of every node."""
    variables = {
        "model_registry_path": STORE,
        "model_registry_seed_dir": str(mirror["root"] / "seed"),
        "model_registry_seed_models": [SEEDED],
        "model_registry_sources": [{"path": MIRRORED, "source": "url", "url": mirror["url"], "revision": "lab-1"}],
        "model_registry_expected_models": [SEEDED, MIRRORED],
        "model_registry_require_models": True,
        "model_registry_cache_dir": str(tmp / "controller-cache"),
        "model_registry_timeout": 30,
        "model_registry_transfer_timeout": 600,
    }
    (tmp / "vars.yml").write_text(yaml.safe_dump(variables))
    playbook = tmp / "weights.yml"
    playbook.write_text(yaml.safe_dump([
        {"import_playbook": str(ROOT / "playbooks" / "groups.yml")},
        {"hosts": "__aiinfra_gpu", "become": True, "gather_facts": False, "roles": [{"role": "aiinfra.k3s.model_registry"}]},
    ]))  # fmt: skip
    proc = subprocess.run(
        [str(ROOT / ".venv" / "bin" / "ansible-playbook"), str(playbook), "-i", str(ROOT / "inventories" / "lab"),
         "-e", "@" + str(tmp / "vars.yml"), "--limit", ",".join(gpu_nodes()), *extra],
        capture_output=True, text=True, timeout=900, check=False,
        env=dict(ENV, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_STDOUT_CALLBACK="ansible.posix.json"),
    )  # fmt: skip
    fetched = []
    try:
        plays = json.loads(proc.stdout)["plays"]
    except ValueError:
        return proc, fetched
    for play in plays:
        for task in play["tasks"]:
            if "Fetch the model weights into the store" in task["task"]["name"]:
                for host, result in task["hosts"].items():
                    fetched += [dict(r, host=host) for r in result.get("results", [])]
    return proc, fetched


def recap(proc: subprocess.CompletedProcess) -> dict:
    return json.loads(proc.stdout)["stats"]


def test_weights_reach_every_gpu_node_verified_and_a_rerun_reads_nothing(mirror, tmp_path):
    proc, fetched = converge(mirror, tmp_path)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    nodes = gpu_nodes()
    assert sorted((r["host"], r["item"]["path"]) for r in fetched) == sorted(
        (n, p) for n in nodes for p in (SEEDED, MIRRORED)
    )
    assert all(r["changed"] and r["bytes_fetched"] >= BIG and r["swapped"] == "new" for r in fetched), fetched
    for node in nodes:
        for path in (SEEDED, MIRRORED):
            check = subprocess.run(["podman", "exec", "-w", f"{STORE}/{path}", node, "sha256sum", "--check", "--strict",
                                    "--quiet", "SHA256SUMS"],
                                   env=ENV, capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
            assert check.returncode == 0, (node, path, check.stdout, check.stderr)
        staged = subprocess.run(["podman", "exec", node, "find", f"{STORE}/.staging", "-type", "f", "-not", "-name", ".lock"],
                                env=ENV, capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
        assert staged.stdout.strip() == "", staged.stdout
    # The seed directory left the controller once, to one node, through its mirror (gone again); the other nodes took
    # it from nodes that held it, through the port the site plan opened in the nodes' firewall.
    assert not list((tmp_path / "controller-cache").glob("mirror-*"))
    seeded = sorted((r["item"].get("peer") or "", r["host"]) for r in fetched if r["item"]["path"] == SEEDED)
    assert [host for peer, host in seeded if not peer] == nodes[:1], seeded
    assert all(peer in nodes and peer != host for peer, host in seeded if peer), seeded
    # Each node fetched the URL model from nginx itself: one full GET of the big file per node.
    log = (mirror["root"] / "access.log").read_text()
    assert log.count(f"GET /{MIRRORED}/model.safetensors") == len(nodes)

    proc, fetched = converge(mirror, tmp_path)
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert all(s["changed"] == 0 for s in recap(proc).values()), recap(proc)
    assert all(not r["changed"] and r["bytes_fetched"] == 0 and r["hashed"] == [] for r in fetched), fetched


def test_a_file_damaged_on_a_node_is_fetched_again_only_with_full_verify(mirror, tmp_path):
    node = gpu_nodes()[0]
    target = f"{STORE}/{SEEDED}/model.safetensors"
    # Same size, other bytes, mtime kept: what a disk error would leave.
    subprocess.run(["podman", "exec", node, "python3", "-c",
                    "import os,sys; p=sys.argv[1]; s=os.stat(p); f=open(p,'r+b'); f.seek(4096); f.write(b'X'*16); f.close();"
                    " os.utime(p, ns=(s.st_atime_ns, s.st_mtime_ns))", target], env=ENV, timeout=60, check=True)  # fmt: skip
    proc, fetched = converge(mirror, tmp_path)
    assert proc.returncode == 0 and not any(r["changed"] for r in fetched)  # fast: sizes and mtimes only
    proc, fetched = converge(mirror, tmp_path, "-e", "model_registry_verify=full")
    assert proc.returncode == 0, proc.stdout[-4000:]
    again = [r for r in fetched if r["changed"]]
    assert [(r["host"], r["item"]["path"], [f["path"] for f in r["fetched"]]) for r in again] == [
        (node, SEEDED, ["model.safetensors"])
    ]
    assert again[0]["swapped"] in ("exchange", "fallback")


# ---------------------------------------------------------------- pruning against the lab's real pods

LIVE_STORE = "/data/model-registry"  # the store the lab's model server pods mount
SERVED = "nvidia/Nemotron-4-35B"  # the lab's vLLM model (inventories/lab): its stand-in pods name it in --model
DROPPED = "lab-test/dropped-model"
KUBECONFIG = Path(os.environ.get("LAB_KUBECONFIG", Path.home() / ".kube" / "aiinfra-lab.yaml"))


def play(
    tmp: Path, name: str, variables: dict, tasks_from: str | None = None
) -> tuple[subprocess.CompletedProcess, dict]:
    """The model_registry role (or one entry point of it) on the running GPU nodes; the JSON callback's result."""
    (tmp / f"{name}-vars.yml").write_text(yaml.safe_dump(variables))
    role = {"ansible.builtin.include_role": {"name": "aiinfra.k3s.model_registry", "tasks_from": tasks_from}}
    plays = [{"import_playbook": str(ROOT / "playbooks" / "groups.yml")},
             {"hosts": "__aiinfra_gpu", "become": True, "gather_facts": False,
              **({"tasks": [dict(role, name="Entry point " + tasks_from)]} if tasks_from
                 else {"roles": [{"role": "aiinfra.k3s.model_registry"}]})}]  # fmt: skip
    (tmp / f"{name}.yml").write_text(yaml.safe_dump(plays))
    proc = subprocess.run(
        [str(ROOT / ".venv" / "bin" / "ansible-playbook"), str(tmp / f"{name}.yml"), "-i", str(ROOT / "inventories" / "lab"),
         "-e", "@" + str(tmp / f"{name}-vars.yml"), "--limit", ",".join(gpu_nodes())],
        capture_output=True, text=True, timeout=900, check=False,
        env=dict(ENV, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_STDOUT_CALLBACK="ansible.posix.json"),
    )  # fmt: skip
    try:
        return proc, json.loads(proc.stdout)
    except ValueError:
        return proc, {}


def nodes_serving(path: str) -> set[str]:
    """The nodes where a running pod of the lab names the model (its model server), read from the API."""
    kubectl = next((ROOT / ".cache" / "kube").glob("*/bin/kubectl"))
    pods = json.loads(subprocess.run([str(kubectl), "--kubeconfig", str(KUBECONFIG), "get", "pods", "-A", "-o", "json"],
                                     capture_output=True, text=True, timeout=60, check=True).stdout)["items"]  # fmt: skip
    return {
        p["spec"].get("nodeName")
        for p in pods
        if p["status"].get("phase") == "Running"
        and any(path in " ".join(c.get("args") or []) for c in p["spec"]["containers"])
    }


@pytest.mark.skipif(not KUBECONFIG.exists(), reason="no lab cluster")
def test_prune_removes_a_dropped_model_and_holds_the_one_the_nodes_pods_serve(tmp_path):
    seed = tmp_path / "seed"
    make_model(seed / SERVED, 1 << 20)
    make_model(seed / DROPPED, 1 << 20)
    nodes = gpu_nodes()
    serving = nodes_serving(SERVED) & set(nodes)
    assert serving, "no running model server pod of %s on %s" % (SERVED, nodes)
    common = {"model_registry_path": LIVE_STORE, "model_registry_cache_dir": str(tmp_path / "controller-cache"),
              "model_registry_expected_models": []}  # fmt: skip
    try:
        seeds = dict(common, model_registry_seed_dir=str(seed), model_registry_seed_models=[SERVED, DROPPED])
        proc, _result = play(tmp_path, "seed", seeds)
        assert proc.returncode == 0, proc.stdout[-4000:]
        # Both dropped from every list: the served one stays where a pod of the node uses it.
        dropped = dict(common, model_registry_prune=True, model_registry_seed_models=[],
                       model_registry_kubeconfig=str(KUBECONFIG))  # fmt: skip
        proc, result = play(tmp_path, "prune", dropped, tasks_from="prune")
        assert proc.returncode == 0, proc.stdout[-4000:]
        pruned = {host: res for p in result["plays"] for t in p["tasks"] if "Remove the models no inventory" in t["task"]["name"]
                  for host, res in t["hosts"].items()}  # fmt: skip
        assert sorted(pruned) == sorted(nodes)
        for node in nodes:
            removed = sorted(r["path"] for r in pruned[node]["removed"])
            if node in serving:
                assert (removed, pruned[node]["held"]) == ([DROPPED], [SERVED]), (node, pruned[node])
            else:
                assert (removed, pruned[node]["held"]) == (sorted([DROPPED, SERVED]), []), (node, pruned[node])
            left = subprocess.run(["podman", "exec", node, "find", LIVE_STORE, "-name", ".aiinfra-weights.json"], env=ENV,
                                  capture_output=True, text=True, timeout=60, check=True).stdout.split()  # fmt: skip
            assert left == ([f"{LIVE_STORE}/{SERVED}/.aiinfra-weights.json"] if node in serving else []), (node, left)
    finally:
        for node in nodes:
            subprocess.run(["podman", "exec", node, "rm", "-rf", f"{LIVE_STORE}/nvidia", f"{LIVE_STORE}/lab-test"],
                           env=ENV, timeout=120, check=False)  # fmt: skip
