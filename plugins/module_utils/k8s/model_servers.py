# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The GPU workloads of the serving stack as plain data: one builder makes every model server (vLLM and NIM),
so placement, GPU limits, tolerations, probes, graceful shutdown and security settings are written once; the
model store's local volumes and the NGC secrets."""

from ansible_collections.aiinfra.k3s.plugins.module_utils.k8s import json_logging
from ansible_collections.aiinfra.k3s.plugins.module_utils.k8s.model_store import store_volume
from ansible_collections.aiinfra.k3s.plugins.module_utils.k8s.objects import (
    RUN_AS_USER,
    SERVED_NAME,
    autoscaler,
    disruption_budget,
    dns_name,
    harden,
    http_probe,
    labels_for,
    registry_secret,
    secret,
    spread,
)
from ansible_collections.aiinfra.k3s.plugins.module_utils.plan.models import PRESTOP_SECONDS, drain_timing, filled

MODEL_WORKLOAD_KIND = "Deployment"
# Taints the node lifecycle controller puts on a node that stopped answering (unreachable) or reports NotReady.
NODE_LOST_TAINTS = ("node.kubernetes.io/unreachable", "node.kubernetes.io/not-ready")
# Seconds a model server stays bound to a node that stopped answering before it is evicted and replaced on another
# GPU node (Kubernetes' default toleration is 300 s). The controller marks the node unreachable after its
# node-monitor-grace-period (50 s in Kubernetes 1.36) first.
NODE_LOST_SECONDS = 30
# GPU Feature Discovery's node label: time-slicing replicas of each GPU of the node (the lab's kwok nodes carry it
# too). Pods asking for several GPUs keep off nodes whose GPUs are sliced: the device plugin runs with
# failRequestsGreaterThanOne, so a request for two slices fails rather than landing on one physical GPU.
SHARED_LABEL = "nvidia.com/gpu.replicas"
# The collection's own node labels of a GPU node, set by the k3s roles from its host variables aiinfra_gpu_type (a
# free name such as H100-80GB) and aiinfra_node_group (an operator's pool of nodes): a model's placement selects on
# them (site_plan.placement_plan), without waiting for GPU Feature Discovery.
GPU_TYPE_LABEL = "aiinfra.io/gpu-type"
NODE_GROUP_LABEL = "aiinfra.io/node-group"
HOSTNAME_KEY = "kubernetes.io/hostname"
CACHE = "/tmp/.cache"


def runtime_env(user, hub_cache=True):
    """The environment a model server needs to run as a uid with no passwd entry and only /tmp writable (read-only
    root, emptyDir /tmp, HOME=/tmp). getpass.getuser() reads LOGNAME and USER before the passwd database, and vLLM
    0.34's FlashAttention-4 (CuTe DSL) cache path and torch's vendored quack kernels call it with no fallback, so
    both name a user. Every cache vLLM and its libraries write at start or at the first kernel build is put under
    /tmp by its own variable (HOME alone misses the ones that default to /tmp/<user>/...). No usage reports: egress
    is denied anyway. hub_cache: also HF_HOME (vLLM; NIM keeps its own cache layout)."""
    env = {
        "USER": user,
        "LOGNAME": user,
        "XDG_CACHE_HOME": CACHE,
        "XDG_CONFIG_HOME": "/tmp/.config",
        "VLLM_CACHE_ROOT": CACHE + "/vllm",
        "TORCHINDUCTOR_CACHE_DIR": CACHE + "/torchinductor",
        "TRITON_HOME": "/tmp",
        "TRITON_CACHE_DIR": CACHE + "/triton",
        "FLASH_ATTENTION_CUTE_DSL_CACHE_DIR": CACHE + "/flash-attention-cute-dsl",
        "QUACK_CACHE_DIR": CACHE + "/quack",
        "NUMBA_CACHE_DIR": CACHE + "/numba",
        "FLASHINFER_WORKSPACE_BASE": "/tmp",
        "CUDA_CACHE_PATH": CACHE + "/nv/ComputeCache",
        "VLLM_NO_USAGE_STATS": "1",
        "DO_NOT_TRACK": "1",
    }
    if hub_cache:
        env["HF_HOME"] = CACHE + "/huggingface"
    return env


