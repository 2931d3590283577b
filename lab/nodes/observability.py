"""Run the lab's monitoring and autoscaling: the LAB'S OWN minimal manifests in place of kube-prometheus-stack's and
KEDA's charts, which the lab cannot fetch.

    python -m lab.nodes.observability apply --kubeconfig PATH --kubectl PATH
                apply them to the lab's cluster (after site.yml) and wait, bounded, until Prometheus runs, KEDA's
                metrics API is available and every ScaledObject is Ready

On a site, the collection's monitoring role installs kube-prometheus-stack and its autoscaling role KEDA, each as a
K3s HelmChart from its chart repository. The lab reaches no chart repository: those HelmCharts stay in the cluster
and their install Jobs fail, as on a site without the network. In their place this writes what the charts would run,
from the lab's builds of the upstream programs (lab/nodes/nodebuild.py; images by lab/nodes/nodeimages.py):

  * prometheus-operator (the release the chart ships, or the nearest the proxy serves) with its config reloader,
    and a Prometheus object named as the chart names it (kube-prometheus-stack-prometheus, whose Service is what
    autoscaling_prometheus_url points at). It takes from the collection's HelmChart values what the chart would:
    the retention, and whether the PodMonitor, ServiceMonitor and rule selectors pick every object
    (`*SelectorNilUsesHelmValues: false`, the collection's choice) or only the chart's release label. NOT from the
    chart: no Alertmanager, node-exporter, kube-state-metrics or Grafana (Grafana is not served here), no storage
    (the lab has no storage class: the TSDB is an emptyDir), and none of the chart's own rules and monitors;
  * KEDA's operator and metrics API server (the v1beta1.external.metrics.k8s.io APIService), with KEDA's own
    certificate rotation, as the chart runs them; NOT its admission webhooks, nor the ServiceMonitors of its parts
    that the collection's values ask the chart for.

The collection's PodMonitors, PrometheusRule and ScaledObjects are the real inputs: Prometheus scrapes what the
operator makes of them, and KEDA scales the workloads the ScaledObjects name. Besides the standard library, only
PyYAML (the venv's, which ansible-core needs) is used, to read the HelmChart's values.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import yaml

from lab.nodes import nodeimages

MONITORING_NAMESPACE = "monitoring"  # roles/monitoring/defaults/main.yml, monitoring_namespace
KEDA_NAMESPACE = "keda"  # roles/autoscaling/defaults/main.yml, autoscaling_namespace
CHARTS_NAMESPACE = "kube-system"  # where the collection's HelmCharts are (K3s's helm-controller reads them there)
RELEASE = "kube-prometheus-stack"  # the collection's HelmChart name, which is the chart's release name
PROMETHEUS = f"{RELEASE}-prometheus"  # the chart's fullname-prometheus
OPERATOR = f"{RELEASE}-operator"
PROMETHEUS_PORT = 9090
METRICS_APISERVICE = "v1beta1.external.metrics.k8s.io"
LAB = {"app.kubernetes.io/managed-by": "aiinfra-lab", "aiinfra.io/lab-standin-for": ""}
# What a restricted namespace asks of every container (KEDA's namespace enforces baseline and warns on restricted),
# and a read-only root, as the charts set.
RESTRICTED = {
    "allowPrivilegeEscalation": False,
    "readOnlyRootFilesystem": True,
    "capabilities": {"drop": ["ALL"]},
}
POD_SECURITY = {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
READ = ["get", "list", "watch"]


class ObservabilityError(Exception):
    """A step failed or did not finish in time; the message says which."""


def log(msg: str) -> None:
    print(f"[observability] {msg}", flush=True)


# ---------------------------------------------------------------- pure functions (unit-tested)


def labels(name: str, chart: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": name, **LAB, "aiinfra.io/lab-standin-for": chart}


def meta(name: str, namespace: str | None, chart: str) -> dict:
    out = {"name": name, "labels": labels(name, chart)}
    if namespace:
        out["namespace"] = namespace
    return out


def rule(groups: list[str], resources: list[str], verbs: list[str]) -> dict:
    return {"apiGroups": groups, "resources": resources, "verbs": verbs}


def role(kind: str, name: str, namespace: str | None, chart: str, rules: list[dict]) -> dict:
    """A Role (in namespace) or ClusterRole (namespace None) of `rules`."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": kind,
        "metadata": meta(name, namespace, chart),
        "rules": rules,
    }


