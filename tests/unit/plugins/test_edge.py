"""plugins/module_utils/k8s/edge.py (Traefik and cert-manager): the public URLs the site plan shows, and a prefix that
doubles the public paths (issue 29 item 10); the problems it refuses and the route rule it writes; on the rendered test
sites (tests/unit/rendered_sites.py), the routes with TLS, rate limit and redirect, the certificate and its issuer,
and the Middlewares against the pinned Traefik's CRD."""

import jsonschema
import pytest
import rendered_sites
import yaml
from rendered_sites import NAMESPACE, of_kind

from ansible_collections.aiinfra.k3s.plugins.module_utils.k8s import edge
from lab.live import crds

rendered = rendered_sites.site_fixture()

GOOD = {
    "host": "api.example.internal",
    "path_prefix": "/api/litellm",
    "rate_average": 100,
    "rate_burst": 200,
    "rate_period": "1s",
    "public_paths": list(edge.PUBLIC_PATHS),
    "expose_admin": False,
}


@pytest.mark.parametrize("prefix", ["/v1", "/v1/chat"])
def test_a_prefix_the_public_paths_already_start_with_is_refused_with_the_fix(prefix):
    (problem,) = edge.edge_problems(dict(GOOD, path_prefix=prefix), None)
    assert problem.startswith("traefik_path_prefix is %r and the public paths already start with it" % prefix)
    assert "/v1/chat/completions" in problem
    assert "set traefik_path_prefix to / to serve https://api.example.internal/v1/" in problem
    assert "https://api.example.internal/api/v1/" in problem


def test_the_issue_site_names_the_doubled_url():
    (problem,) = edge.edge_problems(dict(GOOD, path_prefix="/v1"), None)
    assert "clients would call https://api.example.internal/v1/v1/chat/completions" in problem


@pytest.mark.parametrize("prefix", ["/", "", "/api/litellm", "/v10", "/api"])
def test_prefixes_that_do_not_overlap_pass(prefix):
    assert edge.edge_problems(dict(GOOD, path_prefix=prefix), None) == []


def test_the_overlap_counts_the_default_paths_when_the_admin_routes_are_exposed():
    problems = edge.edge_problems(dict(GOOD, path_prefix="/v1", expose_admin=True, public_paths=None), None)
    assert len(problems) == 1 and "traefik_path_prefix is '/v1'" in problems[0]


def values(**over):
    out = {
        "traefik_host": "api.example.internal",
        "traefik_path_prefix": "/api/litellm",
        "traefik_public_paths": ["/v1/chat/completions", "/v1/models"],
        "traefik_expose_admin": False,
    }
    out.update(over)
    return out


@pytest.mark.parametrize(
    ("over", "urls"),
    [
        (
            {},
            [
                "https://api.example.internal/api/litellm/v1/chat/completions",
                "https://api.example.internal/api/litellm/v1/models",
            ],
        ),
        (
            {"traefik_path_prefix": "/"},
            ["https://api.example.internal/v1/chat/completions", "https://api.example.internal/v1/models"],
        ),
        (
            {"traefik_path_prefix": "", "traefik_public_paths": ["/v1/models"]},
            ["https://api.example.internal/v1/models"],
        ),
        ({"traefik_expose_admin": True}, ["https://api.example.internal/api/litellm/"]),
        ({"traefik_expose_admin": "yes", "traefik_path_prefix": "/"}, ["https://api.example.internal/"]),
        ({"traefik_host": ""}, []),
        ({"traefik_host": None}, []),
    ],
)
def test_public_urls(over, urls):
    assert edge.public_urls(values(**over)) == urls


def test_public_urls_default_to_the_collection_paths():
    urls = edge.public_urls({"traefik_host": "h.example.org", "traefik_path_prefix": "/"})
    assert urls == ["https://h.example.org" + p for p in edge.PUBLIC_PATHS]


def test_public_urls_match_the_route_rule():
    """Each URL's path is one the IngressRoute's rule matches (the same prefix and paths)."""
    v = values()
    rule = edge.route_rule(v["traefik_host"], v["traefik_path_prefix"], v["traefik_public_paths"])
    for url in edge.public_urls(v):
        assert "Path(`%s`)" % url.split("api.example.internal", 1)[1] in rule


@pytest.mark.parametrize("bad", [None, {}, {"traefik_host": 5}, {"traefik_host": "h", "traefik_public_paths": 3}])
def test_public_urls_never_raise(bad):
    edge.public_urls(bad)