def node_lost_tolerations(seconds):
    """Tolerations that replace Kubernetes' default 300 s on a node that stopped answering: the pod is evicted
    `seconds` after the node is marked unreachable or NotReady, so its Deployment starts a replacement on another
    node."""
    return [
        {"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": int(seconds)}
        for key in NODE_LOST_TAINTS
    ]


def gpu_workload(spec, site):
    """Deployment + Service for a GPU model server.

    A Deployment, not a StatefulSet: the servers keep no state of their own (the weights are the node's read-only
    store), and when a node stops answering, a StatefulSet starts no second copy of a replica until the old pod is
    confirmed gone, which a dead node never confirms. The ReplicaSet starts the replacement as soon as the old pod
    is evicted (node_lost_tolerations). Each pod mounts the store of the node it runs on through a claim of its
    own (store_volume); one shared ReadWriteOnce claim would pin every replica to a single node.

    spec: name, component, served_name, image, args, env (dict), port, gpus, replicas, resources
    (requests/limits without GPUs), startup_timeout (seconds a model may take to load), volumes/volume_mounts,
    metrics_path, termination_grace_period, store ({storage_class, size}: the claim template of the
    volume named "models"); optional health ({startup, ready, live} paths, default /health),
    env_secrets ({ENV: [secret, key]}), image_pull_secrets (names), spread_keys (topology keys the replicas
    are spread over), spread (hard: the spread over nodes is required, DoNotSchedule; else ScheduleAnyway),
    node_affinity (the site plan's matchExpressions of the required node affinity; left out, it follows from
    site's shared_replicas and reserve_whole), autoscaled (an autoscaler owns the replica count).
    site: namespace, gpu_node_selector (dict), gpu_toleration_key, runtime_class (or empty), node_lost_seconds
    (NODE_LOST_SECONDS when absent).
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
    grace = int(drain_timing(spec)["termination_grace_period"])
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
        "startupProbe": http_probe(health["startup"], "http", 10, startup_failures),
        "readinessProbe": http_probe(health["ready"], "http", 5, 3),
        "livenessProbe": http_probe(health["live"], "http", 15, 4),
        # Out of the Service's endpoints first (no new request arrives after the sleep), then SIGTERM: the server
        # finishes what is in flight within its shutdown timeout (models.drain_timing).
        "lifecycle": {"preStop": {"exec": {"command": ["/bin/sh", "-c", "sleep %d" % PRESTOP_SECONDS]}}},
        "volumeMounts": list(spec.get("volume_mounts") or []),
    }
    pod_spec = {
        "nodeSelector": dict(site["gpu_node_selector"]),
        "tolerations": [
            {"key": site["gpu_toleration_key"], "operator": "Exists", "effect": "NoSchedule"},
            *node_lost_tolerations(site.get("node_lost_seconds", NODE_LOST_SECONDS)),
        ],
        "terminationGracePeriodSeconds": grace,
        "enableServiceLinks": False,
        "containers": [container],
        "volumes": [store_volume(spec["store"], labels), *(spec.get("volumes") or [])],
    }
    if site.get("runtime_class"):
        pod_spec["runtimeClassName"] = site["runtime_class"]
    harden(pod_spec, container, spec.get("run_as_user", RUN_AS_USER))
    if spec.get("node_affinity") is not None:
        # The site plan's decision (site_plan.placement_plan): time-slicing and the model's placement in one term.
        if spec["node_affinity"]:
            pod_spec["affinity"] = node_affinity(spec["node_affinity"])
    elif gpus > 1 and site.get("shared_replicas"):
        pod_spec["affinity"] = whole_gpus_affinity(site["shared_replicas"])
    elif site.get("shared_replicas") and site.get("reserve_whole"):
        # Multi-GPU pods need the unsliced nodes: one-GPU pods keep to the sliced ones, or they could fill the
        # whole GPUs first (the scheduler places pods one at a time) and leave a tensor-parallel pod nowhere to go.
        pod_spec["affinity"] = whole_gpus_affinity(site["shared_replicas"], "In")
    if spec.get("image_pull_secrets"):
        pod_spec["imagePullSecrets"] = [{"name": n} for n in spec["image_pull_secrets"]]
    if spec.get("spread_keys"):
        pod_spec["topologySpreadConstraints"] = spread(spec["spread_keys"], selector)
        if spec.get("spread") == "hard":
            pod_spec["topologySpreadConstraints"] = [
                hard_spread(c) if c["topologyKey"] == HOSTNAME_KEY else c for c in pod_spec["topologySpreadConstraints"]
            ]
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
            # Rollouts replace one pod at a time, the old one first, so a rollout never needs a spare GPU.
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}},
            "selector": {"matchLabels": selector},
            "template": {"metadata": {"labels": labels, "annotations": annotations}, "spec": pod_spec},
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
            # Which model this Service serves (the gateway routes by the site plan's routes).
            "annotations": {SERVED_NAME: spec.get("served_name", name)},
        },
        "spec": {
            "type": "ClusterIP",
            "selector": selector,
            "ports": [{"name": "http", "port": port, "targetPort": "http", "protocol": "TCP"}],
        },
    }
    return [deployment, service]


def hard_spread(constraint):
    """A spread constraint the scheduler must keep (DoNotSchedule), over the nodes the pod may use and can be
    scheduled on now: nodeTaintsPolicy Honor leaves out a node that is unreachable, NotReady or cordoned (its taints
    are not tolerated for scheduling), so the replacement of a lost or drained node's replica still finds a node."""
    return dict(constraint, whenUnsatisfiable="DoNotSchedule", nodeAffinityPolicy="Honor", nodeTaintsPolicy="Honor")


