# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The LiteLLM gateway: its routing table is read from the model-server Services that were rendered, so it
names exactly the models and Services the site deploys."""

import hashlib
import hmac
import inspect
import json

from ansible_collections.aiinfra.k3s.plugins.module_utils.k8s import consumer_auth
from ansible_collections.aiinfra.k3s.plugins.module_utils.k8s.objects import (
    RUN_AS_USER,
    disruption_budget,
    dump_yaml,
    harden,
    labels_for,
    plain,
    secret,
    spread,
)
from ansible_collections.aiinfra.k3s.plugins.module_utils.plan.consumers import consumer_records

PLACEMENTS = ("cpu", "gpu", "any")
WEAK_WORDS = ("1234", "change", "example", "password", "secret", "test", "default", "master", "litellm")
CONFIG_DIR = "/etc/litellm"
CONFIG_FILE = CONFIG_DIR + "/config.yaml"
# The auth hook (consumer_auth.py) sits next to config.yaml, where LiteLLM loads general_settings.custom_auth from;
# the consumers' key hashes are a Secret mounted beside it.
HOOK_MODULE = "aiinfra_auth"
CONSUMERS_DIR = "/etc/litellm-consumers"
CONSUMERS_FILE = CONSUMERS_DIR + "/" + consumer_auth.CONSUMERS_NAME
REDIS_UID = 999  # the redis user of the official image
# How a gateway pod stops: out of the Service's endpoints, a preStop sleep while they settle, then SIGTERM, after
# which LiteLLM (uvicorn) finishes the requests in flight for GRACEFUL_SHUTDOWN_TIMEOUT seconds (LiteLLM 1.110's
# default is 30) and exits; the grace period holds the three with a margin to exit.
GRACE_SECONDS = 60
PRESTOP_SECONDS = 10
SHUTDOWN_SECONDS = 35
# The model servers' API key (issue 28, item 5): derived from the master key with this context, so that a new
# master key rotates it and the site needs no further secret (model_api_key).
MODEL_KEY_CONTEXT = b"aiinfra.k3s model servers"
# The components whose servers require the key: vLLM reads VLLM_API_KEY. NIM documents no API key of its own (and
# serves its health and metrics under /v1, which vLLM's key guards): NIM keeps to the network policy alone.
KEYED_COMPONENTS = ("vllm",)


def gateway_config(routes, settings):
    """LiteLLM proxy config.yaml as data. The master key is read from the environment (a Secret)."""
    models = [r["model"] for r in routes]
    config = {
        "model_list": [
            {
                "model_name": r["model"],
                "litellm_params": {
                    "model": "hosted_vllm/%s" % r["model"],
                    "api_base": "http://%s.%s.svc.cluster.local:%s/v1" % (r["service"], r["namespace"], r["port"]),
                    "timeout": int(settings["request_timeout"]),
                    **model_key_param(r, settings.get("model_auth")),
                },
                **model_prices((settings.get("prices") or {}).get(r["model"])),
            }
            for r in routes
        ],
        "litellm_settings": {
            "callbacks": ["prometheus"],
            "json_logs": True,
            "request_timeout": int(settings["request_timeout"]),
            "num_retries": int(settings["num_retries"]),
            # X-Request-ID and the other x- headers of the caller reach the model servers.
            "model_group_settings": {"forward_client_headers_to_llm_api": models},
            # Prometheus scrapes /metrics/ without a key: the only key LiteLLM has without its database is the
            # admin key, which Prometheus must not hold. The network policies admit only the monitoring
            # namespace and the Traefik pods to the gateway's port, and Traefik routes only the public paths.
            "require_auth_for_metrics_endpoint": False,
        },
        "general_settings": {
            "master_key": "os.environ/LITELLM_MASTER_KEY",
            # Every key is checked by the collection's hook (consumers by hash, the master key as admin); LiteLLM's
            # own checks then run on the hook's answer: the consumer's model list and limits, and no admin route.
            "custom_auth": HOOK_MODULE + ".user_api_key_auth",
            "custom_auth_run_common_checks": True,
        },
        "router_settings": {"routing_strategy": "least-busy"},
    }
    config["litellm_settings"]["enable_post_custom_auth_checks"] = True
    config["general_settings"].update(redis_settings(settings.get("limits") or {}))
    return config


def model_auth_on(model_auth):
    return bool((model_auth or {}).get("enabled"))


def model_key_param(route, model_auth):
    """litellm_params.api_key of a route whose model server requires the key: LiteLLM reads it from the gateway's
    environment (os.environ/, resolved when the proxy loads its model list) and sends it as the bearer token."""
    if not model_auth_on(model_auth) or route.get("component") not in KEYED_COMPONENTS:
        return {}
    return {"api_key": "os.environ/" + model_auth["env"]}


def model_api_key(master_key):
    """The model servers' API key: HMAC-SHA256 of MODEL_KEY_CONTEXT under the master key, hex. Only the gateway
    (and the model servers) hold it; a new master key gives a new one."""
    if not master_key:
        raise ValueError("the model servers' key is derived from litellm_master_key, which is empty")
    return hmac.new(str(master_key).encode(), MODEL_KEY_CONTEXT, hashlib.sha256).hexdigest()


def model_key_env(model_auth):
    """The gateway's environment entry for the model servers' key (from its Secret), or []."""
    if not model_auth_on(model_auth):
        return []
    return [
        {
            "name": model_auth["env"],
            "valueFrom": {"secretKeyRef": {"name": model_auth["secret"], "key": model_auth["key"]}},
        }
    ]


def model_key_secrets(model_auth, master_key, labels):
    """The model servers' key as a Secret in each namespace that reads it (the model servers' and the gateway's)."""
    if not model_auth_on(model_auth):
        return []
    key = model_api_key(master_key)
    return [
        secret(model_auth["secret"], namespace, dict(labels), {model_auth["key"]: key})
        for namespace in model_auth["namespaces"]
    ]


