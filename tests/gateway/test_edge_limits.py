"""The edge's rate limit holds across Traefik replicas: two real Traefik processes (tests/gateway/traefik_edge.py:
the lab's Traefik binary, its CRD provider reading the rendered IngressRoute, Middlewares and TLSOption from a real
API server) given the rateLimit Middleware edge.py renders for a site whose limits count in Redis, both counting in
one real Redis (Debian's redis-server on loopback, with a password, as the deployed one). One API key is throttled
with 429 once the two together have served its burst (not twice the burst, as two in-memory limiters would), while
another key is still served.

Simulated, and named so: two Traefik processes stand for two Traefik replicas, a loopback HTTP server for the
gateway (reached through an ExternalName Service, see traefik_edge.py), and the rendered Redis endpoint (a cluster
DNS name) is pointed at the loopback Redis, the one change to the rendered Middleware besides the lowered average and
burst. The rendered site's Middleware and Secret are checked against what Traefik's CRD provider reads (its redis
block, the Secret in the Middleware's namespace with the keys username and password) and then loaded as such.
Requests are bounded loops on loopback only.
"""

import contextlib
import importlib.util
import json
import secrets
import socket
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import traefik_edge
import yaml

ROOT = Path(__file__).resolve().parents[2]

# The unit tests' helpers (rendering a site with the working tree's collection); it makes the collection importable.
_spec = importlib.util.spec_from_file_location("unit_helpers", ROOT / "tests" / "unit" / "conftest.py")
helpers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(helpers)

from test_gateway import free_port  # noqa: E402

from ansible_collections.aiinfra.k3s.plugins.module_utils.k8s import edge  # noqa: E402

FULL = {s["id"]: s for s in yaml.safe_load((ROOT / "tests" / "live" / "sites.yml").read_text())}["full"]
HOST = "llm.example.org"
SECRET = "litellm-redis"  # the litellm role's litellm_redis_secret_name default
# A budget no bounded loop refills: 4 requests, then one token an hour (Traefik's maxDelay is 0.5 s below 1/s).
LOW = {"rate_average": 4, "rate_burst": 4, "rate_period": "1h"}
ATTEMPTS = 3 * LOW["rate_burst"]  # per key and edge at most: the loops stop at the first 429 past the burst


def request(url, key, body):
    """The status of one POST through an edge (HTTPS with the route's host as SNI, verified against the site's CA)."""
    status, _headers, _text = traefik_edge.request("POST", url, HOST, key, body, timeout=10, tls=TLS[0])
    return status


TLS = []  # the module's SiteCA (set by the api fixture)


@contextlib.contextmanager
def redis_server(tmp, password):
    """Debian's redis-server on a free loopback port, counters in memory only, the password in its config file
    (not on the command line); yields the port and stops it at the end."""
    port = free_port()
    conf = tmp / ("redis-%d.conf" % port)
    conf.write_text('port %d\nbind 127.0.0.1\nsave ""\nappendonly no\ndir %s\nrequirepass %s\n' % (port, tmp, password))
    conf.chmod(0o600)
    with open(tmp / ("redis-%d.log" % port), "w") as log:
        proc = subprocess.Popen(["redis-server", str(conf)], stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 20
            while True:
                with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError("redis-server did not start")
                time.sleep(0.1)
            yield port
        finally:
            proc.terminate()
            proc.wait(timeout=20)


class Backend(BaseHTTPRequestHandler):
    """The gateway's stand-in (not LiteLLM): 200 with the Authorization it was given, each call counted."""

    calls = []

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.calls.append(self.headers.get("Authorization"))
        body = json.dumps({"ok": True}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def site_params(limits):
    """The traefik role's settings (its defaults, the full site's host and whole-host route) with a low budget."""
    return {
        "name": "litellm-ingress",
        "namespace": "ai-serving",
        "host": HOST,
        "path_prefix": "/",
        "public_paths": list(edge.PUBLIC_PATHS),
        "expose_admin": False,
        "service": "litellm",
        "service_port": 4000,
        "tls_secret": "litellm-tls",
        "customize_bundled": False,
        "limits": limits,
        **LOW,
    }


def secure_route(docs):
    """(IngressRoute, its Middlewares' specs in the route's order) of the HTTPS route."""
    (route,) = [d for d in docs if d["kind"] == "IngressRoute" and d["spec"]["entryPoints"] == ["websecure"]]
    middlewares = {d["metadata"]["name"]: d["spec"] for d in docs if d["kind"] == "Middleware"}
    (rule,) = route["spec"]["routes"]
    return route, [middlewares[ref["name"]] for ref in rule["middlewares"]]


def secret(name, namespace, data):
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace},
        "stringData": data,
    }


