# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The edge: K3s's bundled Traefik (v3 in K3s v1.36, CRD group traefik.io/v1alpha1) routing the site's host and
the gateway's public paths (inference and health only, unless the operator exposes the admin routes) to the
gateway with TLS (a TLSOption of its own), HSTS, a rate limit and an HTTP to HTTPS redirect of the host's root;
cert-manager (a K3s HelmChart) issuing the certificate from an ACME HTTP-01 or a private CA ClusterIssuer."""

import re

from ansible_collections.aiinfra.k3s.plugins.module_utils.k8s.objects import (
    dump_yaml,
    helm_chart,
    labels_for,
    namespace,
    plain,
)

HOST = re.compile(r"^(?=.{1,253}$)([a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)(\.[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)*$")
ISSUER_KINDS = ("acme", "ca")
TRAEFIK = "traefik.io/v1alpha1"


# The OpenAI-compatible inference paths LiteLLM serves, and its unauthenticated liveness check. Everything else
# the proxy serves (key, team, user and model management, /ui, /metrics, /health with its model calls) stays
# inside the cluster unless traefik_expose_admin is on.
PUBLIC_PATHS = ("/v1/chat/completions", "/v1/completions", "/v1/embeddings", "/v1/models", "/health/liveliness")
PATH = re.compile(r"^(/[A-Za-z0-9._~-]+)+$")


def _under(prefix, path):
    return path if not prefix or prefix == "/" else prefix + path


def prefix_overlap(prefix, paths):
    """The public paths that already start with the prefix (a prefix /v1 over /v1/chat/completions would have clients
    call /v1/v1/chat/completions: the prefix is stripped before the gateway sees the path)."""
    if not isinstance(prefix, str) or prefix in ("", "/") or not isinstance(paths, (list, tuple)):
        return []
    prefix = prefix.rstrip("/")
    return [p for p in paths if isinstance(p, str) and (p == prefix or p.startswith(prefix + "/"))]


def base_url(values):
    """https://host + prefix (no trailing slash), what the public paths are appended to; empty without
    traefik_host (values: the traefik_* variables as the plan reads them)."""
    values = values or {}
    host = values.get("traefik_host") or ""
    if not isinstance(host, str) or not host:
        return ""
    prefix = values.get("traefik_path_prefix") or ""
    prefix = "" if not isinstance(prefix, str) or prefix == "/" else prefix.rstrip("/")
    return "https://%s%s" % (host, prefix)


def public_urls(values):
    """The URLs clients call, as Traefik's rule and strip-prefix middleware make them: https://host + prefix +
    each public path (values: the traefik_* variables as the plan reads them). With traefik_expose_admin the whole
    prefix is routed, so the list holds https://host + prefix + / alone. Empty without traefik_host."""
    values = values or {}
    base = base_url(values)
    if not base:
        return []
    if str(values.get("traefik_expose_admin")).lower() in ("true", "yes", "on", "1"):
        return [base + "/"]
    paths = values.get("traefik_public_paths")
    if not isinstance(paths, (list, tuple)):
        paths = PUBLIC_PATHS
    return [base + path for path in paths if isinstance(path, str)]


def route_rule(host, prefix, paths=None):
    """Traefik v3 rule: the host and exact public paths under the prefix, or (paths None) the whole prefix."""
    rule = "Host(`%s`)" % host
    if paths:
        exact = ["Path(`%s`)" % _under(prefix, path) for path in paths]
        rule += " && " + (exact[0] if len(exact) == 1 else "(%s)" % " || ".join(exact))
    elif prefix and prefix != "/":
        rule += " && PathPrefix(`%s`)" % prefix
    return rule


HSTS_SECONDS = 31536000  # one year

RATE_LIMIT_KEY = "Authorization"
# The other request headers LiteLLM 1.110 takes a key from (litellm/types/proxy/auth/special_headers.py), read
# before Authorization or without it: removed at the edge, so that the key the rate limit counts is the key
# LiteLLM checks (a client could otherwise send its key in one and a new Authorization each time).
OTHER_KEY_HEADERS = ("x-litellm-api-key", "API-Key", "x-api-key", "x-goog-api-key", "Ocp-Apim-Subscription-Key")