def model_prices(price):
    """model_info with the model's token prices, which LiteLLM counts each key's spend with (else 0)."""
    if not price:
        return {}
    return {
        "model_info": {
            "input_cost_per_token": float(price["prompt"]),
            "output_cost_per_token": float(price["completion"]),
        }
    }


def redis_settings(limits):
    """The Redis LiteLLM 1.110 counts rate limits in (general_settings.coordination_redis): every replica sees
    the same counters. Without it each replica counts alone. The password comes from the environment (a Secret)."""
    if limits.get("store") != "redis":
        return {}
    return {
        "coordination_redis": {
            "host": limits["host"],
            "port": int(limits["port"]),
            "password": "os.environ/REDIS_PASSWORD",
        }
    }


def gpu_node_pods(namespace, deployment, placement):
    """The gateway's own pods that may run on GPU nodes, as [{namespace, labels}]: the gateway's and its Redis's
    (<deployment>-redis, placed with it) where its placement is gpu or any; none where it is cpu (gpu_verify accepts
    these on GPU nodes without a GPU)."""
    if (placement or "cpu") == "cpu":
        return []
    return [
        {"namespace": namespace, "labels": {"app.kubernetes.io/name": name}}
        for name in (deployment, "%s-redis" % (deployment,))
    ]


def placement(params):
    """nodeSelector/affinity/tolerations for the gateway pods."""
    gpu_labels = params["gpu_node_selector"]
    toleration = {"key": params["gpu_toleration_key"], "operator": "Exists", "effect": "NoSchedule"}
    if params["placement"] == "gpu":
        return {"nodeSelector": dict(gpu_labels), "tolerations": [toleration]}
    if params["placement"] == "any":
        return {"tolerations": [toleration]}
    # cpu: keep off GPU nodes (their memory and CPUs feed the model servers).
    return {
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    # One term: the node must carry none of the GPU labels.
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": k, "operator": "NotIn", "values": [str(v)]}
                                for k, v in sorted(gpu_labels.items())
                            ]
                        }
                    ]
                }
            }
        }
    }


