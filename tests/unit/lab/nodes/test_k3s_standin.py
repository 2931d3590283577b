"""The lab's K3s stand-in (lab/nodes/programs/k3s_standin.py): its pure decisions, as data where it fits."""

import base64
import hashlib
import hmac
import json
from pathlib import Path

import pytest
import yaml

from lab.nodes import nodeimages
from lab.nodes.programs import k3s_standin as standin  # a program the bundle carries, imported here as a module


def test_bootstrap_token_has_kubernetes_shape_and_ignores_the_full_token_prefix():
    tid, secret = standin.bootstrap_token("abc123" * 8)
    assert len(tid) == 6 and len(secret) == 16
    assert all(c in "0123456789abcdef" for c in tid + secret)
    full = standin.full_token(b"CA PEM", "abc123" * 8)
    assert full.startswith("K10" + hashlib.sha256(b"CA PEM").hexdigest() + "::server:")
    assert standin.bootstrap_token(full) == (tid, secret)
    assert standin.bootstrap_token("another token") != (tid, secret)


@pytest.mark.parametrize(
    "token, expected",
    [
        ("K10" + "a" * 64 + "::server:secret", "a" * 64),
        ("plain-token", None),
        ("K10nohash", None),
    ],
)
def test_ca_hash_of(token, expected):
    assert standin.ca_hash_of(token) == expected


