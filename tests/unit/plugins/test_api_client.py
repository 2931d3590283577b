"""module_utils k8s/api_client and the aiinfra.k3s.api_objects_info action on a loopback API server: plain HTTP
with a token, HTTPS that requires a client certificate signed by a CA made here, discovery, GET by name, paginated
LIST with selectors, and a kubeconfig handed on to kubernetes.core.k8s_info."""

import base64
import datetime
import ipaddress
import json
import ssl
import tempfile
import threading
from http.server import ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import pytest
import yaml
from conftest import JsonHandler, exec_credential_user, run_module
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from ansible_collections.aiinfra.k3s.plugins.module_utils.k8s import api_client
from ansible_collections.aiinfra.k3s.plugins.module_utils.k8s.api_client import ApiError, Unsupported

NODES = [{"metadata": {"name": "node-%d" % i, "labels": {"gpu": str(i % 2 == 0).lower()}}} for i in range(5)]
DEPLOYMENTS = [{"metadata": {"name": "litellm", "namespace": "ai-serving"}, "spec": {"replicas": 2}}]
DISCOVERY = {
    "/api/v1": [
        {"name": "nodes", "kind": "Node", "namespaced": False},
        {"name": "nodes/status", "kind": "Node", "namespaced": False},
        {"name": "namespaces", "kind": "Namespace", "namespaced": False},
        {"name": "pods", "kind": "Pod", "namespaced": True},
        {"name": "secrets", "kind": "Secret", "namespaced": True},
    ],
    "/apis/apps/v1": [{"name": "deployments", "kind": "Deployment", "namespaced": True}],
}
COLLECTIONS = {
    "/api/v1/nodes": NODES,
    "/apis/apps/v1/namespaces/ai-serving/deployments": DEPLOYMENTS,
    "/apis/apps/v1/deployments": DEPLOYMENTS,
}
OBJECTS = {
    "/api/v1/namespaces/kube-system": {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kube-system"}},
    "/apis/apps/v1/namespaces/ai-serving/deployments/litellm": dict(
        DEPLOYMENTS[0], apiVersion="apps/v1", kind="Deployment"
    ),
    "/api/v1/nodes/node-1": dict(NODES[1], apiVersion="v1", kind="Node"),
    # what the kubernetes client's discovery reads first (the handed-on read)
    "/version": {"major": "1", "minor": "36", "gitVersion": "v1.36.4"},
    "/api": {"kind": "APIVersions", "versions": ["v1"]},
    "/apis": {
        "kind": "APIGroupList",
        "groups": [
            {
                "name": "apps",
                "versions": [{"groupVersion": "apps/v1", "version": "v1"}],
                "preferredVersion": {"groupVersion": "apps/v1", "version": "v1"},
            }
        ],
    },
}


class FakeApi(JsonHandler):
    """Serves DISCOVERY, COLLECTIONS (paginated, `gpu=true` label selector) and OBJECTS; 401 without the token
    when one is set; records every request."""

    protocol_version = "HTTP/1.1"  # keep-alive, as the API server
    token = None
    requests = []

    def do_GET(self):
        url = urlparse(self.path)
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        FakeApi.requests.append((url.path, query, self.headers.get("Authorization")))
        if FakeApi.token and self.headers.get("Authorization") != "Bearer " + FakeApi.token:
            return self.answer(401, {"kind": "Status", "message": "Unauthorized"})
        if url.path == "/api/v1/pods":
            return self.answer(403, {"kind": "Status", "message": 'pods is forbidden: User "viewer" cannot list'})
        if url.path in DISCOVERY:
            return self.answer(200, {"kind": "APIResourceList", "resources": DISCOVERY[url.path]})
        if url.path in OBJECTS:
            return self.answer(200, OBJECTS[url.path])
        if url.path in FakeApi.applied:
            return self.answer(200, FakeApi.applied[url.path])
        items = COLLECTIONS.get(url.path)
        if items is None:
            return self.answer(404, {"kind": "Status", "message": "%s not found" % url.path})
        if query.get("labelSelector") == "gpu=true":
            items = [i for i in items if i["metadata"]["labels"]["gpu"] == "true"]
        limit, start = int(query.get("limit", 500)), int(query.get("continue", 0))
        meta = {"continue": str(start + limit)} if start + limit < len(items) else {}
        return self.answer(
            200, {"kind": "List", "apiVersion": "v1", "metadata": meta, "items": items[start : start + limit]}
        )

    # Server-side apply, as the API server answers it: the stored object with a resourceVersion that moves only when
    # the content does; dryRun=All stores nothing. The applied objects live in FakeApi.applied by path.
    applied = {}

    def do_PATCH(self):
        url = urlparse(self.path)
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        FakeApi.requests.append((url.path, query, self.headers.get("Content-Type")))
        if FakeApi.token and self.headers.get("Authorization") != "Bearer " + FakeApi.token:
            return self.answer(401, {"kind": "Status", "message": "Unauthorized"})
        if body["metadata"]["name"] == "refused":
            return self.answer(422, {"kind": "Status", "message": 'Secret "refused" is invalid'})
        old = FakeApi.applied.get(url.path)
        content = {k: v for k, v in body.items() if k != "metadata"}
        if old and {k: v for k, v in old.items() if k != "metadata"} == content:
            return self.answer(200, old)
        version = str(int(old["metadata"]["resourceVersion"]) + 1) if old else "1"
        new = dict(body, metadata=dict(body["metadata"], resourceVersion=version, managedFields=[
            {"manager": query["fieldManager"], "operation": "Apply"}]))  # fmt: skip
        if query.get("dryRun") != "All":
            FakeApi.applied[url.path] = new
        return self.answer(201 if old is None else 200, new)


def _cert(subject, issuer_key, key, issuer=None, ca=False, san=None):
    """A certificate Python 3.13's strict X.509 checks accept (key identifiers, a CA's key usage), as the kubernetes
    client (urllib3) checks it."""
    now = datetime.datetime.now(datetime.timezone.utc)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(issuer or name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_key.public_key()), critical=False)
    )
    if ca:
        usage = dict.fromkeys(("digital_signature", "content_commitment", "key_encipherment", "data_encipherment",
                               "key_agreement", "encipher_only", "decipher_only"), False)  # fmt: skip
        builder = builder.add_extension(x509.KeyUsage(key_cert_sign=True, crl_sign=True, **usage), critical=True)
    if san:
        builder = builder.add_extension(x509.SubjectAlternativeName(san), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def _pem(obj):
    if isinstance(obj, x509.Certificate):
        return obj.public_bytes(serialization.Encoding.PEM)
    return obj.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    """A CA, the server's certificate (127.0.0.1 and api.cluster.test) and a client certificate, as PEM files."""
    where = tmp_path_factory.mktemp("pki")
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = _cert("test CA", ca_key, ca_key, ca=True)
    for name, san in (("server", [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("api.cluster.test")]),
                      ("client", None)):  # fmt: skip
        key = ec.generate_private_key(ec.SECP256R1())
        (where / f"{name}.key").write_bytes(_pem(key))
        (where / f"{name}.crt").write_bytes(_pem(_cert(name, ca_key, key, issuer=ca.subject, san=san)))
    (where / "ca.crt").write_bytes(_pem(ca))
    other_key = ec.generate_private_key(ec.SECP256R1())
    (where / "other-ca.crt").write_bytes(_pem(_cert("other CA", other_key, other_key, ca=True)))
    return where


def serve(tls_dir=None):
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeApi)
    if tls_dir:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(tls_dir / "server.crt", tls_dir / "server.key")
        context.verify_mode = ssl.CERT_REQUIRED  # the client must show a certificate of the CA
        context.load_verify_locations(tls_dir / "ca.crt")
        server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.fixture