def rate_limit_redis(limits):
    """The rateLimit's redis block (Traefik v3.7 Middleware CRD, traefik.io/v1alpha1 RateLimit.Redis) when the site
    plan's limits count in Redis, else None. With it every Traefik replica draws one budget per key from the Redis
    the gateway's replicas count in (Traefik's token-bucket script, keys rate:<middleware>:<Authorization>), not one
    each; without it (store memory or none) each Traefik replica counts alone. Traefik reads the credentials from
    the Secret named by `secret`, in the Middleware's namespace, keys `username` and `password` (both must exist;
    an empty username authenticates as Redis's default user). Traefik's timeouts stay at its defaults (dial 5s,
    read and write 3s); an unreachable Redis makes the rate limit answer 500 (it fails closed)."""
    limits = limits or {}
    if limits.get("store") != "redis":
        return None
    host, port = str(limits["host"]), int(limits["port"])
    endpoint = ("[%s]:%d" if ":" in host and not host.startswith("[") else "%s:%d") % (host, port)
    return {"endpoints": [endpoint], "secret": limits["secret"]}


def traefik_manifests(p):
    """Middlewares, the TLSOption, the HTTPS IngressRoute (HSTS, rate limit, prefix strip, TLS) and the HTTP one
    that only redirects the host's root, plus the HelmChartConfig that turns on JSON access logs of the bundled
    Traefik."""
    p = plain(p)
    ns, name = p["namespace"], p["name"]
    labels = labels_for(name, "edge")
    rule = route_rule(p["host"], p["path_prefix"], None if p.get("expose_admin") else p["public_paths"])
    service = [{"name": p["service"], "port": int(p["service_port"])}]
    hsts = int(p.get("hsts_seconds", HSTS_SECONDS))

    rate_limit = {
        "average": int(p["rate_average"]),
        "burst": int(p["rate_burst"]),
        "period": str(p["rate_period"]),
        # One budget per API key, not per client address: behind K3s's ServiceLB (externalTrafficPolicy Cluster)
        # Traefik sees node addresses, so an address-keyed budget is shared by every client entering through a
        # node. Requests without the header share one budget (the gateway refuses them with 401 anyway).
        "sourceCriterion": {"requestHeaderName": RATE_LIMIT_KEY},
    }
    redis = rate_limit_redis(p.get("limits"))
    if redis:
        rate_limit["redis"] = redis

    def middleware(suffix, spec):
        return {
            "apiVersion": TRAEFIK,
            "kind": "Middleware",
            "metadata": {"name": "%s-%s" % (name, suffix), "namespace": ns, "labels": labels},
            "spec": spec,
        }

    out = [
        middleware("rate-limit", {"rateLimit": rate_limit}),
        middleware("redirect-https", {"redirectScheme": {"scheme": "https", "permanent": True}}),
        # An empty value removes the header (Traefik's headers middleware).
        middleware("key-header", {"headers": {"customRequestHeaders": {h: "" for h in OTHER_KEY_HEADERS}}}),
    ]
    chain = [{"name": "%s-key-header" % name}, {"name": "%s-rate-limit" % name}]
    if hsts > 0:
        # Browsers and clients that honour it never try plain HTTP for the host again (no key sent in clear).
        out.append(middleware("hsts", {"headers": {"stsSeconds": hsts, "stsIncludeSubdomains": False}}))
        chain.insert(0, {"name": "%s-hsts" % name})
    if p["path_prefix"] and p["path_prefix"] != "/":
        out.append(middleware("strip-prefix", {"stripPrefix": {"prefixes": [p["path_prefix"]]}}))
        chain.append({"name": "%s-strip-prefix" % name})
    out.append(
        {
            "apiVersion": TRAEFIK,
            "kind": "IngressRoute",
            "metadata": {"name": name, "namespace": ns, "labels": labels},
            "spec": {
                "entryPoints": ["websecure"],
                "routes": [{"match": rule, "kind": "Rule", "middlewares": chain, "services": service}],
                "tls": {"secretName": p["tls_secret"], "options": {"name": name + "-tls", "namespace": ns}},
            },
        }
    )
    # TLS 1.2 at least for the gateway's host. Traefik applies a route's TLSOption to handshakes whose server name
    # is the route's host; with sniStrict such a handshake is refused when the host's certificate is missing,
    # instead of being answered with Traefik's default certificate. Other or no server names get Traefik's default
    # TLS options (K3s's), which this route does not change.
    out.append(
        {
            "apiVersion": TRAEFIK,
            "kind": "TLSOption",
            "metadata": {"name": name + "-tls", "namespace": ns, "labels": labels},
            "spec": {"minVersion": "VersionTLS12", "sniStrict": bool(p.get("sni_strict", True))},
        }
    )
    # Plain HTTP: only the host's root is redirected to HTTPS. The gateway's paths are not routed on `web`, so a
    # client configured with http:// gets Traefik's 404 at once instead of a redirect it would follow after its
    # key had already crossed the network in clear, and keeps failing until its URL is fixed.
    out.append(
        {
            "apiVersion": TRAEFIK,
            "kind": "IngressRoute",
            "metadata": {"name": name + "-http", "namespace": ns, "labels": labels},
            "spec": {
                "entryPoints": ["web"],
                "routes": [
                    {
                        "match": "Host(`%s`) && Path(`/`)" % p["host"],
                        "kind": "Rule",
                        "middlewares": [{"name": "%s-redirect-https" % name}],
                        "services": service,
                    }
                ],
            },
        }
    )
    if p["customize_bundled"]:
        out.append(
            {
                "apiVersion": "helm.cattle.io/v1",
                "kind": "HelmChartConfig",
                "metadata": {"name": "traefik", "namespace": "kube-system", "labels": labels},
                "spec": {
                    "valuesContent": dump_yaml(
                        {
                            "logs": {"access": {"enabled": True, "format": "json"}, "general": {"format": "json"}},
                            "metrics": {"prometheus": {"entryPoint": "metrics"}},
                        }
                    )
                },
            }
        )
    return out


