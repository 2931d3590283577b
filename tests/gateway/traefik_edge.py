"""The edge of the gateway tests: the real Traefik proxy, loaded by its own Kubernetes CRD provider with the
collection's rendered IngressRoute, Middlewares, TLSOption and Secrets from a real API server.

What is real: the Traefik binary (lab/nodes/nodebuild.py's `traefik` part: github.com/traefik/traefik/v3 at the release
K3s v1.36.4 installs, built without the ACME DNS-challenge providers and the dashboard's web UI, named so there),
its kubernetescrd provider, routers, middlewares (rate limit in Redis, strip prefix, headers, HSTS), TLS and TLS
options; the API server, etcd and controllers of lab/live/cluster.py (Kubernetes from its Go modules, kwok nodes); the
rendered objects, applied as they are.

Simulated, and named so, where a pod network or cert-manager would stand:
  * the route's backend Service is an ExternalName Service to 127.0.0.1 at the port the test's backend listens on
    (the API server refuses loopback endpoints, and no gateway pod runs): the route's service port is that port;
  * the TLS Secret holds a certificate for the route's host from a CA the test makes (cert-manager issues it on a
    site); clients verify it against that CA, with the route's host as SNI;
  * Traefik runs as a process on loopback (its entry point `websecure` on a free port), one namespace per edge
    configuration, its token a short-lived one of the lab's Traefik ServiceAccount (the chart's RBAC,
    lab/nodes/k3sbundle.py).

Every request goes to loopback only, in bounded loops.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import http.client
import json
import os
import socket
import ssl
import subprocess
import time
import urllib.parse
from pathlib import Path

import yaml

from lab import ROOT
from lab.live import cluster
from lab.nodes import k3sbundle, nodebuild
from lab.pins import read_pin

STATE = ROOT / ".cache" / "cluster-gateway"
TRAEFIK_KINDS = ("IngressRoute", "Middleware", "TLSOption", "ServersTransport")
START_S = 120  # seconds for Traefik to serve a route it was given


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def traefik_binary() -> Path:
    """The lab's Traefik (built once, cached by lab/nodes/nodebuild.py; `make gateway` builds it first)."""
    path = nodebuild.part_dir(read_pin("k3s_version"), "traefik") / "traefik"
    if not path.is_file():
        raise AssertionError("Traefik is not built: run `.venv/bin/python -m lab.nodes.nodebuild build --part traefik`")
    return path


class Cluster:
    """The API server Traefik reads: kubectl as admin, and a token of the lab's Traefik ServiceAccount."""

    def __init__(self, kubeconfig: Path, tmp: Path):
        self.kubeconfig = kubeconfig
        config = yaml.safe_load(kubeconfig.read_text())
        self.server = config["clusters"][0]["cluster"]["server"]
        self.ca_file = tmp / "api-ca.pem"
        self.ca_file.write_bytes(base64.b64decode(config["clusters"][0]["cluster"]["certificate-authority-data"]))
        rbac = [
            d
            for d in yaml.safe_load_all(k3sbundle.traefik_manifest("unused"))
            if d and d["kind"] in ("ServiceAccount", "ClusterRole", "ClusterRoleBinding")
        ]
        self.apply(rbac)
        (account,) = [d for d in rbac if d["kind"] == "ServiceAccount"]
        self.token = self.kubectl(
            "create", "token", account["metadata"]["name"], "-n", account["metadata"]["namespace"], "--duration", "2h"
        ).stdout.strip()

    def kubectl(self, *args, stdin=None, check=True):
        return cluster.kubectl(self.kubeconfig, *args, stdin=stdin, check=check)

    def apply(self, objects):
        doc = {"apiVersion": "v1", "kind": "List", "items": list(objects)}
        return self.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", stdin=json.dumps(doc))


@contextlib.contextmanager
def control_plane(tmp: Path):
    """lab/live/cluster.py's control plane in a state directory of the gateway tests; stopped at the end."""
    kubeconfig = cluster.up(STATE)
    try:
        yield Cluster(kubeconfig, tmp)
    finally:
        if not os.environ.get("LIVE_KEEP"):
            cluster.down(STATE, quiet=True)