def http_api():
    FakeApi.requests, FakeApi.token, FakeApi.applied = [], "s3cret-token", {}
    server = serve()
    yield "http://127.0.0.1:%d" % server.server_address[1]
    server.shutdown()
    server.server_close()


@pytest.fixture
def https_api(pki):
    FakeApi.requests, FakeApi.token = [], None
    server = serve(pki)
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def kubeconfig(path, cluster, user):
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "site",
        "clusters": [{"name": "site", "cluster": cluster}],
        "users": [{"name": "site", "user": user}],
        "contexts": [{"name": "site", "context": {"cluster": "site", "user": "site"}}],
    }))  # fmt: skip
    return str(path)


def b64(path):
    return base64.b64encode(path.read_bytes()).decode()


def test_token_list_pages_and_fills_kind(http_api, tmp_path):
    conn = api_client.connect(kubeconfig(tmp_path / "kc", {"server": http_api}, {"token": "s3cret-token"}))
    found, nodes = api_client.read_objects(conn, "v1", "Node", limit=2)
    assert found is True
    assert [n["metadata"]["name"] for n in nodes] == ["node-%d" % i for i in range(5)]
    assert {(n["apiVersion"], n["kind"]) for n in nodes} == {("v1", "Node")}
    lists = [(r[0], r[1].get("continue")) for r in FakeApi.requests if r[0] == "/api/v1/nodes"]
    assert lists == [("/api/v1/nodes", None), ("/api/v1/nodes", "2"), ("/api/v1/nodes", "4")]
    assert {r[2] for r in FakeApi.requests} == {"Bearer s3cret-token"}