@contextlib.contextmanager
def edges(api, tmp, namespace, docs, backend, secret_data, count=2, ready=True):
    """count Traefik processes given the rendered Traefik objects docs in namespace (with secret_data as Secrets
    there); yields their base URLs, or the Edge itself when not ready (see traefik_edge.edges)."""
    port = int(backend.rsplit(":", 1)[1])
    objects = traefik_edge.edge_objects(docs, namespace, port)
    extra = [secret(name, namespace, data) for name, data in secret_data.items()]
    with traefik_edge.edges(api, tmp, namespace, objects, port, TLS[0], extra, count=count, ready=ready) as found:
        yield found.urls if ready else found


@pytest.fixture(scope="module")
def api(edge_api, tmp_path_factory):
    """The API server the edges read (tests/gateway/conftest.py), and the site's CA for HOST."""
    TLS[:] = [traefik_edge.SiteCA(tmp_path_factory.mktemp("tls"), HOST)]
    return edge_api


@pytest.fixture(scope="module")
def backend():
    Backend.calls = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Backend)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield "http://127.0.0.1:%d" % server.server_address[1], Backend.calls
    server.shutdown()


@pytest.fixture(scope="module")
def redis(tmp_path_factory):
    """A real Redis on loopback with a password (in its config file, not on the command line)."""
    tmp = tmp_path_factory.mktemp("redis")
    password = secrets.token_hex(32)
    with redis_server(tmp, password) as port:
        yield {"port": port, "password": password, "tmp": tmp}


