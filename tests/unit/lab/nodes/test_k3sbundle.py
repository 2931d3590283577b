"""lab/nodes/k3sbundle.py's manifests: the lab's own minimal Traefik manifests (in place of K3s's embedded chart), held to
what the collection renders for the edge and to what its NetworkPolicies expect of the ingress pods."""

import json
from pathlib import Path

import pytest
import yaml

from ansible_collections.aiinfra.k3s.plugins.module_utils.k8s import edge
from lab.nodes import k3sbundle, nodeimages

ROOT = k3sbundle.ROOT
IMAGE = "localhost/aiinfra-lab/traefik-no-acme-dns-no-webui:v3.7.8"


@pytest.fixture(scope="module")
def objects():
    return {o["kind"]: o for o in (json.loads(doc) for doc in k3sbundle.traefik_manifest(IMAGE).split("\n---\n"))}


def test_the_lab_traefik_runs_the_image_with_the_charts_entry_points(objects):
    pod = objects["Deployment"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["image"] == IMAGE
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"web": 8000, "websecure": 8443, "traefik": 8080, "metrics": 9100}
    for name, port in ports.items():
        assert f"--entryPoints.{name}.address=:{port}/tcp" in container["args"]
    assert "--providers.kubernetescrd" in container["args"]
    assert "--api.dashboard=false" in container["args"]  # the build has no web UI (lab/nodes/nodebuild.py)
    assert container["readinessProbe"]["httpGet"] == {"path": "/ping", "port": "traefik"}


def test_the_service_is_a_named_node_port_in_place_of_servicelb(objects):
    svc = objects["Service"]["spec"]
    assert svc["type"] == "NodePort"
    assert {p["name"]: (p["port"], p["nodePort"]) for p in svc["ports"]} == {
        "web": (80, 30080),
        "websecure": (443, 30443),
    }
    assert svc["selector"] == objects["Deployment"]["spec"]["selector"]["matchLabels"]


def test_the_pods_carry_the_labels_the_collections_network_policies_admit():
    defaults = yaml.safe_load((ROOT / "roles" / "network_policies" / "defaults" / "main.yml").read_text())
    assert defaults["network_policies_ingress_namespace"] == "kube-system"
    assert defaults["network_policies_ingress_labels"].items() <= k3sbundle.TRAEFIK_LABELS.items()


def test_rbac_covers_every_traefik_kind_the_collection_renders(objects):
    rendered = edge.traefik_manifests(
        {
            "name": "r", "namespace": "ai-serving", "host": "gw.example.com", "path_prefix": "/api",
            "public_paths": ["/v1/models"], "expose_admin": False, "service": "litellm", "service_port": 4000,
            "rate_average": 1, "rate_burst": 2, "rate_period": "1s", "tls_secret": "t", "customize_bundled": False,
            "limits": {"store": "redis", "host": "redis", "port": 6379, "secret": "s"},
        }
    )  # fmt: skip
    kinds = {o["kind"] for o in rendered if o["apiVersion"] == edge.TRAEFIK}
    granted = {
        r for rule in objects["ClusterRole"]["rules"] if rule["apiGroups"] == ["traefik.io"] for r in rule["resources"]
    }
    assert {kind.lower() + "s" for kind in kinds} <= granted
    core = next(rule for rule in objects["ClusterRole"]["rules"] if rule["apiGroups"] == [""])
    assert {"services", "secrets"} <= set(core["resources"])  # backends; the rate limit's Redis Secret


def test_the_container_would_pass_restricted_pod_security(objects):
    pod = objects["Deployment"]["spec"]["template"]["spec"]
    assert (
        pod["securityContext"]["runAsNonRoot"] and pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
    )
    sc = pod["containers"][0]["securityContext"]
    assert sc == {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True, "capabilities": {"drop": ["ALL"]}}


def test_the_lab_gives_the_collections_cert_manager_chart_its_images_and_nothing_else():
    """The HelmChartConfig matches the collection's HelmChart (name, kube-system), sets each component's image to the
    lab's build (never pulled) at the chart's version, and turns off only startupapicheck (its image is not built)."""
    defaults = yaml.safe_load((ROOT / "roles" / "cert_manager" / "defaults" / "main.yml").read_text())
    config = json.loads(k3sbundle.cert_manager_chart_config(defaults["cert_manager_chart_version"]))
    rendered = edge.cert_manager_manifests(
        {
            "namespace": "cert-manager", "issuer_name": "i", "chart_name": defaults["cert_manager_chart_name"],
            "chart_repo": "r", "chart_version": defaults["cert_manager_chart_version"], "chart_file": "x.tgz",
            "install_mode": "airgap", "issuer_kind": "ca", "ca_common_name": "ca", "acme_server": "",
            "acme_email": "", "certificates": [],
        }
    )  # fmt: skip
    (chart,) = [o for o in rendered if o["kind"] == "HelmChart"]
    assert config["kind"] == "HelmChartConfig"
    assert config["metadata"] == {"name": chart["metadata"]["name"], "namespace": chart["metadata"]["namespace"]}
    values = yaml.safe_load(config["spec"]["valuesContent"])
    assert values.pop("startupapicheck") == {"enabled": False}
    assert set(values) == {"image", "webhook", "cainjector"}
    assert set(values["webhook"]) == set(values["cainjector"]) == {"image"}
    images = {"image": values["image"], "webhook.image": values["webhook"]["image"]}
    images["cainjector.image"] = values["cainjector"]["image"]
    for path, image in images.items():
        assert image == {
            "repository": nodeimages.CERT_MANAGER_REPOSITORIES[path],
            "tag": defaults["cert_manager_chart_version"],
            "pullPolicy": "Never",
        }, path


def test_the_bundle_leaves_cert_managers_crds_to_its_chart():
    """helm refuses to install a chart over CRDs it does not own: the bundle applies every other chart's CRDs."""
    cached = [
        ("helm-controller v0.17.7: pkg/crds/yaml/generated/helm.cattle.io_helmcharts.yaml", Path("a")),
        ("traefik v3.7.8: docs/content/reference/dynamic-configuration/traefik.io_middlewares.yaml", Path("b")),
        ("cert-manager v1.21.2: deploy/crds/crd-certificates.yaml", Path("c")),
        ("cert-manager-extra v1: crds/x.yaml", Path("d")),
    ]
    assert k3sbundle.bundled_crds(cached) == [Path("a"), Path("b"), Path("d")]