def test_selectors_namespace_and_get_by_name(http_api, tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text("s3cret-token\n")
    conn = api_client.connect(kubeconfig(tmp_path / "kc", {"server": http_api}, {"tokenFile": "token"}))
    gpus = api_client.read_objects(conn, "v1", "Node", label_selectors=["gpu=true"])[1]
    assert [n["metadata"]["name"] for n in gpus] == ["node-0", "node-2", "node-4"]
    assert FakeApi.requests[-1][1]["labelSelector"] == "gpu=true"
    found, deps = api_client.read_objects(conn, "apps/v1", "Deployment", namespace="ai-serving")
    assert found and deps[0]["kind"] == "Deployment" and deps[0]["apiVersion"] == "apps/v1"
    kube_system = OBJECTS["/api/v1/namespaces/kube-system"]
    assert api_client.read_objects(conn, "v1", "Namespace", name="kube-system") == (True, [kube_system])
    assert api_client.read_objects(conn, "v1", "Namespace", name="absent") == (True, [])
    assert api_client.read_objects(conn, "batch/v1", "Job") == (False, [])
    assert api_client.read_objects(conn, "v1", "ConfigMap") == (False, [])


def test_wrong_token_is_an_error_with_the_status(http_api, tmp_path):
    conn = api_client.connect(kubeconfig(tmp_path / "kc", {"server": http_api}, {"token": "wrong"}))
    with pytest.raises(ApiError, match="401 Unauthorized") as err:
        api_client.read_objects(conn, "v1", "Node")
    assert err.value.status == 401


def test_client_certificate_from_files_and_from_data(https_api, pki, tmp_path):
    files = {"client-certificate": str(pki / "client.crt"), "client-key": str(pki / "client.key")}
    datas = {"client-certificate-data": b64(pki / "client.crt"), "client-key-data": b64(pki / "client.key")}
    server = "https://127.0.0.1:%d" % https_api
    for n, (cluster, user) in enumerate((
        ({"server": server, "certificate-authority": str(pki / "ca.crt")}, files),
        ({"server": server, "certificate-authority-data": b64(pki / "ca.crt")}, datas),
        ({"server": "https://localhost:%d" % https_api, "certificate-authority": str(pki / "ca.crt"),
          "tls-server-name": "api.cluster.test"}, files),
    )):  # fmt: skip
        conn = api_client.connect(kubeconfig(tmp_path / ("kc%d" % n), cluster, user))
        assert len(api_client.read_objects(conn, "v1", "Node")[1]) == 5
        conn.close()


@pytest.mark.parametrize(
    ("cluster", "user", "error"),
    [
        pytest.param({"certificate-authority": "other-ca.crt"}, "client", "CERTIFICATE_VERIFY_FAILED",
                     id="server-cert-of-another-ca"),
        pytest.param({"certificate-authority": "ca.crt"}, None, "certificate|reset by peer",
                     id="no-client-certificate"),
        pytest.param({"server": "https://localhost:{port}", "certificate-authority": "ca.crt"}, "client", "localhost",
                     id="host-not-in-certificate"),
        pytest.param({"certificate-authority": "absent.crt"}, "client", "certificate-authority", id="missing-ca-file"),
    ],
)  # fmt: skip
def test_tls_refusals(https_api, pki, tmp_path, cluster, user, error):
    cluster = {
        k: (str(pki / v) if k == "certificate-authority" else v.format(port=https_api)) for k, v in cluster.items()
    }
    cluster.setdefault("server", "https://127.0.0.1:%d" % https_api)
    user = {"client-certificate": str(pki / "client.crt"), "client-key": str(pki / "client.key")} if user else {}
    with pytest.raises(ApiError, match=error):
        conn = api_client.connect(kubeconfig(tmp_path / "kc", cluster, user))
        api_client.read_objects(conn, "v1", "Node")


@pytest.mark.parametrize(
    ("cluster", "user"),
    [
        pytest.param({}, {"exec": {"command": "aws", "apiVersion": "client.authentication.k8s.io/v1"}}, id="exec"),
        pytest.param({}, {"auth-provider": {"name": "oidc"}}, id="auth-provider"),
        pytest.param({}, {"username": "admin", "password": "x"}, id="basic-auth"),
        pytest.param({}, {"token": "t", "as": "someone"}, id="impersonation"),
        pytest.param({"proxy-url": "http://127.0.0.1:3128"}, {"token": "t"}, id="proxy"),
    ],
)
def test_what_it_hands_on(tmp_path, cluster, user):
    with pytest.raises(Unsupported):
        api_client.connect(kubeconfig(tmp_path / "kc", {"server": "https://127.0.0.1:6443", **cluster}, user))


@pytest.mark.parametrize(
    ("text", "error"),
    [
        pytest.param("[]", "not a mapping", id="not-a-mapping"),
        pytest.param(b"\xff\xfe current-context", "cannot read", id="not-utf-8"),
        pytest.param("current-context: x\ncontexts: [{name: x, context: [a]}]\n", "not a mapping", id="context-a-list"),
        pytest.param("clusters: []\n", "no current-context", id="no-context"),
        pytest.param("current-context: x\ncontexts: []\n", "no context named 'x'", id="unknown-context"),
        pytest.param(
            "current-context: x\ncontexts: [{name: x, context: {cluster: c, user: u}}]\n"
            "clusters: [{name: c, cluster: {server: 'ftp://h'}}]\nusers: [{name: u, user: {}}]\n",
            "not an http", id="bad-server"),
    ],
)  # fmt: skip
def test_kubeconfig_refusals(tmp_path, text, error):
    (tmp_path / "kc").write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(ApiError, match=error):
        api_client.connect(str(tmp_path / "kc"))


def test_default_kubeconfig():
    assert api_client.default_kubeconfig({"KUBECONFIG": "/a:/b"}) == "/a"
    assert api_client.default_kubeconfig({}) == "~/.kube/config"


@pytest.mark.slow
def test_action_reads_in_process_and_hands_exec_to_k8s_info(http_api, tmp_path):
    """The action as Ansible runs it: the token kubeconfig is read by api_client; the same API behind an exec
    credential plugin (a script printing the token) by kubernetes.core.k8s_info, with the same answer."""
    rc, out = run_module("aiinfra.k3s.api_objects_info", {
        "kubeconfig": kubeconfig(tmp_path / "kc", {"server": http_api}, {"token": "s3cret-token"}),
        "kind": "Node", "label_selectors": ["gpu=true"]})  # fmt: skip
    assert rc == 0 and out["reader"] == "api_client" and out["changed"] is False
    names = [n["metadata"]["name"] for n in out["resources"]]
    assert names == ["node-0", "node-2", "node-4"]
    exec_user = exec_credential_user(tmp_path, "s3cret-token")
    rc, out = run_module("aiinfra.k3s.api_objects_info", {
        "kubeconfig": kubeconfig(tmp_path / "kc-exec", {"server": http_api}, exec_user),
        "kind": "Node", "label_selectors": ["gpu=true"]})  # fmt: skip
    assert rc == 0 and out["reader"] == "kubernetes.core.k8s_info", out
    assert [n["metadata"]["name"] for n in out["resources"]] == names
    rc, out = run_module("aiinfra.k3s.api_objects_info", {
        "kubeconfig": kubeconfig(tmp_path / "kc-bad", {"server": http_api}, {"token": "wrong"}), "kind": "Node"})  # fmt: skip
    assert rc != 0 and out["failed"] and "401" in out["msg"] and "resources" not in out


def test_name_namespace_field_selectors_and_scope(http_api, tmp_path):
    conn = api_client.connect(kubeconfig(tmp_path / "kc", {"server": http_api}, {"token": "s3cret-token"}))
    found, deps = api_client.read_objects(conn, "apps/v1", "Deployment", name="litellm", namespace="ai-serving")
    assert found and [d["metadata"]["name"] for d in deps] == ["litellm"]
    assert FakeApi.requests[-1][0] == "/apis/apps/v1/namespaces/ai-serving/deployments/litellm"
    assert len(api_client.read_objects(conn, "apps/v1", "Deployment")[1]) == 1  # every namespace
    assert FakeApi.requests[-1][0] == "/apis/apps/v1/deployments"
    # a cluster-scoped kind ignores the namespace it is given
    assert api_client.read_objects(conn, "v1", "Node", name="node-1", namespace="ai-serving")[1][0]["kind"] == "Node"
    assert FakeApi.requests[-1][0] == "/api/v1/nodes/node-1"
    api_client.read_objects(conn, "v1", "Node", field_selectors=["spec.unschedulable=false", "metadata.name!=x"])
    assert FakeApi.requests[-1][1]["fieldSelector"] == "spec.unschedulable=false,metadata.name!=x"


def test_forbidden_fails_rather_than_reading_nothing(http_api, tmp_path):
    conn = api_client.connect(kubeconfig(tmp_path / "kc", {"server": http_api}, {"token": "s3cret-token"}))
    with pytest.raises(ApiError, match="403 pods is forbidden") as err:
        api_client.read_objects(conn, "v1", "Pod")
    assert err.value.status == 403


def test_only_the_kubeconfig_ca_vouches_for_the_server(pki, tmp_path):
    """The kubeconfig's CA is the one trust anchor (the system's CAs are not added); without one, the system's."""
    cluster = {"server": "https://127.0.0.1:6443", "certificate-authority-data": b64(pki / "ca.crt")}
    conn = api_client.connect(kubeconfig(tmp_path / "kc", cluster, {}))
    assert conn._context.cert_store_stats()["x509_ca"] == 1
    assert conn._context.verify_flags & ssl.VERIFY_X509_STRICT
    system = ssl.create_default_context().cert_store_stats()["x509_ca"]
    conn = api_client.connect(kubeconfig(tmp_path / "kc2", {"server": "https://127.0.0.1:6443"}, {}))
    assert conn._context.cert_store_stats()["x509_ca"] == system


def test_insecure_skip_tls_verify_and_no_key_left_behind(https_api, pki, tmp_path, monkeypatch):
    """insecure-skip-tls-verify reads a server of an unknown CA; the client key passes through a private temporary
    file that is gone once the connection is made."""
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    user = {"client-certificate-data": b64(pki / "client.crt"), "client-key-data": b64(pki / "client.key")}
    cluster = {"server": "https://127.0.0.1:%d" % https_api, "insecure-skip-tls-verify": True}
    conn = api_client.connect(kubeconfig(tmp_path / "kc", cluster, user))
    assert list(scratch.iterdir()) == []
    assert len(api_client.read_objects(conn, "v1", "Node")[1]) == 5


@pytest.mark.parametrize(
    ("env", "handed_on"),
    [
        pytest.param({"HTTPS_PROXY": "http://proxy.site:3128"}, True, id="proxy"),
        pytest.param({"ALL_PROXY": "http://proxy.site:3128"}, True, id="all-proxy"),
        pytest.param({"https_proxy": "http://proxy.site:3128", "no_proxy": "10.0.0.10"}, False, id="no-proxy-host"),
        pytest.param({"HTTP_PROXY": "http://proxy.site:3128"}, False, id="other-scheme"),
        pytest.param({}, False, id="none"),
    ],
)
def test_the_proxy_environment_hands_the_read_on(tmp_path, env, handed_on):
    """The environment given (the action passes the task's over the controller's) decides, as the kubernetes client's
    proxy settings do."""
    path = kubeconfig(tmp_path / "kc", {"server": "https://10.0.0.10:6443", "insecure-skip-tls-verify": True}, {})
    if handed_on:
        with pytest.raises(Unsupported, match="proxy"):
            api_client.connect(path, environ=env)
    else:
        api_client.connect(path, environ=env)


def test_wrapped_base64_and_default_port(pki, tmp_path):
    """base64 broken over lines (as `base64` without -w0 writes it) is read, as the kubernetes client reads it; a
    server without a port is reached on 443."""
    wrapped = "\n".join(b64(pki / "ca.crt")[i : i + 76] for i in range(0, len(b64(pki / "ca.crt")), 76))
    conn = api_client.connect(
        kubeconfig(tmp_path / "kc", {"server": "https://[fd00::1]", "certificate-authority-data": wrapped}, {})
    )
    assert conn._context.cert_store_stats()["x509_ca"] == 1
    assert (conn._host, conn._port) == ("fd00::1", 443)


@pytest.mark.parametrize(
    ("cluster", "user", "error"),
    [
        pytest.param({"server": "https://h:99999"}, {}, "not a URL", id="bad-port"),
        pytest.param({"server": "https://[fd00::1:6443"}, {}, "not a URL", id="broken-ipv6"),
        pytest.param({"server": "https://h:6443", "certificate-authority-data": "not base64!"}, {}, "not base64",
                     id="bad-ca-data"),
        pytest.param({"server": "https://h:6443", "certificate-authority-data": "Q0E="}, {}, "cannot be used", id="ca-not-pem"),
    ],
)  # fmt: skip
def test_bad_kubeconfig_values_are_api_errors(tmp_path, cluster, user, error):
    with pytest.raises(ApiError, match=error):
        api_client.connect(kubeconfig(tmp_path / "kc", cluster, user))


NAMESPACE = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ai-serving"}}
SECRET = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "gateway-key", "namespace": "ai-serving"},
          "stringData": {"key": "k-1"}}  # fmt: skip