def redis_keys(redis, pattern):
    """The keys matching pattern (redis-cli, the password through its environment)."""
    proc = subprocess.run(
        ["redis-cli", "-h", "127.0.0.1", "-p", str(redis["port"]), "--no-auth-warning", "--scan", "--pattern", pattern],
        env={"REDISCLI_AUTH": redis["password"], "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=20,
        check=True,
    )
    return proc.stdout.splitlines()


def chat(url, key):
    body = {"model": "qwen-7b", "messages": [{"role": "user", "content": "ping"}], "max_tokens": 4}
    return request(url + "/v1/chat/completions", key, body)


def spend(urls, key):
    """Requests with key, alternating between the edges, until one is refused (bounded): the statuses in order."""
    statuses = []
    for attempt in range(ATTEMPTS):
        statuses.append(chat(urls[attempt % len(urls)], key))
        if statuses[-1] != 200:
            break
    return statuses


def test_the_rendered_rate_limit_counts_in_the_plans_redis():
    """edge.py's rateLimit: Traefik v3.7's CRD fields (redis.endpoints host:port, redis.secret), only with Redis."""
    limits = {"store": "redis", "deploy": True, "name": "litellm-ha-redis", "port": 6379}
    limits["host"] = "litellm-ha-redis.ai-serving.svc.cluster.local"
    _route, chain = secure_route(edge.traefik_manifests(site_params(dict(limits, secret="my-redis"))))
    (limit,) = [spec["rateLimit"] for spec in chain if "rateLimit" in spec]
    assert limit["redis"] == {"endpoints": ["litellm-ha-redis.ai-serving.svc.cluster.local:6379"], "secret": "my-redis"}
    for store in ({"store": "memory"}, {"store": "none"}, {}):
        _route, chain = secure_route(edge.traefik_manifests(site_params(store)))
        assert all("redis" not in spec.get("rateLimit", {}) for spec in chain)


def rendered(limits):
    """The traefik role's objects for site_params(limits): IngressRoutes, Middlewares, TLSOption."""
    return edge.traefik_manifests(site_params(limits))


def test_two_edges_share_one_budget_per_key_in_redis(api, redis, backend, tmp_path):
    """Two Traefik replicas, one Redis: a key gets its burst across both together, then 429 from either; another
    key is still served, and the counters live in Redis under the Middleware's name and the Authorization value."""
    url, calls = backend
    limits = {"store": "redis", "deploy": False, "name": "", "host": "127.0.0.1", "port": redis["port"]}
    docs = rendered(dict(limits, secret=SECRET))
    route, _chain = secure_route(docs)
    key, other = "sk-" + secrets.token_hex(24), "sk-" + secrets.token_hex(24)
    data = {SECRET: {"username": "", "password": redis["password"]}}
    with edges(api, tmp_path, "edge-shared", docs, url, data) as urls:
        statuses = spend(urls, key)
        served = statuses.count(200)
        # Alternating replicas: each served half of the burst; in memory each would have served a whole burst.
        assert served == LOW["rate_burst"] and statuses[-1] == 429, statuses
        assert [chat(u, key) for u in urls] == [429, 429]
        assert calls.count("Bearer " + key) == LOW["rate_burst"]
        assert chat(urls[1], other) == 200 and chat(urls[0], other) == 200
        # Traefik's key: rate:<the Middleware as Traefik names it>:<the Authorization value>.
        (found,) = redis_keys(redis, "rate:*" + key)
        middleware = [m["name"] for m in route["spec"]["routes"][0]["middlewares"] if m["name"].endswith("rate-limit")]
        assert found.startswith("rate:edge-shared-%s@kubernetescrd" % middleware[0]), found
    print("key: %d served across %d Traefik processes, then %s" % (served, len(urls), statuses[served:]))


def test_an_unreachable_redis_fails_closed(api, backend, tmp_path):
    """Traefik's limiter answers 500 when it cannot count (no Redis listening): the edge does not serve unlimited."""
    url, _calls = backend
    limits = {"store": "redis", "deploy": False, "name": "", "host": "127.0.0.1", "port": free_port()}
    docs = rendered(dict(limits, secret=SECRET))
    data = {SECRET: {"username": "", "password": "x"}}
    with edges(api, tmp_path, "edge-closed", docs, url, data, count=1) as urls:
        assert chat(urls[0], "sk-" + secrets.token_hex(24)) == 500


def test_edges_counting_alone_serve_a_burst_each(api, backend, tmp_path):
    """The contrast (limits store memory): the same rendered limit without redis lets each replica serve a whole
    burst, the multiplication the Redis removes."""
    url, _calls = backend
    key = "sk-" + secrets.token_hex(24)
    with edges(api, tmp_path, "edge-memory", rendered({"store": "memory"}), url, {}) as urls:
        per_edge = [spend([u], key).count(200) for u in urls]
    assert per_edge == [LOW["rate_burst"]] * 2, per_edge


def test_the_edge_refuses_a_secret_without_both_keys(api, redis, backend, tmp_path):
    """Traefik's CRD provider refuses a rateLimit whose redis Secret lacks username or password: the Middleware is
    not built, the route that uses it is disabled, and its requests get Traefik's 404, never an unlimited 200."""
    url, _calls = backend
    limits = {"store": "redis", "deploy": False, "name": "", "host": "127.0.0.1", "port": redis["port"]}
    docs = rendered(dict(limits, secret=SECRET))
    route, _chain = secure_route(docs)
    data = {SECRET: {"password": redis["password"]}}
    with edges(api, tmp_path, "edge-badsecret", docs, url, data, count=1, ready=False) as found:
        name = "edge-badsecret-%s-" % route["metadata"]["name"]

        def settled():
            routers = {n: r for n, r in found.routers().items() if n.startswith(name)}
            return next((r for r in routers.values() if r.get("status") == "disabled"), None)

        deadline = time.monotonic() + traefik_edge.START_S
        router = settled()
        while router is None and time.monotonic() < deadline:
            time.sleep(0.3)
            router = settled()
        assert router is not None, found.routers()
        assert any("rate-limit" in e and "does not exist" in e for e in router.get("error", [])), router
        assert chat(found.urls[0], "sk-" + secrets.token_hex(24)) == 404
    log = (tmp_path / "traefik-edge-badsecret.log").read_text()
    assert "must contain both username and password keys" in log, log[-2000:]


@pytest.fixture(scope="module")
def rendered_full(tmp_path_factory):
    """The full site (tests/live/sites.yml: three gateway replicas, the deployed Redis) rendered with its secrets."""
    tmp = tmp_path_factory.mktemp("full")
    site_vars = {
        "litellm_master_key": "sk-" + secrets.token_hex(24),
        "monitoring_grafana_admin_password": secrets.token_urlsafe(24),
        "nim_ngc_api_key": "nvapi-" + secrets.token_hex(24),
    }
    (tmp / "site-vars.json").write_text(json.dumps(site_vars))
    extra = ["-e", "@%s" % (tmp / "site-vars.json"), "-e", "render_secrets=true"]
    return helpers.render_site(FULL, tmp, extra)


def test_the_rendered_site_gives_traefik_its_redis_and_secret(api, rendered_full, redis, backend, tmp_path):
    """What Traefik's CRD provider reads: the Middleware's redis block names the deployed Redis Service and a
    Secret of the Middleware's namespace holding username and password; the rendered Middleware and Secret, given
    to Traefik (endpoint pointed at the loopback Redis started with the rendered password), serve and count."""
    docs = rendered_full
    route, chain = secure_route(docs)
    (limit,) = [spec["rateLimit"] for spec in chain if "rateLimit" in spec]
    namespace = route["metadata"]["namespace"]
    (service,) = [
        d
        for d in docs
        if d["kind"] == "Service" and d["metadata"]["labels"].get("app.kubernetes.io/component") == "rate-limit-store"
    ]
    port = service["spec"]["ports"][0]["port"]
    assert limit["redis"]["endpoints"] == [
        "%s.%s.svc.cluster.local:%d" % (service["metadata"]["name"], service["metadata"]["namespace"], port)
    ]
    found = [
        d
        for d in docs
        if d["kind"] == "Secret"
        and d["metadata"]["name"] == limit["redis"]["secret"]
        and d["metadata"]["namespace"] == namespace
    ]
    assert len(found) == 1, "no Secret %s in the Middleware's namespace %s" % (limit["redis"]["secret"], namespace)
    data = found[0]["stringData"]
    assert {"username", "password"} <= set(data), sorted(data)

    # The rendered password must open the Redis: start a second loopback Redis with it; the rendered Middleware and
    # Secret are applied as they are but for the endpoint.
    with redis_server(tmp_path, data["password"]) as redis_port:

        def loopback(doc):
            if doc["kind"] == "Middleware" and "rateLimit" in doc["spec"]:
                doc["spec"]["rateLimit"]["redis"]["endpoints"] = ["127.0.0.1:%d" % redis_port]
            return doc

        url, _calls = backend
        port = int(url.rsplit(":", 1)[1])
        objects = traefik_edge.edge_objects(docs, "edge-rendered", port, changes=loopback)
        rendered_secret = dict(found[0], metadata={"name": found[0]["metadata"]["name"], "namespace": "edge-rendered"})
        with traefik_edge.edges(api, tmp_path, "edge-rendered", objects, port, TLS[0], [rendered_secret]) as edge_:
            assert chat(edge_.urls[0], "sk-" + secrets.token_hex(24)) == 200