def node_affinity(expressions):
    """A required node affinity of one term: the node must match every expression."""
    term = {"matchExpressions": [dict(e, values=list(e["values"])) for e in expressions]}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}


def whole_gpus_affinity(shared_replicas, operator="NotIn"):
    """Node affinity keeping a pod off (NotIn: multi-GPU pods) or on (In: one-GPU pods, when multi-GPU pods need
    the whole GPUs) nodes whose GPUs are time-sliced. With NotIn, a node without the label (before GPU Feature
    Discovery ran) is not excluded."""
    values = sorted({str(int(r)) for r in shared_replicas if int(r) > 1}, key=int)
    term = {"matchExpressions": [{"key": SHARED_LABEL, "operator": operator, "values": values}]}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}


def vllm_args(model, store_mount):
    """vLLM OpenAI server arguments for one model of the site plan served from the local model store (its
    memory_utilization is the plan's: memory_utilization() of its share of a GPU)."""
    args = [
        "--model",
        "%s/%s" % (store_mount.rstrip("/"), model["path"].strip("/")),
        "--served-model-name",
        model["served_name"],
        "--tensor-parallel-size",
        str(model["tensor_parallel_size"]),
        "--max-model-len",
        str(model.get("max_model_len", 8192)),
        "--gpu-memory-utilization",
        str(model["memory_utilization"]),
        "--port",
        str(model["port"]),
        # Finish the requests in flight on SIGTERM (vLLM's default, 0, aborts them) within the pod's grace period.
        "--shutdown-timeout",
        str(drain_timing(model)["shutdown_timeout"]),
    ]
    if model.get("prefix_caching", True):
        args.append("--enable-prefix-caching")
    return args + [str(a) for a in model.get("extra_args") or []]


LOG_DIR = "/etc/aiinfra/logging"
# vLLM 0.34 reads its API key from this variable (vllm/envs.py) when --api-key is not given.
VLLM_KEY_ENV = "VLLM_API_KEY"


