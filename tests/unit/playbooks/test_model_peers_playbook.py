"""model_registry hands the controller's models on node to node, run for real on this machine: three GPU hosts with
a local connection, each with its own store and its own loopback address (127.0.0.x), the controller's mirror and the
nodes' mirrors (aiinfra.k3s.model_mirror) on loopback. The controller's link carries the model once."""

import os
import socket

import pytest
import yaml
from conftest import local_gpu_hosts, run_playbook, write_inventory
from make_test_airgap import make_model

MODEL = "org/peer-model"
HOSTS = {"gpu-1": "127.0.0.1", "gpu-2": "127.0.0.2", "gpu-3": "127.0.0.3"}


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def converge(tmp_path, peers=True, limit=None):
    inventory = write_inventory(
        tmp_path / "inv",
        {"all": {"hosts": local_gpu_hosts(HOSTS, tmp_path / "stores")}},
        {
            "site_plan_gpu_hosts": list(HOSTS),
            "model_registry_owner": str(os.getuid()),
            "model_registry_group": str(os.getgid()),
            "model_registry_min_free_gib": 0,
            "model_registry_seed_dir": str(tmp_path / "src" / "models"),
            "model_registry_seed_models": [MODEL],
            "model_registry_peers": peers,
            "model_registry_peer_port": free_port(),
            "model_registry_mirror_address": "127.0.0.1",
            "model_registry_mirror_bind": "127.0.0.1",
            "model_registry_cache_dir": str(tmp_path / "controller-cache"),
            "model_registry_timeout": 10,
            "model_registry_transfer_timeout": 120,
        },
    )
    playbook = tmp_path / "peers.yml"
    playbook.write_text(
        yaml.safe_dump([{"hosts": "all", "gather_facts": False, "roles": [{"role": "aiinfra.k3s.model_registry"}]}])
    )
    return run_playbook(str(playbook), inventory, extra=["--limit", limit] if limit else [])


def results(result, name):
    """Every (host, result) of the tasks whose name holds `name`, in the order they ran."""
    return [
        (host, res)
        for play in result["plays"]
        for task in play["tasks"]
        if name in task["task"]["name"]
        for host, res in task["hosts"].items()
    ]


def fetched_from(result):
    """{host: [the peer (None: the controller) of each fetch it made]}."""
    out = {}
    for host, res in results(result, "Fetch the model weights into the store"):
        for item in res.get("results") or []:
            out.setdefault(host, []).append(item["item"].get("peer"))
    return out


def controller_bytes(result):
    done = [res for _host, res in results(result, "Wait for the controller's mirror to stop") if "bytes_sent" in res]
    return done[0]["bytes_sent"] if done else 0


@pytest.mark.slow
def test_the_controller_hands_the_model_to_one_node_and_the_nodes_hand_it_on(tmp_path):
    source = make_model(tmp_path / "src", MODEL)
    size = sum(f.stat().st_size for f in source.iterdir() if f.name != "SHA256SUMS")
    proc, result = converge(tmp_path)
    assert proc.returncode == 0, proc.stdout[-4000:]
    for host in HOSTS:
        model = tmp_path / "stores" / host / MODEL
        for name in ("config.json", "tokenizer.json", "model.safetensors"):
            assert (model / name).read_bytes() == (source / name).read_bytes()
        assert (model / ".aiinfra-weights.json").is_file()
    peers = fetched_from(result)
    assert peers["gpu-1"] == [None]  # round 1: from the controller
    assert peers["gpu-2"] == ["gpu-1"]  # round 2: from the first node
    assert peers["gpu-3"] in (["gpu-1"], ["gpu-2"])  # round 3
    assert controller_bytes(result) == size  # the controller's link carried the model once, not three times
    # The role's public output, which the stage report reads: who took the model from where, how much.
    records = {
        host: res["ansible_facts"]["model_registry_output_fetched"]
        for host, res in results(result, "Record what this node fetched")
        if "ansible_facts" in res
    }
    assert [(r["host"], r["peer"], r["bytes"]) for r in records["gpu-2"]] == [("gpu-2", "gpu-1", size)]
    assert records["gpu-1"][0]["peer"] is None and records["gpu-1"][0]["source"].startswith("controller ")
    assert not list((tmp_path / "controller-cache").glob("mirror-*"))
    assert not [p for p in os.listdir("/run") if p.startswith("aiinfra-model-mirror-")]
    # A re-run: every store is current, nothing starts.
    proc, result = converge(tmp_path)
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert all(s["changed"] == 0 for s in result["stats"].values()), result["stats"]
    assert not fetched_from(result)


@pytest.mark.slow
def test_a_node_added_takes_the_model_from_a_node_that_holds_it_not_the_controller(tmp_path):
    make_model(tmp_path / "src", MODEL)
    proc, result = converge(tmp_path, limit="gpu-1,gpu-2")
    assert proc.returncode == 0, proc.stdout[-4000:]
    proc, result = converge(tmp_path)  # gpu-3 joins
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert fetched_from(result) == {"gpu-3": ["gpu-1"]}
    assert not results(result, "Serve the controller's models (Hub snapshots")  # the controller's mirror never started
    assert (tmp_path / "stores" / "gpu-3" / MODEL / "model.safetensors").is_file()


@pytest.mark.slow
def test_without_peers_every_node_takes_the_model_from_the_controller(tmp_path):
    source = make_model(tmp_path / "src", MODEL)
    size = sum(f.stat().st_size for f in source.iterdir() if f.name != "SHA256SUMS")
    proc, result = converge(tmp_path, peers=False)
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert fetched_from(result) == {host: [None] for host in HOSTS}
    assert controller_bytes(result) == 3 * size