def binding(name: str, namespace: str | None, chart: str, role_ref: tuple[str, str], subject: tuple[str, str]) -> dict:
    """A RoleBinding (in namespace) or ClusterRoleBinding (namespace None) of role_ref (kind, name) to the service
    account subject (namespace, name)."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding" if namespace else "ClusterRoleBinding",
        "metadata": meta(name, namespace, chart),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_ref[0], "name": role_ref[1]},
        "subjects": [{"kind": "ServiceAccount", "name": subject[1], "namespace": subject[0]}],
    }


def rbac(name: str, namespace: str, chart: str, rules: list[dict]) -> list[dict]:
    """A ServiceAccount with a ClusterRole of `rules` bound to it."""
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta(name, namespace, chart)},
        role("ClusterRole", name, None, chart, rules),
        binding(name, None, chart, ("ClusterRole", name), (namespace, name)),
    ]


def deployment(name: str, namespace: str, chart: str, container: dict, volumes: list[dict] | None = None) -> dict:
    selector = {"app.kubernetes.io/name": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": meta(name, namespace, chart),
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": selector},
            "template": {
                "metadata": {"labels": labels(name, chart)},
                "spec": {
                    "serviceAccountName": name,
                    "securityContext": POD_SECURITY,
                    "containers": [{"imagePullPolicy": "Never", "securityContext": RESTRICTED, **container}],
                    **({"volumes": volumes} if volumes else {}),
                },
            },
        },
    }


def service(name: str, namespace: str, chart: str, selector: dict, ports: list[tuple[str, int, int | str]]) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta(name, namespace, chart),
        "spec": {
            "selector": selector,
            "ports": [{"name": n, "port": p, "targetPort": t, "protocol": "TCP"} for n, p, t in ports],
        },
    }


def chart_values(helm_chart: dict | None) -> dict:
    """The values a HelmChart object gives its chart (spec.valuesContent, YAML)."""
    text = ((helm_chart or {}).get("spec") or {}).get("valuesContent") or "{}"
    try:
        values = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ObservabilityError(f"the HelmChart {RELEASE}'s valuesContent is not YAML: {exc}") from None
    return values if isinstance(values, dict) else {}


def prometheus_spec(values: dict, image: str, version: str) -> dict:
    """The Prometheus object's spec as kube-prometheus-stack makes it from these values: retention, and for each of
    the PodMonitor, ServiceMonitor and rule selectors every object (`*SelectorNilUsesHelmValues: false`) or only
    those with the chart's release label (the chart's default). The lab's image; no storage (an emptyDir)."""
    spec = (values.get("prometheus") or {}).get("prometheusSpec") or {}
    release_only = {"matchLabels": {"release": RELEASE}}
    out = {
        "image": image,
        "version": version,
        "replicas": 1,
        "serviceAccountName": PROMETHEUS,
        "retention": spec.get("retention", "10d"),
        "scrapeInterval": "30s",
        "evaluationInterval": "30s",
        "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}},
    }
    for kind in ("podMonitor", "serviceMonitor", "rule"):
        every = spec.get(f"{kind}SelectorNilUsesHelmValues", True) is False
        out[f"{kind}Selector"] = {} if every else release_only
        out[f"{kind}NamespaceSelector"] = {}
    return out


def prometheus_release(module_version: str) -> str:
    """Prometheus's release of its Go module's version (the image's tag): the module numbers release 3.Y.Z as
    v0.3YY.Z (v0.316.0 is 3.16.0). The operator reads the Prometheus object's version to choose its flags."""
    match = re.fullmatch(r"v0\.(\d)(\d\d)\.(\d+)", module_version)
    if not match:
        raise ObservabilityError(f"{module_version!r} is not a Prometheus module version v0.MYY.Z (e.g. v0.316.0)")
    major, minor, patch = (int(g) for g in match.groups())
    return f"v{major}.{minor}.{patch}"


