# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kubernetes manifests of the serving stack, built as plain data.

One builder makes every GPU workload (vLLM today, NIM on the same path), so placement, GPU limits,
tolerations, probes, graceful shutdown and security settings are written once.
"""

import re

LABEL_PART = re.compile(r"[^a-z0-9-]+")
TAG = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")


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


def gpu_workload(spec, site):
    """Deployment + Service for a GPU model server.

    spec: name, component, image, args, env (dict), port, gpus, replicas, resources (requests/limits without
    GPUs), startup_timeout (seconds a model may take to load), volumes/volume_mounts, metrics_path,
    termination_grace_period.
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
    container = {
        "name": spec["component"],
        "image": spec["image"],
        "imagePullPolicy": "IfNotPresent",
        "args": [str(a) for a in spec["args"]],
        "env": [{"name": k, "value": str(v)} for k, v in sorted((spec.get("env") or {}).items())],
        "ports": [{"name": "http", "containerPort": port, "protocol": "TCP"}],
        "resources": resources,
        # Model loads take minutes: the startup probe holds liveness off until the server answers once.
        "startupProbe": _probe("/health", "http", 10, startup_failures),
        "readinessProbe": _probe("/health", "http", 5, 3),
        "livenessProbe": _probe("/health", "http", 15, 4),
        # Stop taking traffic first, let in-flight requests finish, then SIGTERM.
        "lifecycle": {"preStop": {"exec": {"command": ["/bin/sh", "-c", "sleep 15"]}}},
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"},
        },
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
    annotations = {
        "prometheus.io/scrape": "true",
        "prometheus.io/port": str(port),
        "prometheus.io/path": spec.get("metrics_path", "/metrics"),
    }
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": site["namespace"], "labels": labels},
        "spec": {
            "replicas": int(spec.get("replicas", 1)),
            "revisionHistoryLimit": 3,
            "selector": {"matchLabels": selector},
            # Recreate: a rolling update would need a spare GPU for the surge pod and deadlocks when every
            # GPU is in use; the old pod goes first, then the new one takes its GPUs.
            "strategy": {"type": "Recreate"},
            "template": {"metadata": {"labels": labels, "annotations": annotations}, "spec": pod_spec},
        },
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": site["namespace"], "labels": labels},
        "spec": {
            "type": "ClusterIP",
            "selector": selector,
            "ports": [{"name": "http", "port": port, "targetPort": "http", "protocol": "TCP"}],
        },
    }
    return [deployment, service]


def vllm_args(model, store_mount):
    """vLLM OpenAI server arguments for one model served from the local model store."""
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
        str(model.get("gpu_memory_utilization", 0.9)),
        "--port",
        str(model.get("port", 8000)),
    ]
    if model.get("prefix_caching", True):
        args.append("--enable-prefix-caching")
    return args + [str(a) for a in model.get("extra_args") or []]


def vllm_manifests(models, site, defaults):
    """Deployment + Service per vLLM model. defaults: image, store_mount, claim_name, shm_size, resources."""
    out = []
    for model in models:
        tp = int(model.get("tensor_parallel_size", 1))
        spec = {
            "name": "vllm-%s" % model["served_name"],
            "component": "vllm",
            "image": model.get("image", defaults["image"]),
            "args": vllm_args(model, defaults["store_mount"]),
            "env": dict(
                {
                    "HF_HUB_OFFLINE": "1",
                    "TRANSFORMERS_OFFLINE": "1",
                    "LOG_FORMAT": "json",
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
            ],
            "volumes": [
                {"name": "models", "persistentVolumeClaim": {"claimName": defaults["claim_name"], "readOnly": True}},
                {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": defaults["shm_size"]}},
            ],
        }
        out.extend(gpu_workload(spec, site))
    return out


def model_registry_manifests(nodes, params):
    """The serving namespace, the StorageClass, one local PersistentVolume per GPU node pinned to it, and the claim.

    params: storage_class, path, size, namespace, claim_name, pv_prefix.
    """
    out = [
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {
                "name": params["namespace"],
                "labels": {
                    # Model servers run as root in their images and mount a memory-backed /dev/shm: baseline fits.
                    "pod-security.kubernetes.io/enforce": "baseline",
                    "pod-security.kubernetes.io/warn": "restricted",
                    "app.kubernetes.io/managed-by": "aiinfra.k3s",
                },
            },
        },
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
        out.append(
            {
                "apiVersion": "v1",
                "kind": "PersistentVolume",
                "metadata": {
                    "name": dns_name("%s-%s" % (params["pv_prefix"], node)),
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
    out.append(
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {
                "name": params["claim_name"],
                "namespace": params["namespace"],
                "labels": labels_for("model-registry", "storage"),
            },
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": params["storage_class"],
                "resources": {"requests": {"storage": params["size"]}},
            },
        }
    )
    return out


def plan_problems(models, gpu_nodes, default_image, replicas_per_gpu=1, store_paths=None):
    """Reasons a vLLM plan cannot work, before anything is touched.

    gpu_nodes: {node: GPUs}; replicas_per_gpu: time-slicing replicas; store_paths: model paths present in
    the store (None when unknown).
    """
    problems = []
    if not gpu_nodes:
        return ["no GPU node in the inventory: vLLM models need the GPU group"] if models else []
    biggest = max(gpu_nodes.values())
    total = sum(gpu_nodes.values()) * replicas_per_gpu
    wanted = 0
    names = set()
    for model in models:
        name = model.get("served_name", "?")
        if name in names:
            problems.append("%s: served_name is used twice; each model needs its own" % name)
        names.add(name)
        tp = int(model.get("tensor_parallel_size", 1))
        if tp > biggest:
            problems.append(
                "%s: tensor_parallel_size %d is larger than the GPUs of any node (at most %d): "
                "lower it or add a node with more GPUs" % (name, tp, biggest)
            )
        wanted += tp * int(model.get("replicas", 1))
        image = model.get("image", default_image)
        if not image_pinned(image):
            problems.append("%s: image %r is not pinned: use an explicit version tag or a digest" % (name, image))
        if store_paths is not None and model.get("path") not in store_paths:
            problems.append(
                "%s: model path %r is not in the model store (%s): seed it first"
                % (name, model.get("path"), ", ".join(sorted(store_paths)) or "empty")
            )
    if wanted > total:
        problems.append(
            "the models request %d GPUs in all but the cluster has %d (%d GPU(s) x %d time-slicing "
            "replica(s)): remove models or replicas" % (wanted, total, sum(gpu_nodes.values()), replicas_per_gpu)
        )
    return problems
