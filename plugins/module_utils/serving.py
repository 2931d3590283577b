# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kubernetes manifests of the serving stack, built as plain data.

One builder makes every GPU workload (vLLM today, NIM on the same path), so placement, GPU limits,
tolerations, probes, graceful shutdown and security settings are written once.
"""

import base64
import json
import math
import re

try:
    import yaml
except ImportError:  # only the controller renders manifests, and Ansible brings PyYAML there
    yaml = None

from ansible_collections.aiinfra.k3s.plugins.module_utils import json_logging

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


class ServingError(Exception):
    """A serving plan that cannot work; the message says which model and what to change."""


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


def _probe(path, port, period, failures, initial=0):
    probe = {
        "httpGet": {"path": path, "port": port},
        "periodSeconds": period,
        "timeoutSeconds": 5,
        "failureThreshold": failures,
    }
    if initial:
        probe["initialDelaySeconds"] = initial
    return probe


MODEL_WORKLOAD_KIND = "StatefulSet"
# GPU Feature Discovery's node label: time-slicing replicas of each GPU of the node (the lab's kwok nodes carry it
# too). Pods asking for several GPUs keep off nodes whose GPUs are sliced: the device plugin runs with
# failRequestsGreaterThanOne, so a request for two slices fails rather than landing on one physical GPU.
SHARED_LABEL = "nvidia.com/gpu.replicas"
# vLLM's share of a GPU's memory when the GPU is its own (vLLM's default); divided by the slices of a shared GPU.
MEMORY_UTILIZATION = 0.9
# Fraction of a model server's memory share that must stay free of weights, for activations and the KV cache.
KV_CACHE_ROOM = 0.1


def store_claim_template(store):
    """The claim each model server replica gets for the GPU node's local model store.

    store: {"storage_class", "size"}. Every GPU node offers one local PersistentVolume of its store per GPU unit
    (model_registry_manifests), so each replica's claim binds, at first scheduling, to a volume on the node the
    scheduler picks for it (WaitForFirstConsumer), and the replica stays on that node where the weights are.
    """
    return {
        "metadata": {"name": "models"},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": store["storage_class"],
            "resources": {"requests": {"storage": store["size"]}},
        },
    }


def gpu_workload(spec, site):
    """StatefulSet + Service for a GPU model server.

    A StatefulSet, not a Deployment: each replica mounts the model store of the node it runs on through its
    own claim (a volume claim template), because every GPU node has its own local volume; one shared
    ReadWriteOnce claim would pin every replica to a single node.

    spec: name, component, served_name, image, args, env (dict), port, gpus, replicas, resources
    (requests/limits without GPUs), startup_timeout (seconds a model may take to load), volumes/volume_mounts,
    metrics_path, termination_grace_period, store ({storage_class, size}: the claim template of the
    volume named "models"); optional health ({startup, ready, live} paths, default /health),
    env_secrets ({ENV: [secret, key]}), image_pull_secrets (names), spread_keys (topology keys the replicas
    are spread over), autoscaled (an autoscaler owns the replica count).
    site: namespace, gpu_node_selector (dict), gpu_toleration_key, runtime_class (or empty).
    """
    name = dns_name(spec["name"])
    labels = labels_for(name, spec["component"])
    selector = {"app.kubernetes.io/name": name}
    gpus = int(spec["gpus"])
    resources = {
        "requests": dict(spec["resources"].get("requests") or {}),
        "limits": dict(spec["resources"].get("limits") or {}),
    }
    resources["requests"]["nvidia.com/gpu"] = str(gpus)
    resources["limits"]["nvidia.com/gpu"] = str(gpus)
    port = int(spec["port"])
    startup_failures = max(int(spec.get("startup_timeout", 1800)) // 10, 1)
    grace = int(spec.get("termination_grace_period", 120))
    health = dict({"startup": "/health", "ready": "/health", "live": "/health"}, **(spec.get("health") or {}))
    env = [{"name": k, "value": str(v)} for k, v in sorted((spec.get("env") or {}).items())]
    env += [
        {"name": k, "valueFrom": {"secretKeyRef": {"name": ref[0], "key": ref[1]}}}
        for k, ref in sorted((spec.get("env_secrets") or {}).items())
    ]
    container = {
        "name": spec["component"],
        "image": spec["image"],
        "imagePullPolicy": "IfNotPresent",
        "args": [str(a) for a in spec["args"]],
        "env": env,
        "ports": [{"name": "http", "containerPort": port, "protocol": "TCP"}],
        "resources": resources,
        # Model loads take minutes: the startup probe holds liveness off until the server answers once.
        "startupProbe": _probe(health["startup"], "http", 10, startup_failures),
        "readinessProbe": _probe(health["ready"], "http", 5, 3),
        "livenessProbe": _probe(health["live"], "http", 15, 4),
        # Stop taking traffic first, let in-flight requests finish, then SIGTERM.
        "lifecycle": {"preStop": {"exec": {"command": ["/bin/sh", "-c", "sleep 15"]}}},
        "volumeMounts": list(spec.get("volume_mounts") or []),
    }
    pod_spec = {
        "nodeSelector": dict(site["gpu_node_selector"]),
        "tolerations": [{"key": site["gpu_toleration_key"], "operator": "Exists", "effect": "NoSchedule"}],
        "terminationGracePeriodSeconds": grace,
        "enableServiceLinks": False,
        "containers": [container],
        "volumes": list(spec.get("volumes") or []),
    }
    if site.get("runtime_class"):
        pod_spec["runtimeClassName"] = site["runtime_class"]
    harden(pod_spec, container, spec.get("run_as_user", RUN_AS_USER))
    if gpus > 1 and site.get("shared_replicas"):
        pod_spec["affinity"] = whole_gpus_affinity(site["shared_replicas"])
    elif site.get("shared_replicas") and site.get("reserve_whole"):
        # Multi-GPU pods need the unsliced nodes: one-GPU pods keep to the sliced ones, or they could fill the
        # whole GPUs first (the scheduler places pods one at a time) and leave a tensor-parallel pod nowhere to go.
        pod_spec["affinity"] = whole_gpus_affinity(site["shared_replicas"], "In")
    if spec.get("image_pull_secrets"):
        pod_spec["imagePullSecrets"] = [{"name": n} for n in spec["image_pull_secrets"]]
    if spec.get("spread_keys"):
        pod_spec["topologySpreadConstraints"] = spread(spec["spread_keys"], selector)
    annotations = {
        "prometheus.io/scrape": "true",
        "prometheus.io/port": str(port),
        "prometheus.io/path": spec.get("metrics_path", "/metrics"),
    }
    replicas = int(spec.get("replicas", 1))
    deployment = {
        "apiVersion": "apps/v1",
        "kind": MODEL_WORKLOAD_KIND,
        "metadata": {"name": name, "namespace": site["namespace"], "labels": labels},
        "spec": {
            "replicas": replicas,
            "revisionHistoryLimit": 3,
            "serviceName": name,
            # Replicas start (and load their models) side by side; rollouts replace one pod at a time, the old
            # one first, so a rollout never needs a spare GPU.
            "podManagementPolicy": "Parallel",
            "updateStrategy": {"type": "RollingUpdate"},
            "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Retain", "whenScaled": "Retain"},
            "selector": {"matchLabels": selector},
            "template": {"metadata": {"labels": labels, "annotations": annotations}, "spec": pod_spec},
            "volumeClaimTemplates": [store_claim_template(spec["store"])],
        },
    }
    if spec.get("autoscaled"):
        # The autoscaler owns the count: a replicas field would reset it whenever K3s re-applies the file.
        del deployment["spec"]["replicas"]
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": name,
            "namespace": site["namespace"],
            "labels": labels,
            # The gateway's routing table is built from this annotation on the rendered Services.
            "annotations": {SERVED_NAME: spec.get("served_name", name)},
        },
        "spec": {
            "type": "ClusterIP",
            "selector": selector,
            "ports": [{"name": "http", "port": port, "targetPort": "http", "protocol": "TCP"}],
        },
    }
    return [deployment, service]


# Pod Security "restricted" for every serving pod: a non-root user (the vLLM and LiteLLM images default to root, so
# one is set), no privilege escalation, no capability, the runtime's seccomp profile, a read-only root file system
# with a disk-backed /tmp (HOME points there, so caches land in it), and no service-account token.
RUN_AS_USER = 1000


def harden(pod_spec, container, uid=RUN_AS_USER, tmp_size="10Gi"):
    """Make a pod spec and its container meet Pod Security "restricted" (see RUN_AS_USER); in place."""
    uid = int(uid)
    pod_spec["automountServiceAccountToken"] = False
    pod_spec["securityContext"] = {
        "runAsNonRoot": True,
        "runAsUser": uid,
        "runAsGroup": uid,
        "fsGroup": uid,
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


def whole_gpus_affinity(shared_replicas, operator="NotIn"):
    """Node affinity keeping a pod off (NotIn: multi-GPU pods) or on (In: one-GPU pods, when multi-GPU pods need
    the whole GPUs) nodes whose GPUs are time-sliced. With NotIn, a node without the label (before GPU Feature
    Discovery ran) is not excluded."""
    values = sorted({str(int(r)) for r in shared_replicas if int(r) > 1}, key=int)
    term = {"matchExpressions": [{"key": SHARED_LABEL, "operator": operator, "values": values}]}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}


def gpu_share(gpus, shared_replicas):
    """How many pods may share each GPU of a pod asking for `gpus`: the most slices of any time-sliced node for a
    one-GPU pod (it may land there), 1 for a multi-GPU pod (kept off sliced nodes)."""
    if int(gpus) > 1:
        return 1
    return max([1] + [int(r) for r in shared_replicas or []])


def memory_utilization(model, share):
    """vLLM's --gpu-memory-utilization: the model's own value, else vLLM's default divided by the pods that may
    share the GPU, rounded down to hundredths."""
    if model.get("gpu_memory_utilization") is not None:
        return float(model["gpu_memory_utilization"])
    return math.floor(MEMORY_UTILIZATION * 100 / int(share)) / 100


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


def vllm_args(model, store_mount, share=1):
    """vLLM OpenAI server arguments for one model served from the local model store; share: pods that may share
    each of its GPUs (time-slicing)."""
    args = [
        "--model",
        "%s/%s" % (store_mount.rstrip("/"), model["path"].strip("/")),
        "--served-model-name",
        model["served_name"],
        "--tensor-parallel-size",
        str(model.get("tensor_parallel_size", 1)),
        "--max-model-len",
        str(model.get("max_model_len", 8192)),
        "--gpu-memory-utilization",
        str(memory_utilization(model, share)),
        "--port",
        str(model.get("port", 8000)),
    ]
    if model.get("prefix_caching", True):
        args.append("--enable-prefix-caching")
    return args + [str(a) for a in model.get("extra_args") or []]


LOG_DIR = "/etc/aiinfra/logging"


def logging_configmap(name, namespace, loggers, level):
    """ConfigMap with the JSON log formatter and the dictConfig that uses it (see json_logging)."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "labels": labels_for(name, "logging")},
        "data": json_logging.logging_files(loggers, level),
    }