def test_edge_routes_have_tls_rate_limit_and_redirect(rendered):
    site, docs, _out, _proc = rendered
    routes = {r["metadata"]["name"]: r for r in of_kind(docs, "IngressRoute")}
    middlewares = {m["metadata"]["name"]: m["spec"] for m in of_kind(docs, "Middleware")}
    secure = [r for r in routes.values() if "websecure" in r["spec"]["entryPoints"]]
    assert secure, "the gateway is not exposed"
    host = {"example": "intranet.cris-mora-cv.es", "lab": "gateway.lab.aiinfra.test", "full": "llm.example.org"}[site]
    options = {o["metadata"]["name"]: o["spec"] for o in of_kind(docs, "TLSOption")}
    for route in secure:
        assert route["spec"]["tls"]["secretName"] == "litellm-tls"
        tls_options = options[route["spec"]["tls"]["options"]["name"]]
        assert tls_options == {"minVersion": "VersionTLS12", "sniStrict": True}  # the lab's cert-manager issues one too
        (rule,) = route["spec"]["routes"]
        assert f"Host(`{host}`)" in rule["match"]
        specs = [middlewares[m["name"]] for m in rule["middlewares"]]
        # One budget per API key, not per client address (behind ServiceLB that is a node's, shared by its clients),
        # counted in the deployed Redis (every site keeps litellm_redis deploy) so every Traefik replica shares it.
        (store,) = [
            d
            for d in of_kind(docs, "Service")
            if d["metadata"]["labels"].get("app.kubernetes.io/component") == "rate-limit-store"
        ]
        average, burst = (5, 10) if site == "lab" else (100, 200)  # the lab's budget: tests/lab go past it
        limit = {
            "average": average,
            "burst": burst,
            "period": "1s",
            "sourceCriterion": {"requestHeaderName": "Authorization"},
            "redis": {
                "endpoints": ["%s.%s.svc.cluster.local:6379" % (store["metadata"]["name"], NAMESPACE[site])],
                "secret": "litellm-redis",
            },
        }
        assert {"rateLimit": limit} in specs
        assert specs[0] == {"headers": {"stsSeconds": 31536000, "stsIncludeSubdomains": False}}  # HSTS, on every answer
        assert rule["services"] == [{"name": "litellm", "port": 4000}]
        prefix = "" if site == "full" else "/api/litellm"  # the notes' prefix, stripped before the gateway
        # Only the inference paths and liveness are routed (tests/gateway routes requests through this rule).
        assert "PathPrefix" not in rule["match"]
        assert "Path(`%s/v1/chat/completions`)" % prefix in rule["match"]
        if prefix:
            assert {"stripPrefix": {"prefixes": ["/api/litellm"]}} in specs
    plain_http = [r for r in routes.values() if r["spec"]["entryPoints"] == ["web"]]
    assert len(plain_http) == len(secure)
    for route in plain_http:
        (rule,) = route["spec"]["routes"]
        # Only the host's root is redirected: the gateway's paths are not routed on plain HTTP (404, no redirect a
        # client would follow after sending its key in clear).
        assert rule["match"] == f"Host(`{host}`) && Path(`/`)"
        assert [middlewares[m["name"]] for m in rule["middlewares"]] == [
            {"redirectScheme": {"scheme": "https", "permanent": True}}
        ]


def test_certificate_covers_the_gateway_host(rendered):
    site, docs, _out, _proc = rendered
    (route,) = [r for r in of_kind(docs, "IngressRoute") if "websecure" in r["spec"]["entryPoints"]]
    certs = [c for c in of_kind(docs, "Certificate") if c["spec"]["secretName"] == route["spec"]["tls"]["secretName"]]
    (cert,) = certs
    assert cert["metadata"]["namespace"] == route["metadata"]["namespace"]
    assert route["spec"]["routes"][0]["match"].startswith("Host(`%s`)" % cert["spec"]["dnsNames"][0])
    issuers = {i["metadata"]["name"]: i["spec"] for i in of_kind(docs, "ClusterIssuer")}
    issuer = issuers[cert["spec"]["issuerRef"]["name"]]
    if site == "full":
        assert issuer["acme"]["email"] == "ops@example.org"
        assert issuer["acme"]["solvers"] == [{"http01": {"ingress": {"ingressClassName": "traefik"}}}]
    else:  # intranet: a CA issuer backed by a self-signed root
        root = next(c for c in of_kind(docs, "Certificate") if c["spec"].get("isCA"))
        assert issuer["ca"]["secretName"] == root["spec"]["secretName"]
        assert "selfSigned" in issuers[root["spec"]["issuerRef"]["name"]]
    (chart,) = [c for c in of_kind(docs, "HelmChart") if c["metadata"]["name"] == "cert-manager"]
    assert yaml.safe_load(chart["spec"]["valuesContent"])["crds"]["enabled"] is True