def prometheus_manifests(refs: dict[str, str], values: dict, namespace: str = MONITORING_NAMESPACE) -> list[dict]:
    """prometheus-operator, and the Prometheus object the chart would make, with the Service the chart gives it."""
    chart = RELEASE
    operator_rules = [
        rule(["monitoring.coreos.com"], ["*"], ["*"]),
        rule(["apps"], ["statefulsets"], ["*"]),
        rule([""], ["configmaps", "secrets"], ["*"]),
        rule([""], ["pods"], ["list", "delete"]),
        rule([""], ["services", "services/finalizers", "endpoints"], ["get", "create", "update", "delete"]),
        rule([""], ["nodes", "namespaces"], READ),
        rule([""], ["events"], ["create", "patch"]),
        rule(["events.k8s.io"], ["events"], ["create", "patch"]),
        rule(["networking.k8s.io"], ["ingresses"], READ),
        rule(["storage.k8s.io"], ["storageclasses"], ["get"]),
    ]
    prometheus_rules = [
        rule([""], ["nodes", "nodes/metrics", "services", "endpoints", "pods"], READ),
        rule(["discovery.k8s.io"], ["endpointslices"], READ),
        rule(["networking.k8s.io"], ["ingresses"], READ),
        rule([""], ["configmaps"], ["get"]),
        {"nonResourceURLs": ["/metrics", "/metrics/cadvisor"], "verbs": ["get"]},
    ]
    reloader = refs["prometheus-config-reloader"]
    operator = {
        "name": "prometheus-operator",
        "image": refs["prometheus-operator"],
        "command": ["/prometheus-operator"],
        "args": [
            f"--prometheus-config-reloader={reloader}",
            "--localhost=127.0.0.1",
            "--log-level=info",
            "--web.listen-address=:8080",
        ],
        "ports": [{"name": "http", "containerPort": 8080}],
        "resources": {"requests": {"cpu": "20m", "memory": "64Mi"}},
    }
    version = prometheus_release(nodeimages.image_tag(refs["prometheus"]))
    selector = {"app.kubernetes.io/name": "prometheus", "operator.prometheus.io/name": PROMETHEUS}
    return [
        *rbac(OPERATOR, namespace, chart, operator_rules),
        deployment(OPERATOR, namespace, chart, operator),
        *rbac(PROMETHEUS, namespace, chart, prometheus_rules),
        {
            "apiVersion": "monitoring.coreos.com/v1",
            "kind": "Prometheus",
            "metadata": meta(PROMETHEUS, namespace, chart),
            "spec": prometheus_spec(values, refs["prometheus"], version),
        },
        service(PROMETHEUS, namespace, chart, selector, [("http-web", PROMETHEUS_PORT, PROMETHEUS_PORT)]),
    ]


