# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""NetworkPolicies of the serving namespace (enforced by K3s's embedded network policy controller):
everything denied, then exactly the seed's paths: ingress controller -> gateway -> model servers, Prometheus
scraping, DNS, and cert-manager's HTTP-01 solver."""

from ansible_collections.aiinfra.k3s.plugins.module_utils.k8s.objects import labels_for, plain

MODEL_COMPONENTS = ["vllm", "nim"]


def _ns(name):
    return {"kubernetes.io/metadata.name": name}


def _policy(name, namespace, selector, ingress=None, egress=None):
    # An empty rule list is written as no list at all (the API server drops empty lists, so writing one would
    # make every apply a change); the policy type alone denies everything of that direction.
    spec = {"podSelector": selector, "policyTypes": []}
    if ingress is not None:
        spec["policyTypes"].append("Ingress")
        if ingress:
            spec["ingress"] = ingress
    if egress is not None:
        spec["policyTypes"].append("Egress")
        if egress:
            spec["egress"] = egress
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": name, "namespace": namespace, "labels": labels_for("network-policy", "security")},
        "spec": spec,
    }


def redis_policies(p, gateway, ingress_peer):
    """The deployed Redis of the rate limits (the site plan's limits): reached by the gateway and the ingress
    controller (Traefik's rateLimit.redis) on its port, by nothing else."""
    limits = p.get("limits") or {}
    if limits.get("store") != "redis" or not limits.get("deploy"):
        if limits.get("store") == "redis":  # the operator's Redis, outside the namespace
            port = [{"protocol": "TCP", "port": int(limits["port"])}]
            return [_policy("gateway-to-redis", p["namespace"], gateway, egress=[{"ports": port}])]
        return []
    redis = {"matchLabels": {"app.kubernetes.io/name": limits["name"]}}
    port = [{"protocol": "TCP", "port": int(limits["port"])}]
    return [
        _policy(
            "redis-from-gateway-and-ingress",
            p["namespace"],
            redis,
            ingress=[{"from": [{"podSelector": gateway}, ingress_peer], "ports": port}],
        ),
        _policy("gateway-to-redis", p["namespace"], gateway, egress=[{"to": [{"podSelector": redis}], "ports": port}]),
    ]


def network_policies(p):
    """p: namespace, gateway (its app.kubernetes.io/name), gateway_port, ingress_namespace, ingress_labels,
    monitoring_namespace, prometheus_labels (the Prometheus pods' labels: only they scrape, not every pod of the
    monitoring namespace), dns_namespace, dns_labels, limits (the site plan's)."""
    p = plain(p)
    ns = p["namespace"]
    gateway = {"matchLabels": {"app.kubernetes.io/name": p["gateway"]}}
    models = {
        "matchExpressions": [{"key": "app.kubernetes.io/component", "operator": "In", "values": MODEL_COMPONENTS}]
    }
    ingress_peer = {
        "namespaceSelector": {"matchLabels": _ns(p["ingress_namespace"])},
        "podSelector": {"matchLabels": dict(p["ingress_labels"])},
    }
    dns_ports = [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]
    return [
        _policy("default-deny", ns, {}, ingress=[], egress=[]),
        _policy(
            "allow-dns",
            ns,
            {},
            egress=[
                {
                    "to": [
                        {
                            "namespaceSelector": {"matchLabels": _ns(p["dns_namespace"])},
                            "podSelector": {"matchLabels": dict(p["dns_labels"])},
                        }
                    ],
                    "ports": dns_ports,
                }
            ],
        ),
        _policy(
            "gateway-from-ingress",
            ns,
            gateway,
            ingress=[{"from": [ingress_peer], "ports": [{"protocol": "TCP", "port": int(p["gateway_port"])}]}],
        ),
        _policy(
            "gateway-to-models",
            ns,
            gateway,
            egress=[{"to": [{"podSelector": models}], "ports": [{"protocol": "TCP", "port": "http"}]}],
        ),
        _policy(
            "models-from-gateway",
            ns,
            models,
            ingress=[{"from": [{"podSelector": gateway}], "ports": [{"protocol": "TCP", "port": "http"}]}],
        ),
        _policy(
            "metrics-from-monitoring",
            ns,
            {},
            ingress=[
                {
                    "from": [
                        {
                            "namespaceSelector": {"matchLabels": _ns(p["monitoring_namespace"])},
                            "podSelector": {"matchLabels": dict(p["prometheus_labels"])},
                        }
                    ],
                    "ports": [{"protocol": "TCP", "port": "http"}],
                }
            ],
        ),
        # cert-manager's HTTP-01 solver pods run in the Certificate's namespace and answer Traefik on 8089.
        _policy(
            "acme-solver-from-ingress",
            ns,
            {"matchLabels": {"acme.cert-manager.io/http01-solver": "true"}},
            ingress=[{"from": [ingress_peer], "ports": [{"protocol": "TCP", "port": 8089}]}],
        ),
        *redis_policies(p, gateway, ingress_peer),
    ]