def vllm_manifests(models, site, defaults):
    """Deployment + Service per vLLM model (+ PodDisruptionBudget with several replicas), and the shared
    JSON-logging ConfigMap. defaults: image, store_mount, store ({storage_class, size}), shm_size, resources,
    log_level."""
    if not models:
        return []
    log_map = "vllm-logging"
    out = [
        logging_configmap(
            log_map, site["namespace"], ["vllm", "uvicorn", "uvicorn.access"], defaults.get("log_level", "INFO")
        )
    ]
    for model in models:
        tp = int(model.get("tensor_parallel_size", 1))
        spec = {
            "name": "vllm-%s" % model["served_name"],
            "served_name": model["served_name"],
            "component": "vllm",
            "image": model.get("image", defaults["image"]),
            "args": vllm_args(model, defaults["store_mount"], gpu_share(tp, site.get("shared_replicas"))),
            "env": dict(
                {
                    "HF_HUB_OFFLINE": "1",
                    "TRANSFORMERS_OFFLINE": "1",
                    "VLLM_CONFIGURE_LOGGING": "1",
                    "VLLM_LOGGING_CONFIG_PATH": LOG_DIR + "/logging.json",
                    "PYTHONPATH": LOG_DIR,
                },
                **(model.get("env") or {}),
            ),
            "port": model.get("port", 8000),
            "gpus": tp,
            "replicas": model.get("replicas", 1),
            "resources": model.get("resources", defaults["resources"]),
            "startup_timeout": model.get("startup_timeout", 1800),
            "volume_mounts": [
                {"name": "models", "mountPath": defaults["store_mount"], "readOnly": True},
                {"name": "dshm", "mountPath": "/dev/shm"},
                {"name": "logging", "mountPath": LOG_DIR, "readOnly": True},
            ],
            "volumes": [
                {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": defaults["shm_size"]}},
                {"name": "logging", "configMap": {"name": log_map}},
            ],
            "store": defaults["store"],
            "run_as_user": defaults.get("run_as_user", RUN_AS_USER),
        }
        out.extend(gpu_workload(spec, site))
        if int(model.get("replicas", 1)) > 1:
            name = dns_name(spec["name"])
            out.append(disruption_budget(name, site["namespace"], labels_for(name, "vllm")))
    return out


def nim_manifests(models, site, defaults):
    """NVIDIA NIM backends on the same GPU workload builder as vLLM, shaped for the NIM notes: at least two
    replicas spread over nodes and zones, a HorizontalPodAutoscaler, a PodDisruptionBudget, the NGC key as a
    Secret (environment) and as the image pull secret, NIM's own health endpoints.

    defaults: store_mount, store ({storage_class, size}), shm_size, resources, ngc_secret, pull_secret, max_replicas, metric,
    store_read_only.
    """
    out = []
    for model in models:
        name = dns_name("nim-%s" % model["served_name"])
        replicas = int(model.get("replicas", 2))
        spec = {
            "name": name,
            "served_name": model["served_name"],
            "component": "nim",
            "image": model["image"],
            "args": [],
            "env": dict(
                {
                    "NIM_SERVED_MODEL_NAME": model["served_name"],
                    "NIM_CACHE_PATH": defaults["store_mount"],
                    "NIM_JSONL_LOGGING": "1",
                    "NIM_LOG_LEVEL": "INFO",
                    "NIM_SERVER_PORT": str(model.get("port", 8000)),
                    "HF_HUB_OFFLINE": "1",
                },
                **(model.get("env") or {}),
            ),
            # NVIDIA's air-gap mode: the cache is filled beforehand and NIM gets no NGC key unless it may download.
            "env_secrets": (
                {"NGC_API_KEY": [defaults["ngc_secret"], "NGC_API_KEY"]} if defaults.get("download") else {}
            ),
            "image_pull_secrets": [defaults["pull_secret"]],
            "port": model.get("port", 8000),
            "gpus": int(model.get("gpus", 1)),
            "replicas": replicas,
            "autoscaled": True,
            "resources": model.get("resources", defaults["resources"]),
            "startup_timeout": model.get("startup_timeout", 1800),
            "health": {"startup": "/v1/health/ready", "ready": "/v1/health/ready", "live": "/v1/health/live"},
            # NIM for LLMs serves its Prometheus metrics under /v1 like its health endpoints.
            "metrics_path": "/v1/metrics",
            "spread_keys": ["kubernetes.io/hostname", "topology.kubernetes.io/zone"],
            "volume_mounts": [
                {"name": "models", "mountPath": defaults["store_mount"], "readOnly": defaults["store_read_only"]},
                {"name": "dshm", "mountPath": "/dev/shm"},
            ],
            "volumes": [
                {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": defaults["shm_size"]}},
            ],
            "store": defaults["store"],
            "run_as_user": defaults.get("run_as_user", RUN_AS_USER),
        }
        out.extend(gpu_workload(spec, site))
        labels = labels_for(name, "nim")
        out.append(disruption_budget(name, site["namespace"], labels))
        maximum = int(model.get("max_replicas", defaults["max_replicas"]))
        out.append(
            autoscaler(
                name,
                site["namespace"],
                labels,
                replicas,
                max(maximum, replicas),
                defaults["metric"],
                MODEL_WORKLOAD_KIND,
            )
        )
    return out


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


def ngc_secrets(api_key, namespace, api_secret, pull_secret, download=False):
    """The nvcr.io pull secret ($oauthtoken) made of the NGC API key, and, only when NIM may download
    (download), the key as an Opaque Secret (NGC_API_KEY) for the pods."""
    labels = labels_for("nim", "credentials")
    pull = [registry_secret(pull_secret, namespace, "nvcr.io", "$oauthtoken", api_key, labels)]
    return ([secret(api_secret, namespace, labels, {"NGC_API_KEY": api_key})] if download else []) + pull


def model_registry_manifests(nodes, params):
    """The serving namespace, the StorageClass and, on every GPU node, one local PersistentVolume of its model
    store per GPU unit (physical GPUs times time-slicing replicas): a node never runs more model server pods
    than it has GPU units, and each pod's claim (store_claim_template) binds one of them on its node.

    nodes: {node: {"gpus", "replicas"}} (gpu_capacity) or a list of node names (one GPU each).
    params: storage_class, path, size, namespace, pv_prefix.
    """
    if not isinstance(nodes, dict):
        nodes = {node: {"gpus": 1, "replicas": 1} for node in nodes}
    out = [
        # Every pod of the serving namespace meets "restricted" (serving.harden): enforce it.
        namespace(params["namespace"], "restricted"),
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": params["storage_class"], "labels": labels_for("model-registry", "storage")},
            "provisioner": "kubernetes.io/no-provisioner",
            "volumeBindingMode": "WaitForFirstConsumer",
            "reclaimPolicy": "Retain",
        },
    ]
    for node in sorted(nodes):  # stable file content whatever order the groups came in
        units = max(int(nodes[node].get("gpus", 1)) * int(nodes[node].get("replicas", 1)), 1)
        for slot in range(1, units + 1):
            out.append(
                {
                    "apiVersion": "v1",
                    "kind": "PersistentVolume",
                    "metadata": {
                        "name": dns_name("%s-%s-%d" % (params["pv_prefix"], node, slot)),
                        "labels": dict(labels_for("model-registry", "storage"), **{"aiinfra.io/node": dns_name(node)}),
                    },
                    "spec": {
                        "capacity": {"storage": params["size"]},
                        "accessModes": ["ReadWriteOnce"],
                        "persistentVolumeReclaimPolicy": "Retain",
                        "storageClassName": params["storage_class"],
                        "local": {"path": params["path"]},
                        "nodeAffinity": {
                            "required": {
                                "nodeSelectorTerms": [
                                    {
                                        "matchExpressions": [
                                            {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}
                                        ]
                                    }
                                ]
                            }
                        },
                    },
                }
            )
    return out


def gpu_capacity(nodes, classes=None, default_class=""):
    """GPU capacity per node, with time-slicing replicas from the node's class.

    nodes: {node: {"gpus": int, "class": class name or empty}}; classes: {class: replicas per GPU}.
    Returns ({node: {"gpus": physical GPUs, "replicas": replicas per GPU}}, problems).
    """
    classes = classes or {}
    problems = []
    capacity = {}
    for node, info in sorted(nodes.items()):
        wanted = info.get("class") or default_class
        if wanted and wanted not in classes:
            problems.append(
                "%s: GPU class %r is not in gpu_operator_time_slicing_classes (%s): add it or set aiinfra_gpu_class "
                "to one of them" % (node, wanted, ", ".join(sorted(classes)) or "none defined")
            )
        capacity[node] = {"gpus": int(info.get("gpus", 1)), "replicas": int(classes.get(wanted, 1) if wanted else 1)}
        memory = info.get("memory_mib")
        if memory:
            if isinstance(memory, bool) or not str(memory).isdigit():
                problems.append(
                    "%s: aiinfra_gpu_memory_mib is %r: give the memory of one GPU in MiB as nvidia-smi shows it "
                    "(e.g. 23034 for an L4, 81920 for an A100 80GB)" % (node, memory)
                )
            else:
                capacity[node]["memory_mib"] = int(memory)
    return capacity, problems


def sharing_problems(work, capacity):
    """A multi-GPU workload needs whole GPUs on one node: time-sliced nodes refuse requests for more than one
    slice (failRequestsGreaterThanOne), so only nodes without time-slicing can hold it."""
    if work["gpus"] < 2 or all(c["replicas"] == 1 for c in capacity.values()):
        return []
    whole = max([c["gpus"] for c in capacity.values() if c["replicas"] == 1] + [0])
    if work["gpus"] <= whole:
        return []
    return [
        "%s: %s %d needs %d whole GPUs on one node, but time-sliced nodes give a pod one slice at most "
        "(failRequestsGreaterThanOne) and the nodes without time-slicing have %s: give a node with enough GPUs a "
        "class of 1 replica, or lower %s"
        % (
            work["name"],
            work["what"],
            work["gpus"],
            work["gpus"],
            "at most %d GPU(s)" % whole if whole else "none",
            work["what"],
        )
    ]


def memory_problems(work, capacity, weights_gib):
    """vLLM's memory share of a GPU, and whether the weights fit in it with room for the KV cache."""
    shared = [c["replicas"] for c in capacity.values()]
    share = gpu_share(work["gpus"], shared)
    explicit = work["model"].get("gpu_memory_utilization")
    problems = []
    try:
        utilization = memory_utilization(work["model"], share)
    except (TypeError, ValueError):
        return ["%s: gpu_memory_utilization %r is not a number between 0 and 1" % (work["name"], explicit)]
    if not 0 < utilization <= 1:
        return ["%s: gpu_memory_utilization %r is not a number between 0 and 1" % (work["name"], explicit)]
    if explicit is not None and share > 1 and utilization * share > 1:
        problems.append(
            "%s: gpu_memory_utilization %s on a GPU time-sliced %d ways asks for %d%% of its memory: the second "
            "pod on the GPU fails at start; set it to at most %s or leave it out (it is then %s)"
            % (
                work["name"],
                explicit,
                share,
                round(utilization * share * 100),
                math.floor(100 / share) / 100,
                memory_utilization({}, share),
            )
        )
    candidates = {
        n: c for n, c in capacity.items() if c["gpus"] >= work["gpus"] and (work["gpus"] == 1 or c["replicas"] == 1)
    }
    memories = {n: c["memory_mib"] for n, c in candidates.items() if c.get("memory_mib")}
    if weights_gib is None or not memories:
        return problems
    try:
        weights_gib = float(weights_gib)
    except (TypeError, ValueError):
        return [*problems, "%s: weights_gib %r is not a number of GiB" % (work["name"], weights_gib)]
    node = min(memories, key=lambda n: (memories[n], n))
    room = memories[node] / 1024.0 * utilization
    per_gpu = float(weights_gib) / work["gpus"]
    if per_gpu > room * (1 - KV_CACHE_ROOM):
        problems.append(
            "%s: %.1f GiB of weights over %d GPU(s) is %.1f GiB per GPU, more than its share of %s can hold with "
            "%d%% left for the KV cache (%d MiB x gpu_memory_utilization %s = %.1f GiB): raise "
            "tensor_parallel_size, serve a smaller or quantised model, or use GPUs with more memory"
            % (
                work["name"],
                float(weights_gib),
                work["gpus"],
                per_gpu,
                node,
                KV_CACHE_ROOM * 100,
                memories[node],
                utilization,
                room,
            )
        )
    return problems


def plan_problems(models, capacity, default_image, nim_models=(), store_paths=None, weights=None):
    """Reasons a serving plan (vLLM and NIM models) cannot work, before anything is touched.

    capacity: {node: {"gpus", "replicas", optional "memory_mib" (per GPU)}} from gpu_capacity (a bare GPU
    count per node also works); store_paths: model paths present in the store (None when unknown);
    weights: {model path: GiB of weights} measured in the seed directory (a model's own weights_gib wins).
    """
    weights = weights or {}
    capacity = {n: c if isinstance(c, dict) else {"gpus": int(c), "replicas": 1} for n, c in capacity.items()}
    workloads = []
    for model in models:
        workloads.append(
            {
                "name": model.get("served_name", "?"),
                "gpus": int(model.get("tensor_parallel_size", 1)),
                "what": "tensor_parallel_size",
                "replicas": int(model.get("replicas", 1)),
                "max": int(model.get("replicas", 1)),
                "image": model.get("image", default_image),
                "path": model.get("path"),
                "model": model,
            }
        )
    for model in nim_models:
        replicas = int(model.get("replicas", 2))
        workloads.append(
            {
                "name": model.get("served_name", "?"),
                "gpus": int(model.get("gpus", 1)),
                "what": "gpus",
                "replicas": replicas,
                "max": max(int(model.get("max_replicas", replicas)), replicas),
                "image": model.get("image"),
                "path": None,
                "nim": True,
            }
        )
    if not capacity:
        return ["no GPU node in the inventory: the model servers need the GPU group"] if workloads else []
    problems = []
    biggest = max(c["gpus"] for c in capacity.values())
    physical = sum(c["gpus"] for c in capacity.values())
    total = sum(c["gpus"] * c["replicas"] for c in capacity.values())
    wanted = 0
    whole_wanted = 0
    names = set()
    for work in workloads:
        name = work["name"]
        problems.extend(sharing_problems(work, capacity))
        if work["gpus"] > 1:
            whole_wanted += work["gpus"] * work["replicas"]
        if "model" in work:
            declared = work["model"].get("weights_gib")
            problems.extend(
                memory_problems(work, capacity, declared if declared is not None else weights.get(work["path"]))
            )
        if name in names:
            problems.append("%s: served_name is used twice; each model needs its own" % name)
        names.add(name)
        if work["gpus"] > biggest:
            problems.append(
                "%s: %s %d is larger than the GPUs of any node (at most %d): "
                "lower it or add a node with more GPUs" % (name, work["what"], work["gpus"], biggest)
            )
        if work.get("nim") and work["replicas"] < 2:
            problems.append("%s: a NIM backend needs at least 2 replicas to survive a pod or node loss" % name)
        if work.get("nim") and work["gpus"] * work["max"] > total:
            problems.append(
                "%s: max_replicas %d x %d GPU(s) is more than the cluster's %d: the autoscaler would create pods "
                "that never schedule; lower max_replicas" % (name, work["max"], work["gpus"], total)
            )
        wanted += work["gpus"] * work["replicas"]
        if not image_pinned(work["image"]):
            problems.append(
                "%s: image %r is not pinned: use an explicit version tag or a digest" % (name, work["image"])
            )
        if work["path"] is not None and (
            not work["path"] or work["path"].startswith("/") or ".." in work["path"].split("/")
        ):
            problems.append(
                "%s: model path %r must be relative to the model store, without '..'" % (name, work["path"])
            )
        elif store_paths is not None and work["path"] is not None and work["path"] not in store_paths:
            problems.append(
                "%s: model path %r is not in the model store (%s): seed it first"
                % (name, work["path"], ", ".join(sorted(store_paths)) or "empty")
            )
    whole = sum(c["gpus"] for c in capacity.values() if c["replicas"] == 1)
    sliced = sum(c["gpus"] * c["replicas"] for c in capacity.values() if c["replicas"] > 1)
    if whole_wanted and sliced and wanted - whole_wanted > sliced:
        problems.append(
            "the one-GPU models need %d GPU slices but the time-sliced nodes have %d: with multi-GPU models in the "
            "plan, one-GPU pods keep to the time-sliced nodes (the whole GPUs are for the multi-GPU pods); add "
            "slices or nodes to a shared class, or lower replicas" % (wanted - whole_wanted, sliced)
        )
    if whole_wanted > whole and whole < physical:
        problems.append(
            "the multi-GPU models need %d whole GPUs in all but the nodes without time-slicing have %d: move GPUs to "
            "a class of 1 replica, or lower tensor_parallel_size or replicas" % (whole_wanted, whole)
        )
    if wanted > total:
        problems.append(
            "the models request %d GPUs in all but the cluster has %d (%d GPU(s) with time-slicing): "
            "remove models or replicas" % (wanted, total, physical)
        )
    return problems