def traefik_middleware_schema():
    """openAPIV3Schema of the Middleware CRD of the Traefik the pinned K3s release installs (lab/live/crds.py: its table
    of K3s's embedded versions, the CRD file from Traefik's module, cached under .cache/crds; the lab's Traefik is
    built from the same release); every object closed to unknown fields (the API server would prune them silently,
    which hides a misspelt field)."""
    (path,) = [p for label, p in crds.cached() if label.endswith("traefik.io_middlewares.yaml")]
    (crd,) = [d for d in yaml.safe_load_all(path.read_text()) if d]
    (served,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1alpha1"]

    def closed(node):
        if isinstance(node, dict):
            node = {k: closed(v) for k, v in node.items()}
            if node.get("type") == "object" and "properties" in node and "additionalProperties" not in node:
                node["additionalProperties"] = False
        elif isinstance(node, list):
            node = [closed(v) for v in node]
        return node

    return closed(served["schema"]["openAPIV3Schema"])


def test_middlewares_pass_the_pinned_traefik_crd(rendered):
    """The rendered Middlewares (rateLimit with its redis block) against Traefik's own CRD, fields by name."""
    _site, docs, _out, _proc = rendered
    spec = {"type": "object", "properties": {"spec": traefik_middleware_schema()["properties"]["spec"]}}
    middlewares = of_kind(docs, "Middleware")
    assert any("redis" in m["spec"].get("rateLimit", {}) for m in middlewares)
    for doc in middlewares:
        jsonschema.validate({"spec": doc["spec"]}, spec)
    typo = {"spec": {"rateLimit": {"average": 1, "redis": {"endpoints": ["r:6379"], "secretName": "s"}}}}
    with pytest.raises(jsonschema.ValidationError, match="secretName"):
        jsonschema.validate(typo, spec)


@pytest.mark.parametrize(
    ("traefik", "certs", "fragment"),
    [
        ({"host": "Bad_Host"}, None, "traefik_host is 'Bad_Host'"),
        ({"host": ""}, None, "traefik_host is ''"),
        ({"path_prefix": "api/"}, None, "traefik_path_prefix is 'api/'"),
        # a crafted prefix would close the Path matcher and add a PathPrefix(`/`): the admin API exposed
        ({"path_prefix": "/api`) || PathPrefix(`/"}, None, "traefik_path_prefix is '/api`) || PathPrefix(`/'"),
        ({"path_prefix": "/api/../admin"}, None, "no . or .. segment"),
        ({"path_prefix": "/api litellm"}, None, "traefik_path_prefix is '/api litellm'"),
        ({"public_paths": ["/v1/../key/list"]}, None, "traefik_public_paths has '/v1/../key/list'"),
        ({"hsts_seconds": -1}, None, "traefik_hsts_seconds is -1"),
        ({"rate_average": 100, "rate_burst": 50}, None, "at least as large"),
        ({"rate_period": "1 second"}, None, "traefik_rate_limit_period is '1 second'"),
        ({}, {"issuer_kind": "acme", "acme_email": ""}, "cert_manager_acme_email is not set"),
        ({}, {"issuer_kind": "vault"}, "cert_manager_issuer_kind is 'vault'"),
        ({"public_paths": []}, None, "traefik_public_paths is []"),
        ({"public_paths": ["/v1/models", "v1/chat"]}, None, "traefik_public_paths has 'v1/chat'"),
        ({"public_paths": ["/v1/models/"]}, None, "traefik_public_paths has '/v1/models/'"),
        ({"public_paths": ["/v1/`models`"]}, None, "traefik_public_paths has '/v1/`models`'"),
    ],
)
def test_edge_problems(traefik, certs, fragment):
    good = {"host": "llm.example.org", "path_prefix": "/api/litellm", "rate_average": 100, "rate_burst": 200}
    good.update(rate_period="1s", public_paths=list(edge.PUBLIC_PATHS), expose_admin=False)
    assert edge.edge_problems(good, {"issuer_kind": "ca"}) == []
    problems = edge.edge_problems(dict(good, **traefik), certs)
    assert len(problems) == 1 and fragment in problems[0], problems


@pytest.mark.parametrize(
    ("prefix", "paths", "rule"),
    [
        ("/api/litellm", ["/v1/models"], "Host(`h.example.org`) && Path(`/api/litellm/v1/models`)"),
        (
            "/api/litellm",
            ["/v1/models", "/health/liveliness"],
            "Host(`h.example.org`) && (Path(`/api/litellm/v1/models`) || Path(`/api/litellm/health/liveliness`))",
        ),
        ("/", ["/v1/models"], "Host(`h.example.org`) && Path(`/v1/models`)"),
        # traefik_expose_admin: the whole prefix (admin API and UI included), or the whole host.
        ("/api/litellm", None, "Host(`h.example.org`) && PathPrefix(`/api/litellm`)"),
        ("/", None, "Host(`h.example.org`)"),
    ],
)
def test_route_rule_names_exact_public_paths_unless_admin_is_exposed(prefix, paths, rule):
    assert edge.route_rule("h.example.org", prefix, paths) == rule