def keda_manifests(refs: dict[str, str], namespace: str = KEDA_NAMESPACE) -> list[dict]:
    """KEDA's operator (with its certificate rotation, which writes the kedaorg-certs Secret and the APIService's CA)
    and its metrics API server, as the kedacore/keda chart runs them; no admission webhooks."""
    chart = "keda"
    certs = {"name": "certificates", "secret": {"secretName": "kedaorg-certs", "optional": True}}
    mount = {"name": "certificates", "mountPath": "/certs", "readOnly": True}
    field = {"valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}}
    operator_rules = [
        rule(["keda.sh", "eventing.keda.sh"], ["*"], ["*"]),
        rule(["*"], ["*/scale"], ["get", "list", "watch", "update", "patch"]),
        rule(["autoscaling"], ["horizontalpodautoscalers"], ["*"]),
        rule([""], ["configmaps", "configmaps/status", "limitranges", "pods", "services", "serviceaccounts"], READ),
        rule([""], ["secrets"], READ),
        rule(["", "events.k8s.io"], ["events"], ["create", "patch"]),
        rule(["apps"], ["deployments", "statefulsets", "replicasets"], READ),
        rule(["batch"], ["jobs"], ["*"]),
        rule(["apiregistration.k8s.io"], ["apiservices"], [*READ, "update", "patch"]),
        rule(["admissionregistration.k8s.io"], ["validatingwebhookconfigurations"], READ),
    ]
    # Written only in KEDA's namespace, as upstream's Role grants: its certificates Secret and its leader lease.
    operator_own = [
        rule([""], ["secrets"], [*READ, "create", "update", "patch"]),
        rule(["coordination.k8s.io"], ["leases"], ["*"]),
    ]
    adapter_rules = [
        rule([""], ["configmaps", "namespaces"], READ),
        rule(["keda.sh"], ["scaledobjects", "scaledjobs"], READ),
        rule(["external.metrics.k8s.io"], ["*"], READ),
    ]
    operator = {
        "name": "keda-operator",
        "image": refs["keda"],
        "command": ["/keda"],
        "args": [
            "--leader-elect",
            "--zap-log-level=info",
            "--zap-encoder=console",
            "--enable-cert-rotation=true",
            "--cert-secret-name=kedaorg-certs",
            "--operator-service-name=keda-operator",
            "--metrics-server-service-name=keda-operator-metrics-apiserver",
            "--webhooks-service-name=keda-admission-webhooks",
            "--enable-webhook-patching=false",
            "--k8s-cluster-name=kubernetes-default",
            "--k8s-cluster-domain=cluster.local",
        ],
        "env": [
            {"name": "WATCH_NAMESPACE", "value": ""},
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "POD_NAMESPACE", **field},
            {"name": "KEDA_CLUSTER_OBJECT_NAMESPACE", **field},
            {"name": "OPERATOR_NAME", "value": "keda-operator"},
            {"name": "KEDA_HTTP_DEFAULT_TIMEOUT", "value": "3000"},
        ],
        "ports": [{"name": "metrics", "containerPort": 8080}, {"name": "metricsservice", "containerPort": 9666}],
        "readinessProbe": {"httpGet": {"path": "/readyz", "port": 8081}, "periodSeconds": 5},
        "volumeMounts": [mount],
        "resources": {"requests": {"cpu": "50m", "memory": "100Mi"}},
    }
    adapter = {
        "name": "keda-operator-metrics-apiserver",
        "image": refs["keda-adapter"],
        "command": ["/keda-adapter"],
        "args": [
            "--port=8080",
            "--secure-port=6443",
            f"--metrics-service-address=keda-operator.{namespace}.svc.cluster.local:9666",
            "--client-ca-file=/certs/ca.crt",
            "--tls-cert-file=/certs/tls.crt",
            "--tls-private-key-file=/certs/tls.key",
            "--cert-dir=/certs",
            "--v=0",
        ],
        "env": [
            {"name": "WATCH_NAMESPACE", "value": ""},
            {"name": "POD_NAMESPACE", **field},
            {"name": "KEDA_HTTP_DEFAULT_TIMEOUT", "value": "3000"},
        ],
        "ports": [{"name": "https", "containerPort": 6443}, {"name": "metrics", "containerPort": 8080}],
        "readinessProbe": {"httpGet": {"path": "/readyz", "port": 6443, "scheme": "HTTPS"}, "periodSeconds": 5},
        "volumeMounts": [mount],
        "resources": {"requests": {"cpu": "50m", "memory": "100Mi"}},
    }
    adapter_sa = (namespace, "keda-operator-metrics-apiserver")
    auth_delegator = binding(
        "keda-operator-metrics-apiserver-auth-delegator",
        None,
        chart,
        ("ClusterRole", "system:auth-delegator"),
        adapter_sa,
    )
    auth_reader = binding(
        "keda-operator-metrics-apiserver-auth-reader",
        "kube-system",
        chart,
        ("Role", "extension-apiserver-authentication-reader"),
        adapter_sa,
    )
    # The HPA controller reads the external metrics as its service account (the lab's controller manager, as K3s's,
    # runs with --use-service-account-credentials).
    hpa_reader = binding(
        "keda-hpa-controller-external-metrics",
        None,
        chart,
        ("ClusterRole", "keda-external-metrics-reader"),
        ("kube-system", "horizontal-pod-autoscaler"),
    )
    own_role = role("Role", "keda-operator", namespace, chart, operator_own)
    own_binding = binding("keda-operator", namespace, chart, ("Role", "keda-operator"), (namespace, "keda-operator"))
    return [
        *rbac("keda-operator", namespace, chart, operator_rules),
        own_role,
        own_binding,
        deployment("keda-operator", namespace, chart, operator, [certs]),
        service(
            "keda-operator",
            namespace,
            chart,
            {"app.kubernetes.io/name": "keda-operator"},
            [("metricsservice", 9666, 9666), ("metrics", 8080, 8080)],
        ),
        *rbac("keda-operator-metrics-apiserver", namespace, chart, adapter_rules),
        deployment(
            "keda-operator-metrics-apiserver",
            namespace,
            chart,
            adapter,
            [dict(certs, secret={"secretName": "kedaorg-certs"})],
        ),
        service(
            "keda-operator-metrics-apiserver",
            namespace,
            chart,
            {"app.kubernetes.io/name": "keda-operator-metrics-apiserver"},
            [("https", 443, 6443), ("metrics", 8080, 8080)],
        ),
        auth_delegator,
        auth_reader,
        role(
            "ClusterRole", "keda-external-metrics-reader", None, chart, [rule(["external.metrics.k8s.io"], ["*"], READ)]
        ),
        hpa_reader,
        {
            "apiVersion": "apiregistration.k8s.io/v1",
            "kind": "APIService",
            "metadata": meta(METRICS_APISERVICE, None, chart),
            "spec": {
                "service": {"name": "keda-operator-metrics-apiserver", "namespace": namespace, "port": 443},
                "group": "external.metrics.k8s.io",
                "version": "v1beta1",
                "groupPriorityMinimum": 100,
                "versionPriority": 100,
            },
        },
    ]