def gateway_manifests(routes, params):
    """ConfigMap, Deployment, Service and PodDisruptionBudget of the gateway, routing to the site plan's routes
    ([{model, service, namespace, port, component}]). params: see roles/litellm/defaults/main.yml (without the
    litellm_ prefix), plus autoscaled (an autoscaler owns the replica count)."""
    params, routes = plain(params), sorted(plain(routes), key=lambda r: r["model"])
    name, ns = params["deployment_name"], params["namespace"]
    labels = labels_for(name, "gateway")
    selector = {"app.kubernetes.io/name": name}
    config = dump_yaml(gateway_config(routes, params))
    hook = hook_source()
    port = int(params["port"])

    def probe(path, period, failures):
        return {
            "httpGet": {"path": path, "port": "http"},
            "periodSeconds": period,
            "timeoutSeconds": 5,
            "failureThreshold": failures,
        }

    pod = {
        "terminationGracePeriodSeconds": GRACE_SECONDS,
        "enableServiceLinks": False,
        "topologySpreadConstraints": spread(["kubernetes.io/hostname"], selector),
        "containers": [
            {
                "name": "litellm",
                "image": params["image"],
                "imagePullPolicy": "IfNotPresent",
                "args": ["--config", CONFIG_FILE, "--port", str(port), "--num_workers", str(params["workers"])],
                "env": [
                    {
                        "name": "LITELLM_MASTER_KEY",
                        "valueFrom": {"secretKeyRef": {"name": params["secret_name"], "key": "LITELLM_MASTER_KEY"}},
                    },
                    {"name": "JSON_LOGS", "value": "True"},
                    {"name": "LITELLM_LOG", "value": params["log_level"]},
                    {"name": "LITELLM_MODE", "value": "PRODUCTION"},
                    # Use the cost map inside the image: no download at start (airgap, egress denied).
                    {"name": "LITELLM_LOCAL_MODEL_COST_MAP", "value": "True"},
                    {"name": "GRACEFUL_SHUTDOWN_TIMEOUT", "value": str(SHUTDOWN_SECONDS)},
                    {"name": consumer_auth.CONSUMERS_ENV, "value": CONSUMERS_FILE},
                    *redis_env(params),
                    *model_key_env(params.get("model_auth")),
                ],
                "ports": [{"name": "http", "containerPort": port, "protocol": "TCP"}],
                "resources": params["resources"],
                "startupProbe": probe("/health/liveliness", 5, 24),
                "readinessProbe": probe("/health/readiness", 10, 3),
                "livenessProbe": probe("/health/liveliness", 15, 4),
                "lifecycle": {"preStop": {"exec": {"command": ["/bin/sh", "-c", "sleep %d" % PRESTOP_SECONDS]}}},
                "volumeMounts": [
                    {"name": "config", "mountPath": CONFIG_DIR, "readOnly": True},
                    {"name": "consumers", "mountPath": CONSUMERS_DIR, "readOnly": True},
                ],
            }
        ],
        "volumes": [
            {"name": "config", "configMap": {"name": name + "-config"}},
            # A consumer added, rotated or revoked does not restart the gateway (which would cut every other
            # consumer's streams): the kubelet swaps the file in place and the hook reads it at the next request.
            # Optional: without it (render.yml without secrets, or before the secrets land) only the admin gets in.
            {"name": "consumers", "secret": {"secretName": params["consumer_secret_name"], "optional": True}},
        ],
    }
    harden(pod, pod["containers"][0], params.get("run_as_user", RUN_AS_USER), "1Gi")
    pod.update(placement(params))
    annotations = {
        "prometheus.io/scrape": "true",
        "prometheus.io/port": str(port),
        "prometheus.io/path": "/metrics/",
        # A new routing table rolls the pods (K3s re-applies the file; the pods would keep the old config).
        "aiinfra.io/config-sha256": hashlib.sha256((config + hook).encode()).hexdigest(),
    }
    # A new master key or Redis password rolls the pods too, but through ROLLOUT_ANNOTATION (rollout_patches), set
    # once the Secrets are applied: nothing derived from the key is written here.
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns, "labels": labels},
        "spec": {
            "replicas": int(params["replicas"]),
            "revisionHistoryLimit": 3,
            "selector": {"matchLabels": selector},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
            "template": {"metadata": {"labels": labels, "annotations": annotations}, "spec": pod},
        },
    }
    if params.get("autoscaled") is True or str(params.get("autoscaled")).lower() == "true":
        # The autoscaler owns the count: a replicas field would reset it whenever K3s re-applies the file.
        del deployment["spec"]["replicas"]
    return [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name + "-config", "namespace": ns, "labels": labels},
            "data": {"config.yaml": config, HOOK_MODULE + ".py": hook},
        },
        deployment,
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": params["service_name"], "namespace": ns, "labels": labels},
            "spec": {
                "type": "ClusterIP",
                "selector": selector,
                "ports": [{"name": "http", "port": port, "targetPort": "http", "protocol": "TCP"}],
            },
        },
        disruption_budget(name, ns, labels),
        *redis_manifests(params),
    ]


def hook_source():
    """consumer_auth.py as the gateway loads it."""
    return inspect.getsource(consumer_auth)


def consumers_file(consumers):
    """The consumers Secret's file: hashes (never keys), aliases, teams, models and limits."""
    return json.dumps({"consumers": consumer_records(consumers)}, indent=1, sort_keys=True) + "\n"


def redis_password(params, master_key):
    """The Redis password: litellm_redis_password, else derived from the master key (HMAC-SHA256), so a site needs
    no second secret for the Redis it deploys and rotating the master key rotates it."""
    given = params.get("redis_password") or ""
    if given or not (params.get("limits") or {}).get("deploy"):
        return given  # an operator's Redis: its password, or none
    return hmac.new(master_key.encode(), b"aiinfra.k3s litellm redis", hashlib.sha256).hexdigest()


