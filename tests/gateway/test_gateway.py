"""The gateway as clients and Prometheus meet it: the real LiteLLM proxy (PyPI, the release the image pins;
`make gateway` installs it) started with the config and the container arguments and environment that
render.yml writes, as the pod runs it (lab/live/runtime.py: the rendered uid without a passwd entry, a read-only
root with only /tmp writable, the config ConfigMap mounted read-only where the pod mounts it), behind Traefik's
the real Traefik proxy (the lab's build of the release K3s bundles) whose CRD provider reads the rendered
IngressRoute, its Middlewares (HSTS, key headers, rate limit in Redis, strip prefix) and TLSOption from a real API
server (tests/gateway/traefik_edge.py), over HTTPS with the route's host as SNI.

Simulated, and named so: the model servers are stand-in backends on loopback (an OpenAI-compatible
/v1/chat/completions that answers with the model name it was asked for; a vLLM model's stand-in requires the
rendered model servers' key as vLLM does, with the lab stand-in's check, lab/nodes/programs/model_server_standin.py), and the
rendered api_base of each model is pointed at its stand-in instead of the cluster Service (the one change to the
config); LiteLLM
listens on a free loopback port instead of the container port, which Traefik reaches through an ExternalName
Service, and the site's certificate comes from a CA of the test (traefik_edge.py names both). The rate limit is also
run by a second Traefik, in a namespace of its own, whose rendered rateLimit has its average and burst lowered, so
that a bounded loop reaches it. The network policies are not part of this test (the live tests apply them).
"""

import contextlib
import importlib.util
import json
import os
import secrets
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import traefik_edge
import yaml

from lab import ROOT
from lab.live import runtime
from lab.nodes.programs import model_server_standin  # the lab's stand-in: its key check is the one under test

# The unit tests' helpers (running playbooks with the working tree's collection, writing a site inventory).
_spec = importlib.util.spec_from_file_location("unit_helpers", ROOT / "tests" / "unit" / "conftest.py")
helpers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(helpers)  # it also makes the collection importable

from ansible_collections.aiinfra.k3s.plugins.module_utils.plan import consumers  # noqa: E402

LITELLM = ROOT / ".cache" / "litellm-venv" / "bin" / "litellm"
LIVE_SITES = {s["id"]: s for s in yaml.safe_load((ROOT / "tests" / "live" / "sites.yml").read_text())}
SITES = {
    # The example operators copy: one vLLM model, the route under /api/litellm (stripped before the gateway).
    "example": {"inventory": ROOT / "inventories" / "example"},
    # The live tests' largest site: vLLM and NIM models, tensor parallelism, time-slicing, the whole host ("/").
    "full": LIVE_SITES["full"],
}
# Routes LiteLLM serves that must never be reachable through the public route (admin API, UI, metrics, and
# /health, which calls every model).
ADMIN = [
    ("POST", "/key/generate"),
    ("GET", "/key/list"),
    ("POST", "/user/new"),
    ("POST", "/team/new"),
    ("POST", "/model/new"),
    ("GET", "/model/info"),
    ("GET", "/ui"),
    ("GET", "/ui/"),
    ("GET", "/metrics/"),
    ("GET", "/health"),
    ("GET", "/config/list"),
    ("GET", "/global/spend/logs"),
    ("GET", "/v1/chat/completions/../../key/list"),
]
DEADLINE = 120  # seconds for a process to answer
# The full site's consumers (tests/gateway/test_consumers.py): alice may call one model and is throttled at 4
# requests a minute; bob may call every model.
CONSUMERS = [
    {"name": "alice", "team": "research", "models": ["qwen-7b"], "rpm_limit": 4, "tpm_limit": 100000},
    {"name": "bob", "team": "product", "rpm_limit": 1000, "tpm_limit": 1000000},
]
PRICES = {"qwen-7b": {"prompt": 0.000001, "completion": 0.000002}}
# The throttled edge's rate limit: the rendered one (its sourceCriterion) with this average, burst and period (a
# token every 20 s: a bounded loop spends the burst whatever LiteLLM's answer time).
THROTTLED = {"average": 3, "burst": 3, "period": "1m"}


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


TLS = {}  # the site's CA per route host (traefik_edge.SiteCA), set by the gateway fixture


def request(method, url, host=None, key=None, body=None, timeout=30, headers=None):
    """(status, headers, text) of one HTTP request (HTTPS through Traefik: the host as SNI, verified against the
    site's CA); never raises for an HTTP error status."""
    return traefik_edge.request(method, url, host, key, body, timeout, headers, tls=TLS.get(host))


def from_traefik(status, text):
    """Traefik's own 404 (no router matched): its plain-text body, never LiteLLM's JSON."""
    return status == 404 and text == "404 page not found\n"