# ---------------------------------------------------------------- process boundary


class Kubectl:
    def __init__(self, binary: str, kubeconfig: Path):
        self.base = [binary, "--kubeconfig", str(kubeconfig)]

    def run(self, *args: str, stdin: str | None = None, check: bool = True, timeout: float = 120) -> str:
        proc = subprocess.run(
            [*self.base, *args], input=stdin, capture_output=True, text=True, timeout=timeout, check=False
        )
        if check and proc.returncode != 0:
            raise ObservabilityError(f"kubectl {' '.join(args[:3])}: {proc.stderr.strip()[-800:]}")
        return proc.stdout if proc.returncode == 0 else ""

    def json(self, *args: str) -> dict | None:
        text = self.run(*args, "-o", "json", check=False)
        return json.loads(text) if text else None

    def apply(self, objects: list[dict]) -> None:
        doc = {"apiVersion": "v1", "kind": "List", "items": objects}
        self.run(
            "apply",
            "--server-side",
            "--force-conflicts",
            "--field-manager=aiinfra-lab",
            "-f",
            "-",
            stdin=json.dumps(doc),
        )


def wait(what: str, check, timeout: float) -> None:
    """Call check() every 3 s until it returns None (done) or `timeout` s pass (an error naming its last answer)."""
    deadline, last = time.monotonic() + timeout, ""
    while True:
        last = check()
        if last is None:
            return
        if time.monotonic() > deadline:
            raise ObservabilityError(f"{what} not ready after {timeout:.0f}s: {last}")
        time.sleep(3)


def available(kubectl: Kubectl, namespace: str, name: str):
    def check():
        obj = kubectl.json("get", "deployment", name, "-n", namespace)
        status = (obj or {}).get("status", {})
        return None if status.get("availableReplicas", 0) >= 1 else f"{namespace}/{name}: {status or 'not created'}"

    return check


def apiservice_available(kubectl: Kubectl):
    def check():
        obj = kubectl.json("get", "apiservice", METRICS_APISERVICE) or {}
        conditions = {c.get("type"): c for c in obj.get("status", {}).get("conditions", [])}
        cond = conditions.get("Available", {})
        return None if cond.get("status") == "True" else f"{cond.get('reason')}: {cond.get('message')}"

    return check


def scaled_objects(kubectl: Kubectl, why):
    """A check that lists every ScaledObject and names those for which why(item) gives a reason to wait."""

    def check():
        items = (kubectl.json("get", "scaledobjects.keda.sh", "-A") or {}).get("items", [])
        waiting = [
            f"{item['metadata']['namespace']}/{item['metadata']['name']}{reason}"
            for item in items
            if (reason := why(item)) is not None
        ]
        return "; ".join(waiting) or None

    return check