def test_server_side_apply_changes_only_what_differs(http_api, tmp_path):
    conn = api_client.connect(kubeconfig(tmp_path / "kc", {"server": http_api}, {"token": "s3cret-token"}))
    first = api_client.apply_objects(conn, [NAMESPACE, SECRET], "aiinfra-k3s")
    assert [api_client.applied_changed(b, a) for b, a in first] == [True, True]
    patches = [r for r in FakeApi.requests if r[2] == "application/apply-patch+yaml"]
    assert [(p[0], p[1]) for p in patches] == [
        ("/api/v1/namespaces/ai-serving", {"fieldManager": "aiinfra-k3s", "force": "true"}),
        ("/api/v1/namespaces/ai-serving/secrets/gateway-key", {"fieldManager": "aiinfra-k3s", "force": "true"}),
    ]
    again = api_client.apply_objects(conn, [NAMESPACE, SECRET], "aiinfra-k3s")
    assert [api_client.applied_changed(b, a) for b, a in again] == [False, False]
    rotated = dict(SECRET, stringData={"key": "k-2"})
    ((before, after),) = api_client.apply_objects(conn, [rotated], "aiinfra-k3s", force=False)
    assert api_client.applied_changed(before, after) and after["metadata"]["resourceVersion"] == "2"
    assert "force" not in FakeApi.requests[-1][1]