def cert_manager_manifests(p):
    """cert-manager as a K3s HelmChart, the ClusterIssuer(s) and the gateway's Certificate."""
    p = plain(p)
    ns, issuer = p["namespace"], p["issuer_name"]
    labels = labels_for("cert-manager", "tls")
    out = [
        # cert-manager's pods run as non-root with a read-only root file system: restricted fits.
        namespace(ns, "restricted"),
        helm_chart(
            "cert-manager",
            p["chart_name"],
            p["chart_repo"],
            p["chart_version"],
            ns,
            {"crds": {"enabled": True, "keep": True}, "prometheus": {"enabled": True}},
            p["chart_file"] if p.get("install_mode") == "airgap" else "",
        ),
    ]
    if p["issuer_kind"] == "acme":
        out.append(
            {
                "apiVersion": "cert-manager.io/v1",
                "kind": "ClusterIssuer",
                "metadata": {"name": issuer, "labels": labels},
                "spec": {
                    "acme": {
                        "server": p["acme_server"],
                        "email": p["acme_email"],
                        "privateKeySecretRef": {"name": issuer + "-account-key"},
                        "solvers": [{"http01": {"ingress": {"ingressClassName": "traefik"}}}],
                    }
                },
            }
        )
    else:
        # Private CA for intranets: a self-signed root made once in cert-manager's namespace, then a CA issuer.
        out += [
            {
                "apiVersion": "cert-manager.io/v1",
                "kind": "ClusterIssuer",
                "metadata": {"name": issuer + "-selfsigned", "labels": labels},
                "spec": {"selfSigned": {}},
            },
            {
                "apiVersion": "cert-manager.io/v1",
                "kind": "Certificate",
                "metadata": {"name": issuer + "-root", "namespace": ns, "labels": labels},
                "spec": {
                    "isCA": True,
                    "commonName": p["ca_common_name"],
                    "secretName": issuer + "-root",
                    "duration": "87600h",
                    "privateKey": {"algorithm": "ECDSA", "size": 256},
                    "issuerRef": {"name": issuer + "-selfsigned", "kind": "ClusterIssuer", "group": "cert-manager.io"},
                },
            },
            {
                "apiVersion": "cert-manager.io/v1",
                "kind": "ClusterIssuer",
                "metadata": {"name": issuer, "labels": labels},
                "spec": {"ca": {"secretName": issuer + "-root"}},
            },
        ]
    for cert in p["certificates"]:
        out.append(
            {
                "apiVersion": "cert-manager.io/v1",
                "kind": "Certificate",
                "metadata": {"name": cert["secret"], "namespace": cert["namespace"], "labels": labels},
                "spec": {
                    "secretName": cert["secret"],
                    "dnsNames": [cert["host"]],
                    "privateKey": {"rotationPolicy": "Always"},
                    "issuerRef": {"name": issuer, "kind": "ClusterIssuer", "group": "cert-manager.io"},
                },
            }
        )
    return out


