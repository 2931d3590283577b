"""Serving manifests: rendered for every inventory through playbooks/render.yml, then checked with strict
Kubernetes schema validation (the K3s release's Kubernetes version), custom resources against their CRD
schema, policies kept as data, and the GPU verifier run on what the cluster would schedule."""

import difflib
import hashlib
import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml
from conftest import DATA, ROOT, run_playbook, write_site

from ansible_collections.aiinfra.k3s.plugins.module_utils.k8s import autoscaling, edge, json_logging
from ansible_collections.aiinfra.k3s.plugins.module_utils.k8s import gateway as gw
from ansible_collections.aiinfra.k3s.plugins.module_utils.k8s import model_servers as wl
from ansible_collections.aiinfra.k3s.plugins.module_utils.k8s import objects as sv
from ansible_collections.aiinfra.k3s.plugins.module_utils.plan import capacity as plan

kubernetes_validate = pytest.importorskip("kubernetes_validate")

K8S_VERSION = "1.36"  # K3s v1.36.4+k3s1 (roles/k3s/defaults/main.yml)
POLICIES = yaml.safe_load((DATA / "serving_policy.yml").read_text())
CRDS = {
    (d["properties"]["apiVersion"]["const"], d["properties"]["kind"]["const"]): d
    for d in (yaml.safe_load(p.read_text()) for p in sorted((DATA / "crds").glob("*.yml")))
}
GATEWAY_KEY = "sk-3e8b1d6f9a2c4e7b0d5f8a1c3e6b9d2f4a7c"
NGC_KEY = "nvapi-7Hq2Lm9Xw4Rt8Yp3Kd6Fz1Vb5Nc0Gs"
NIM_IMAGE = "nvcr.io/nim/meta/llama-3.1-8b-instruct:1.3.3"
# A bigger site than the notes: two GPU nodes with two GPUs, one shared by time-slicing, a NIM backend next to
# vLLM, the gateway on the GPU nodes (the notes' placement) and the secrets rendered too.
FULL_VARS = {
    "aiinfra_namespace": "ia-services-payed",
    "litellm_master_key": GATEWAY_KEY,
    "litellm_placement": "gpu",
    "nim_ngc_api_key": NGC_KEY,
    "nim_models": [{"served_name": "llama-8b", "image": NIM_IMAGE, "gpus": 1, "replicas": 2, "max_replicas": 3}],
    "vllm_models": [
        {"served_name": "nemotron-35b", "path": "nvidia/Nemotron-4-35B", "tensor_parallel_size": 2},
        {"served_name": "qwen-7b", "path": "Qwen/Qwen2-7B", "replicas": 2},
    ],
    "gpu_operator_time_slicing_classes": {"shared": 2, "exclusive": 1},
    "gpu_operator_time_slicing_default": "exclusive",
    "gpu_operator_mig_strategy": "single",
    "gpu_operator_registry": "registry.site.internal:5000",
    "traefik_host": "llm.example.org",
    "traefik_path_prefix": "/",
    "cert_manager_issuer_kind": "acme",
    "cert_manager_acme_email": "ops@example.org",
    "monitoring_grafana_admin_password": "Gq8wE3rT6yU1iO4pA7sD",
    "monitoring_token_prices": {"nemotron-35b": {"prompt": 0.000002, "completion": 0.000006}},
}
NPM_GROUPS = ("traefik.io/", "cert-manager.io/", "monitoring.coreos.com/", "keda.sh/")  # tests/crd/validate.cjs
CRD_DIR = ROOT / "tests" / "crd"
NODES = {
    "example": {"gx10-db4d": 1},
    "lab": {"lab-gpu-1": 2, "lab-gpu-2": 2},  # inventories/lab/group_vars/gpu_nodes.yml
    "full": {"gpu-a": 2, "gpu-b": 2},
}
# The example and the full site name the notes' namespace; the lab takes the collection's default.
NAMESPACE = {"example": "ia-services-payed", "lab": "ai-serving", "full": "ia-services-payed"}
FULL_CLASSES = {"gpu-a": "shared"}  # gpu-b takes the default class, exclusive
ALLOCATABLE = {"example": NODES["example"], "lab": NODES["lab"], "full": {"gpu-a": 4, "gpu-b": 2}}


def render(inventory, out, extra=()):
    proc = run_playbook("render.yml", inventory, callback="default", extra=["-e", f"render_dir={out}", *extra])[0]
    assert proc.returncode == 0, proc.stdout[-3000:]
    return proc


def load_docs(out):
    docs = []
    for path in sorted(out.glob("*.yaml")):
        docs.extend(d for d in yaml.safe_load_all(path.read_text()) if d)
    return docs


@pytest.fixture(scope="module", params=list(NODES))
def rendered(request, tmp_path_factory):
    site = request.param
    out = tmp_path_factory.mktemp(f"render-{site}")
    extra = []
    if site == "example":
        inventory = ROOT / "inventories" / "example"
    elif site == "lab":  # the lab's hosts.yml is written by labctl; render its default shape
        inventory = write_site(tmp_path_factory.mktemp("lab-inv"), ["lab-cp-1"], NODES["lab"], link_lab=True)
    else:
        inventory = write_site(
            tmp_path_factory.mktemp("full-inv"), ["cp-1"], NODES["full"], FULL_VARS, classes=FULL_CLASSES
        )
        extra = ["-e", "render_secrets=true", "-vvv"]  # secrets must not reach even the most verbose output
    proc = render(inventory, out, [*extra, "-e", f"render_plan_file={out}.plan"])
    return site, load_docs(out), out, proc


def workloads(docs):
    """The Deployments: the gateway and the model servers (one store claim per pod)."""
    return [d for d in docs if d["kind"] in ("Deployment", "StatefulSet")]


def of_kind(docs, kind):
    return [d for d in docs if d["kind"] == kind]


def npm_validated(doc):
    return doc["apiVersion"].startswith(NPM_GROUPS)