def wait_for(url, proc, what):
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError("%s exited with %s" % (what, proc.returncode))
        try:
            urllib.request.urlopen(url, timeout=2).close()
            return
        except urllib.error.HTTPError:
            return  # it answers
        except OSError:
            time.sleep(0.5)
    raise AssertionError("%s did not answer %s within %ds" % (what, url, DEADLINE))


class StandIn(BaseHTTPRequestHandler):
    """A stand-in model server (not vLLM or NIM): answers chat completions with the model it was asked for. With
    api_keys (a vLLM model's), it refuses what vLLM refuses without its key (the lab stand-in's check, 401)."""

    calls = None  # list shared with the test, set per server
    request_ids = []  # the X-Request-ID of each completion request, every stand-in of the module
    api_keys = []  # the keys vLLM would be started with (VLLM_API_KEY); none: nothing is guarded
    authorizations = None  # the Authorization header of each request, set per server

    def refused(self):
        if self.authorizations is not None:
            self.authorizations.append(self.headers.get("Authorization"))
        path = self.path.split("?", 1)[0]
        if model_server_standin.authorized(self.command, path, self.headers.get("Authorization"), self.api_keys):
            return False
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.reply({"error": "Unauthorized"}, 401)
        return True

    def do_POST(self):
        if self.refused():
            return
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        self.calls.append((self.path, body.get("model")))
        StandIn.request_ids.append(self.headers.get("X-Request-ID"))
        self.reply(
            {
                "id": "chatcmpl-stand-in",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body.get("model"),
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "stop",
                        "message": {"role": "assistant", "content": "stand-in for %s" % body.get("model")},
                    }
                ],
                "usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7},
            }
        )

    def do_GET(self):
        if self.refused():
            return
        self.reply({"object": "list", "data": []})

    def reply(self, obj, status=200):
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


def one(docs, kind, name=None, pred=None):
    found = [
        d
        for d in docs
        if d["kind"] == kind and (name is None or d["metadata"]["name"] == name) and (pred is None or pred(d))
    ]
    assert len(found) == 1, "%d %s %s" % (len(found), kind, name or "")
    return found[0]