class SiteCA:
    """A CA of the test and a certificate for one host from it (openssl), as cert-manager would issue."""

    def __init__(self, tmp: Path, host: str):
        self.dir = tmp / "edge-tls"
        self.dir.mkdir(exist_ok=True)
        self.host = host
        ca_key, ca_crt = self.dir / "ca.key", self.dir / "ca.crt"
        key, csr, crt = self.dir / "tls.key", self.dir / "tls.csr", self.dir / "tls.crt"
        ext = self.dir / "san.ext"
        # What Python's strict verification asks of a chain (keyUsage on the CA, key identifiers on the leaf).
        ext.write_text(
            "subjectAltName=DNS:%s\nextendedKeyUsage=serverAuth\nkeyUsage=critical,digitalSignature\n"
            "authorityKeyIdentifier=keyid,issuer\nsubjectKeyIdentifier=hash\n" % host
        )

        def run(*args):
            subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)

        run("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2",
            "-subj", "/CN=aiinfra.k3s gateway tests CA", "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign", "-keyout", str(ca_key), "-out", str(ca_crt))  # fmt: skip
        run("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-subj", "/CN=" + host,
            "-keyout", str(key), "-out", str(csr))  # fmt: skip
        run("x509", "-req", "-in", str(csr), "-CA", str(ca_crt), "-CAkey", str(ca_key), "-CAcreateserial",
            "-days", "2", "-extfile", str(ext), "-out", str(crt))  # fmt: skip
        self.cert, self.key = crt.read_text(), key.read_text()
        self.context = ssl.create_default_context(cafile=str(ca_crt))

    def secret(self, name: str, namespace: str) -> dict:
        return {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "kubernetes.io/tls",
            "metadata": {"name": name, "namespace": namespace},
            "stringData": {"tls.crt": self.cert, "tls.key": self.key},
        }


def request(method, url, host=None, key=None, body=None, timeout=30, headers=None, tls=None, data=None):
    """(status, headers, text) of one request to url (http, or https with host as SNI verified by tls.context);
    the path is sent as written (no normalisation); never raises for an HTTP error status."""
    parts = urllib.parse.urlsplit(url)
    sent = dict(headers or {})
    if data is None and body is not None:
        data = json.dumps(body).encode()
        sent.setdefault("Content-Type", "application/json")
    if host:
        sent["Host"] = host
    if key:
        sent["Authorization"] = "Bearer " + key
    if parts.scheme == "https":
        # (imported here: the test modules make the collection importable after this module is loaded)
        from ansible_collections.aiinfra.k3s.plugins.module_utils.drill import load

        # The drill's connection (the collection's own): TLS to the address with the host as SNI and checked name.
        conn = load._ConnectToHTTPS(host, parts.hostname, parts.port, timeout, tls.context)
    else:
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    try:
        conn.request(method, (parts.path or "/") + ("?" + parts.query if parts.query else ""), body=data, headers=sent)
        resp = conn.getresponse()
        return resp.status, dict(resp.getheaders()), resp.read().decode()
    finally:
        conn.close()


def edge_objects(docs, namespace, backend_port, tls_secret=None, changes=None):
    """The rendered Traefik objects of the HTTPS route's site moved into namespace, with the test's changes: the
    route's service port is backend_port (see the module docstring); changes(doc) may alter a copy further."""
    objects = []
    for doc in docs:
        if doc.get("kind") not in TRAEFIK_KINDS:
            continue
        doc = copy.deepcopy(doc)
        doc["metadata"]["namespace"] = namespace
        if doc["kind"] == "IngressRoute":
            for route in doc["spec"]["routes"]:
                for service in route.get("services", []):
                    service["port"] = backend_port
            options = doc["spec"].get("tls", {}).get("options")
            if options and "namespace" in options:
                options["namespace"] = namespace
        if changes:
            doc = changes(doc)
        objects.append(doc)
    return objects


def backend_services(objects, namespace, backend_port):
    """ExternalName Services to 127.0.0.1 named as the routes' services (see the module docstring)."""
    names = sorted(
        {s["name"] for d in objects if d["kind"] == "IngressRoute" for r in d["spec"]["routes"] for s in r["services"]}
    )
    return [
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "type": "ExternalName",
                "externalName": "127.0.0.1",
                "ports": [{"name": "http", "port": backend_port}],
            },
        }
        for name in names
    ]


class Edge:
    """Traefik processes of one namespace: base URLs (https://127.0.0.1:PORT) and their API (routers' state)."""

    def __init__(self, namespace, urls, api_urls, procs, tls):
        self.namespace, self.urls, self.api_urls, self.procs, self.tls = namespace, urls, api_urls, procs, tls

    def routers(self, index=0):
        """Traefik's own view of its HTTP routers (its API's raw data): {name: router}."""
        with contextlib.suppress(OSError, ValueError):
            status, _headers, text = request("GET", self.api_urls[index] + "/api/http/routers", timeout=5)
            if status == 200:
                return {r["name"]: r for r in json.loads(text)}
        return {}


