# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Building blocks of the serving stack's manifests, as plain data: names, labels, namespaces, K3s HelmCharts,
probes, pod hardening, spreading, disruption budgets, autoscalers and secrets. The workloads are built from
them in model_servers.py; the plan checks are in plan/capacity.py."""

import base64
import json
import re

try:
    import yaml
except ImportError:  # only the controller renders manifests, and Ansible brings PyYAML there
    yaml = None


LABEL_PART = re.compile(r"[^a-z0-9-]+")
SERVED_NAME = "aiinfra.io/served-model-name"
TAG = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")


def plain(value):
    """The same data with Ansible's tagged str/int/dict/list subclasses made plain (yaml.safe_dump needs it)."""
    if isinstance(value, dict):
        return {plain(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    return value


def dump_yaml(data):
    """YAML text for files read by other programs (Helm values, LiteLLM config): no anchors, sorted keys."""

    class NoAliasDumper(yaml.SafeDumper):
        def ignore_aliases(self, data):
            return True

    return yaml.dump(plain(data), Dumper=NoAliasDumper, sort_keys=True, default_flow_style=False)


def dns_name(text, limit=63):
    """A DNS-1123 label from a model or node name (lower case, dashes, at most `limit` characters)."""
    name = LABEL_PART.sub("-", str(text).lower()).strip("-")
    return name[:limit].rstrip("-") or "x"


def image_pinned(image):
    """True for an image with an explicit tag other than latest, or a digest."""
    if not image or any(c.isspace() for c in image):
        return False
    name, _at, digest = image.partition("@")
    if digest:
        return bool(DIGEST.match(digest))
    tag = name.rsplit("/", 1)[-1].partition(":")[2]  # the last path part: a registry port is not a tag
    return bool(TAG.match(tag)) and tag != "latest"


STATIC_CHARTS = "/var/lib/rancher/k3s/server/static/charts"


def helm_chart(name, chart, repo, version, namespace, values, airgap_file=""):
    """A K3s HelmChart (helm.cattle.io/v1) in kube-system, installing into `namespace`.

    With airgap_file, the chart comes from K3s itself: the archive is staged in its static charts directory on
    the first server (roles/manifests/tasks/chart.yml) and fetched through the %{KUBERNETES_API}% URL.
    """
    spec = {
        "chart": chart,
        "repo": repo,
        "version": version,
        "targetNamespace": namespace,
        "createNamespace": False,
        "valuesContent": dump_yaml(values),
    }
    if airgap_file:
        spec["chart"] = "https://%%{KUBERNETES_API}%%/static/charts/%s" % airgap_file
        del spec["repo"]
    return {
        "apiVersion": "helm.cattle.io/v1",
        "kind": "HelmChart",
        "metadata": {"name": name, "namespace": "kube-system", "labels": labels_for(name, "helm-chart")},
        "spec": spec,
    }


def chart_problems(prefix, install_mode, chart_file, sha256):
    """Airgap settings of a role's chart that cannot work (prefix: the role's variable prefix)."""
    if install_mode not in ("online", "airgap"):
        return ["%s_install_mode is %r: use online or airgap" % (prefix, install_mode)]
    if install_mode != "airgap":
        return []
    problems = []
    if not str(chart_file).endswith(".tgz"):
        problems.append("%s_chart_file is %r: airgap mode serves a chart archive (.tgz)" % (prefix, chart_file))
    if not re.match(r"^[0-9a-f]{64}$", str(sha256 or "")):
        problems.append(
            "%s_install_mode is airgap but %s_chart_sha256 is not a sha256: set the digest of %s so the archive is "
            "verified before K3s serves it" % (prefix, prefix, chart_file)
        )
    return problems


def namespace(name, enforce, warn=None):
    """A Namespace with its Pod Security Admission level (and an optional stricter level to warn on)."""
    labels = {"app.kubernetes.io/managed-by": "aiinfra.k3s", "pod-security.kubernetes.io/enforce": enforce}
    if warn:
        labels["pod-security.kubernetes.io/warn"] = warn
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def labels_for(app, component):
    return {
        "app.kubernetes.io/name": app,
        "app.kubernetes.io/component": component,
        "app.kubernetes.io/part-of": "aiinfra-serving",
        "app.kubernetes.io/managed-by": "aiinfra.k3s",
    }


def http_probe(path, port, period, failures, initial=0):
    probe = {
        "httpGet": {"path": path, "port": port},
        "periodSeconds": period,
        "timeoutSeconds": 5,
        "failureThreshold": failures,
    }
    if initial:
        probe["initialDelaySeconds"] = initial
    return probe


# Pod Security "restricted" for every serving pod: a non-root user (the vLLM and LiteLLM images default to root, so
# one is set), no privilege escalation, no capability, the runtime's seccomp profile, a read-only root file system
# with a disk-backed /tmp (HOME points there, so caches land in it), and no service-account token.
# No fsGroup: for a volume mounted writable at the claim level (the model store's local volumes are), the kubelet
# would walk it at every pod start, chown every file to that group and add group write (volume.SetVolumeOwnership),
# rewriting the weights on the host; a container mount's readOnly does not stop it. No serving pod needs it: the
# store is world-readable (model_registry), emptyDir /tmp is world-writable, ConfigMaps and Secrets are 0644.
RUN_AS_USER = 1000


def harden(pod_spec, container, uid=RUN_AS_USER, tmp_size="10Gi"):
    """Make a pod spec and its container meet Pod Security "restricted" (see RUN_AS_USER); in place."""
    uid = int(uid)
    pod_spec["automountServiceAccountToken"] = False
    pod_spec["securityContext"] = {
        "runAsNonRoot": True,
        "runAsUser": uid,
        "runAsGroup": uid,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    container["securityContext"] = {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    container.setdefault("volumeMounts", []).append({"name": "tmp", "mountPath": "/tmp"})
    pod_spec.setdefault("volumes", []).append({"name": "tmp", "emptyDir": {"sizeLimit": tmp_size}})
    env = container.setdefault("env", [])
    if not any(e["name"] == "HOME" for e in env):
        env.append({"name": "HOME", "value": "/tmp"})
    return pod_spec


def spread(keys, selector):
    """Spread replicas over each topology key (hostname, zone); soft, so a small site still schedules them."""
    return [
        {
            "maxSkew": 1,
            "topologyKey": key,
            "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": dict(selector)},
        }
        for key in keys
    ]


def disruption_budget(name, namespace, labels, max_unavailable=1):
    """PodDisruptionBudget letting drains take one replica at a time."""
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {"maxUnavailable": max_unavailable, "selector": {"matchLabels": {"app.kubernetes.io/name": name}}},
    }


def autoscaler(name, namespace, labels, minimum, maximum, metric, kind="Deployment"):
    """HorizontalPodAutoscaler (autoscaling/v2) on CPU utilisation or on a per-pod metric.

    metric: {"cpu": percent} or {"pods": metric name, "average": target value}.
    """
    if "pods" in metric:
        spec_metric = {
            "type": "Pods",
            "pods": {
                "metric": {"name": metric["pods"]},
                "target": {"type": "AverageValue", "averageValue": str(metric["average"])},
            },
        }
    else:
        spec_metric = {
            "type": "Resource",
            "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": int(metric["cpu"])}},
        }
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": kind, "name": name},
            "minReplicas": int(minimum),
            "maxReplicas": int(maximum),
            "metrics": [spec_metric],
            # Model servers take minutes to load: scale down slowly so a short lull does not drop warm replicas.
            "behavior": {"scaleDown": {"stabilizationWindowSeconds": 600}},
        },
    }


def secret(name, namespace, labels, data, kind="Opaque"):
    """A Secret holding `data` as stringData (written only to 0600 files, never logged)."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "type": kind,
        "stringData": data,
    }


def registry_secret(name, namespace, registry, username, password, labels):
    """kubernetes.io/dockerconfigjson Secret for one registry."""
    auth = base64.b64encode(("%s:%s" % (username, password)).encode()).decode()
    config = {"auths": {registry: {"username": username, "password": password, "auth": auth}}}
    return secret(
        name,
        namespace,
        labels,
        {".dockerconfigjson": json.dumps(config, sort_keys=True)},
        "kubernetes.io/dockerconfigjson",
    )