def validate_with_npm_schemas(docs):
    """tests/crd/validate.cjs: each object against the CRD schema shipped by @kubernetes-models (pinned)."""
    if not (CRD_DIR / "node_modules").is_dir():
        pytest.fail("CRD schema packages missing: run `make crd-deps` (npm ci in tests/crd)")
    proc = subprocess.run(
        ["node", str(CRD_DIR / "validate.cjs")],
        input=json.dumps(docs),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return proc.returncode, [json.loads(line) for line in proc.stdout.splitlines()]


def test_every_builtin_manifest_passes_strict_schema_validation(rendered):
    _site, docs, _out, _proc = rendered
    builtin = [d for d in docs if (d["apiVersion"], d["kind"]) not in CRDS and not npm_validated(d)]
    assert builtin
    for doc in builtin:
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


def test_custom_resources_pass_their_crd_schema(rendered):
    _site, docs, _out, _proc = rendered
    custom = [d for d in docs if (d["apiVersion"], d["kind"]) in CRDS]
    assert custom, "the GPU Operator HelmChart is missing"
    for doc in custom:
        jsonschema.validate(doc, CRDS[(doc["apiVersion"], doc["kind"])])


def test_traefik_and_cert_manager_resources_pass_their_crd_schemas(rendered):
    _site, docs, _out, _proc = rendered
    custom = [d for d in docs if npm_validated(d)]
    assert {d["kind"] for d in custom} >= {
        "IngressRoute",
        "Middleware",
        "ClusterIssuer",
        "Certificate",
        "PrometheusRule",
    }
    rc, lines = validate_with_npm_schemas(custom)
    assert rc == 0, [line for line in lines if not line["ok"]]
    assert len(lines) == len(custom)


def test_npm_crd_schemas_refuse_bad_objects():
    """The validator is not a rubber stamp: a wrong type and a missing issuer are refused."""
    bad = [
        {
            "apiVersion": "traefik.io/v1alpha1",
            "kind": "Middleware",
            "metadata": {"name": "m", "namespace": "n"},
            "spec": {"rateLimit": {"average": "lots"}},
        },
        {
            "apiVersion": "cert-manager.io/v1",
            "kind": "Certificate",
            "metadata": {"name": "c", "namespace": "n"},
            "spec": {"secretName": "s", "dnsNames": ["a.example.org"]},
        },
    ]
    rc, lines = validate_with_npm_schemas(bad)
    assert rc == 1 and [line["ok"] for line in lines] == [False, False]
    assert "average" in lines[0]["error"] and "issuerRef" in lines[1]["error"]


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
    """openAPIV3Schema of the Middleware CRD of the Traefik the pinned K3s release installs (lab/crds.py: its table
    of K3s's embedded versions, the CRD file from Traefik's module, cached under .cache/crds; the lab's Traefik is
    built from the same release); every object closed to unknown fields (the API server would prune them silently,
    which hides a misspelt field)."""
    sys.path.insert(0, str(ROOT / "lab"))
    import crds

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


PATHS = yaml.safe_load((DATA / "network_paths.yml").read_text())


def selects(selector, labels):
    """A Kubernetes label selector applied to a label set (matchLabels and In/NotIn/Exists/DoesNotExist)."""
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for expr in selector.get("matchExpressions") or []:
        value, present = labels.get(expr["key"]), expr["key"] in labels
        op = expr["operator"]
        if (op == "In" and value not in expr["values"]) or (op == "NotIn" and present and value in expr["values"]):
            return False
        if (op == "Exists" and not present) or (op == "DoesNotExist" and present):
            return False
    return True


def peer_matches(peer, policy_ns, pod):
    if "namespaceSelector" in peer:
        if not selects(peer["namespaceSelector"], {"kubernetes.io/metadata.name": pod["namespace"]}):
            return False
    elif pod["namespace"] != policy_ns:
        return False
    return selects(peer.get("podSelector") or {}, pod["labels"])


def port_matches(rule, port, named):
    wanted = rule.get("ports")
    return not wanted or any(p["port"] == port or named.get(p["port"]) == port for p in wanted)


def side_allows(policies, direction, pod, peer, port, named):
    """NetworkPolicy semantics for one side: unselected pods allow all; selected ones need a matching rule."""
    key, peers = ("ingress", "from") if direction == "Ingress" else ("egress", "to")
    chosen = [
        p
        for p in policies
        if p["metadata"]["namespace"] == pod["namespace"]
        and direction in p["spec"]["policyTypes"]
        and selects(p["spec"]["podSelector"], pod["labels"])
    ]
    if not chosen:
        return True
    return any(
        port_matches(rule, port, named)
        and (not rule.get(peers) or any(peer_matches(x, p["metadata"]["namespace"], peer) for x in rule[peers]))
        for p in chosen
        for rule in p["spec"].get(key) or []
    )


def pod_of(end, docs):
    if "deployment" in end or "component" in end:
        (dep,) = [
            d
            for d in workloads(docs)
            if d["metadata"]["name"] == end.get("deployment")
            or d["metadata"]["labels"]["app.kubernetes.io/component"] == end.get("component")
        ][:1]
        container = dep["spec"]["template"]["spec"]["containers"][0]
        ports = {p["name"]: p["containerPort"] for p in container["ports"]}
        return {
            "namespace": dep["metadata"]["namespace"],
            "labels": dep["spec"]["template"]["metadata"]["labels"],
        }, ports
    return {"namespace": end["namespace"], "labels": end["labels"]}, end.get("ports", {})


@pytest.mark.parametrize("path", PATHS, ids=[p["id"] for p in PATHS])
def test_network_policies_allow_exactly_the_seed_paths(rendered, path):
    _site, docs, _out, _proc = rendered
    policies = of_kind(docs, "NetworkPolicy")
    assert policies
    src, _src_ports = pod_of(path["from"], docs)
    dst, dst_ports = pod_of(path["to"], docs)
    allowed = side_allows(policies, "Egress", src, dst, path["port"], dst_ports) and side_allows(
        policies, "Ingress", dst, src, path["port"], dst_ports
    )
    assert allowed is path["allowed"]


def test_every_namespace_has_a_pod_security_level(rendered):
    _site, docs, _out, _proc = rendered
    for ns in of_kind(docs, "Namespace"):
        labels = ns["metadata"].get("labels") or {}
        assert labels.get("pod-security.kubernetes.io/enforce") in ("restricted", "baseline", "privileged"), ns


def test_one_autoscaler_per_target_and_maxima_fit_the_gpus(rendered):
    site, docs, _out, _proc = rendered
    scaled = of_kind(docs, "ScaledObject")
    hpas = of_kind(docs, "HorizontalPodAutoscaler")
    targets = [(o["metadata"]["namespace"], o["spec"]["scaleTargetRef"]["name"]) for o in scaled + hpas]
    assert len(targets) == len(set(targets)), targets
    deployments = {(d["metadata"]["namespace"], d["metadata"]["name"]): d for d in workloads(docs)}
    for target in targets:
        assert target in deployments, target
        assert "replicas" not in deployments[target]["spec"], target  # the autoscaler owns the count
    for obj in scaled + hpas:  # KEDA takes a scaleTargetRef without kind for a Deployment (its default)
        ref = obj["spec"]["scaleTargetRef"]
        target = deployments[(obj["metadata"]["namespace"], ref["name"])]
        assert (ref.get("apiVersion", "apps/v1"), ref.get("kind", "Deployment")) == ("apps/v1", target["kind"]), ref
    # The lab fixes its counts (no KEDA runs there: inventories/lab autoscaling_engine none).
    assert ((NAMESPACE[site], "litellm-ha") in targets) == (site != "lab")
    total = sum(ALLOCATABLE[site].values())
    gpus_at_min = 0
    for dep in deployments.values():
        limits = dep["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
        key = (dep["metadata"]["namespace"], dep["metadata"]["name"])
        minimum = dep["spec"].get("replicas") or next(
            (o["spec"].get("minReplicaCount") or o["spec"].get("minReplicas"))
            for o in scaled + hpas
            if (o["metadata"]["namespace"], o["spec"]["scaleTargetRef"]["name"]) == key
        )
        gpus_at_min += int(limits.get("nvidia.com/gpu", 0)) * minimum
    for obj in scaled:
        dep = deployments[(obj["metadata"]["namespace"], obj["spec"]["scaleTargetRef"]["name"])]
        gpus = int(dep["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"].get("nvidia.com/gpu", 0))
        if gpus:  # scaling this model to its maximum, with every other workload at its minimum, fits the cluster
            extra = (obj["spec"]["maxReplicaCount"] - obj["spec"]["minReplicaCount"]) * gpus
            assert gpus_at_min + extra <= total, (obj["metadata"]["name"], gpus_at_min, extra, total)
            trigger = obj["spec"]["triggers"][0]["metadata"]
            assert "vllm:num_requests_waiting" in trigger["query"]
        else:
            assert obj["spec"]["triggers"][0]["metadata"]["threshold"] == "50"  # the notes' gateway threshold


def test_gpu_bounds_leave_room_for_every_other_workload():
    capacity = {"g1": {"gpus": 2, "replicas": 1}, "g2": {"gpus": 2, "replicas": 1}}
    models = [
        {"served_name": "big", "tensor_parallel_size": 2, "replicas": 1},
        {"served_name": "small", "tensor_parallel_size": 1, "replicas": 1},
    ]
    assert autoscaling.gpu_bounds(models, [], capacity) == {"big": 1, "small": 2}
    nim = [{"served_name": "n", "gpus": 1, "replicas": 2}]
    assert autoscaling.gpu_bounds(models[1:], nim, capacity) == {"small": 2}


def test_crd_schema_refuses_a_typo():
    """The schema is strict: a misspelt field is an error, not silently pruned as the API server would."""
    good = {"apiVersion": "helm.cattle.io/v1", "kind": "HelmChart", "metadata": {"name": "x", "namespace": "y"}}
    schema = CRDS[("helm.cattle.io/v1", "HelmChart")]
    jsonschema.validate(dict(good, spec={"chart": "gpu-operator", "version": "v1"}), schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(dict(good, spec={"chart": "gpu-operator", "valuesContents": "x"}), schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(dict(good, spec={"chart": "c", "failurePolicy": "retry"}), schema)


def helm_values(docs):
    (chart,) = [c for c in of_kind(docs, "HelmChart") if c["metadata"]["name"] == "gpu-operator"]
    return chart, yaml.safe_load(chart["spec"]["valuesContent"])


def test_gpu_operator_chart_is_shaped_for_k3s(rendered):
    site, docs, _out, _proc = rendered
    chart, values = helm_values(docs)
    assert (chart["metadata"]["namespace"], chart["spec"]["targetNamespace"]) == ("kube-system", "gpu-operator")
    assert chart["spec"]["version"] == "v26.7.1" and chart["spec"]["repo"].startswith("https://")
    known = set(CRDS[("helm.cattle.io/v1", "HelmChart")]["x-gpu-operator-values"])
    assert set(values) <= known, set(values) - known
    env = {e["name"]: e["value"] for e in values["toolkit"]["env"]}
    assert env["CONTAINERD_SOCKET"] == "/run/k3s/containerd/containerd.sock"
    assert env["CONTAINERD_CONFIG"].startswith("/var/lib/rancher/k3s/agent/etc/containerd/")
    assert values["driver"]["enabled"] is False  # drivers on the host, as in the notes
    assert values["devicePlugin"]["enabled"] and values["dcgmExporter"]["enabled"]
    toleration = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    assert toleration in values["daemonsets"]["tolerations"]
    (ns,) = [d for d in of_kind(docs, "Namespace") if d["metadata"]["name"] == "gpu-operator"]
    assert ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"
    if site == "full":
        assert values["mig"] == {"strategy": "single"}
        assert values["devicePlugin"]["config"] == {"name": "time-slicing-config", "default": "exclusive"}
        assert values["toolkit"]["repository"] == "registry.site.internal:5000/nvidia/k8s"
        assert values["node-feature-discovery"]["image"]["repository"].startswith("registry.site.internal:5000/")
        # Since v25.10 the validator and the node status exporter are the operator's own image.
        for component in ("validator", "nodeStatusExporter"):
            assert values[component]["repository"] == values["operator"]["repository"]
            assert values[component]["image"] == "gpu-operator"
        assert values["operator"]["repository"] == "registry.site.internal:5000/nvidia"
        assert values["driver"]["manager"]["repository"] == "registry.site.internal:5000/nvidia/cloud-native"
    else:
        # MIG off is written as such: the chart's own default is mig.strategy single.
        assert "config" not in values["devicePlugin"] and values["mig"] == {"strategy": "none"}


def test_time_slicing_configmap_has_one_config_per_class(rendered):
    site, docs, _out, _proc = rendered
    maps = [d for d in of_kind(docs, "ConfigMap") if d["metadata"]["name"] == "time-slicing-config"]
    if site != "full":
        assert maps == []
        return
    (cm,) = maps
    assert sorted(cm["data"]) == ["exclusive", "shared"]
    shared = yaml.safe_load(cm["data"]["shared"])
    assert shared["flags"]["migStrategy"] == "single"
    assert shared["sharing"]["timeSlicing"]["resources"] == [{"name": "nvidia.com/gpu", "replicas": 2}]
    assert "sharing" not in yaml.safe_load(cm["data"]["exclusive"])


def dig(obj, path):
    """Follow a dotted path; a backslash keeps a dot inside a key (prometheus\\.io/scrape)."""
    for part in (p.replace("\\.", ".") for p in re.split(r"(?<!\\)\.", path)):
        obj = obj[int(part)] if isinstance(obj, list) else obj[part]
    return obj


def check(policy, pod):
    container = pod["spec"]["containers"][0]
    res = container["resources"]
    if policy.get("check") == "gpu_limits":
        return (
            res["limits"]["nvidia.com/gpu"] == res["requests"]["nvidia.com/gpu"]
            and int(res["limits"]["nvidia.com/gpu"]) >= 1
        )
    if policy.get("check") == "cpu_memory":
        return all(k in res["requests"] for k in ("cpu", "memory")) and "memory" in res["limits"]
    if policy.get("check") == "hf_offline":
        return {"name": "HF_HUB_OFFLINE", "value": "1"} in container["env"]
    if policy.get("check") == "store_read_only":
        return any(m.get("readOnly") for m in container["volumeMounts"] if m["name"] == "models")
    if policy.get("check") == "pinned_image":
        return sv.image_pinned(container["image"])
    if policy.get("check") == "no_surge":
        return True  # checked on the Deployment by test_gpu_rollouts_never_need_a_spare_gpu
    if policy.get("check") == "no_fs_group":
        return "fsGroup" not in pod["spec"].get("securityContext", {})
    if policy.get("check") == "runtime_env":
        env = {e["name"]: e.get("value") for e in container["env"]}
        return (
            all(env.get(name) for name in policy["names_a_user"])
            and all(str(env.get(name)).startswith("/tmp") for name in policy["under_tmp"])
            and all(env.get(name) == value for name, value in policy["equals"].items())
        )
    if policy.get("check") == "drain":
        return drain_fits(pod, container, policy["margin"])
    value = dig(pod, policy["path"])
    if "equals" in policy:
        return value == policy["equals"]
    if "contains" in policy:
        return policy["contains"] in value
    if "at_least" in policy:
        return value >= policy["at_least"]
    return bool(value)


def drain_fits(pod, container, margin):
    """The server's shutdown timeout (vLLM --shutdown-timeout, or NIM's passthrough of it) is above 0 and the grace
    period holds the preStop sleep, the timeout and the margin."""
    args = container["args"] or {e["name"]: e.get("value") for e in container["env"]}["NIM_PASSTHROUGH_ARGS"].split()
    timeout = int(args[args.index("--shutdown-timeout") + 1])
    sleep = int(container["lifecycle"]["preStop"]["exec"]["command"][-1].split()[-1])
    return timeout > 0 and sleep + timeout + margin <= pod["spec"]["terminationGracePeriodSeconds"]


def gpu_deployments(docs):
    return [
        d
        for d in workloads(docs)
        if "nvidia.com/gpu" in d["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    ]


@pytest.mark.parametrize("policy", POLICIES, ids=[p["id"] for p in POLICIES])
def test_gpu_workload_policies(rendered, policy):
    _site, docs, _out, _proc = rendered
    deployments = gpu_deployments(docs)
    assert deployments
    for dep in deployments:
        assert check(policy, dep["spec"]["template"]), (policy["id"], dep["metadata"]["name"])


def test_gpu_rollouts_never_need_a_spare_gpu(rendered):
    """Model servers are Deployments that replace a pod the old one first: a rollout never asks for a GPU nobody
    has."""
    _site, docs, _out, _proc = rendered
    for dep in gpu_deployments(docs):
        assert dep["kind"] == "Deployment", dep["metadata"]["name"]
        assert dep["spec"]["strategy"] == {
            "type": "RollingUpdate",
            "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1},
        }


def test_model_servers_leave_a_lost_node_and_claim_the_store_where_they_land(rendered):
    """A node that stops answering: the model server is evicted after its own tolerationSeconds (not the
    default 300 s) and its replacement binds a store volume on the node it lands on (a claim per pod)."""
    _site, docs, _out, _proc = rendered
    for dep in gpu_deployments(docs):
        pod = dep["spec"]["template"]["spec"]
        lost = {t["key"]: t for t in pod["tolerations"] if t.get("effect") == "NoExecute"}
        assert set(lost) == {"node.kubernetes.io/unreachable", "node.kubernetes.io/not-ready"}
        assert all(0 < t["tolerationSeconds"] <= 60 for t in lost.values()), lost
        (store,) = [v for v in pod["volumes"] if v["name"] == "models"]
        claim = store["ephemeral"]["volumeClaimTemplate"]["spec"]
        assert claim["storageClassName"] == "nvidia-ai-store" and claim["accessModes"] == ["ReadWriteOnce"]
        assert "volumeClaimTemplates" not in dep["spec"]


def test_tensor_parallel_gpus_and_store_claim(rendered):
    _site, docs, _out, _proc = rendered
    pv_size = {pv["spec"]["capacity"]["storage"] for pv in of_kind(docs, "PersistentVolume")}
    assert not of_kind(docs, "PersistentVolumeClaim")  # no claim shared by every replica
    for dep in workloads(docs):
        if dep["metadata"]["labels"]["app.kubernetes.io/component"] != "vllm":
            continue
        args = dep["spec"]["template"]["spec"]["containers"][0]["args"]
        tp = args[args.index("--tensor-parallel-size") + 1]
        assert dep["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == tp
        container = dep["spec"]["template"]["spec"]["containers"][0]
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            assert container[probe]["httpGet"]["path"] == "/health", probe  # vLLM's health endpoint
        volumes = {v["name"]: v for v in dep["spec"]["template"]["spec"]["volumes"]}
        template = volumes["models"]["ephemeral"]["volumeClaimTemplate"]
        assert template["spec"]["storageClassName"] == "nvidia-ai-store"
        assert {template["spec"]["resources"]["requests"]["storage"]} == pv_size
        assert volumes["dshm"]["emptyDir"]["medium"] == "Memory"


def test_vllm_logs_json_through_its_configmap(rendered, tmp_path):
    """The ConfigMap's formatter and dictConfig, loaded as vLLM loads them, print one JSON object per line."""
    _site, docs, _out, _proc = rendered
    (cm,) = [d for d in of_kind(docs, "ConfigMap") if d["metadata"]["name"] == "vllm-logging"]
    for name, content in cm["data"].items():
        (tmp_path / name).write_text(content)
    env = next(d for d in workloads(docs) if d["metadata"]["name"].startswith("vllm-"))
    env = {e["name"]: e.get("value") for e in env["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["VLLM_LOGGING_CONFIG_PATH"] == env["PYTHONPATH"] + "/logging.json"
    code = (
        "import json, logging, logging.config, sys\n"
        "logging.config.dictConfig(json.load(open(sys.argv[1])))\n"
        "logging.getLogger('vllm.engine').info('loaded %s in %ds', 'model \"x\"', 42)\n"
        "logging.getLogger('uvicorn.access').warning('GET /health 200')\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "logging.json")],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(tmp_path)},
        timeout=30,
        check=True,
    )
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [(e["logger"], e["level"]) for e in lines] == [("vllm.engine", "INFO"), ("uvicorn.access", "WARNING")]
    assert lines[0]["message"] == 'loaded model "x" in 42s'
    assert json_logging.MODULE + ".py" in cm["data"]


def test_storage_follows_the_notes(rendered):
    site, docs, _out, _proc = rendered
    (sc,) = of_kind(docs, "StorageClass")
    assert sc["metadata"]["name"] == "nvidia-ai-store"
    assert (sc["provisioner"], sc["volumeBindingMode"], sc["reclaimPolicy"]) == (
        "kubernetes.io/no-provisioner",
        "WaitForFirstConsumer",
        "Retain",
    )
    pvs = of_kind(docs, "PersistentVolume")
    pinned = [
        pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] for pv in pvs
    ]
    # Two volumes of the node's store per GPU unit (time-slicing replicas count): one per model server pod, and
    # one free for its replacement while the volume it held waits for the recycler.
    per_node = {node: [v[0] for v in pinned].count(node) for node in NODES[site]}
    assert per_node == {node: wl.VOLUMES_PER_UNIT * units for node, units in ALLOCATABLE[site].items()}
    assert all(pv["spec"]["local"]["path"] == "/data/model-registry" for pv in pvs)
    (ns,) = [d for d in of_kind(docs, "Namespace") if d["metadata"]["name"] == NAMESPACE[site]]
    assert ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"


def test_gateway_routes_exactly_the_deployed_models_and_services(rendered):
    _site, docs, _out, _proc = rendered
    (cm,) = [d for d in of_kind(docs, "ConfigMap") if d["metadata"]["name"] == "litellm-ha-config"]
    config = yaml.safe_load(cm["data"]["config.yaml"])
    routes = {m["model_name"]: m["litellm_params"] for m in config["model_list"]}
    services = {
        s["metadata"]["name"]: s
        for s in of_kind(docs, "Service")
        if s["metadata"]["labels"]["app.kubernetes.io/component"] in ("vllm", "nim")
    }
    deployed = {}
    for dep in workloads(docs):
        container = dep["spec"]["template"]["spec"]["containers"][0]
        if "--served-model-name" in container.get("args", []):
            deployed[container["args"][container["args"].index("--served-model-name") + 1]] = dep
        for e in container["env"]:
            if e["name"] == "NIM_SERVED_MODEL_NAME":
                deployed[e["value"]] = dep
    assert set(routes) == set(deployed) and routes
    for model, params in routes.items():
        assert params["model"] == f"hosted_vllm/{model}"
        dep = deployed[model]
        (svc,) = [s for s in services.values() if s["spec"]["selector"] == dep["spec"]["selector"]["matchLabels"]]
        ns, port = svc["metadata"]["namespace"], svc["spec"]["ports"][0]["port"]
        assert params["api_base"] == f"http://{svc['metadata']['name']}.{ns}.svc.cluster.local:{port}/v1"
        pod_port = dep["spec"]["template"]["spec"]["containers"][0]["ports"][0]
        assert pod_port["name"] == svc["spec"]["ports"][0]["targetPort"]
    assert config["general_settings"]["master_key"] == "os.environ/LITELLM_MASTER_KEY"
    assert set(config["litellm_settings"]["model_group_settings"]["forward_client_headers_to_llm_api"]) == set(routes)


def test_gateway_is_highly_available(rendered):
    site, docs, _out, _proc = rendered
    (dep,) = [d for d in workloads(docs) if d["metadata"]["name"] == "litellm-ha"]
    spec = dep["spec"]
    assert min_replicas(dep, docs) == 3  # inventories/lab: litellm_replicas 3 too
    assert spec["strategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}
    pod = spec["template"]["spec"]
    container = pod["containers"][0]
    assert container["readinessProbe"]["httpGet"]["path"] == "/health/readiness"
    assert container["livenessProbe"]["httpGet"]["path"] == "/health/liveliness"
    assert {"name": "JSON_LOGS", "value": "True"} in container["env"]
    key_ref = next(e for e in container["env"] if e["name"] == "LITELLM_MASTER_KEY")
    assert key_ref["valueFrom"]["secretKeyRef"]["name"] == "litellm-master-key"
    assert pod["topologySpreadConstraints"][0]["topologyKey"] == "kubernetes.io/hostname"
    (pdb,) = [p for p in of_kind(docs, "PodDisruptionBudget") if p["metadata"]["name"] == "litellm-ha"]
    assert pdb["spec"]["selector"]["matchLabels"] == spec["selector"]["matchLabels"]
    (svc,) = [s for s in of_kind(docs, "Service") if s["metadata"]["name"] == "litellm"]
    assert svc["spec"]["ports"][0]["port"] == 4000  # litellm.ia-services-payed.svc.cluster.local:4000
    if site == "full":  # the notes' placement: on the GPU nodes, tolerating the taint
        assert pod["nodeSelector"] == {"ai-workload": "true"}
        assert pod["tolerations"][0]["key"] == "nvidia.com/gpu"
    else:  # default: off the GPU nodes
        term = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        assert term["nodeSelectorTerms"][0]["matchExpressions"] == [
            {"key": "ai-workload", "operator": "NotIn", "values": ["true"]}
        ]
        assert "tolerations" not in pod


def test_nim_backends_follow_the_nim_notes(rendered):
    site, docs, _out, _proc = rendered
    nims = [d for d in workloads(docs) if d["metadata"]["labels"]["app.kubernetes.io/component"] == "nim"]
    if site != "full":
        assert nims == []
        return
    (dep,) = nims
    name = dep["metadata"]["name"]
    assert "replicas" not in dep["spec"]  # the autoscaler owns it
    pod = dep["spec"]["template"]["spec"]
    assert pod["imagePullSecrets"] == [{"name": "ngc-registry"}]
    assert {c["topologyKey"] for c in pod["topologySpreadConstraints"]} == {
        "kubernetes.io/hostname",
        "topology.kubernetes.io/zone",
    }
    container = pod["containers"][0]
    assert container["readinessProbe"]["httpGet"]["path"] == "/v1/health/ready"
    assert container["livenessProbe"]["httpGet"]["path"] == "/v1/health/live"
    # NVIDIA's air-gap mode: the cache is pre-seeded, so the pods get no NGC key (only the pull secret uses it).
    assert not [e for e in container["env"] if e["name"] == "NGC_API_KEY"]
    assert dep["spec"]["template"]["metadata"]["annotations"]["prometheus.io/path"] == "/v1/metrics"
    (hpa,) = [h for h in of_kind(docs, "HorizontalPodAutoscaler") if h["metadata"]["name"] == name]
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (2, 3)
    assert hpa["spec"]["scaleTargetRef"]["name"] == name
    assert any(p["metadata"]["name"] == name for p in of_kind(docs, "PodDisruptionBudget"))


def test_secrets_are_rendered_only_on_request_and_never_printed(rendered):
    site, docs, out, proc = rendered
    assert not of_kind(docs, "Secret") or site == "full"
    secrets_file = out / "secrets.yaml"
    if site != "full":
        assert not secrets_file.exists()
        return
    assert stat.S_IMODE(secrets_file.stat().st_mode) == 0o600
    assert GATEWAY_KEY not in proc.stdout + proc.stderr and NGC_KEY not in proc.stdout + proc.stderr
    secrets = {s["metadata"]["name"]: s for s in of_kind(docs, "Secret")}
    assert secrets["litellm-master-key"]["stringData"]["LITELLM_MASTER_KEY"] == GATEWAY_KEY
    assert "ngc-api" not in secrets  # only with nim_download
    auths = json.loads(secrets["ngc-registry"]["stringData"][".dockerconfigjson"])["auths"]
    assert auths["nvcr.io"]["username"] == "$oauthtoken" and auths["nvcr.io"]["password"] == NGC_KEY
    for path in out.glob("*.yaml"):
        if path != secrets_file:
            assert GATEWAY_KEY not in path.read_text() and NGC_KEY not in path.read_text()
    (dep,) = [d for d in workloads(docs) if d["metadata"]["name"] == "litellm-ha"]
    # Issue 28, item 9: no function of the key material in the workloads (they carried sha256(key:Redis password),
    # which anyone who may read Deployments could test guesses against); a new key rolls them through the Secrets'
    # resourceVersions (test_a_new_key_rolls_the_gateway_and_its_redis). The Redis password (derived from the master
    # key here) is in its Secret, nowhere else.
    (redis,) = [d for d in workloads(docs) if d["metadata"]["name"] == "litellm-ha-redis"]
    password = secrets["litellm-redis"]["stringData"]["password"]
    material = [GATEWAY_KEY, password, GATEWAY_KEY + ":", GATEWAY_KEY + ":" + password]
    digests = {hashlib.sha256(m.encode()).hexdigest() for m in material}
    for workload in (dep, redis):
        text = json.dumps(workload)
        assert "aiinfra.io/secret-sha256" not in text
        assert not [d for d in digests if d in text] and GATEWAY_KEY not in text and password not in text
    assert "requirepass %s\n" % password in secrets["litellm-redis"]["stringData"]["redis.conf"]
    for path in out.glob("*.yaml"):
        if path != secrets_file:
            assert password not in path.read_text()


def min_replicas(dep, docs):
    """The Deployment's replicas, or its autoscaler's minimum when one owns the count."""
    if "replicas" in dep["spec"]:
        return dep["spec"]["replicas"]
    key = (dep["metadata"]["namespace"], dep["metadata"]["name"])
    (scaler,) = [
        o
        for o in of_kind(docs, "ScaledObject") + of_kind(docs, "HorizontalPodAutoscaler")
        if (o["metadata"]["namespace"], o["spec"]["scaleTargetRef"]["name"]) == key
    ]
    return scaler["spec"].get("minReplicaCount", scaler["spec"].get("minReplicas"))


def test_airgap_charts_are_served_by_k3s(tmp_path):
    (tmp_path / "inv").mkdir()
    airgap = {"k3s_install_mode": "airgap", "litellm_enabled": False}
    for prefix in ("gpu_operator", "cert_manager", "monitoring", "autoscaling"):
        airgap[f"{prefix}_chart_sha256"] = "0" * 64
    inventory = write_site(tmp_path / "inv", ["cp-1"], {"gpu-1": 1}, airgap)
    render(inventory, tmp_path / "out")
    charts = {c["metadata"]["name"]: c["spec"] for c in of_kind(load_docs(tmp_path / "out"), "HelmChart")}
    assert set(charts) == {"gpu-operator", "cert-manager", "kube-prometheus-stack", "keda"}
    for name, spec in charts.items():
        assert spec["chart"] == f"https://%{{KUBERNETES_API}}%/static/charts/{name}-{spec['version']}.tgz"
        assert "repo" not in spec


def test_airgap_without_digests_is_refused_with_every_chart_named():
    problems = sv.chart_problems("cert_manager", "airgap", "cert-manager-v1.18.2.tgz", "")
    assert problems and "cert_manager_chart_sha256 is not a sha256" in problems[0]
    assert sv.chart_problems("keda", "online", "x", "") == []
    assert "use online or airgap" in sv.chart_problems("monitoring", "usb-stick", "x.tgz", "")[0]


@pytest.mark.parametrize(
    ("models", "nodes", "problem"),
    [
        (
            [{"served_name": "big", "path": "m", "tensor_parallel_size": 4}],
            {"g1": 2, "g2": 2},
            "tensor_parallel_size 4 is larger than the GPUs of any node (at most 2)",
        ),
        (
            [{"served_name": "a", "path": "m", "replicas": 2}, {"served_name": "b", "path": "m"}],
            {"g1": 2},
            "the models request 3 GPUs in all but the cluster has 2",
        ),
        ([{"served_name": "a", "path": "m", "image": "vllm/vllm-openai:latest"}], {"g1": 1}, "is not pinned"),
        ([{"served_name": "a", "path": "m", "image": "vllm/vllm-openai"}], {"g1": 1}, "is not pinned"),
        ([{"served_name": "a", "path": "m"}, {"served_name": "a", "path": "n"}], {"g1": 2}, "used twice"),
        ([{"served_name": "a", "path": "missing/model"}], {"g1": 1}, "'missing/model' is not in the model store"),
        ([{"served_name": "a", "path": "m"}], {}, "no GPU node in the inventory"),
        (
            [{"served_name": "a", "path": "m", "shutdown_timeout": 0}],
            {"g1": 1},
            "a: shutdown_timeout is 0: a stopping server would abort every request in flight",
        ),
        (
            [{"served_name": "a", "path": "m", "shutdown_timeout": 300, "termination_grace_period": 120}],
            {"g1": 1},
            "a: termination_grace_period 120 is shorter than the preStop sleep (15 s) + shutdown_timeout (300 s)",
        ),
        (
            [{"served_name": "a", "path": "m", "extra_args": ["--shutdown-timeout=5"]}],
            {"g1": 1},
            "a: --shutdown-timeout is set in extra_args or NIM_PASSTHROUGH_ARGS",
        ),
        (
            [{"served_name": "a", "path": "m", "termination_grace_period": 20}],
            {"g1": 1},
            "a: shutdown_timeout is -10",
        ),
    ],
)
def test_impossible_plans_are_rejected(models, nodes, problem):
    problems = plan.plan_problems(models, nodes, "vllm/vllm-openai:v0.6.3", store_paths={"m", "n"})
    assert any(problem in p for p in problems), problems


@pytest.mark.parametrize(
    ("model", "shutdown", "grace"),
    [
        ({}, 90, 120),  # neither given: vLLM's drain of 90 s in the 120 s the pods always had
        ({"shutdown_timeout": 600}, 600, 630),  # long generations: the grace period follows
        ({"termination_grace_period": 300}, 270, 300),  # or the shutdown timeout follows the grace period
        ({"shutdown_timeout": 60, "termination_grace_period": 300}, 60, 300),
    ],
)
def test_the_drain_fits_the_grace_period(model, shutdown, grace):
    (filled,) = wl.filled("vllm", [dict({"served_name": "a", "path": "m"}, **model)], IMAGE)
    assert (filled["shutdown_timeout"], filled["termination_grace_period"]) == (shutdown, grace)
    assert plan.drain_problems("a", filled) == []
    sts, _svc = wl.gpu_workload(
        {
            **filled,
            "name": "a",
            "component": "vllm",
            "args": wl.vllm_args(filled, "/data/models"),
            "env": {},
            "resources": {},
            "store": {"storage_class": "s", "size": "1Gi"},
        },
        {"namespace": "ns", "gpu_node_selector": {}, "gpu_toleration_key": "nvidia.com/gpu"},
    )
    pod = sts["spec"]["template"]
    assert drain_fits(pod, pod["spec"]["containers"][0], 15)
    assert pod["spec"]["terminationGracePeriodSeconds"] == grace


def test_nim_keeps_its_own_passthrough_arguments_and_drains():
    nim = {"served_name": "n", "image": NIM_IMAGE, "env": {"NIM_PASSTHROUGH_ARGS": "--max-num-seqs 8"}}
    defaults = {
        "store_mount": "/opt/nim/.cache",
        "store": {"storage_class": "s", "size": "1Gi"},
        "shm_size": "1Gi",
        "resources": {},
        "ngc_secret": "ngc-api",
        "pull_secret": "ngc-registry",
        "max_replicas": 4,
        "metric": {"cpu": 70},
        "store_read_only": True,
    }
    site = {"namespace": "ns", "gpu_node_selector": {}, "gpu_toleration_key": "nvidia.com/gpu"}
    (sts,) = [o for o in wl.nim_manifests([nim], site, defaults) if o["kind"] == "Deployment"]
    env = {e["name"]: e.get("value") for e in sts["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["NIM_PASSTHROUGH_ARGS"] == "--max-num-seqs 8 --shutdown-timeout 90"


def test_time_slicing_classes_count_in_the_capacity():
    models = [{"served_name": "a", "path": "m", "replicas": 4}]
    shared, problems = plan.gpu_capacity({"g1": {"gpus": 1, "class": "shared"}}, {"shared": 4})
    assert problems == [] and shared == {"g1": {"gpus": 1, "replicas": 4}}
    assert plan.plan_problems(models, shared, "vllm/vllm-openai:v0.6.3") == []
    half, _problems = plan.gpu_capacity({"g1": {"gpus": 1, "class": ""}}, {"shared": 2}, "shared")
    assert plan.plan_problems(models, half, "vllm/vllm-openai:v0.6.3")
    _cap, problems = plan.gpu_capacity({"g1": {"gpus": 1, "class": "nope"}}, {"shared": 2})
    assert problems and "'nope' is not in gpu_operator_time_slicing_classes" in problems[0]


def test_tensor_parallel_counts_physical_gpus_not_slices():
    """Two slices of one GPU are not two GPUs for tensor parallelism."""
    capacity, _problems = plan.gpu_capacity({"g1": {"gpus": 1, "class": "s"}}, {"s": 4})
    problems = plan.plan_problems([{"served_name": "tp2", "path": "m", "tensor_parallel_size": 2}], capacity, "i:1")
    assert any("tensor_parallel_size 2 is larger than the GPUs of any node (at most 1)" in p for p in problems)


def test_nim_plan_rules():
    nim = {"served_name": "n", "image": NIM_IMAGE, "gpus": 1, "replicas": 2, "max_replicas": 5}
    problems = plan.plan_problems([], {"g1": 2, "g2": 2}, "i:1", nim_models=[nim])
    assert any("max_replicas 5 x 1 GPU(s) is more than the cluster's 4" in p for p in problems)
    assert plan.plan_problems([], {"g1": 2, "g2": 2}, "i:1", nim_models=[dict(nim, max_replicas=4)]) == []
    single = plan.plan_problems([], {"g1": 2}, "i:1", nim_models=[dict(nim, replicas=1, max_replicas=1)])
    assert any("needs at least 2 replicas" in p for p in single)


@pytest.mark.parametrize(
    ("key", "fragments"),
    [
        ("", ["is not set"]),
        ("sk-1234", ["fewer than 32", "placeholder"]),
        ("0f3a9c7e1b5d2f8a4c6e0b9d3f7a5c1e9b2d", ["does not start with sk-"]),
        ("sk-" + "ab" * 20, ["too few distinct characters"]),
        ("sk-changeme-0f3a9c7e1b5d2f8a4c6e0b9d3f7a", ["placeholder"]),
        ("sk-5f0c9a1e7b3d48c2a6e9f1b7d3c5a8e0f2b4d6c8", []),
    ],
)
def test_weak_master_keys_are_refused(key, fragments):
    problems = gw.master_key_problems(key)
    assert len(problems) == len(fragments), problems
    for fragment in fragments:
        assert any(fragment in p for p in problems), (fragment, problems)
    assert all(not key or key not in p for p in problems)  # the key is never quoted


@pytest.mark.parametrize(
    ("image", "ok"),
    [
        ("vllm/vllm-openai:v0.6.3", True),
        ("vllm/vllm-openai:latest", False),
        ("vllm/vllm-openai", False),
        ("reg.local:5000/vllm/vllm-openai", False),
        ("reg.local:5000/vllm/vllm-openai:v1", True),
        ("vllm/vllm-openai@sha256:" + "a" * 64, True),
    ],
)
def test_image_pinned(image, ok):
    assert sv.image_pinned(image) is ok


def test_manifests_do_not_depend_on_node_order():
    """Group order can vary between runs; the written file must not, or every run reports a change."""
    params = {
        "storage_class": "nvidia-ai-store",
        "path": "/data/model-registry",
        "size": "500Gi",
        "namespace": "ia-services-payed",
        "pv_prefix": "model-registry",
    }
    b_first = {"gpu-b": {"gpus": 2, "replicas": 1}, "gpu-a": {"gpus": 1, "replicas": 4}}
    a_first = dict(sorted(b_first.items()))
    assert wl.model_registry_manifests(b_first, params) == wl.model_registry_manifests(a_first, params)


def test_every_serving_pod_is_scraped_once_at_its_own_metrics_path(rendered):
    """Each model server and gateway pod is selected by exactly one PodMonitor, on the path it serves (NIM: /v1)."""
    _site, docs, _out, _proc = rendered
    monitors = of_kind(docs, "PodMonitor")
    if not monitors:
        return

    def selects(monitor, labels):
        selector = monitor["spec"]["selector"]
        if any(labels.get(k) != v for k, v in selector.get("matchLabels", {}).items()):
            return False
        for expr in selector.get("matchExpressions", []):
            inside = labels.get(expr["key"]) in expr["values"]
            if inside != (expr["operator"] == "In"):
                return False
        return True

    for dep in workloads(docs):
        template = dep["spec"]["template"]
        path = template["metadata"].get("annotations", {}).get("prometheus.io/path")
        if not path:
            continue
        chosen = [m for m in monitors if selects(m, template["metadata"]["labels"])]
        assert len(chosen) == 1, (dep["metadata"]["name"], [m["metadata"]["name"] for m in chosen])
        assert chosen[0]["spec"]["podMetricsEndpoints"][0]["path"] == path, dep["metadata"]["name"]


def test_keda_metrics_are_scraped_through_service_monitors(rendered):
    _site, docs, _out, _proc = rendered
    charts = {c["metadata"]["name"]: c["spec"] for c in of_kind(docs, "HelmChart")}
    if "keda" not in charts:
        return
    values = yaml.safe_load(charts["keda"]["valuesContent"])
    for part in ("operator", "metricServer", "webhooks"):
        assert values["prometheus"][part]["enabled"] is True, part
        assert values["prometheus"][part]["serviceMonitor"]["enabled"] is True, part


SLICED = {"gpu-a": {"gpus": 2, "replicas": 2}, "gpu-b": {"gpus": 2, "replicas": 1}}
IMAGE = "vllm/vllm-openai:v0.34.0"


@pytest.mark.parametrize(
    ("models", "capacity", "fragment"),
    [
        # A tensor-parallel model fits the node without time-slicing...
        ([{"served_name": "tp", "path": "m", "tensor_parallel_size": 2}], SLICED, None),
        # ...but not when every node slices its GPUs: the device plugin would refuse two slices.
        (
            [{"served_name": "tp", "path": "m", "tensor_parallel_size": 2}],
            {"gpu-a": {"gpus": 2, "replicas": 2}},
            "needs 2 whole GPUs on one node",
        ),
        # Two tensor-parallel replicas need four whole GPUs; the unsliced node has two.
        (
            [{"served_name": "tp", "path": "m", "tensor_parallel_size": 2, "replicas": 2}],
            SLICED,
            "need 4 whole GPUs in all but the nodes without time-slicing have 2",
        ),
        # An explicit 0.9 on a GPU shared two ways: the second pod on the GPU fails at start.
        ([{"served_name": "q", "path": "m", "gpu_memory_utilization": 0.9}], SLICED, "set it to at most 0.5"),
        ([{"served_name": "q", "path": "m", "gpu_memory_utilization": 0.45}], SLICED, None),
        ([{"served_name": "q", "path": "m", "gpu_memory_utilization": "lots"}], SLICED, "not a number between"),
        # Weights against the memory share: the notes' 35B model (65 GiB in bf16) on a 24 GB L4 at TP 1.
        (
            [{"served_name": "n", "path": "m", "weights_gib": 65.2}],
            {"l4": {"gpus": 1, "replicas": 1, "memory_mib": 23034}},
            "65.2 GiB of weights over 1 GPU(s) is 65.2 GiB per GPU",
        ),
        (
            [{"served_name": "n", "path": "m", "weights_gib": 14.2}],
            {"l4": {"gpus": 1, "replicas": 1, "memory_mib": 23034}},
            None,
        ),
        # The same 14.2 GiB on an L4 sliced two ways: its share is 0.45 x 22.5 GiB.
        (
            [{"served_name": "n", "path": "m", "weights_gib": 14.2}],
            {"l4": {"gpus": 1, "replicas": 2, "memory_mib": 23034}},
            "more than its share of l4 can hold",
        ),
        # Split over 4 A100s it fits.
        (
            [{"served_name": "n", "path": "m", "weights_gib": 65.2, "tensor_parallel_size": 4}],
            {"a100": {"gpus": 4, "replicas": 1, "memory_mib": 81920}},
            None,
        ),
        # Unknown GPU memory: nothing to compare with, no refusal.
        ([{"served_name": "n", "path": "m", "weights_gib": 65.2}], {"x": {"gpus": 1, "replicas": 1}}, None),
    ],
)
def test_plans_that_time_slicing_or_gpu_memory_cannot_hold_are_refused(models, capacity, fragment):
    problems = plan.plan_problems(models, capacity, IMAGE)
    if fragment is None:
        assert problems == []
    else:
        assert any(fragment in p for p in problems), problems


def test_weights_measured_in_the_seed_directory_are_checked():
    l4 = {"l4": {"gpus": 1, "replicas": 1, "memory_mib": 23034}}
    models = [{"served_name": "n", "path": "nvidia/big"}]
    assert plan.plan_problems(models, l4, IMAGE, weights={"nvidia/big": 30.0})
    assert plan.plan_problems(models, l4, IMAGE, weights={"nvidia/big": 10.0}) == []
    # A declared size wins over the measured one.
    assert plan.plan_problems([dict(models[0], weights_gib=10)], l4, IMAGE, weights={"nvidia/big": 30.0}) == []


def test_the_memory_share_follows_the_slices_of_a_shared_gpu():
    assert wl.memory_utilization({}, 1) == 0.9
    assert wl.memory_utilization({}, 2) == 0.45
    assert wl.memory_utilization({}, 3) == 0.3
    assert wl.memory_utilization({"gpu_memory_utilization": 0.8}, 4) == 0.8
    assert wl.gpu_share(1, [1, 2, 4]) == 4
    assert wl.gpu_share(2, [1, 2, 4]) == 1


def test_time_sliced_site_keeps_tensor_parallel_pods_off_shared_gpus(rendered):
    site, docs, _out, _proc = rendered
    if site != "full":
        return
    by_name = {d["metadata"]["name"]: d for d in workloads(docs)}
    tp = by_name["vllm-nemotron-35b"]["spec"]["template"]["spec"]
    (term,) = tp["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert term["matchExpressions"] == [{"key": "nvidia.com/gpu.replicas", "operator": "NotIn", "values": ["2"]}]
    args = tp["containers"][0]["args"]
    assert args[args.index("--gpu-memory-utilization") + 1] == "0.9"
    single = by_name["vllm-qwen-7b"]["spec"]["template"]["spec"]
    args = single["containers"][0]["args"]
    assert args[args.index("--gpu-memory-utilization") + 1] == "0.45"  # it may share a GPU two ways
    (config,) = [d for d in of_kind(docs, "ConfigMap") if d["metadata"]["name"] == "time-slicing-config"]
    shared = yaml.safe_load(config["data"]["shared"])
    assert shared["sharing"]["timeSlicing"]["failRequestsGreaterThanOne"] is True


def test_every_serving_pod_is_hardened_for_pod_security_restricted(rendered):
    _site, docs, _out, _proc = rendered
    serving = {d["metadata"]["namespace"] for d in workloads(docs)}
    for ns in of_kind(docs, "Namespace"):
        if ns["metadata"]["name"] in serving:
            assert ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    for dep in workloads(docs):
        pod = dep["spec"]["template"]["spec"]
        assert pod["automountServiceAccountToken"] is False, dep["metadata"]["name"]
        assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] > 0
        for container in pod["containers"]:
            ctx = container["securityContext"]
            assert ctx["readOnlyRootFilesystem"] is True and ctx["allowPrivilegeEscalation"] is False
            assert ctx["capabilities"] == {"drop": ["ALL"]}
            assert {"name": "HOME", "value": "/tmp"} in container["env"]
            assert {"name": "tmp", "mountPath": "/tmp"} in container["volumeMounts"]


def test_one_gpu_pods_keep_to_sliced_nodes_when_multi_gpu_pods_need_the_whole_ones(rendered):
    site, docs, _out, _proc = rendered
    if site != "full":
        return
    for dep in workloads(docs):
        name = dep["metadata"]["name"]
        if name in ("vllm-qwen-7b", "nim-llama-8b"):
            term = dep["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
                "requiredDuringSchedulingIgnoredDuringExecution"
            ]["nodeSelectorTerms"][0]
            assert term["matchExpressions"] == [{"key": "nvidia.com/gpu.replicas", "operator": "In", "values": ["2"]}]


def test_one_gpu_demand_beyond_the_slices_is_refused_when_whole_gpus_are_reserved():
    capacity = {"gpu-a": {"gpus": 1, "replicas": 2}, "gpu-b": {"gpus": 2, "replicas": 1}}
    models = [
        {"served_name": "tp", "path": "m", "tensor_parallel_size": 2},
        {"served_name": "one", "path": "n", "replicas": 3},
    ]
    problems = plan.plan_problems(models, capacity, IMAGE)
    assert any("the one-GPU models need 3 GPU slices but the time-sliced nodes have 2" in p for p in problems)
    assert plan.plan_problems([models[0], dict(models[1], replicas=2)], capacity, IMAGE) == []


GOLDEN = ROOT / "tests" / "golden"
PLAN_FILE = "site-plan.yaml"


def test_rendered_manifests_match_the_golden_files(rendered):
    """Every file render.yml writes for each test site, byte for byte (stored as <file>.golden, outside the YAML
    linters). A change that alters them on purpose regenerates them with AIINFRA_UPDATE_GOLDEN=1 make unit and
    says why in its commit."""
    site, _docs, out, _proc = rendered
    golden = GOLDEN / site
    files = sorted(p.name for p in out.glob("*.yaml") if p.name != "secrets.yaml")  # secrets stay out of git
    texts = {name: (out / name).read_text() for name in files}
    texts[PLAN_FILE] = Path(f"{out}.plan").read_text()  # the site plan render.yml writes beside the manifests
    if os.environ.get("AIINFRA_UPDATE_GOLDEN") == "1":
        golden.mkdir(parents=True, exist_ok=True)
        for old in golden.glob("*.golden"):
            old.unlink()
        for name, text in texts.items():
            (golden / (name + ".golden")).write_text(text)
    assert sorted(p.name.removesuffix(".golden") for p in golden.glob("*.golden")) == sorted(texts)
    for name, got in texts.items():
        want = (golden / (name + ".golden")).read_text()
        if want != got:
            diff = difflib.unified_diff(
                want.splitlines(), got.splitlines(), f"golden/{site}/{name}", "rendered", lineterm=""
            )
            pytest.fail("\n".join(list(diff)[:80]))


def gateway_params(**params):
    base = yaml.safe_load((ROOT / "roles" / "litellm" / "defaults" / "main.yml").read_text())
    settings = {k.removeprefix("litellm_"): v for k, v in base.items() if k.startswith("litellm_")}
    limits = {"store": "redis", "deploy": True, "name": "litellm-ha-redis", "host": "h", "port": 6379}
    settings.update(namespace="ai", consumers=[], limits=limits, prices={}, edge_namespace="", autoscaled=False)
    settings.update(params)
    return settings


def gateway_objects(**params):
    routes = [{"model": "m1", "service": "vllm-m1", "namespace": "ai", "port": 8000, "component": "vllm"}]
    return gw.gateway_manifests(routes, gateway_params(**params))


def applied_secrets(master, redis, consumers="7"):
    return [
        {"name": "litellm-master-key", "namespace": "ai", "resourceVersion": master},
        {"name": "litellm-redis", "namespace": "ai", "resourceVersion": redis},
        {"name": "litellm-consumers", "namespace": "ai", "resourceVersion": consumers},
        {"name": "litellm-redis", "namespace": "edge", "resourceVersion": "99"},
    ]


def test_a_new_key_rolls_the_gateway_and_its_redis():
    """Issue 28, item 9: the pods roll on the resourceVersions of the Secrets they read at start, which the API
    server changes when a Secret is written with new content (a new master key or Redis password) and only then."""
    from ansible_collections.aiinfra.k3s.plugins.filter.secret_rollout_patches import secret_rollout_patches

    objects = gateway_objects()
    patches = {p["metadata"]["name"]: p for p in secret_rollout_patches(objects, applied_secrets("10", "11"))}
    assert sorted(patches) == ["litellm-ha", "litellm-ha-redis"]

    def value(patches, name):
        assert patches[name]["kind"] == "Deployment" and patches[name]["metadata"]["namespace"] == "ai"
        return patches[name]["spec"]["template"]["metadata"]["annotations"]["aiinfra.io/secret-versions"]

    # The gateway reads the master key and the Redis password at start; the Redis its config (a Secret volume).
    # The consumers' file (an optional volume, swapped in place and read at each request) rolls nothing.
    assert value(patches, "litellm-ha") == "litellm-master-key=10,litellm-redis=11"
    assert value(patches, "litellm-ha-redis") == "litellm-redis=11"
    same = {p["metadata"]["name"]: p for p in secret_rollout_patches(objects, applied_secrets("10", "11", "8"))}
    assert same == patches  # nothing the pods read at start changed: the same patch, no rollout
    rotated = {p["metadata"]["name"]: p for p in secret_rollout_patches(objects, applied_secrets("12", "13"))}
    assert value(rotated, "litellm-ha") != value(patches, "litellm-ha")
    assert value(rotated, "litellm-ha-redis") != value(patches, "litellm-ha-redis")
    # Nothing applied through the API (render.yml, K3s not answering): no patch.
    assert secret_rollout_patches(objects, []) == []


def test_an_external_redis_rolls_the_gateway_only():
    limits = {"store": "redis", "deploy": False, "name": "", "host": "redis.example.org", "port": 6379}
    patches = gw.rollout_patches(gateway_objects(limits=limits), applied_secrets("10", "11"))
    assert [(p["metadata"]["name"], p["spec"]["template"]["metadata"]["annotations"]) for p in patches] == [
        ("litellm-ha", {"aiinfra.io/secret-versions": "litellm-master-key=10,litellm-redis=11"})
    ]


# Issue 28, item 5: the model servers require an API key that only the gateway holds.
MODEL_KEY_SECRET = "litellm-ha-model-api-key"
MODEL_AUTH = {
    "enabled": True,
    "secret": MODEL_KEY_SECRET,
    "key": "api-key",
    "env": "MODEL_SERVER_API_KEY",
    "namespaces": ["ai"],
}


def test_the_model_servers_key_is_an_hmac_of_the_master_key():
    """HMAC-SHA256("aiinfra.k3s model servers") under the master key, hex: a known answer (the context is part of
    the contract: a changed one would give every site a new key), a new master key gives a new key, and it is
    neither the master key nor the Redis password derived from it."""
    key = gw.model_api_key(GATEWAY_KEY)
    assert key == "fad17779ec40f604e1e34b17252a996521a29fa886fec7fd90bddf43edfb8486"
    assert gw.model_api_key("sk-" + "9" * 40) != key and GATEWAY_KEY not in key
    assert key != gw.redis_password({"limits": {"deploy": True}}, GATEWAY_KEY)
    with pytest.raises(ValueError, match="litellm_master_key"):
        gw.model_api_key("")


def plan_file(out):
    return yaml.safe_load(Path(f"{out}.plan").read_text())


def test_only_the_gateway_and_the_vllm_servers_read_the_model_servers_key(rendered):
    """The plan names the key's Secret once; every vLLM server reads it as VLLM_API_KEY, the gateway as the plan's
    variable, which every vLLM route of its config sends (litellm_params.api_key: os.environ/...); NIM, which has no
    API key, reads nothing. With the secrets rendered, the Secret holds the HMAC of the master key in each namespace
    that reads it, and the key is in no other file and never printed."""
    site, docs, out, proc = rendered
    auth = plan_file(out)["model_auth"]
    namespace = NAMESPACE[site]
    assert auth == {
        "enabled": True,
        "secret": MODEL_KEY_SECRET,
        "key": "api-key",
        "env": "MODEL_SERVER_API_KEY",
        "namespaces": [namespace],
    }
    ref = {"secretKeyRef": {"name": MODEL_KEY_SECRET, "key": "api-key"}}
    servers = {}
    for dep in workloads(docs):
        component = dep["metadata"]["labels"]["app.kubernetes.io/component"]
        (container,) = dep["spec"]["template"]["spec"]["containers"]
        from_secrets = {e["name"]: e["valueFrom"] for e in container["env"] if "valueFrom" in e}
        if component == "vllm":
            assert from_secrets == {"VLLM_API_KEY": ref}, dep["metadata"]["name"]
            assert "--api-key" not in container["args"]  # never on the command line (ps, the pod spec)
            servers[dep["metadata"]["name"]] = dep
        elif component == "nim":
            assert "VLLM_API_KEY" not in from_secrets and "MODEL_SERVER_API_KEY" not in from_secrets
        elif component == "gateway":
            assert from_secrets["MODEL_SERVER_API_KEY"] == ref
    assert servers
    (cm,) = [d for d in of_kind(docs, "ConfigMap") if d["metadata"]["name"] == "litellm-ha-config"]
    config = yaml.safe_load(cm["data"]["config.yaml"])
    for entry in config["model_list"]:
        params = entry["litellm_params"]
        if params["api_base"].startswith("http://vllm-"):
            assert params["api_key"] == "os.environ/MODEL_SERVER_API_KEY", entry["model_name"]
        else:
            assert "api_key" not in params, entry["model_name"]
    if site != "full":
        assert not [s for s in of_kind(docs, "Secret") if s["metadata"]["name"] == MODEL_KEY_SECRET]
        return
    key = gw.model_api_key(GATEWAY_KEY)
    (secret,) = [s for s in of_kind(docs, "Secret") if s["metadata"]["name"] == MODEL_KEY_SECRET]
    assert secret["metadata"]["namespace"] == namespace and secret["stringData"] == {"api-key": key}
    assert key not in proc.stdout + proc.stderr
    for path in out.glob("*.yaml"):
        if path.name != "secrets.yaml":
            assert key not in path.read_text(), path.name
    assert key not in Path(f"{out}.plan").read_text()


def test_the_key_secret_goes_to_each_namespace_that_reads_it():
    auth = dict(MODEL_AUTH, namespaces=["ai", "gateway"])
    params = dict(gateway_params(), model_auth=auth)
    secrets = [s for s in gw.gateway_secret(params, GATEWAY_KEY) if s["metadata"]["name"] == MODEL_KEY_SECRET]
    assert [s["metadata"]["namespace"] for s in secrets] == ["ai", "gateway"]
    assert all(s["stringData"] == {"api-key": gw.model_api_key(GATEWAY_KEY)} for s in secrets)
    off = dict(gateway_params(), model_auth={"enabled": False})
    assert not [s for s in gw.gateway_secret(off, GATEWAY_KEY) if s["metadata"]["name"] == MODEL_KEY_SECRET]
    config = gw.gateway_config([{"model": "m", "service": "vllm-m", "namespace": "ai", "port": 8000}], off)
    assert "api_key" not in config["model_list"][0]["litellm_params"]


def vllm_objects(model_auth):
    site = {"namespace": "ai", "gpu_node_selector": {"ai-workload": "true"}, "gpu_toleration_key": "nvidia.com/gpu"}
    defaults = {
        "image": IMAGE,
        "store_mount": "/data/models",
        "store": {"storage_class": "nvidia-ai-store", "size": "500Gi"},
        "shm_size": "8Gi",
        "resources": {"requests": {"cpu": "4"}},
        "model_auth": model_auth,
    }
    return wl.vllm_manifests([{"served_name": "m1", "path": "org/m1"}], site, defaults)


def test_a_new_master_key_rolls_the_vllm_servers_with_the_gateway():
    """The vLLM servers read the key at start (VLLM_API_KEY from its Secret): a new master key writes a new key,
    whose Secret's new resourceVersion rolls them as it rolls the gateway (rollout_patches); without model_auth
    (no gateway) they read no Secret and never roll on one."""
    from ansible_collections.aiinfra.k3s.plugins.filter.secret_rollout_patches import secret_rollout_patches

    objects = vllm_objects(MODEL_AUTH) + gateway_objects(model_auth=MODEL_AUTH)
    (server,) = [o for o in objects if o["kind"] == "Deployment" and o["metadata"]["name"] == "vllm-m1"]
    assert gw.start_secrets(server["spec"]["template"]["spec"]) == {MODEL_KEY_SECRET}

    def patches(model_key):
        model_key_secret = {"name": MODEL_KEY_SECRET, "namespace": "ai", "resourceVersion": model_key}
        applied = [*applied_secrets("10", "11"), model_key_secret]
        return {
            p["metadata"]["name"]: p["spec"]["template"]["metadata"]["annotations"]["aiinfra.io/secret-versions"]
            for p in secret_rollout_patches(objects, applied)
        }

    first = patches("20")
    assert first["vllm-m1"] == MODEL_KEY_SECRET + "=20"
    assert first["litellm-ha"] == "%s=20,litellm-master-key=10,litellm-redis=11" % MODEL_KEY_SECRET
    assert patches("20") == first  # the same Secrets: the same patches, no rollout
    assert patches("21")["vllm-m1"] != first["vllm-m1"]
    unkeyed = vllm_objects({"enabled": False})
    assert gw.rollout_patches(unkeyed, applied_secrets("10", "11")) == []


@pytest.mark.parametrize("playbook", ["serving.yml", "apply.yml"])
def test_the_playbooks_roll_the_vllm_servers_on_their_secrets(playbook):
    """serving.yml and apply.yml hand the rollout (manifests role, tasks_from: rollout) the vLLM servers' objects
    with the gateway's, so a new key rolls both."""
    plays = yaml.safe_load((ROOT / "playbooks" / playbook).read_text())
    tasks = [t for play in plays for t in play.get("tasks") or []]
    (task,) = [t for t in tasks if (t.get("ansible.builtin.include_role") or {}).get("tasks_from") == "rollout"]
    expression = task["vars"]["manifests_objects"]
    assert "'vllm'" in expression and "'litellm'" in expression, expression