def test_a_dry_run_stores_nothing_and_says_what_would_change(http_api, tmp_path):
    conn = api_client.connect(kubeconfig(tmp_path / "kc", {"server": http_api}, {"token": "s3cret-token"}))
    ((before, after),) = api_client.apply_objects(conn, [SECRET], "m", dry_run=True)
    assert before is None and api_client.applied_changed(before, after, dry_run=True)
    assert FakeApi.requests[-1][1]["dryRun"] == "All" and FakeApi.applied == {}
    api_client.apply_objects(conn, [SECRET], "m")
    ((before, after),) = api_client.apply_objects(conn, [SECRET], "m", dry_run=True)
    assert not api_client.applied_changed(before, after, dry_run=True)
    ((before, after),) = api_client.apply_objects(conn, [dict(SECRET, stringData={"key": "k-2"})], "m", dry_run=True)
    assert api_client.applied_changed(before, after, dry_run=True)
    assert FakeApi.applied["/api/v1/namespaces/ai-serving/secrets/gateway-key"]["stringData"] == {"key": "k-1"}


@pytest.mark.parametrize(
    ("obj", "error"),
    [
        pytest.param({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}}, "serves no Job", id="kind"),
        pytest.param({"apiVersion": "v1", "kind": "Secret", "metadata": {}}, "metadata.name", id="no-name"),
        pytest.param(dict(SECRET, metadata={"name": "refused", "namespace": "x"}), "Secret x/refused: .*422 Secret",
                     id="refused"),
    ],
)  # fmt: skip
def test_an_apply_that_cannot_be_made_names_the_object(http_api, tmp_path, obj, error):
    conn = api_client.connect(kubeconfig(tmp_path / "kc", {"server": http_api}, {"token": "s3cret-token"}))
    with pytest.raises(ApiError, match=error):
        api_client.apply_objects(conn, [NAMESPACE, obj], "m")