@pytest.fixture(scope="module", params=sorted(SITES), ids=sorted(SITES))
def gateway(request, tmp_path_factory, edge_api):
    if not LITELLM.exists():
        pytest.fail("the LiteLLM proxy is not installed: run `make gateway` (it installs .cache/litellm-venv)")
    tmp = tmp_path_factory.mktemp(request.param)
    master_key = "sk-" + secrets.token_hex(24)
    # The secrets are rendered too (render_secrets): the consumers' hashes and the Redis password are read from the
    # rendered Secrets, as the pod mounts them. The full site gets consumers, their keys issued as
    # playbooks/consumers.yml issues them (only the hashes reach the inventory).
    site_vars = {
        "litellm_master_key": master_key,
        "monitoring_grafana_admin_password": secrets.token_urlsafe(24),
        "nim_ngc_api_key": "nvapi-" + secrets.token_hex(24),
    }
    consumer_keys = {}
    if request.param == "full":
        consumer_keys = {c["name"]: consumers.new_key() for c in CONSUMERS}
        site_vars.update(
            litellm_consumers=[*CONSUMERS, {"name": "gone", "revoked": True}],
            litellm_consumer_key_hashes={n: consumers.key_hash(k) for n, k in consumer_keys.items()},
            monitoring_token_prices=PRICES,
        )
        consumer_keys["gone"] = consumers.new_key()  # a revoked consumer's key, hash dropped
    (tmp / "site-vars.json").write_text(json.dumps(site_vars))
    docs = helpers.render_site(
        SITES[request.param], tmp, ["-e", "@%s" % (tmp / "site-vars.json"), "-e", "render_secrets=true"]
    )
    deployment = one(
        docs, "Deployment", pred=lambda d: d["metadata"]["labels"].get("app.kubernetes.io/component") == "gateway"
    )
    name = deployment["metadata"]["name"]

    def in_ns(doc):
        return doc["metadata"]["namespace"] == deployment["metadata"]["namespace"]

    configmap = one(docs, "ConfigMap", name + "-config")["data"]
    config = yaml.safe_load(configmap["config.yaml"])
    pod_files = {
        "hook": configmap["aiinfra_auth.py"],
        "consumers": one(docs, "Secret", "litellm-consumers")["stringData"]["consumers.json"],
        "redis_password": one(docs, "Secret", "litellm-redis", in_ns)["stringData"]["password"],
        "redis_conf": one(docs, "Secret", "litellm-redis", in_ns)["stringData"]["redis.conf"],
    }
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    # The model servers' key: the Secret the gateway's MODEL_SERVER_API_KEY names, as the litellm role writes it.
    (key_ref,) = [e["valueFrom"]["secretKeyRef"] for e in container["env"] if e["name"] == "MODEL_SERVER_API_KEY"]
    pod_files["model_key"] = one(docs, "Secret", key_ref["name"], in_ns)["stringData"][key_ref["key"]]
    route = one(docs, "IngressRoute", pred=lambda d: d["spec"]["entryPoints"] == ["websecure"])
    middlewares = {d["metadata"]["name"]: d["spec"] for d in docs if d["kind"] == "Middleware"}
    monitor = one(docs, "PodMonitor", "aiinfra-gateway")

    # Stand-ins: one per model of the rendered routing table; api_base is the only field changed.
    # A model whose config sends the model servers' key (the vLLM ones) gets a stand-in that requires it.
    servers, calls, backends, authorizations, keyed = [], {}, {}, {}, []
    for entry in config["model_list"]:
        model = entry["model_name"]
        calls[model], authorizations[model] = [], []
        attributes = {"calls": calls[model], "authorizations": authorizations[model]}
        if entry["litellm_params"].get("api_key") == "os.environ/MODEL_SERVER_API_KEY":
            attributes["api_keys"] = [pod_files["model_key"]]
            keyed.append(model)
        handler = type("StandIn_" + model.replace("-", "_").replace(".", "_"), (StandIn,), attributes)
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        backends[model] = "http://127.0.0.1:%d" % server.server_address[1]
        entry["litellm_params"]["api_base"] = backends[model] + "/v1"
    port, second_port = free_port(), free_port()
    log = open(tmp / "litellm.log", "w")  # noqa: SIM115 (closed at teardown)
    stack = contextlib.ExitStack()  # LiteLLM runs from here to the teardown, whatever fails in between
    # The rendered Redis (coordination_redis) is a real one on loopback, with the rendered password: the one other
    # change to the config.
    redis = config["general_settings"]["coordination_redis"]
    assert redis["password"] == "os.environ/REDIS_PASSWORD"
    limits_host, limits_port = redis["host"], redis["port"]
    redis.update(host="127.0.0.1", port=stack.enter_context(redis_server(tmp, pod_files["redis_conf"], log)))

    # The real Traefik with the rendered objects; a second one, in a namespace of its own, with the rate limit
    # lowered (see the module docstring).
    rendered_route = route["spec"]["routes"][0]
    chain = [middlewares[ref["name"]] for ref in rendered_route.get("middlewares", [])]
    strip = [p for spec in chain for p in spec.get("stripPrefix", {}).get("prefixes", [])]
    (limit,) = [spec["rateLimit"] for spec in chain if "rateLimit" in spec]
    # Both count in the test's Redis (the rendered rateLimit.redis, its endpoint moved to loopback), each in a
    # database of its own so that their different limits never share a bucket.
    assert limit["redis"] == {"endpoints": ["%s:%d" % (limits_host, limits_port)], "secret": "litellm-redis"}
    loopback = ["127.0.0.1:%d" % redis["port"]]

    def public(doc):
        if doc["kind"] == "Middleware" and "rateLimit" in doc["spec"]:
            doc["spec"]["rateLimit"]["redis"]["endpoints"] = loopback
        return doc

    def throttled(doc):
        doc = public(doc)
        if doc["kind"] == "Middleware" and "rateLimit" in doc["spec"]:
            doc["spec"]["rateLimit"].update(THROTTLED)
            doc["spec"]["rateLimit"]["redis"]["db"] = 1
        return doc

    host = route["spec"]["routes"][0]["match"].split("`")[1]
    TLS[host] = traefik_edge.SiteCA(tmp, host)
    route_ns = route["metadata"]["namespace"]
    redis_doc = one(docs, "Secret", "litellm-redis", lambda d: d["metadata"]["namespace"] == route_ns)
    try:
        litellm = stack.enter_context(
            litellm_as_its_pod(deployment, config, tmp / "pod-1", port, master_key, log, pod_files)
        )
        second = None
        if consumer_keys:  # a second replica sharing the Redis (the limits hold across replicas)
            second = stack.enter_context(
                litellm_as_its_pod(deployment, config, tmp / "pod-2", second_port, master_key, log, pod_files)
            )
        edges = []
        for namespace, changes in ((route_ns, public), (route_ns + "-throttled", throttled)):
            objects = traefik_edge.edge_objects(docs, namespace, port, changes=changes)
            secret = dict(redis_doc, metadata={"name": redis_doc["metadata"]["name"], "namespace": namespace})
            edges.append(
                stack.enter_context(traefik_edge.edges(edge_api, tmp, namespace, objects, port, TLS[host], [secret]))
            )
        wait_for("http://127.0.0.1:%d/health/liveliness" % port, litellm, "LiteLLM")
        if second is not None:
            wait_for("http://127.0.0.1:%d/health/liveliness" % second_port, second, "the second LiteLLM")
        prefix = strip[0] if strip else ""
        yield {
            "site": request.param,
            "public": edges[0].urls[0] + prefix,
            "throttled": edges[1].urls[0] + prefix,
            "rate_limit": limit,
            "host": host,
            "direct": "http://127.0.0.1:%d" % port,
            "replicas": ["http://127.0.0.1:%d" % port, "http://127.0.0.1:%d" % second_port],
            "key": master_key,
            "consumer_keys": consumer_keys,
            "pod_files": pod_files,
            "tmp": tmp,
            "models": sorted(calls),
            "calls": calls,
            "backends": backends,
            "authorizations": authorizations,
            "keyed": keyed,
            "route": route["metadata"]["name"],
            "container": container,
            "deployment": deployment,
            "config": config,
            "monitor": monitor,
            "log": tmp / "litellm.log",
        }
    finally:
        stack.close()
        for server in servers:
            server.shutdown()
        log.close()