def traefik_environment(api, namespace, port, api_port, tmp):
    """Traefik's static configuration, all of it in its environment (Traefik reads one source only; the token is
    not on a command line)."""
    return {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp),
        "TRAEFIK_GLOBAL_CHECKNEWVERSION": "false",
        "TRAEFIK_GLOBAL_SENDANONYMOUSUSAGE": "false",
        "TRAEFIK_ENTRYPOINTS_WEBSECURE_ADDRESS": "127.0.0.1:%d" % port,
        "TRAEFIK_ENTRYPOINTS_WEBSECURE_HTTP_TLS": "true",
        "TRAEFIK_ENTRYPOINTS_TRAEFIK_ADDRESS": "127.0.0.1:%d" % api_port,
        "TRAEFIK_API": "true",
        "TRAEFIK_API_INSECURE": "true",
        "TRAEFIK_API_DASHBOARD": "false",
        "TRAEFIK_PROVIDERS_KUBERNETESCRD": "true",
        "TRAEFIK_PROVIDERS_KUBERNETESCRD_ENDPOINT": api.server,
        "TRAEFIK_PROVIDERS_KUBERNETESCRD_TOKEN": api.token,
        "TRAEFIK_PROVIDERS_KUBERNETESCRD_CERTAUTHFILEPATH": str(api.ca_file),
        "TRAEFIK_PROVIDERS_KUBERNETESCRD_NAMESPACES": namespace,
        "TRAEFIK_PROVIDERS_KUBERNETESCRD_ALLOWEXTERNALNAMESERVICES": "true",
        "TRAEFIK_LOG_LEVEL": "INFO",
        "TRAEFIK_LOG_FORMAT": "json",
        "TRAEFIK_ACCESSLOG": "true",
        "TRAEFIK_ACCESSLOG_FORMAT": "json",
    }


@contextlib.contextmanager
def edges(api, tmp, namespace, objects, backend_port, tls, secrets=(), count=1, ready=True):
    """count Traefik processes reading namespace (created with objects, the backend Services, the TLS Secret and
    secrets); yields an Edge once every process has its HTTPS router enabled (when ready)."""
    api.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}])
    tls_names = {
        d["spec"]["tls"]["secretName"] for d in objects if d["kind"] == "IngressRoute" and d["spec"].get("tls")
    }
    tls_secrets = [tls.secret(n, namespace) for n in tls_names]
    api.apply([*backend_services(objects, namespace, backend_port), *tls_secrets, *secrets, *objects])
    procs, urls, api_urls = [], [], []
    log = open(tmp / ("traefik-%s.log" % namespace), "a")  # noqa: SIM115 (closed below)
    try:
        for _index in range(count):
            port, api_port = free_port(), free_port()
            env = traefik_environment(api, namespace, port, api_port, tmp)
            procs.append(subprocess.Popen([str(traefik_binary())], stdout=log, stderr=subprocess.STDOUT, env=env))
            urls.append("https://127.0.0.1:%d" % port)
            api_urls.append("http://127.0.0.1:%d" % api_port)
        edge = Edge(namespace, urls, api_urls, procs, tls)
        routes = [d for d in objects if d["kind"] == "IngressRoute" and "websecure" in d["spec"]["entryPoints"]]
        wanted = {"%s-%s" % (namespace, r["metadata"]["name"]) for r in routes}
        deadline = time.monotonic() + START_S
        for index, proc in enumerate(procs):
            while True:
                if proc.poll() is not None:
                    raise AssertionError("Traefik exited with %s (log: %s)" % (proc.returncode, log.name))
                routers = edge.routers(index).items()
                names = {n.split("@")[0].rsplit("-", 1)[0]: r for n, r in routers if n.endswith("@kubernetescrd")}
                if not ready or all(names.get(w, {}).get("status") == "enabled" for w in wanted):
                    break
                if time.monotonic() > deadline:
                    raise AssertionError("Traefik did not enable %s within %ds: %s" % (sorted(wanted), START_S, names))
                time.sleep(0.3)
        yield edge
    finally:
        for proc in procs:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
        log.close()
        api.kubectl("delete", "namespace", namespace, "--ignore-not-found", "--wait=false", check=False)
