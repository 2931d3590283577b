"""lab/k3sbundle.py's manifests: the lab's own minimal Traefik manifests (in place of K3s's embedded chart), held to
what the collection renders for the edge and to what its NetworkPolicies expect of the ingress pods."""

import json
import re
import subprocess
from pathlib import Path

import k3sbundle
import pytest
import yaml

from ansible_collections.aiinfra.k3s.plugins.module_utils import edge

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
    assert "--api.dashboard=false" in container["args"]  # the build has no web UI (lab/nodebuild.py)
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


CM_IMAGE = "localhost/aiinfra-lab/cert-manager-controller-only-ca-selfsigned-labmain:v1.21.2"
CHART_RBAC = "deploy/charts/cert-manager/templates/rbac.yaml"


@pytest.fixture(scope="module")
def cm_objects():
    return [json.loads(doc) for doc in k3sbundle.cert_manager_manifest(CM_IMAGE).split("\n---\n")]


def test_the_lab_cert_manager_is_one_controller_in_the_collections_namespace(cm_objects):
    defaults = yaml.safe_load((ROOT / "roles" / "cert_manager" / "defaults" / "main.yml").read_text())
    ns = defaults["cert_manager_namespace"]
    assert ns == k3sbundle.CERT_MANAGER_NAMESPACE
    (deploy,) = [o for o in cm_objects if o["kind"] == "Deployment"]
    assert deploy["metadata"]["namespace"] == ns and deploy["spec"]["replicas"] == 1
    (container,) = deploy["spec"]["template"]["spec"]["containers"]
    assert container["image"] == CM_IMAGE
    # ClusterIssuers' Secrets (the CA root the collection makes in its namespace) are read from the pod's namespace.
    assert "--cluster-resource-namespace=$(POD_NAMESPACE)" in container["args"]
    assert container["env"][0]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"
    assert "--leader-election-namespace=kube-system" in container["args"]
    kinds = {o["kind"] for o in cm_objects}
    # No webhook, no cainjector: nothing the API server would call, and no second Deployment.
    assert not kinds & {"ValidatingWebhookConfiguration", "MutatingWebhookConfiguration", "APIService"}
    assert [o["kind"] for o in cm_objects].count("Deployment") == 1


def test_the_lab_cert_manager_namespace_and_pod_fit_restricted_as_the_collection_labels_it(cm_objects):
    rendered = edge.cert_manager_manifests(
        {
            "namespace": "cert-manager", "issuer_name": "i", "chart_name": "cert-manager", "chart_repo": "r",
            "chart_version": "v1.21.2", "chart_file": "", "install_mode": "online", "issuer_kind": "ca",
            "ca_common_name": "ca", "acme_server": "", "acme_email": "", "certificates": [],
        }
    )  # fmt: skip
    collection_ns = next(o for o in rendered if o["kind"] == "Namespace")
    (ns,) = [o for o in cm_objects if o["kind"] == "Namespace"]
    level = "pod-security.kubernetes.io/enforce"
    assert ns["metadata"]["labels"][level] == collection_ns["metadata"]["labels"][level] == "restricted"
    pod = next(o for o in cm_objects if o["kind"] == "Deployment")["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] and pod["securityContext"]["runAsUser"] != 0
    assert pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
    sc = pod["containers"][0]["securityContext"]
    assert sc == {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True, "capabilities": {"drop": ["ALL"]}}


def test_the_lab_cert_manager_rbac_is_the_charts_for_its_controllers_not_cluster_admin(cm_objects):
    roles = {o["metadata"]["name"]: o for o in cm_objects if o["kind"] in ("ClusterRole", "Role")}
    assert set(roles) == {
        "cert-manager-controller-issuers",
        "cert-manager-controller-clusterissuers",
        "cert-manager-controller-certificates",
        "cert-manager-controller-ingress-shim",  # the only one granting create on CertificateRequests
        "cert-manager-controller-approve:cert-manager-io",
        "cert-manager:leaderelection",
    }
    for role in roles.values():
        for rule in role["rules"]:
            assert "*" not in rule["verbs"] and "*" not in rule["resources"] and "*" not in rule["apiGroups"]
    bindings = [o for o in cm_objects if o["kind"] in ("ClusterRoleBinding", "RoleBinding")]
    assert {b["roleRef"]["name"] for b in bindings} == set(roles)
    for b in bindings:
        assert b["subjects"] == [{"kind": "ServiceAccount", "name": "cert-manager", "namespace": "cert-manager"}]
        assert b["roleRef"]["kind"] == roles[b["roleRef"]["name"]]["kind"]
        if b["kind"] == "RoleBinding":
            assert b["metadata"]["namespace"] == roles[b["roleRef"]["name"]]["metadata"]["namespace"] == "kube-system"
    granted = {
        verb
        for role in roles.values()
        for rule in role["rules"]
        if "cert-manager.io" in rule["apiGroups"] and "certificaterequests" in rule["resources"]
        for verb in rule["verbs"]
    }
    assert {"create", "update", "patch", "delete", "get", "list", "watch"} <= granted  # the request manager's needs
    lease = roles["cert-manager:leaderelection"]["rules"][0]
    assert lease["resourceNames"] == ["cert-manager-controller"]  # the lease the lab's main takes (its leaseName)
    main = (ROOT / "lab" / "certmanager" / "controller" / "main.go").read_text()
    assert 'const leaseName = "cert-manager-controller"' in main


def chart_rules():
    """The chart's rules by ClusterRole/Role name (release cert-manager, default values) from the pinned module, when
    it is in the Go module cache (lab/nodebuild.py and lab/crds.py put it there); None otherwise."""
    version = yaml.safe_load((ROOT / "roles" / "cert_manager" / "defaults" / "main.yml").read_text())[
        "cert_manager_chart_version"
    ]
    try:
        proc = subprocess.run(["go", "env", "GOMODCACHE"], capture_output=True, text=True, timeout=60, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    chart = Path(proc.stdout.strip()) / f"github.com/cert-manager/cert-manager@{version}" / "deploy/charts/cert-manager"
    if not (chart / "templates" / "rbac.yaml").is_file():
        return None
    signers = yaml.safe_load((chart / "values.yaml").read_text())["approveSignerNames"]
    text = (chart / "templates" / "rbac.yaml").read_text()
    text = text.replace("    - {{ . | quote }}\n", "".join(f"    - {json.dumps(n)}\n" for n in signers))
    text = text.replace('{{ template "cert-manager.fullname" . }}', "cert-manager")
    text = text.replace("{{ .Values.global.leaderElection.namespace }}", "kube-system")
    text = re.sub(r"\{\{[^}]*\}\}", "", text)  # control actions, includes and label values: rules have none left
    return {
        doc["metadata"]["name"]: doc["rules"]
        for doc in yaml.safe_load_all(text)
        if doc and doc.get("kind") in ("ClusterRole", "Role")
    }


def test_the_lab_cert_manager_roles_are_the_charts_rules_at_the_pinned_release():
    chart = chart_rules()
    if chart is None:
        pytest.skip("the pinned cert-manager module is not in the Go module cache (run lab/nodebuild.py build)")
    for name, rules in k3sbundle.cert_manager_rules().items():
        assert rules == chart[name], name
    lab_le = next(
        o
        for o in (json.loads(d) for d in k3sbundle.cert_manager_manifest(CM_IMAGE).split("\n---\n"))
        if o["kind"] == "Role"
    )
    assert lab_le["rules"] == chart["cert-manager:leaderelection"]
