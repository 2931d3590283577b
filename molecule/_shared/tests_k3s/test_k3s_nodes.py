"""What the K3s roles must leave on each node of a scenario (airgap test bundle, k3s_start: false)."""

import hashlib
import os
from pathlib import Path

import pytest
import testinfra
import yaml

INVENTORY = yaml.safe_load(Path(os.environ["MOLECULE_INVENTORY_FILE"]).read_text())
AIRGAP = Path(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"]) / "airgap"
TOKEN = "molecule-test-token-0123456789abcdef0123456789"
GPU_LABELS = {
    "ai-workload=true",
    "nvidia.com/gpu.deploy-gpu-feature=true",
    "nvidia.com/gpu.deploy-container-engine-launcher=true",
    "nvidia.com/gpu.deploy-dcgm=true",
}
GPU_TAINT = "nvidia.com/gpu=present:NoSchedule"


def group(name):
    """Hosts of a group in inventory order (Molecule writes each group at the top level)."""
    return list((INVENTORY.get(name) or {}).get("hosts") or {})


SERVERS = group("k3s_servers")
GPU = set(group("gpu_nodes"))
HA = len(SERVERS) > 1


def name_of(host):
    return host.backend.get_hostname()


def config(host):
    f = host.file("/etc/rancher/k3s/config.yaml")
    assert (f.user, f.group, f.mode) == ("root", "root", 0o600)
    return yaml.safe_load(f.content_string)


def first_server_ip():
    first = testinfra.get_host(f"podman://{SERVERS[0]}")
    return first.check_output("hostname -I").split()[0]


def sha256_of(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def test_config_matches_the_node_role(host):
    name, cfg = name_of(host), config(host)
    assert cfg["token-file"] == "/etc/rancher/k3s/cluster-token"
    assert cfg["node-ip"] == host.check_output("hostname -I").split()[0]
    assert cfg["protect-kernel-defaults"] is False
    if name in SERVERS:
        assert cfg["write-kubeconfig-mode"] == "0600"
        assert cfg["secrets-encryption"] is True
        assert cfg["cluster-cidr"] == "10.42.0.0/16" and cfg["service-cidr"] == "10.43.0.0/16"
        if name == SERVERS[0]:
            assert cfg.get("cluster-init") is (True if HA else None)
            assert "server" not in cfg
        else:
            assert "cluster-init" not in cfg
            assert cfg["server"] == f"https://{first_server_ip()}:6443"
    else:
        assert cfg["server"] == f"https://{first_server_ip()}:6443"
        assert "cluster-init" not in cfg and "cluster-cidr" not in cfg


def test_gpu_labels_and_taint_only_on_gpu_nodes(host):
    name, cfg = name_of(host), config(host)
    if name in GPU:
        assert set(cfg["node-label"]) == GPU_LABELS
        assert cfg["node-taint"] == [GPU_TAINT]
    else:
        assert "node-label" not in cfg
        assert "node-taint" not in cfg


def test_token_file_is_private(host):
    f = host.file("/etc/rancher/k3s/cluster-token")
    assert (f.user, f.group, f.mode) == ("root", "root", 0o600)
    assert f.content_string.strip() == TOKEN


def test_registries_yaml(host):
    f = host.file("/etc/rancher/k3s/registries.yaml")
    assert f.mode == 0o600
    data = yaml.safe_load(f.content_string)
    assert data["mirrors"]["docker.io"]["endpoint"] == ["https://registry.molecule.test:5000"]


def test_binary_and_images_are_the_verified_artifacts(host):
    binary = host.file("/usr/local/bin/k3s")
    assert binary.mode == 0o755 and binary.user == "root"
    assert binary.sha256sum == sha256_of(AIRGAP / "k3s")
    images = host.file("/var/lib/rancher/k3s/agent/images/k3s-airgap-images-amd64.tar.zst")
    assert images.sha256sum == sha256_of(AIRGAP / "k3s-airgap-images-amd64.tar.zst")
    assert host.file("/usr/local/bin/kubectl").linked_to == "/usr/local/bin/k3s"


def test_unit_passes_systemd_analyze_and_is_not_started(host):
    unit = "k3s.service" if name_of(host) in SERVERS else "k3s-agent.service"
    path = f"/etc/systemd/system/{unit}"
    assert host.file(path).mode == 0o644
    assert host.run(f"systemd-analyze verify {path}").rc == 0
    exec_start = "server" if unit == "k3s.service" else "agent"
    assert (
        f"ExecStart=/usr/local/bin/k3s {exec_start} --config /etc/rancher/k3s/config.yaml"
        in host.file(path).content_string
    )
    # k3s_start is false and the binary is a test artifact: nothing may pretend to run.
    assert not host.service(unit).is_running


@pytest.mark.parametrize("key", ["net.ipv4.ip_forward", "net.bridge.bridge-nf-call-iptables"])
def test_prereq_sysctls(host, key):
    assert host.sysctl(key) == 1


def test_model_store_on_gpu_nodes_only(host):
    store = host.file("/data/model-registry")
    if name_of(host) in GPU:
        assert store.is_directory and store.mode == 0o755 and store.user == "root"
    else:
        assert not store.exists


def test_serving_manifests_wait_on_the_first_server(host):
    manifests = host.file("/var/lib/rancher/k3s/server/manifests/aiinfra-vllm.yaml")
    if name_of(host) != SERVERS[0]:
        assert not manifests.exists
        return
    assert (manifests.user, manifests.mode) == ("root", 0o600)
    kinds = [d["kind"] for d in yaml.safe_load_all(manifests.content_string) if d]
    assert kinds == ["Deployment", "Service"]
    storage = host.file("/var/lib/rancher/k3s/server/manifests/aiinfra-model-registry.yaml").content_string
    kinds = [d["kind"] for d in yaml.safe_load_all(storage) if d]
    assert kinds == ["Namespace", "StorageClass"] + ["PersistentVolume"] * len(GPU) + ["PersistentVolumeClaim"]
