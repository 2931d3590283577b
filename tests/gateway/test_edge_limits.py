"""The edge's rate limit holds across Traefik replicas: two edges (Traefik's own router and rate limiter,
lab/edge, built from the Traefik module K3s bundles) loaded with the rateLimit Middleware edge.py renders for a
site whose limits count in Redis, both counting in one real Redis (Debian's redis-server on loopback, with a
password, as the deployed one). One API key is throttled with 429 once the two edges together have served its
burst (not twice the burst, as two in-memory limiters would), while another key is still served.

Simulated, and named so: two edge processes stand for two Traefik replicas, a loopback HTTP server for the gateway,
and the rendered Redis endpoint (a cluster DNS name) is pointed at the loopback Redis, the one change to the
rendered Middleware besides the lowered average and burst. The rendered site's Middleware and Secret are checked
against what Traefik's CRD provider reads (its redis block, the Secret in the Middleware's namespace with the keys
username and password) and then loaded as such. Requests are bounded loops on loopback only.
"""

import contextlib
import importlib.util
import json
import secrets
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "lab"))
import edgebuild  # noqa: E402

# The unit tests' helpers (rendering a site with the working tree's collection); it makes the collection importable.
_spec = importlib.util.spec_from_file_location("unit_helpers", ROOT / "tests" / "unit" / "conftest.py")
helpers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(helpers)

from test_gateway import free_port, wait_for  # noqa: E402

from ansible_collections.aiinfra.k3s.plugins.module_utils import edge  # noqa: E402

FULL = {s["id"]: s for s in yaml.safe_load((ROOT / "tests" / "live" / "sites.yml").read_text())}["full"]
HOST = "llm.example.org"
SECRET = "litellm-redis"  # the litellm role's litellm_redis_secret_name default
# A budget no bounded loop refills: 4 requests, then one token an hour (Traefik's maxDelay is 0.5 s below 1/s).
LOW = {"rate_average": 4, "rate_burst": 4, "rate_period": "1h"}
ATTEMPTS = 3 * LOW["rate_burst"]  # per key and edge at most: the loops stop at the first 429 past the burst


def request(url, key, body):
    """The status of one POST (never raises for an HTTP error status)."""
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST")
    req.add_header("Host", HOST)
    req.add_header("Content-Type", "application/json")
    if key:
        req.add_header("Authorization", "Bearer " + key)
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            resp.read()
            return resp.status
    except urllib.error.HTTPError as err:
        err.read()
        return err.code


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


@contextlib.contextmanager
def edges(tmp, route, chain, backend, secret_data, count=2):
    """count edge processes with the route's rule and Middlewares, the Secrets of the namespace in their config;
    yields their base URLs."""
    if not edgebuild.edge_path().is_file():
        pytest.fail("the edge is not built: run `.venv/bin/python lab/edgebuild.py build` (make gateway does)")
    procs, urls = [], []
    log = open(tmp / "edges.log", "w")  # noqa: SIM115 (closed below)
    try:
        for index in range(count):
            port = free_port()
            config = tmp / ("edge-%d.json" % index)
            config.write_text(
                json.dumps(
                    {
                        "listen": "127.0.0.1:%d" % port,
                        "routes": [
                            {
                                "name": route["metadata"]["name"],
                                "rule": route["spec"]["routes"][0]["match"],
                                "backend": backend,
                                "middlewares": chain,
                            }
                        ],
                        "secrets": secret_data,
                    }
                )
            )
            config.chmod(0o600)
            procs.append(subprocess.Popen([str(edgebuild.edge_path()), str(config)], stdout=log, stderr=log))
            urls.append("http://127.0.0.1:%d" % port)
        for proc, url in zip(procs, urls):
            wait_for(url + "/", proc, "the edge")
        yield urls
    finally:
        for proc in procs:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
        log.close()


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