@pytest.mark.slow
def test_the_apply_action_in_check_mode_normal_and_diff(http_api, tmp_path):
    """The action as Ansible runs it: check mode applies nothing, a run applies, a second run changes nothing, and the
    diff of a changed Secret hides its values."""
    args = {"kubeconfig": kubeconfig(tmp_path / "kc", {"server": http_api}, {"token": "s3cret-token"}),
            "field_manager": "aiinfra-k3s", "definition": [NAMESPACE, SECRET]}  # fmt: skip
    rc, out = run_module("aiinfra.k3s.api_objects", args, check=True)
    assert rc == 0 and out["changed"] is True and out["reader"] == "api_client" and FakeApi.applied == {}
    rc, out = run_module("aiinfra.k3s.api_objects", args)
    assert rc == 0 and out["changed"] is True
    assert [o["metadata"]["resourceVersion"] for o in out["objects"]] == ["1", "1"]
    rc, out = run_module("aiinfra.k3s.api_objects", args)
    assert rc == 0 and out["changed"] is False
    args["definition"] = [dict(SECRET, stringData={"key": "k-2"})]
    rc, out = run_module("aiinfra.k3s.api_objects", args, check=True, diff=True)
    assert rc == 0 and out["changed"] is True and "k-2" not in json.dumps(out["diff"])
    assert "<hidden>" in out["diff"][0]["after"] and out["diff"][0]["after_header"] == "Secret ai-serving/gateway-key"
    args["definition"] = [dict(SECRET, metadata={"name": "refused", "namespace": "ai-serving"})]
    rc, out = run_module("aiinfra.k3s.api_objects", args)
    assert rc != 0 and "refused" in out["msg"] and "422" in out["msg"]