def redis_env(params):
    limits = params.get("limits") or {}
    if limits.get("store") != "redis":
        return []
    return [
        {
            "name": "REDIS_PASSWORD",
            "valueFrom": {"secretKeyRef": {"name": params["redis_secret_name"], "key": "password"}},
        },
    ]


def redis_manifests(params):
    """Deployment and Service of the Redis the gateway (and the edge's rate limit) count in, when the plan deploys
    one. Counters only: no persistence (a restart resets the windows), a password (its Secret); the network
    policies admit only the gateway and the ingress controller (network_policies role)."""
    limits = params.get("limits") or {}
    if limits.get("store") != "redis" or not limits.get("deploy"):
        return []
    name, ns = limits["name"], params["namespace"]
    labels = labels_for(name, "rate-limit-store")
    selector = {"app.kubernetes.io/name": name}
    container = {
        "name": "redis",
        "image": params["redis_image"],
        "imagePullPolicy": "IfNotPresent",
        "command": ["redis-server", "/etc/redis/redis.conf"],
        "ports": [{"name": "redis", "containerPort": int(limits["port"]), "protocol": "TCP"}],
        "resources": params["redis_resources"],
        "readinessProbe": {"tcpSocket": {"port": "redis"}, "periodSeconds": 5, "failureThreshold": 3},
        "livenessProbe": {"tcpSocket": {"port": "redis"}, "periodSeconds": 15, "failureThreshold": 4},
        "volumeMounts": [{"name": "config", "mountPath": "/etc/redis", "readOnly": True}],
    }
    pod = {
        "terminationGracePeriodSeconds": 10,
        "enableServiceLinks": False,
        "containers": [container],
        "volumes": [{"name": "config", "secret": {"secretName": params["redis_secret_name"]}}],
    }
    harden(pod, container, REDIS_UID, "64Mi")
    pod.update(placement(params))
    # Redis reads its password at start only: a new one (a new master key, or litellm_redis_password) restarts it,
    # through ROLLOUT_ANNOTATION (its config is a Secret volume, not optional: start_secrets counts it).
    return [
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": name, "namespace": ns, "labels": labels},
            "spec": {
                "replicas": 1,
                "revisionHistoryLimit": 3,
                "selector": {"matchLabels": selector},
                "strategy": {"type": "Recreate"},
                "template": {"metadata": {"labels": labels}, "spec": pod},
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": name, "namespace": ns, "labels": labels},
            "spec": {
                "type": "ClusterIP",
                "selector": selector,
                "ports": [{"name": "redis", "port": int(limits["port"]), "targetPort": "redis", "protocol": "TCP"}],
            },
        },
    ]


def redis_config(password, port):
    """redis.conf of the deployed Redis: counters in memory only, a password, no admin commands over the wire."""
    lines = [
        "port %d" % int(port),
        "bind * -::*",
        "protected-mode yes",
        'save ""',
        "appendonly no",
        "dir /tmp",
        "maxmemory 200mb",
        "maxmemory-policy volatile-ttl",
        'rename-command CONFIG ""',
        'rename-command DEBUG ""',
        'rename-command MODULE ""',
        # Traefik names its counters after the Authorization header: no listing or watching of keys.
        'rename-command KEYS ""',
        'rename-command MONITOR ""',
        'rename-command ACL ""',
        "requirepass " + password,
    ]
    return "\n".join(lines) + "\n"


def gateway_secret(params, master_key):
    """The master key's Secret, the consumers', the model servers' key's (model_auth: in each namespace that reads
    it) and, with a Redis, the Redis password's (with the deployed Redis's config)."""
    out = [
        secret(
            params["secret_name"],
            params["namespace"],
            labels_for(params["deployment_name"], "credentials"),
            {"LITELLM_MASTER_KEY": master_key},
        )
    ]
    # The consumers' key hashes go with the secrets (applied through the API, never left in a plain file), though
    # they are hashes of random keys.
    out.append(
        secret(
            params["consumer_secret_name"],
            params["namespace"],
            labels_for(params["deployment_name"], "credentials"),
            {consumer_auth.CONSUMERS_NAME: consumers_file(params.get("consumers") or [])},
        )
    )
    out += model_key_secrets(params.get("model_auth"), master_key, labels_for(params["deployment_name"], "credentials"))
    limits = params.get("limits") or {}
    if limits.get("store") == "redis":
        password = redis_password(params, master_key)
        # Traefik's rateLimit.redis needs both keys (an empty username is Redis's default user).
        data = {"username": "", "password": password}
        labels = labels_for(limits.get("name") or params["deployment_name"], "credentials")
        edge_ns = params.get("edge_namespace")
        if edge_ns and edge_ns != params["namespace"]:  # Traefik reads it from its Middleware's namespace
            out.append(secret(params["redis_secret_name"], edge_ns, labels, dict(data)))
        if limits.get("deploy"):
            data["redis.conf"] = redis_config(password, limits["port"])
        out.append(secret(params["redis_secret_name"], params["namespace"], labels, data))
    return out