def edge_problems(traefik, certs):
    """Settings of the edge that cannot work (traefik: the traefik role's settings; certs: cert_manager's or None)."""
    problems = []
    host = traefik.get("host") or ""
    if not HOST.match(host):
        problems.append(
            "traefik_host is %r: set the DNS name clients use for the gateway (e.g. intranet.example.org)" % host
        )
    prefix = traefik.get("path_prefix") or ""
    # The prefix is written into Traefik's rule: only path segments of letters, digits and . _ ~ - (a backquote or
    # a parenthesis could close the matcher and add one, e.g. a PathPrefix(`/`) that exposes the admin API).
    if prefix and prefix != "/" and (not PATH.match(prefix) or any(seg in (".", "..") for seg in prefix.split("/"))):
        problems.append(
            "traefik_path_prefix is %r: write it as / or as path segments such as /api/litellm (letters, digits, "
            ". _ ~ -; starting with /, no trailing /, no . or .. segment)" % (prefix,)
        )
    try:
        average, burst = int(traefik.get("rate_average")), int(traefik.get("rate_burst"))
        if average < 1 or burst < average:
            problems.append(
                "traefik_rate_limit_average (%d) must be 1 or more and traefik_rate_limit_burst (%d) at least as "
                "large" % (average, burst)
            )
    except (TypeError, ValueError):
        problems.append("traefik_rate_limit_average and traefik_rate_limit_burst must be whole numbers")
    paths = traefik.get("public_paths")
    doubled = prefix_overlap(prefix, paths if isinstance(paths, list) else list(PUBLIC_PATHS))
    if doubled:
        first = doubled[0]
        problems.append(
            "traefik_path_prefix is %r and the public paths already start with it (%s): the prefix is put before each "
            "path (and stripped again before the gateway), so clients would call https://%s%s%s; set "
            "traefik_path_prefix to / to serve https://%s%s, or give the prefix a name of its own such as /api "
            "(https://%s/api%s)"
            % (prefix, ", ".join(doubled), host, prefix.rstrip("/"), first, host, first, host, first)
        )
    if not traefik.get("expose_admin"):
        if not isinstance(paths, list) or not paths:
            problems.append(
                "traefik_public_paths is %r: list the gateway paths clients may reach (default: %s)"
                % (paths, ", ".join(PUBLIC_PATHS))
            )
        else:
            for path in paths:
                if not isinstance(path, str) or not PATH.match(path) or any(s in (".", "..") for s in path.split("/")):
                    problems.append(
                        "traefik_public_paths has %r: write each as an exact path such as /v1/chat/completions "
                        "(letters, digits, . _ ~ -, no trailing /)" % (path,)
                    )
    hsts = traefik.get("hsts_seconds", HSTS_SECONDS)
    try:
        hsts_ok = not isinstance(hsts, bool) and int(hsts) >= 0
    except (TypeError, ValueError):
        hsts_ok = False
    if not hsts_ok:
        problems.append("traefik_hsts_seconds is %r: use a whole number of seconds, 0 to send no HSTS" % (hsts,))
    if not re.match(r"^[0-9]+(ms|s|m|h)$", str(traefik.get("rate_period"))):
        problems.append("traefik_rate_limit_period is %r: use a duration such as 1s or 1m" % traefik.get("rate_period"))
    if certs is not None:
        if certs.get("issuer_kind") not in ISSUER_KINDS:
            problems.append(
                "cert_manager_issuer_kind is %r: use acme (public names, HTTP-01) or ca (private CA for intranets)"
                % certs.get("issuer_kind")
            )
        if certs.get("issuer_kind") == "acme" and "@" not in (certs.get("acme_email") or ""):
            problems.append("cert_manager_acme_email is not set: ACME needs a contact address for the account")
    return problems