@pytest.mark.slow
def test_the_apply_action_hands_an_exec_kubeconfig_to_kubernetes_core_k8s(http_api, tmp_path):
    """A kubeconfig whose user runs an exec credential plugin is applied by kubernetes.core.k8s (server-side apply,
    the same field manager): the same objects reach the API, and the action returns them as its own."""
    exec_user = exec_credential_user(tmp_path, "s3cret-token")
    args = {"kubeconfig": kubeconfig(tmp_path / "kc-exec", {"server": http_api}, exec_user),
            "field_manager": "aiinfra-k3s", "definition": [NAMESPACE, SECRET]}  # fmt: skip
    rc, out = run_module("aiinfra.k3s.api_objects", args)
    assert rc == 0 and out["reader"] == "kubernetes.core.k8s", out
    assert [o["metadata"]["name"] for o in out["objects"]] == ["ai-serving", "gateway-key"]
    patches = [r for r in FakeApi.requests if r[2] == "application/apply-patch+yaml"]
    assert [p[1]["fieldManager"] for p in patches] == ["aiinfra-k3s", "aiinfra-k3s"]
    assert set(FakeApi.applied) == {
        "/api/v1/namespaces/ai-serving",
        "/api/v1/namespaces/ai-serving/secrets/gateway-key",
    }


def test_a_dry_run_counts_a_new_owner_of_the_same_fields_but_not_a_new_time():
    """In check mode the answer of a dry run is compared with the object as it is: a field manager taking over the
    same values is a change (the real apply stores it), a managedFields time alone is not."""
    before = {"kind": "Secret", "data": {"k": "dg=="}, "metadata": {"name": "s", "resourceVersion": "7",
              "managedFields": [{"manager": "deploy@k3s", "operation": "Apply", "time": "T1"}]}}  # fmt: skip
    retimed = dict(before, metadata=dict(before["metadata"], managedFields=[
        {"manager": "deploy@k3s", "operation": "Apply", "time": "T2"}]))  # fmt: skip
    taken = dict(before, metadata=dict(before["metadata"], managedFields=[
        {"manager": "deploy@k3s", "operation": "Apply", "time": "T1"},
        {"manager": "aiinfra-k3s", "operation": "Apply", "time": "T2"}]))  # fmt: skip
    assert not api_client.applied_changed(before, retimed, dry_run=True)
    assert api_client.applied_changed(before, taken, dry_run=True)
    assert not api_client.applied_changed(before, dict(taken, metadata=dict(taken["metadata"], resourceVersion="7")))