def redis_server(tmp, rendered_conf, log):
    """A real Redis (Debian's redis-server) started with the rendered redis.conf (from the rendered Secret), moved
    to a free loopback port and a directory of the test; a context manager yielding the port."""
    port = free_port()
    conf = tmp / ("redis-%d.conf" % port)
    moved = {"port": "port %d" % port, "bind": "bind 127.0.0.1", "dir": "dir %s" % tmp}
    lines = [moved.get(line.split(" ", 1)[0], line) for line in rendered_conf.splitlines()]
    assert sorted(line.split(" ", 1)[0] for line in lines if line.split(" ", 1)[0] in moved) == sorted(moved)
    conf.write_text("\n".join(lines) + "\n")  # the password stays in a file, never on the command line
    conf.chmod(0o600)
    proc = subprocess.Popen(["redis-server", str(conf)], stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 20
    while True:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
            break
        if proc.poll() is not None or time.monotonic() > deadline:
            raise AssertionError("redis-server did not start")
        time.sleep(0.1)

    @contextlib.contextmanager
    def running():
        try:
            yield port
        finally:
            proc.terminate()
            proc.wait(timeout=20)

    return running()


def litellm_as_its_pod(deployment, config, pod_dir, port, master_key, log, pod_files):
    """The sandboxed LiteLLM (see the module docstring): the container's arguments and environment, as the pod's
    user on a read-only root, the config ConfigMap (config.yaml and the auth hook) and the consumers Secret mounted
    read-only where the pod mounts them (the rendered --config path is kept); only the port is taken over for
    loopback. pod_files: the hook's and the consumers file's text and the Redis password, as rendered. A context
    manager yielding the Popen."""
    name = deployment["metadata"]["name"]
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    mount = mounts["config"]
    assert mount.get("readOnly") and {"name": "config", "configMap": {"name": name + "-config"}} in pod["volumes"]
    assert mounts["consumers"].get("readOnly")
    assert {"name": "consumers", "secret": {"secretName": "litellm-consumers", "optional": True}} in pod["volumes"]
    config_dir, consumers_dir = pod_dir / "config", pod_dir / "consumers"
    config_dir.mkdir(parents=True)
    consumers_dir.mkdir()
    (config_dir / "config.yaml").write_text(yaml.safe_dump(config))
    (config_dir / "aiinfra_auth.py").write_text(pod_files["hook"])
    (consumers_dir / "consumers.json").write_text(pod_files["consumers"])
    args = list(container["args"])
    assert args[args.index("--config") + 1] == mount["mountPath"] + "/config.yaml"
    args[args.index("--port") + 1] = str(port)
    env = {e["name"]: e["value"] for e in container["env"] if "value" in e}
    assert env["AIINFRA_CONSUMERS_FILE"] == mounts["consumers"]["mountPath"] + "/consumers.json"
    assert [e["name"] for e in container["env"] if "valueFrom" in e] == [
        "LITELLM_MASTER_KEY",
        "REDIS_PASSWORD",
        "MODEL_SERVER_API_KEY",
    ]
    env.update(
        LITELLM_MASTER_KEY=master_key,
        REDIS_PASSWORD=pod_files["redis_password"],
        MODEL_SERVER_API_KEY=pod_files["model_key"],
        PATH="%s:/usr/bin:/bin" % LITELLM.parent,
    )
    uid = pod["securityContext"]["runAsUser"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True and uid > 0
    return runtime.sandbox(
        [str(LITELLM.resolve()), *args],
        env,
        uid,
        LITELLM.parent.parent,
        [(config_dir, mount["mountPath"], True), (consumers_dir, mounts["consumers"]["mountPath"], True)],
        stdout=log,
        stderr=subprocess.STDOUT,
    )


def chat(gw, model, key):
    body = {"model": model, "messages": [{"role": "user", "content": "ping"}], "max_tokens": 4}
    return request("POST", gw["public"] + "/v1/chat/completions", gw["host"], key, body)


def test_a_request_without_the_key_is_refused_with_401(gateway):
    status, headers, text = chat(gateway, gateway["models"][0], None)
    assert status == 401, text
    assert "error" in json.loads(text), (headers, text)  # refused by LiteLLM (its JSON), after Traefik routed it
    assert all(not calls for calls in gateway["calls"].values())


def test_the_gateway_sends_the_model_servers_key_which_a_direct_call_lacks(gateway):
    """Issue 28, item 5: a vLLM model's server requires the key only the gateway holds (the rendered Secret, derived
    from the master key). Through the gateway (the real LiteLLM with the rendered config and environment) the
    request is answered, the stand-in having seen `Bearer <key>`; the same call straight to the model server, as a
    pod that gets past the network policy would make it, is refused 401 (with a client's key too), while /health
    and /metrics stay open for the probes and Prometheus. A NIM model's server (no API key) is never sent it."""
    from ansible_collections.aiinfra.k3s.plugins.module_utils.k8s import gateway as gw

    key = gateway["pod_files"]["model_key"]
    assert key == gw.model_api_key(gateway["key"])
    assert gateway["keyed"], "no vLLM model requires the key"
    for model in gateway["models"]:
        before = len(gateway["calls"][model])
        status, _headers, text = chat(gateway, model, gateway["key"])
        assert status == 200, text
        assert len(gateway["calls"][model]) == before + 1
        sent = gateway["authorizations"][model][-1]
        if model in gateway["keyed"]:
            assert sent == "Bearer " + key, model
        else:
            assert key not in (sent or ""), model
    for model in gateway["keyed"]:
        backend, before = gateway["backends"][model], len(gateway["calls"][model])
        body = {"model": model, "messages": [{"role": "user", "content": "ping"}], "max_tokens": 4}
        for client_key in (None, gateway["key"], "wrong"):
            status, _headers, text = request("POST", backend + "/v1/chat/completions", key=client_key, body=body)
            assert (status, json.loads(text)) == (401, {"error": "Unauthorized"}), (model, client_key)
            assert request("GET", backend + "/v1/models", key=client_key)[0] == 401
        assert len(gateway["calls"][model]) == before  # nothing reached the model
        assert request("POST", backend + "/v1/chat/completions", key=key, body=body)[0] == 200
        for path in ("/health", "/metrics"):
            assert request("GET", backend + path)[0] == 200, path


def test_each_model_is_routed_to_its_backend_and_answered(gateway):
    for model in gateway["models"]:
        status, _headers, text = chat(gateway, model, gateway["key"])
        assert status == 200, text
        assert json.loads(text)["choices"][0]["message"]["content"] == "stand-in for %s" % model
        assert gateway["calls"][model][-1] == ("/v1/chat/completions", model)
    status, _headers, text = request("GET", gateway["public"] + "/v1/models", gateway["host"], gateway["key"])
    assert status == 200, text
    assert sorted(m["id"] for m in json.loads(text)["data"]) == gateway["models"]


def test_an_unknown_model_reaches_no_backend(gateway):
    before = {m: len(c) for m, c in gateway["calls"].items()}
    status, _headers, _text = chat(gateway, "no-such-model", gateway["key"])
    assert status in (400, 404)
    assert {m: len(c) for m, c in gateway["calls"].items()} == before


@pytest.mark.parametrize(("method", "path"), ADMIN, ids=[p for _method, p in ADMIN])
def test_admin_routes_are_not_reachable_through_the_public_route(gateway, method, path):
    status, headers, text = request(
        method, gateway["public"] + path, gateway["host"], gateway["key"], body={} if method == "POST" else None
    )
    assert from_traefik(status, text), (status, headers, text)  # no router matched: the gateway never saw it


def test_the_gateway_serves_admin_routes_inside_the_cluster(gateway):
    """The 404s above are the edge's doing: the same gateway answers an admin route when asked directly."""
    status, _headers, text = request("GET", gateway["direct"] + "/model/info", key=gateway["key"])
    assert status == 200, text
    status, _headers, _text = request("GET", gateway["public"] + "/health/liveliness", gateway["host"])
    assert status == 200


def test_the_scrape_as_the_pod_monitor_configures_it_returns_the_gateway_metrics(gateway):
    chat(gateway, gateway["models"][0], gateway["key"])  # at least one answered request to count
    chat(gateway, gateway["models"][0], None)  # and one refused
    endpoint = gateway["monitor"]["spec"]["podMetricsEndpoints"][0]
    assert not {"authorization", "basicAuth", "bearerTokenSecret", "oauth2"} & set(endpoint)
    # The endpoint's port name is the container port LiteLLM listens on (--port), here moved to a free port.
    args = gateway["container"]["args"]
    ports = {p["name"]: p["containerPort"] for p in gateway["container"]["ports"]}
    assert ports[endpoint["port"]] == int(args[args.index("--port") + 1])
    url = "%s://%s%s" % (endpoint.get("scheme", "http"), gateway["direct"].split("://")[1], endpoint["path"])
    status, _headers, text = request("GET", url)
    assert status == 200, text[:500]
    samples = [line for line in text.splitlines() if line.startswith("litellm_proxy_total_requests_metric_total{")]
    model = gateway["models"][0]
    assert any('requested_model="%s"' % model in s and 'status_code="200"' in s for s in samples), samples
    assert any(line.startswith("litellm_proxy_failed_requests_metric_total") for line in text.splitlines())


def test_the_rate_limit_throttles_one_api_key_and_still_serves_another(gateway):
    """One budget per API key (the rendered sourceCriterion): a client that spends its burst gets 429 from the
    edge while another key, from the same address, is still served. Every request comes from 127.0.0.1, so a
    limit keyed on the client address would throttle both."""
    assert gateway["rate_limit"]["sourceCriterion"] == {"requestHeaderName": "Authorization"}
    url = gateway["throttled"] + "/v1/chat/completions"
    body = {"model": gateway["models"][0], "messages": [{"role": "user", "content": "ping"}], "max_tokens": 4}
    other_key = "sk-" + secrets.token_hex(24)  # unknown to LiteLLM: refused once past the edge, 429 when throttled
    statuses = []
    for _attempt in range(THROTTLED["burst"] * 4):  # bounded: at most 12 requests, each within the request timeout
        status, _headers, _text = request("POST", url, gateway["host"], other_key, body, timeout=10)
        statuses.append(status)
        if status == 429:
            break
    assert statuses[-1] == 429 and set(statuses[:-1]) <= {400, 401}, statuses
    status, _headers, text = request("POST", url, gateway["host"], gateway["key"], body, timeout=10)
    assert status == 200, (status, text)


class SlowStandIn(StandIn):
    """A stand-in model server (not vLLM or NIM) that takes SLOW_SECONDS to answer."""

    calls = None

    def do_POST(self):
        time.sleep(SLOW_SECONDS)
        super().do_POST()


SLOW_SECONDS = 6


def test_litellm_finishes_the_requests_in_flight_on_sigterm(gateway, tmp_path):
    """The gateway pod's stop, as the kubelet runs it after the preStop sleep: SIGTERM to LiteLLM while a request
    waits on a slow backend (a stand-in answering after SLOW_SECONDS). The request still gets its answer, LiteLLM
    exits by itself within its shutdown timeout, and the pod's grace period holds preStop + that timeout."""
    if gateway["site"] != "example":
        pytest.skip("one site is enough")
    pod = gateway["deployment"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    timeout = float(env["GRACEFUL_SHUTDOWN_TIMEOUT"])
    sleep = int(container["lifecycle"]["preStop"]["exec"]["command"][-1].split()[-1])
    assert sleep + timeout < pod["terminationGracePeriodSeconds"]
    calls = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), type("Slow", (SlowStandIn,), {"calls": calls}))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    config = json.loads(json.dumps(gateway["config"]))
    for entry in config["model_list"]:
        entry["litellm_params"]["api_base"] = "http://127.0.0.1:%d/v1" % server.server_address[1]
    port, key = free_port(), "sk-" + secrets.token_hex(24)
    files = gateway["pod_files"]
    model = config["model_list"][0]["model_name"]
    body = {"model": model, "messages": [{"role": "user", "content": "ping"}], "max_tokens": 4}
    answers = []
    with (
        open(tmp_path / "litellm.log", "w") as log,
        litellm_as_its_pod(gateway["deployment"], config, tmp_path / "pod", port, key, log, files) as litellm,
    ):
        wait_for("http://127.0.0.1:%d/health/liveliness" % port, litellm, "LiteLLM")
        url = "http://127.0.0.1:%d/v1/chat/completions" % port
        client = threading.Thread(target=lambda: answers.append(request("POST", url, key=key, body=body, timeout=60)))
        client.start()
        deadline = time.monotonic() + 30
        while not calls and time.monotonic() < deadline:  # the request has reached the backend
            time.sleep(0.1)
        assert calls, "the request never reached the backend"
        stopped = time.monotonic()
        os.killpg(litellm.pid, signal.SIGTERM)  # one SIGTERM to every process of the pod's sandbox
        client.join(timeout=60)
        litellm.wait(timeout=timeout + 15)
        deadline = time.monotonic() + timeout + 15
        while time.monotonic() < deadline:  # LiteLLM itself (unshare above it exits on the signal at once)
            try:
                os.killpg(litellm.pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.2)
        exited = time.monotonic() - stopped
    server.shutdown()
    assert answers and answers[0][0] == 200, (answers, (tmp_path / "litellm.log").read_text()[-3000:])
    assert json.loads(answers[0][2])["choices"][0]["message"]["content"] == "stand-in for %s" % model
    assert exited < timeout + 15, exited


def test_a_key_in_another_header_does_not_escape_the_rate_limit(gateway):
    """LiteLLM also takes a key from x-litellm-api-key (read before Authorization), x-api-key and others: the edge
    removes them, so a client cannot send its key there and a new Authorization each time for a fresh budget."""
    body = {"model": gateway["models"][0], "messages": [{"role": "user", "content": "ping"}], "max_tokens": 4}
    for header in ("x-litellm-api-key", "x-api-key", "API-Key"):
        sent = {header: gateway["key"], "Authorization": "Bearer sk-" + secrets.token_hex(24)}
        statuses = [
            request("POST", gateway["direct"] + "/v1/chat/completions", body=body, headers=sent)[0],
            request("POST", gateway["public"] + "/v1/chat/completions", gateway["host"], body=body, headers=sent)[0],
        ]
        # LiteLLM itself accepts the key there; through the edge only the (random) Authorization reaches it.
        assert statuses[1] in (400, 401), (header, statuses)
        if header == "x-litellm-api-key":
            assert statuses[0] == 200, (header, statuses)


# ---------------------------------------------------------------- consumers (the full site)
# Per-consumer keys, limits, usage and tracing: the real proxy runs the collection's auth hook (aiinfra_auth.py from
# the rendered ConfigMap) with the consumers file from the rendered Secret; two gateway processes share one real
# Redis (Debian's redis-server on loopback, the rendered password). Keys are issued as playbooks/consumers.yml
# issues them: only their hashes reach the inventory.


@pytest.fixture
def site(gateway):
    if not gateway["consumer_keys"]:
        pytest.skip("the consumers are on the full site")
    return gateway


def consumer_chat(url, model, key, headers=None, timeout=30):
    body = {"model": model, "messages": [{"role": "user", "content": "ping"}], "max_tokens": 4}
    req_headers = dict(headers or {})
    return request("POST", url + "/v1/chat/completions", key=key, body=body, timeout=timeout, headers=req_headers)


def test_a_consumer_is_throttled_at_its_limit_across_both_replicas_and_another_is_served(site):
    """alice's 4 requests a minute, spent alternately on two gateway processes: the 5th is refused (one shared
    count in Redis, not 4 per replica), while bob is still served by both."""
    alice, bob = site["consumer_keys"]["alice"], site["consumer_keys"]["bob"]
    statuses = []
    for attempt in range(8):  # bounded: 8 requests
        status, _headers, text = consumer_chat(site["replicas"][attempt % 2], "qwen-7b", alice)
        statuses.append(status)
        if status == 429:
            assert json.loads(text)["error"]["type"] == "throttling_error", text
            break
    assert statuses == [200, 200, 200, 200, 429], statuses
    for url in site["replicas"]:
        status, _headers, text = consumer_chat(url, "qwen-7b", bob)
        assert status == 200, text


def test_a_consumer_is_refused_a_model_outside_its_list(site):
    status, _headers, text = consumer_chat(site["replicas"][1], "nemotron-35b", site["consumer_keys"]["alice"])
    assert status == 403, text
    assert json.loads(text)["error"]["type"] == "key_model_access_denied"


def test_unknown_and_revoked_keys_are_refused(site):
    for key in ("sk-" + "0" * 48, site["consumer_keys"]["gone"], None):
        status, _headers, text = consumer_chat(site["replicas"][0], "qwen-7b", key)
        assert status == 401, text


# The edge's list without its path-traversal probe (an edge matter: LiteLLM has no such route), and two more.
CONSUMER_REFUSED = [r for r in ADMIN if ".." not in r[1]] + [("GET", "/settings"), ("GET", "/get/config/callbacks")]


@pytest.mark.parametrize(("method", "path"), CONSUMER_REFUSED)
def test_a_consumer_key_is_refused_on_every_admin_route(site, method, path):
    """Asked of the gateway directly (not through the edge, which routes none of them): 401 or 403, never an
    answer, and /health never calls the models for a consumer."""
    before = len(StandIn.request_ids)
    body = {} if method == "POST" else None
    status, _headers, text = request(method, site["replicas"][0] + path, key=site["consumer_keys"]["bob"], body=body)
    if path.startswith(("/ui", "/metrics")):
        # LiteLLM serves its UI's static files, and /metrics/ for Prometheus (require_auth_for_metrics_endpoint:
        # false; the network policies admit only the monitoring namespace), without asking the hook: a consumer
        # key gets no more than no key.
        anonymous = request(method, site["replicas"][0] + path, body=body)
        assert status == anonymous[0], (status, anonymous[0])
        return
    assert status in (401, 403), (status, text[:300])
    assert len(StandIn.request_ids) == before


def test_the_master_key_is_the_admin(site):
    status, _headers, text = request("GET", site["replicas"][0] + "/model/info", key=site["key"])
    assert status == 200, text[:300]


def test_request_ids_reach_the_model_server_and_are_made_when_missing(site):
    bob = site["consumer_keys"]["bob"]
    status, headers, text = consumer_chat(site["replicas"][0], "qwen-7b", bob, {"X-Request-ID": "trace-4711"})
    assert status == 200, text
    assert StandIn.request_ids[-1] == "trace-4711" and headers.get("x-litellm-call-id") == "trace-4711"
    status, headers, text = consumer_chat(site["replicas"][1], "qwen-7b", bob)
    made = StandIn.request_ids[-1]
    assert status == 200 and made and len(made) == 32 and headers.get("x-litellm-call-id") == made


def test_the_logs_carry_request_id_and_consumer_never_a_key(site):
    bob = site["consumer_keys"]["bob"]
    consumer_chat(site["replicas"][0], "qwen-7b", bob, {"X-Request-ID": "log-check-1"})
    time.sleep(0.5)
    text = site["log"].read_text()
    lines = [json.loads(line) for line in text.splitlines() if line.startswith("{") and "aiinfra_auth" in line]
    mine = [line for line in lines if line.get("request_id") == "log-check-1"]
    assert mine and mine[0]["consumer"] == "bob" and mine[0]["team"] == "product", lines[-3:]
    for key in [*site["consumer_keys"].values(), site["key"]]:
        assert key not in text


def test_metrics_count_spend_and_tokens_per_consumer(site):
    """Each replica counts what it served (Prometheus scrapes every pod): bob's calls on replica 2 are there with
    his alias and team, priced with the site's token prices; alice's are apart."""
    bob = site["consumer_keys"]["bob"]
    url = site["replicas"][1]

    def samples(name):
        status, _headers, text = request("GET", url + "/metrics/")
        assert status == 200
        out = {}
        for line in text.splitlines():
            if line.startswith(name + "{") and 'model="qwen-7b"' in line:
                labels = line[line.index("{") + 1 : line.rindex("}")]
                alias = labels.split('api_key_alias="')[1].split('"')[0]
                team = labels.split('team="')[1].split('"')[0]
                out[(alias, team)] = out.get((alias, team), 0.0) + float(line.rsplit(" ", 1)[1])
        return out

    before = samples("litellm_requests_metric_total").get(("bob", "product"), 0.0)
    spend_before = samples("litellm_spend_metric_total").get(("bob", "product"), 0.0)
    for _attempt in range(3):
        status, _headers, text = consumer_chat(url, "qwen-7b", bob)
        assert status == 200, text
    price = PRICES["qwen-7b"]
    per_call = 3 * price["prompt"] + 4 * price["completion"]  # the stand-in's usage: 3 prompt, 4 completion tokens
    deadline = time.monotonic() + 15  # the callback counts after the answer: wait for it, bounded
    while True:
        requests = samples("litellm_requests_metric_total")
        spend = samples("litellm_spend_metric_total").get(("bob", "product"), 0.0) - spend_before
        counted = requests.get(("bob", "product"), 0.0) - before >= 3 and spend >= 3 * per_call * (1 - 1e-6)
        if counted or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert requests[("bob", "product")] - before == 3
    assert spend == pytest.approx(3 * per_call, rel=1e-6)
    tokens = samples("litellm_total_tokens_metric_total")
    assert tokens[("bob", "product")] >= 21
    assert ("alice", "research") in requests  # alice's calls on this replica (the throttling test), apart
    assert {c["name"] for c in CONSUMERS} >= {alias for alias, _team in requests}


def test_a_revoked_consumer_is_refused_once_the_secret_changes(site):
    """The kubelet swaps the Secret's file when the converge changes it; the hook reads the new list at the next
    request (the converge also rolls the pods): here the file of replica 1 loses bob."""
    bob = site["consumer_keys"]["bob"]
    path = site["tmp"] / "pod-1" / "consumers" / "consumers.json"
    records = json.loads(path.read_text())
    kept = [r for r in records["consumers"] if r["alias"] != "bob"]
    assert len(kept) == len(records["consumers"]) - 1
    new = path.with_name("new.json")
    new.write_text(json.dumps({"consumers": kept}))
    new.replace(path)
    status, _headers, text = consumer_chat(site["replicas"][0], "qwen-7b", bob)
    assert status == 401, text
    status, _headers, text = consumer_chat(site["replicas"][1], "qwen-7b", bob)  # replica 2 not yet converged
    assert status == 200, text
