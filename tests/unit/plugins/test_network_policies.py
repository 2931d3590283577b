"""plugins/module_utils/k8s/network_policies.py: the rendered NetworkPolicies of every test site
(tests/unit/rendered_sites.py) allow exactly the traffic paths of tests/unit/data/network_paths.yml, evaluated with
Kubernetes' NetworkPolicy semantics."""

import pytest
import rendered_sites
import yaml
from conftest import DATA
from rendered_sites import of_kind, workloads

rendered = rendered_sites.site_fixture()
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