def logging_configmap(name, namespace, loggers, level):
    """ConfigMap with the JSON log formatter and the dictConfig that uses it (see json_logging)."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "labels": labels_for(name, "logging")},
        "data": json_logging.logging_files(loggers, level),
    }


def placement_spec(model):
    """The site plan's placement of a model (site_plan.placement_plan) as gpu_workload spec keys: its required node
    affinity and whether its replicas must be spread over nodes. A model not from the plan gets neither."""
    out = {}
    if isinstance(model.get("node_affinity"), list):
        out["node_affinity"] = model["node_affinity"]
    if model.get("spread"):
        out["spread"] = model["spread"]
    return out


def vllm_manifests(models, params, site):
    """Deployment + Service per vLLM model of the site plan (+ PodDisruptionBudget with several replicas), and the
    shared JSON-logging ConfigMap. site: namespace and placement; params (the vllm role's): image, store_mount,
    store ({storage_class, size}), shm_size, resources, log_level; model_auth (the site plan's: when enabled, each
    server reads the key only the gateway holds from its Secret as VLLM_API_KEY and refuses /v1, /v2, /inference
    and /cohere requests without it; /health and /metrics stay open for the probes and Prometheus)."""
    if not models:
        return []
    log_map = "vllm-logging"
    auth = params.get("model_auth") or {}
    key_env = {VLLM_KEY_ENV: [auth["secret"], auth["key"]]} if auth.get("enabled") else {}
    out = [
        logging_configmap(
            log_map, site["namespace"], ["vllm", "uvicorn", "uvicorn.access"], params.get("log_level", "INFO")
        )
    ]
    for model in filled("vllm", models, params["image"]):
        tp = model["gpus"]
        spec = {
            "name": "vllm-%s" % model["served_name"],
            "served_name": model["served_name"],
            "component": "vllm",
            "image": model["image"],
            "args": vllm_args(model, params["store_mount"]),
            "env": {
                **runtime_env("vllm"),
                "HF_HUB_OFFLINE": "1",
                "TRANSFORMERS_OFFLINE": "1",
                "VLLM_CONFIGURE_LOGGING": "1",
                "VLLM_LOGGING_CONFIG_PATH": LOG_DIR + "/logging.json",
                "PYTHONPATH": LOG_DIR,
                **(model.get("env") or {}),
            },
            "env_secrets": key_env,
            "port": model["port"],
            "gpus": tp,
            "replicas": model["replicas"],
            "autoscaled": model.get("autoscaled", False),
            "resources": model.get("resources") or params["resources"],
            "startup_timeout": model.get("startup_timeout", 1800),
            "termination_grace_period": model["termination_grace_period"],
            "volume_mounts": [
                {"name": "models", "mountPath": params["store_mount"], "readOnly": True},
                {"name": "dshm", "mountPath": "/dev/shm"},
                {"name": "logging", "mountPath": LOG_DIR, "readOnly": True},
            ],
            "volumes": [
                {
                    "name": "dshm",
                    "emptyDir": {"medium": "Memory", "sizeLimit": model.get("shm_size") or params["shm_size"]},
                },
                {"name": "logging", "configMap": {"name": log_map}},
            ],
            "store": params["store"],
            "run_as_user": params.get("run_as_user", RUN_AS_USER),
            # Replicas on different GPU nodes, so that one node's loss leaves the others: required where the site
            # plan found a node for each (spread hard), preferred otherwise.
            "spread_keys": [HOSTNAME_KEY],
            **placement_spec(model),
        }
        out.extend(gpu_workload(spec, site))
        if int(model["replicas"]) > 1:
            name = dns_name(spec["name"])
            out.append(disruption_budget(name, site["namespace"], labels_for(name, "vllm")))
    return out


def nim_manifests(models, params, site):
    """NVIDIA NIM backends on the same GPU workload builder as vLLM, shaped for the NIM notes: at least two
    replicas spread over nodes and zones, a HorizontalPodAutoscaler, a PodDisruptionBudget, the NGC key as a
    Secret (environment) and as the image pull secret, NIM's own health endpoints.

    site: namespace and placement; params (the nim role's): store_mount, store ({storage_class, size}), shm_size,
    resources, ngc_secret, pull_secret, max_replicas, metric, store_read_only.
    """
    out = []
    for model in filled("nim", models):
        name = dns_name("nim-%s" % model["served_name"])
        replicas = int(model["replicas"])
        spec = {
            "name": name,
            "served_name": model["served_name"],
            "component": "nim",
            "image": model["image"],
            "args": [],
            "env": {
                **runtime_env("nim", hub_cache=False),
                "NIM_SERVED_MODEL_NAME": model["served_name"],
                "NIM_CACHE_PATH": params["store_mount"],
                "NIM_JSONL_LOGGING": "1",
                "NIM_LOG_LEVEL": "INFO",
                "NIM_SERVER_PORT": str(model["port"]),
                "HF_HUB_OFFLINE": "1",
                **(model.get("env") or {}),
                # NIM 2.x hands these to its vLLM engine: finish the requests in flight on SIGTERM within the pod's
                # grace period, as the vLLM servers do (after the model's own passthrough arguments, if any).
                "NIM_PASSTHROUGH_ARGS": " ".join(
                    a
                    for a in (
                        str((model.get("env") or {}).get("NIM_PASSTHROUGH_ARGS", "")).strip(),
                        "--shutdown-timeout %d" % int(model["shutdown_timeout"]),
                    )
                    if a
                ),
            },
            # NVIDIA's air-gap mode: the cache is filled beforehand and NIM gets no NGC key unless it may download.
            "env_secrets": ({"NGC_API_KEY": [params["ngc_secret"], "NGC_API_KEY"]} if params.get("download") else {}),
            "image_pull_secrets": [params["pull_secret"]],
            "port": model["port"],
            "gpus": model["gpus"],
            "replicas": replicas,
            "autoscaled": True,
            "resources": model.get("resources") or params["resources"],
            "startup_timeout": model.get("startup_timeout", 1800),
            "termination_grace_period": model["termination_grace_period"],
            "health": {"startup": "/v1/health/ready", "ready": "/v1/health/ready", "live": "/v1/health/live"},
            # NIM for LLMs serves its Prometheus metrics under /v1 like its health endpoints.
            "metrics_path": "/v1/metrics",
            "spread_keys": [HOSTNAME_KEY, "topology.kubernetes.io/zone"],
            "volume_mounts": [
                {"name": "models", "mountPath": params["store_mount"], "readOnly": params["store_read_only"]},
                {"name": "dshm", "mountPath": "/dev/shm"},
            ],
            "volumes": [
                {
                    "name": "dshm",
                    "emptyDir": {"medium": "Memory", "sizeLimit": model.get("shm_size") or params["shm_size"]},
                },
            ],
            "store": params["store"],
            "run_as_user": params.get("run_as_user", RUN_AS_USER),
            **placement_spec(model),
        }
        out.extend(gpu_workload(spec, site))
        labels = labels_for(name, "nim")
        out.append(disruption_budget(name, site["namespace"], labels))
        maximum = int(model.get("max_replicas", params["max_replicas"]))
        out.append(
            autoscaler(
                name,
                site["namespace"],
                labels,
                replicas,
                max(maximum, replicas),
                params["metric"],
                MODEL_WORKLOAD_KIND,
            )
        )
    return out


def ngc_secrets(api_key, namespace, api_secret, pull_secret, download=False):
    """The nvcr.io pull secret ($oauthtoken) made of the NGC API key, and, only when NIM may download
    (download), the key as an Opaque Secret (NGC_API_KEY) for the pods."""
    labels = labels_for("nim", "credentials")
    pull = [registry_secret(pull_secret, namespace, "nvcr.io", "$oauthtoken", api_key, labels)]
    return ([secret(api_secret, namespace, labels, {"NGC_API_KEY": api_key})] if download else []) + pull