def sign(payload: str, tid: str, secret: str) -> str:
    """A detached JWS as kube-controller-manager's bootstrapsigner writes it."""

    def b64(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    head = b64(json.dumps({"alg": "HS256", "kid": tid}).encode())
    mac = hmac.new(secret.encode(), f"{head}.{b64(payload.encode())}".encode(), hashlib.sha256).digest()
    return f"{head}..{b64(mac)}"


def test_jws_verify_accepts_the_token_signature_only():
    tid, secret = standin.bootstrap_token("cluster-token")
    payload = standin.cluster_info("https://10.0.0.1:6443", b"PEM")
    good = sign(payload, tid, secret)
    assert standin.jws_verify(good, payload, tid, secret)
    assert not standin.jws_verify(good, payload + " ", tid, secret)  # tampered kubeconfig
    assert not standin.jws_verify(sign(payload, tid, "x" * 16), payload, tid, secret)  # other token
    assert not standin.jws_verify(sign(payload, "zzzzzz", secret), payload, tid, secret)  # other key id
    assert not standin.jws_verify("not-a-jws", payload, tid, secret)


def test_cluster_info_carries_server_and_ca():
    doc = yaml.safe_load(standin.cluster_info("https://10.0.0.1:6443", b"PEM"))
    cluster = doc["clusters"][0]["cluster"]
    assert cluster["server"] == "https://10.0.0.1:6443"
    assert base64.b64decode(cluster["certificate-authority-data"]) == b"PEM"


@pytest.mark.parametrize(
    "labels, own, server",
    [
        (["nvidia.com/gpu.present=true"], ["nvidia.com/gpu.present=true"], []),
        (["node-role.kubernetes.io/worker=true"], [], ["node-role.kubernetes.io/worker=true"]),
        (["topology.kubernetes.io/zone=a"], ["topology.kubernetes.io/zone=a"], []),
        (["node.kubernetes.io/instance-type=x"], ["node.kubernetes.io/instance-type=x"], []),
        (["aiinfra.k3s/gpu-class=l4", "foo.k8s.io/x=y"], ["aiinfra.k3s/gpu-class=l4"], ["foo.k8s.io/x=y"]),
    ],
)
def test_split_labels_follows_node_restriction(labels, own, server):
    assert standin.split_labels(labels) == (own, server)


def test_settings_defaults_are_k3s_defaults_and_unknown_keys_are_listed():
    s = standin.settings({"token-file": "/t", "node-label": "a=b", "no-such-flag": True}, "host1")
    assert s["node_name"] == "host1"
    assert s["labels"] == ["a=b"]
    assert (s["cluster_cidr"], s["service_cidr"], s["cluster_dns"]) == ("10.42.0.0/16", "10.43.0.0/16", "10.43.0.10")
    assert s["flannel_backend"] == "vxlan"
    assert s["unknown"] == ["no-such-flag"]
    assert s["disable"] == []
    assert standin.settings({"disable": ["traefik", "servicelb"]}, "h")["disable"] == ["traefik", "servicelb"]
    assert standin.settings({"disable": "traefik,servicelb"}, "h")["disable"] == ["traefik", "servicelb"]


def test_cluster_dns_follows_the_service_network():
    assert standin.cluster_dns("10.96.0.0/12") == "10.96.0.10"
    assert standin.api_service_ip("10.96.0.0/12") == "10.96.0.1"


def test_extra_args_take_k3s_form():
    assert standin.extra_args(["max-pods=50", "--v=2"]) == ["--max-pods=50", "--v=2"]


def test_kubelet_config_keeps_imported_images_and_states_cgroup_v1():
    cfg = standin.kubelet_config(standin.settings({"protect-kernel-defaults": True}, "n"))
    assert cfg["failCgroupV1"] is False and cfg["cgroupDriver"] == "cgroupfs"
    assert cfg["imageGCHighThresholdPercent"] == 100
    assert cfg["protectKernelDefaults"] is True
    assert cfg["authentication"]["anonymous"]["enabled"] is False
    assert cfg["clusterDNS"] == ["10.43.0.10"]


def test_cni_config_uses_the_flannel_subnet():
    env = "FLANNEL_NETWORK=10.42.0.0/16\nFLANNEL_SUBNET=10.42.1.1/24\nFLANNEL_MTU=1450\nFLANNEL_IPMASQ=true\n"
    cfg = standin.cni_config(env)
    bridge = cfg["plugins"][0]
    assert bridge["ipam"]["ranges"] == [[{"subnet": "10.42.1.0/24", "gateway": "10.42.1.1"}]]
    assert bridge["mtu"] == 1450
    assert [p["type"] for p in cfg["plugins"]] == ["bridge", "portmap"]


def test_containerd_config_restricts_oom_score_and_pins_the_sandbox():
    text = standin.containerd_config("localhost/aiinfra-lab/pause:lab")
    assert "restrict_oom_score_adj = true" in text
    assert 'sandbox = "localhost/aiinfra-lab/pause:lab"' in text
    assert "SystemdCgroup = false" in text


def test_bootstrap_objects_bind_the_token_groups():
    objs = standin.bootstrap_objects(standin.settings({}, "n"), "10.0.0.1", b"PEM", {"cluster token": "tok"})
    secret = next(o for o in objs if o["kind"] == "Secret")
    tid, tsec = standin.bootstrap_token("tok")
    assert secret["metadata"]["name"] == f"bootstrap-token-{tid}"
    assert secret["stringData"]["token-secret"] == tsec
    roles = {o["roleRef"]["name"]: o["subjects"][0]["name"] for o in objs if o["kind"] == "ClusterRoleBinding"}
    assert roles["system:certificates.k8s.io:certificatesigningrequests:nodeclient"] == "system:bootstrappers"
    assert roles["system:node-bootstrapper"] == "system:bootstrappers"
    assert roles["system:node-proxier"] == "system:nodes"


def test_an_agent_token_gets_its_own_bootstrap_token_that_its_secure_form_derives():
    tokens = {"cluster token": "s" * 40, "agent token": "a" * 40}
    objs = standin.bootstrap_objects(standin.settings({}, "n"), "10.0.0.1", b"PEM", tokens)
    names = {o["metadata"]["name"] for o in objs if o["kind"] == "Secret"}
    agent_full = standin.full_token(b"PEM", "a" * 40, "node")
    assert agent_full.startswith("K10" + hashlib.sha256(b"PEM").hexdigest() + "::node:")
    assert names == {f"bootstrap-token-{standin.bootstrap_token(t)[0]}" for t in ("s" * 40, agent_full)}
    assert standin.bootstrap_token(agent_full) != standin.bootstrap_token("s" * 40)


def test_bootstrap_objects_go_to_the_api_server_as_json_so_a_digit_token_id_stays_a_string():
    # PyYAML writes "010587" unquoted; a YAML 1.2 reader (the API server's) reads it as a number.
    assert yaml.safe_dump({"token-id": "010587"}).strip() == "token-id: 010587"
    secret = standin.bootstrap_secret("t" * 40, "cluster token")
    secret["stringData"]["token-id"] = "010587"
    (item,) = json.loads(standin.apply_document([secret]))["items"]
    assert item["stringData"]["token-id"] == "010587"


def test_settings_read_the_agent_token_file(tmp_path):
    (tmp_path / "agent").write_text("secret-agent-token\n")
    s = standin.settings({"agent-token-file": str(tmp_path / "agent")}, "n")
    assert standin.read_agent_token(s) == "secret-agent-token" and not s["unknown"]
    assert standin.read_agent_token(standin.settings({}, "n")) == ""


def test_encryption_config_keeps_identity_for_reading_old_data():
    cfg = standin.encryption_config("a2V5")
    providers = cfg["resources"][0]["providers"]
    assert list(providers[0]) == ["aescbc"] and providers[-1] == {"identity": {}}


@pytest.mark.parametrize(
    "content, secret, signature, valid",
    [  # k8s.io/cluster-bootstrap token/jws/jws_test.go (v0.36.4): what bootstrapsigner computes
        (
            "Hello from the other side. I must have called a thousand times.",
            "my voice is my passcode",
            "eyJhbGciOiJIUzI1NiIsImtpZCI6Impvc2h1YSJ9..VShe2taLd-YTrmWuRkcL_8QTNDHYxQIEBsAYYiIj1_8",
            True,
        ),
        (
            "",
            "my voice is my passcode",
            "eyJhbGciOiJIUzI1NiIsImtpZCI6Impvc2h1YSJ9..7Ui1ALizW4jXphVUB7xUqC9vLYLL9RZeOFfVLoB7Tgk",
            True,
        ),
        (
            "Hello from the other side. I must have called a thousand times.",
            "my voice is my passcode",
            "eyJhbGciOiJIUzI1NiIsImtpZCI6Impvc2h1YSJ9..VShe2taLd-YTrmWuRkcL_8QTNDHYxQIEBsAYYiIj1_8foo",
            False,
        ),
    ],
)
def test_jws_verify_matches_the_upstream_vectors(content, secret, signature, valid):
    assert standin.jws_verify(signature, content, "joshua", secret) is valid


def snapshot_bytes(db: bytes) -> bytes:
    import hashlib

    return db + hashlib.sha256(db).digest()


def gateway_stream(data: bytes, size: int, cut: int) -> list[bytes]:
    """etcd's JSON gateway stream of a snapshot (one {"result": {...}} object per chunk), read in `cut`-byte pieces."""
    import base64
    import json

    text = "".join(
        json.dumps(
            {
                "result": {
                    "remaining_bytes": str(len(data) - i - size),
                    "blob": base64.b64encode(data[i : i + size]).decode(),
                }
            }
        )
        + "\n"
        for i in range(0, len(data), size)
    ).encode()
    return [text[i : i + cut] for i in range(0, len(text), cut)]


@pytest.mark.parametrize("cut", [7, 64, 100000])
def test_a_snapshot_is_read_back_whole_from_the_gateway_stream_however_it_is_cut(cut):
    data = snapshot_bytes(bytes(range(256)) * 40)
    assert standin.snapshot_chunks(gateway_stream(data, 1000, cut)) == data
    assert standin.snapshot_is_whole(data)


def test_a_snapshot_whose_hash_does_not_match_is_refused():
    data = bytearray(snapshot_bytes(b"etcd database" * 100))
    data[10] ^= 1
    assert not standin.snapshot_is_whole(bytes(data))
    assert not standin.snapshot_is_whole(b"short")


def test_an_error_in_the_stream_stops_the_snapshot():
    with pytest.raises(SystemExit, match="etcd refused the snapshot"):
        standin.snapshot_chunks([b'{"error": {"grpc_code": 14, "message": "unavailable"}}'])


def test_pods_reach_the_supervisor_port_through_the_kubernetes_service():
    """The `kubernetes` endpoints the stand-in writes (its API server reconciles none): this node at the supervisor's
    port, where K3s serves /static/ too; the Endpoints are not mirrored into a second slice."""
    endpoints, slice_ = standin.kubernetes_endpoints("10.89.0.2")
    assert endpoints["kind"] == "Endpoints" and slice_["kind"] == "EndpointSlice"
    for obj in (endpoints, slice_):
        assert obj["metadata"]["name"] == "kubernetes" and obj["metadata"]["namespace"] == "default"
    assert endpoints["metadata"]["labels"] == {"endpointslice.kubernetes.io/skip-mirror": "true"}
    assert endpoints["subsets"] == [
        {"addresses": [{"ip": "10.89.0.2"}], "ports": [{"name": "https", "port": 6443, "protocol": "TCP"}]}
    ]
    assert slice_["metadata"]["labels"] == {"kubernetes.io/service-name": "kubernetes"}
    assert slice_["endpoints"] == [{"addresses": ["10.89.0.2"], "conditions": {"ready": True}}]
    assert slice_["ports"] == [{"name": "https", "port": standin.API_PORT, "protocol": "TCP"}]


def flags(args):
    """{flag: value} of a '--flag value' / '-flag value' / '--flag=value' argument list."""
    out, pending = {}, None
    for arg in args:
        if pending:
            out[pending], pending = arg, None
        elif "=" in arg:
            key, _sep, value = arg.partition("=")
            out[key.lstrip("-")] = value
        else:
            pending = arg.lstrip("-")
    return out


def test_the_api_server_trusts_identity_headers_only_from_the_supervisors_certificate():
    api = flags(standin.apiserver_front_args())
    sup = flags(standin.supervisor_command(Path("/ca.crt"))[1:])
    assert api["bind-address"] == "127.0.0.1"  # reachable only through the supervisor from outside the node
    assert api["secure-port"] == str(standin.APISERVER_PORT) != str(standin.API_PORT)
    assert sup["listen"] == "0.0.0.0:%d" % standin.API_PORT
    assert sup["backend"] == "https://127.0.0.1:%d" % standin.APISERVER_PORT
    assert api["endpoint-reconciler-type"] == "none"  # kubernetes_endpoints() writes them
    # The supervisor's client certificate is the one the API server's request-header CA vouches for.
    assert sup["proxy-client-cert-file"] == api["proxy-client-cert-file"]
    assert api["proxy-client-cert-file"].endswith("client-auth-proxy.crt")
    assert api["requestheader-client-ca-file"].endswith("request-header-ca.crt")
    assert api["requestheader-allowed-names"] == "system:auth-proxy"
    assert (api["requestheader-username-headers"], api["requestheader-group-headers"]) == (
        "X-Remote-User",
        "X-Remote-Group",
    )
    assert sup["static-dir"] == str(standin.STATIC) == "/var/lib/rancher/k3s/server/static"


def test_helm_controller_runs_the_klipper_helm_stand_in_without_the_nodes_proxies():
    cmd = flags(standin.helm_controller_command(Path("/admin.kubeconfig"))[1:])
    assert cmd["default-job-image"] == standin.KLIPPER_HELM_IMAGE == nodeimages.KLIPPER_HELM_IMAGE
    assert cmd["kubeconfig"] == "/admin.kubeconfig" and cmd["job-cluster-role"] == "cluster-admin"
    assert {"https_proxy", "HTTPS_PROXY", "no_proxy", "NO_PROXY"} <= set(standin.PROXY_VARIABLES)