# Rolling the pods when a Secret they read only at start changes (the master key, the Redis password; issue 28,
# item 9). The pod template carries the resourceVersions of those Secrets as the API server returned them when they
# were applied, not any function of their content: an unsalted digest of the key material in a Deployment (which far
# more people may read than Secrets) let anyone who reads it test guesses of the key offline, and an HMAC would need
# a second secret that no Deployment reader knows, stable across runs and controllers, which the site does not have.
# A resourceVersion changes whenever the Secret is written with new content and stays the same when an apply changes
# nothing (the API server drops no-op writes), so the pods roll on a new key and only then. It is set through the
# API right after the Secrets (manifests role, tasks_from: rollout); a run that cannot reach the API (render.yml, or
# K3s not answering yet) writes the Secrets with the rest and sets none: the pods that start read the current ones.
ROLLOUT_ANNOTATION = "aiinfra.io/secret-versions"
ROLLED_KINDS = ("Deployment", "StatefulSet", "DaemonSet")


def start_secrets(pod_spec):
    """Names of the Secrets a pod reads when it starts only: environment references and Secret volumes that are not
    optional (an optional one, the consumers' file, is swapped in place by the kubelet and read at each request)."""
    names = set()
    for container in (pod_spec.get("initContainers") or []) + (pod_spec.get("containers") or []):
        for env in container.get("env") or []:
            ref = (env.get("valueFrom") or {}).get("secretKeyRef")
            if ref:
                names.add(ref["name"])
        for source in container.get("envFrom") or []:
            if source.get("secretRef"):
                names.add(source["secretRef"]["name"])
    for volume in pod_spec.get("volumes") or []:
        ref = volume.get("secret")
        if ref and not ref.get("optional"):
            names.add(ref["secretName"])
    return names


def rollout_patches(objects, applied):
    """Merge patches giving each workload of `objects` whose pods read Secrets at start (start_secrets) the
    resourceVersions of those Secrets (ROLLOUT_ANNOTATION, ``name=version`` sorted by name). applied: the metadata
    of the Secrets as the API server returned them after applying them ({name, namespace, resourceVersion}). A
    workload none of whose Secrets was applied gets no patch."""
    versions = {
        (m.get("namespace"), m.get("name")): str(m.get("resourceVersion"))
        for m in applied or []
        if m.get("resourceVersion")
    }
    patches = []
    for obj in objects or []:
        if obj.get("kind") not in ROLLED_KINDS:
            continue
        namespace = obj["metadata"].get("namespace")
        spec = obj["spec"]["template"].get("spec") or {}
        known = sorted(n for n in start_secrets(spec) if (namespace, n) in versions)
        if not known:
            continue
        value = ",".join("%s=%s" % (name, versions[(namespace, name)]) for name in known)
        patches.append(
            {
                "apiVersion": obj["apiVersion"],
                "kind": obj["kind"],
                "metadata": {"name": obj["metadata"]["name"], "namespace": namespace},
                "spec": {"template": {"metadata": {"annotations": {ROLLOUT_ANNOTATION: value}}}},
            }
        )
    return patches


def master_key_problems(key):
    """Why a LiteLLM master key must be refused (never quoting the key)."""
    fix = "put a random key in a vault-encrypted group_vars file, e.g. sk-$(openssl rand -hex 24)"
    if not key:
        return ["litellm_master_key is not set: " + fix]
    problems = []
    if not key.startswith("sk-"):
        problems.append("litellm_master_key does not start with sk- (LiteLLM requires it): " + fix)
    body = key[3:] if key.startswith("sk-") else key
    if len(body) < 32:
        problems.append("litellm_master_key has %d characters after sk-, fewer than 32: %s" % (len(body), fix))
    elif len(set(body)) < 12:
        problems.append("litellm_master_key repeats too few distinct characters to be random: " + fix)
    lowered = key.lower()
    if any(word in lowered for word in WEAK_WORDS):
        problems.append("litellm_master_key contains a well-known placeholder word: " + fix)
    return problems