def not_ready(item: dict) -> str | None:
    conditions = {c.get("type"): c.get("status") for c in item.get("status", {}).get("conditions", [])}
    if conditions.get("Ready") != "True":
        return ""
    return " (no HPA yet)" if item.get("status", {}).get("hpaName") is None else None


def below_minimum(kubectl: Kubectl):
    """Why a ScaledObject's target holds fewer ready replicas than its minReplicaCount (KEDA's HPA makes the count)."""

    def why(item: dict) -> str | None:
        ref, ns = item["spec"]["scaleTargetRef"], item["metadata"]["namespace"]
        target = kubectl.json("get", ref.get("kind", "Deployment").lower(), ref["name"], "-n", ns) or {}
        ready = target.get("status", {}).get("readyReplicas", 0)
        minimum = int(item["spec"].get("minReplicaCount", 0))  # KEDA's default minimum is 0
        return f": {ref['name']} {ready} of {minimum} ready" if ready < minimum else None

    return why


def apply(kubeconfig: Path, kubectl_bin: str, timeout: float = 300) -> None:
    started = time.monotonic()
    kubectl = Kubectl(kubectl_bin, kubeconfig)
    refs = nodeimages.refs(None)
    missing = [r for r in (*nodeimages.PROMETHEUS_OPERATOR_ROLES, *nodeimages.KEDA_ROLES) if r not in refs]
    if missing:
        raise ObservabilityError(f"the lab images lack {', '.join(missing)}: rebuild them (make lab-bundle)")
    # What the site asked for: the collection's HelmCharts say it (none where monitoring_enabled is false or
    # autoscaling_engine is not keda; then the lab runs none either).
    prometheus_chart = kubectl.json("get", "helmcharts.helm.cattle.io", RELEASE, "-n", CHARTS_NAMESPACE)
    keda_chart = kubectl.json("get", "helmcharts.helm.cattle.io", "keda", "-n", CHARTS_NAMESPACE)
    objects, deployments = [], []
    if prometheus_chart is not None:
        objects += prometheus_manifests(refs, chart_values(prometheus_chart))
        deployments.append((MONITORING_NAMESPACE, OPERATOR))
    if keda_chart is not None:
        objects += keda_manifests(refs)
        deployments += [(KEDA_NAMESPACE, "keda-operator"), (KEDA_NAMESPACE, "keda-operator-metrics-apiserver")]
    if not objects:
        log("the site has neither kube-prometheus-stack's nor KEDA's HelmChart: nothing to run in their place")
        return
    kubectl.apply(objects)
    log(
        "applied "
        + " and ".join(
            n for n, c in (("prometheus-operator with a Prometheus", prometheus_chart), ("KEDA", keda_chart)) if c
        )
        + " (the lab's own manifests, in place of their charts)"
    )
    for ns, name in deployments:
        wait(f"deployment {ns}/{name}", available(kubectl, ns, name), timeout)

    def prometheus_ready():
        obj = kubectl.json("get", "statefulset", f"prometheus-{PROMETHEUS}", "-n", MONITORING_NAMESPACE)
        status = (obj or {}).get("status", {})
        return None if status.get("readyReplicas", 0) >= 1 else f"{status or 'not created by the operator yet'}"

    if prometheus_chart is not None:
        wait(f"Prometheus {PROMETHEUS}", prometheus_ready, timeout)
    if keda_chart is not None:
        wait(f"APIService {METRICS_APISERVICE}", apiservice_available(kubectl), timeout)
        wait("the ScaledObjects", scaled_objects(kubectl, not_ready), timeout)
        wait("the scaled workloads' minimum replicas", scaled_objects(kubectl, below_minimum(kubectl)), timeout)
    log(f"ready in {time.monotonic() - started:.0f}s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    app = sub.add_parser("apply", help="apply the lab's monitoring and autoscaling; wait until they run")
    app.add_argument("--kubeconfig", required=True, type=Path)
    app.add_argument("--kubectl", required=True)
    app.add_argument("--timeout", type=float, default=300)
    args = parser.parse_args(argv)
    try:
        apply(args.kubeconfig, args.kubectl, args.timeout)
    except (ObservabilityError, nodeimages.ImageError) as exc:
        print(f"[observability] ERROR: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