def test_two_edges_share_one_budget_per_key_in_redis(redis, backend, tmp_path):
    """Two edges, one Redis: a key gets its burst across both edges together, then 429 from either; another key
    is still served, and the counters live in Redis (rate:<middleware>:<Authorization>)."""
    url, calls = backend
    limits = {"store": "redis", "deploy": False, "name": "", "host": "127.0.0.1", "port": redis["port"]}
    route, chain = secure_route(edge.traefik_manifests(site_params(dict(limits, secret=SECRET))))
    namespace = {SECRET: {"username": "", "password": redis["password"]}}
    key, other = "sk-" + secrets.token_hex(24), "sk-" + secrets.token_hex(24)
    with edges(tmp_path, route, chain, url, namespace) as urls:
        statuses = spend(urls, key)
        served = statuses.count(200)
        # Alternating edges: each served half of the burst; in memory each would have served a whole burst.
        assert served == LOW["rate_burst"] and statuses[-1] == 429, statuses
        assert [chat(u, key) for u in urls] == [429, 429]
        assert calls.count("Bearer " + key) == LOW["rate_burst"]
        assert chat(urls[1], other) == 200 and chat(urls[0], other) == 200
        # Traefik's key: rate:<middleware>:<the Authorization value> (the edge names a middleware route-index).
        index = next(i for i, spec in enumerate(chain) if "rateLimit" in spec)
        assert redis_keys(redis, "rate:*" + key) == ["rate:%s-%d:Bearer %s" % (route["metadata"]["name"], index, key)]
    print("key: %d served across %d edges, then %s" % (served, len(urls), statuses[served:]))


def test_an_unreachable_redis_fails_closed(backend, tmp_path):
    """Traefik's limiter answers 500 when it cannot count (no Redis listening): the edge does not serve unlimited."""
    url, _calls = backend
    limits = {"store": "redis", "deploy": False, "name": "", "host": "127.0.0.1", "port": free_port()}
    route, chain = secure_route(edge.traefik_manifests(site_params(dict(limits, secret=SECRET))))
    with edges(tmp_path, route, chain, url, {SECRET: {"username": "", "password": "x"}}, count=1) as urls:
        assert chat(urls[0], "sk-" + secrets.token_hex(24)) == 500


def test_edges_counting_alone_serve_a_burst_each(backend, tmp_path):
    """The contrast (limits store memory): the same rendered limit without redis lets each edge serve a whole
    burst, the multiplication the Redis removes."""
    url, _calls = backend
    route, chain = secure_route(edge.traefik_manifests(site_params({"store": "memory"})))
    key = "sk-" + secrets.token_hex(24)
    with edges(tmp_path, route, chain, url, {}) as urls:
        per_edge = [spend([u], key).count(200) for u in urls]
    assert per_edge == [LOW["rate_burst"]] * 2, per_edge


def test_the_edge_refuses_a_secret_without_both_keys(redis, backend, tmp_path):
    """As Traefik's CRD provider: a redis secret must hold username and password (the edge exits at start)."""
    url, _calls = backend
    limits = {"store": "redis", "deploy": False, "name": "", "host": "127.0.0.1", "port": redis["port"]}
    route, chain = secure_route(edge.traefik_manifests(site_params(dict(limits, secret=SECRET))))
    config = tmp_path / "edge.json"
    config.write_text(
        json.dumps(
            {
                "listen": "127.0.0.1:%d" % free_port(),
                "routes": [
                    {"name": "r", "rule": route["spec"]["routes"][0]["match"], "backend": url, "middlewares": chain}
                ],
                "secrets": {SECRET: {"password": redis["password"]}},
            }
        )
    )
    proc = subprocess.run(
        [str(edgebuild.edge_path()), str(config)], capture_output=True, text=True, timeout=30, check=False
    )
    assert proc.returncode == 1 and "must contain both username and password keys" in proc.stderr, proc.stderr


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


def test_the_rendered_site_gives_traefik_its_redis_and_secret(rendered_full, redis, backend, tmp_path):
    """What Traefik's CRD provider reads: the Middleware's redis block names the deployed Redis Service and a
    Secret of the Middleware's namespace holding username and password; the rendered Middleware and Secret, loaded
    into an edge (endpoint pointed at the loopback Redis started with the rendered password), serve and count."""
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

    # The rendered password must open the Redis: start a second loopback Redis with it.
    with redis_server(tmp_path, data["password"]) as redis_port:
        loopback = [
            dict(
                spec,
                rateLimit=dict(spec["rateLimit"], redis=dict(limit["redis"], endpoints=["127.0.0.1:%d" % redis_port])),
            )
            if "rateLimit" in spec
            else spec
            for spec in chain
        ]
        url, _calls = backend
        with edges(tmp_path, route, loopback, url, {limit["redis"]["secret"]: data}, count=1) as urls:
            assert chat(urls[0], "sk-" + secrets.token_hex(24)) == 200
