"""What the K3s roles must leave on each node of a scenario (airgap test bundle, k3s_start: false)."""

import hashlib
import os
from pathlib import Path

import pytest
import testinfra
import yaml

INVENTORY = yaml.safe_load(Path(os.environ["MOLECULE_INVENTORY_FILE"]).read_text())
AIRGAP = Path(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"]) / "airgap"
TOKEN = "7c1e9b4f0a3d6e8b2f5a9c0d4e7b1a3f6c8e0d2b"  # molecule/_shared/k3s_group_vars/all/k3s.yml
AGENT_TOKEN = "2e8d4a6c0f1b3e5d7a9c2f4b6e8d0a1c3f5b7d9e"
GPU_LABELS = {
    "ai-workload=true",
    "nvidia.com/gpu.deploy.gpu-feature-discovery=true",
    "nvidia.com/gpu.deploy.container-toolkit=true",
    "nvidia.com/gpu.deploy.dcgm=true",
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


def test_only_servers_hold_the_server_token_and_joins_wait_for_the_ca(host):
    """K3s never runs here, so the first server has no CA: it gets the short server token (K3s makes the CA from
    it); every node that joins gets no token at all (its token must pin the CA's hash) and is not started. The
    lab (tests/lab) checks the secure tokens on nodes whose first server runs."""
    name = name_of(host)
    token, agent_token = host.file("/etc/rancher/k3s/cluster-token"), host.file("/etc/rancher/k3s/agent-token")
    if name == SERVERS[0]:
        assert (token.user, token.group, token.mode) == ("root", "root", 0o600)
        assert token.content_string == TOKEN
    else:
        assert not token.exists
    if name in SERVERS:
        assert (agent_token.user, agent_token.mode) == ("root", 0o600)
        assert agent_token.content_string == AGENT_TOKEN
        assert config(host)["agent-token-file"] == "/etc/rancher/k3s/agent-token"
    else:
        assert not agent_token.exists
        assert "agent-token-file" not in config(host)
    assert TOKEN not in host.check_output("cat /etc/rancher/k3s/* 2>/dev/null || true") or name in SERVERS


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


def test_store_recycler_runs_on_the_servers_only(host):
    unit = "/etc/systemd/system/aiinfra-model-store-recycler.service"
    if name_of(host) not in SERVERS:
        assert not host.file(unit).exists
        return
    assert host.file(unit).mode == 0o644
    assert host.run(f"systemd-analyze verify {unit}").rc == 0
    assert host.service("aiinfra-model-store-recycler").is_enabled
    assert host.file("/usr/local/lib/aiinfra/model_store_recycler.py").mode == 0o644  # run by python3


@pytest.mark.parametrize("key", ["net.ipv4.ip_forward", "net.bridge.bridge-nf-call-iptables"])
def test_prereq_sysctls(host, key):
    assert host.sysctl(key) == 1


def test_model_store_on_gpu_nodes_only(host):
    store = host.file("/data/model-registry")
    if name_of(host) in GPU:
        assert store.is_directory and store.mode == 0o755 and store.user == "root"
    else:
        assert not store.exists


MANIFESTS = "/var/lib/rancher/k3s/server/manifests"
GATEWAY_KEY = "sk-5f0c9a1e7b3d48c2a6e9f1b7d3c5a8e0f2b4d6c8"  # molecule/_shared/k3s_group_vars/all/k3s.yml


def kinds_in(host, name):
    f = host.file(f"{MANIFESTS}/aiinfra-{name}.yaml")
    assert (f.user, f.group, f.mode) == ("root", "root", 0o600), name
    return [d["kind"] for d in yaml.safe_load_all(f.content_string) if d]


def test_seeded_model_is_verified_in_the_store_of_gpu_nodes(host):
    model = "/data/model-registry/nvidia/Nemotron-4-35B"
    if name_of(host) not in GPU:
        assert not host.file(model).exists
        return
    source = AIRGAP / "models" / "nvidia" / "Nemotron-4-35B"
    for name in ("config.json", "tokenizer.json", "model.safetensors", "SHA256SUMS"):
        f = host.file(f"{model}/{name}")
        assert (f.user, f.mode) == ("root", 0o644), name
        assert f.sha256sum == sha256_of(source / name), name
    assert host.run(f"cd {model} && sha256sum --check --strict --quiet SHA256SUMS").rc == 0


def test_serving_manifests_wait_on_the_first_server(host):
    files = (
        sorted(f for f in host.file(MANIFESTS).listdir() if f.startswith("aiinfra-"))
        if host.file(MANIFESTS).exists
        else []
    )
    if name_of(host) != SERVERS[0]:
        assert files == []
        return
    assert files == [
        "aiinfra-autoscaling.yaml",
        "aiinfra-cert-manager.yaml",
        "aiinfra-gpu-operator.yaml",
        "aiinfra-litellm.yaml",
        "aiinfra-model-registry.yaml",
        "aiinfra-monitoring.yaml",
        "aiinfra-network-policies.yaml",
        "aiinfra-serving-secrets.yaml",
        "aiinfra-traefik.yaml",
        "aiinfra-vllm.yaml",
    ]  # no NIM model in the scenario: no file for it
    assert kinds_in(host, "vllm") == ["ConfigMap", "Deployment", "Service"]
    # Two local volumes per GPU unit (one GPU per node here); each model server pod claims one where it runs.
    assert kinds_in(host, "model-registry") == ["Namespace", "StorageClass"] + ["PersistentVolume"] * 2 * len(GPU)
    assert kinds_in(host, "gpu-operator") == ["Namespace", "HelmChart"]
    # The gateway, then the Redis its replicas and Traefik count rate limits in.
    gateway, redis = ["ConfigMap", "Deployment", "Service", "PodDisruptionBudget"], ["Deployment", "Service"]
    assert kinds_in(host, "litellm") == gateway + redis
    # Gateway key, consumers' key hashes, Redis password and config, the model servers' key (one namespace serves
    # both the gateway and vLLM here), Grafana admin.
    assert kinds_in(host, "serving-secrets") == ["Secret"] * 5
    # One PodMonitor per metrics path: vLLM /metrics, NIM /v1/metrics, the gateway /metrics/.
    assert kinds_in(host, "monitoring")[:7] == [
        "Namespace",
        "HelmChart",
        "PodMonitor",
        "PodMonitor",
        "PodMonitor",
        "ServiceMonitor",
        "PrometheusRule",
    ]
    assert set(kinds_in(host, "network-policies")) == {"NetworkPolicy"}
    assert kinds_in(host, "autoscaling") == ["Namespace", "HelmChart", "ScaledObject", "ScaledObject"]
    # Rate limit, HTTPS redirect, the other key headers removed, HSTS, prefix strip; the HTTPS route, its TLSOption,
    # the HTTP route that redirects the root.
    assert kinds_in(host, "traefik") == ["Middleware"] * 5 + [
        "IngressRoute",
        "TLSOption",
        "IngressRoute",
        "HelmChartConfig",
    ]
    assert kinds_in(host, "cert-manager") == (
        ["Namespace", "HelmChart", "ClusterIssuer", "Certificate", "ClusterIssuer", "Certificate"]
    )


CHARTS = {
    "gpu-operator": "gpu-operator-v26.7.1.tgz",
    "cert-manager": "cert-manager-v1.21.2.tgz",
    "monitoring": "kube-prometheus-stack-93.9.0.tgz",
    "autoscaling": "keda-2.21.1.tgz",
}


@pytest.mark.parametrize("manifest", sorted(CHARTS))
def test_charts_are_staged_for_k3s_airgap(host, manifest):
    archive = CHARTS[manifest]
    chart = host.file(f"/var/lib/rancher/k3s/server/static/charts/{archive}")
    if name_of(host) != SERVERS[0]:
        assert not chart.exists
        return
    assert (chart.user, chart.mode) == ("root", 0o600)
    assert chart.sha256sum == sha256_of(AIRGAP / archive)
    helm = next(
        d
        for d in yaml.safe_load_all(host.file(f"{MANIFESTS}/aiinfra-{manifest}.yaml").content_string)
        if d and d["kind"] == "HelmChart"
    )
    assert helm["spec"]["chart"] == f"https://%{{KUBERNETES_API}}%/static/charts/{archive}"
    assert "repo" not in helm["spec"]


def test_gateway_key_only_in_the_secret_file(host):
    if name_of(host) != SERVERS[0]:
        return
    assert GATEWAY_KEY in host.file(f"{MANIFESTS}/aiinfra-serving-secrets.yaml").content_string
    for name in ("litellm", "vllm", "gpu-operator", "model-registry", "monitoring", "traefik"):
        assert GATEWAY_KEY not in host.file(f"{MANIFESTS}/aiinfra-{name}.yaml").content_string
