"""lab/nodes/observability.py: the lab's own manifests in place of kube-prometheus-stack's and KEDA's charts take from
the collection's HelmChart what the chart would, name the objects as the chart does, and fit the namespaces' pod
security (tests/lab runs them)."""

import re
from pathlib import Path

import pytest
import yaml

from lab.nodes import observability

ROOT = Path(__file__).resolve().parents[4]
REFS = {
    "prometheus-operator": "localhost/aiinfra-lab/prometheus-operator:v0.94.1",
    "prometheus-config-reloader": "localhost/aiinfra-lab/prometheus-config-reloader:v0.94.1",
    "prometheus": "localhost/aiinfra-lab/prometheus-kubernetes-sd-only-no-webui:v0.316.0",
    "keda": "localhost/aiinfra-lab/keda-only-cpu-cron-memory-prometheus-scalers:v2.21.1",
    "keda-adapter": "localhost/aiinfra-lab/keda-metrics-apiserver-only-cpu-cron-memory-prometheus-scalers:v2.21.1",
}


def lab_helm_chart(name):
    docs = yaml.safe_load_all((ROOT / "tests" / "golden" / "lab" / "monitoring.yaml.golden").read_text())
    (chart,) = [d for d in docs if d and d["kind"] == "HelmChart" and d["metadata"]["name"] == name]
    return chart


def test_the_prometheus_takes_the_retention_and_selectors_the_collections_values_give_the_chart():
    chart = lab_helm_chart(observability.RELEASE)
    assert chart["metadata"]["namespace"] == observability.CHARTS_NAMESPACE
    spec = observability.prometheus_spec(observability.chart_values(chart), REFS["prometheus"], "v3.16.0")
    values = yaml.safe_load(chart["spec"]["valuesContent"])["prometheus"]["prometheusSpec"]
    assert spec["retention"] == values["retention"]
    for kind in ("podMonitor", "serviceMonitor", "rule"):  # the collection asks for every object, not the release's
        assert spec[f"{kind}Selector"] == {} and spec[f"{kind}NamespaceSelector"] == {}
    assert (spec["image"], spec["version"]) == (REFS["prometheus"], "v3.16.0")


def test_without_the_collections_values_the_chart_picks_only_its_release():
    spec = observability.prometheus_spec({}, REFS["prometheus"], "v3.16.0")
    assert spec["podMonitorSelector"] == {"matchLabels": {"release": observability.RELEASE}}
    with pytest.raises(observability.ObservabilityError, match="not YAML"):
        observability.chart_values({"spec": {"valuesContent": "a: [b"}})


def test_the_prometheus_service_is_the_one_the_autoscaling_roles_url_names():
    default = yaml.safe_load((ROOT / "roles" / "autoscaling" / "defaults" / "main.yml").read_text())
    host, port = re.fullmatch(
        r"http://([^.]+)\.\{\{.*\}\}\.svc\.cluster\.local:(\d+)", default["autoscaling_prometheus_url"]
    ).groups()
    objects = observability.prometheus_manifests(REFS, {})
    (svc,) = [o for o in objects if o["kind"] == "Service"]
    assert (svc["metadata"]["name"], svc["spec"]["ports"][0]["port"]) == (host, int(port))
    (prom,) = [o for o in objects if o["kind"] == "Prometheus"]
    assert svc["spec"]["selector"]["operator.prometheus.io/name"] == prom["metadata"]["name"]
    (operator,) = [o for o in objects if o["kind"] == "Deployment"]
    args = operator["spec"]["template"]["spec"]["containers"][0]["args"]
    assert f"--prometheus-config-reloader={REFS['prometheus-config-reloader']}" in args


def test_every_lab_container_runs_under_restricted_pod_security_with_the_labs_images():
    objects = observability.prometheus_manifests(REFS, {}) + observability.keda_manifests(REFS)
    deployments = [o for o in objects if o["kind"] == "Deployment"]
    assert {d["metadata"]["name"] for d in deployments} == {
        observability.OPERATOR,
        "keda-operator",
        "keda-operator-metrics-apiserver",
    }
    for dep in deployments:
        pod = dep["spec"]["template"]["spec"]
        assert pod["securityContext"] == {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
        for container in pod["containers"]:
            assert container["image"] in REFS.values() and container["imagePullPolicy"] == "Never"
            sc = container["securityContext"]
            assert sc["allowPrivilegeEscalation"] is False and sc["capabilities"] == {"drop": ["ALL"]}
        assert dep["metadata"]["labels"]["aiinfra.io/lab-standin-for"] in ("kube-prometheus-stack", "keda")


def test_keda_serves_the_external_metrics_api_with_its_own_rotated_certificates():
    objects = observability.keda_manifests(REFS)
    (api,) = [o for o in objects if o["kind"] == "APIService"]
    assert api["metadata"]["name"] == "v1beta1.external.metrics.k8s.io"
    assert api["spec"]["service"] == {"name": "keda-operator-metrics-apiserver", "namespace": "keda", "port": 443}
    assert "caBundle" not in api["spec"] and not api["spec"].get("insecureSkipTLSVerify")  # KEDA patches the CA in
    by_name = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Deployment"}
    operator = by_name["keda-operator"]["spec"]["template"]["spec"]["containers"][0]
    assert "--enable-cert-rotation=true" in operator["args"]
    adapter = by_name["keda-operator-metrics-apiserver"]["spec"]["template"]["spec"]["containers"][0]
    assert "--metrics-service-address=keda-operator.keda.svc.cluster.local:9666" in adapter["args"]
    readers = [o for o in objects if o["metadata"]["name"] == "keda-hpa-controller-external-metrics"]
    assert [s["name"] for s in readers[0]["subjects"]] == ["horizontal-pod-autoscaler"]


def test_keda_writes_secrets_and_leases_only_in_its_own_namespace():
    objects = observability.keda_manifests(REFS)
    writes = {"create", "update", "patch", "delete", "*"}
    for obj in objects:
        for rule in obj.get("rules", []):
            touched = {"secrets", "leases"} & set(rule.get("resources", []))
            if touched and writes & set(rule["verbs"]):
                assert obj["kind"] == "Role" and obj["metadata"]["namespace"] == "keda", (obj["metadata"], rule)
    (binding,) = [o for o in objects if o["kind"] == "RoleBinding" and o["metadata"]["namespace"] == "keda"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "keda-operator", "namespace": "keda"}]


@pytest.mark.parametrize(("module", "release"), [("v0.316.0", "v3.16.0"), ("v0.305.1", "v3.5.1")])
def test_the_prometheus_object_names_the_release_not_the_module_version(module, release):
    assert observability.prometheus_release(module) == release
    refs = dict(REFS, prometheus=f"localhost/aiinfra-lab/prometheus-kubernetes-sd-only-no-webui:{module}")
    (prom,) = [o for o in observability.prometheus_manifests(refs, {}) if o["kind"] == "Prometheus"]
    assert prom["spec"]["version"] == release


def test_a_tag_that_is_no_prometheus_module_version_is_refused():
    with pytest.raises(observability.ObservabilityError, match="not a Prometheus module version"):
        observability.prometheus_release("3.16.0")
