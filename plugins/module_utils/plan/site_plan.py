# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The site plan: everything the serving stack of one inventory becomes, computed in one place.

``site_plan(values, gpu_nodes, weights_bytes, secrets)`` is a pure function. ``values`` holds the effective value
of every variable in VARIABLES (the inventory's, or the owning role's default); ``gpu_nodes`` the host variables
of the GPU hosts. It returns:

- ``nodes``: each GPU node's class, physical GPUs, time-slicing replicas per GPU and GPU memory;
- ``classes``: per class, its nodes, GPUs and slices;
- ``capacity``: physical GPUs, slices, whole (unsliced) GPUs of the site;
- ``placement``: the time-sliced replica counts and whether whole GPUs are reserved for multi-GPU models;
- ``models``: every vLLM and NIM model with its per-model defaults filled in once (``server``, ``gpus``,
  ``replicas``, ``port``, ``image``), whether an autoscaler owns its replica count, and where it may run
  (placement_plan): its ``placement`` (``gpu_types``, ``node_groups``: the GPU hosts' aiinfra_gpu_type and
  aiinfra_node_group it may use), ``nodes`` (the GPU nodes that match it and can hold a replica), ``node_affinity``
  (the required node affinity its pods get) and ``spread`` (hard or soft spread of its replicas over nodes);
- ``workloads``: each scalable workload (models and gateway) with its kind, minimum and maximum replicas and the
  autoscaler that owns the count (``keda``, ``hpa``, ``nim-hpa`` or ``none``); a maximum is bounded by the GPUs
  left when every other workload keeps its minimum; the gateway's ``nodes``: where litellm_placement lets it run
  (when the cluster hosts are known);
- ``model_routes``: the gateway's (LiteLLM's) model routes: each served model to its Service;
- ``edge``: the public host, its TLS secret and whether cert-manager issues its certificate;
- ``consumers``: the gateway's consumers with their models, limits and where their key comes from (consumers.py),
  and ``revoked_consumers``;
- ``model_auth``: whether the model servers require an API key that only the gateway holds (``enabled``: the gateway
  is enabled and the site has vLLM models), and where it lives: the Secret (``secret``, ``key``) in each namespace
  that reads it (``namespaces``: the vLLM servers' and the gateway's) and the gateway's environment variable
  (``env``); its value is derived from the master key (gateway.model_api_key);
- ``limits``: where rate-limit counters live (``store``: redis, memory or none) and the Redis to use;
- ``prices``: US dollars per prompt and per generated token of each priced model (spend per consumer and model);
- ``node_loss``: N-1 capacity: per model, its replicas and how many of them run on the GPUs left after the loss
  of the GPU node whose loss hurts it most (``after_node_loss``, ``worst_node``);
- ``firewall``: the host firewall every cluster node gets (firewall.py): whether prereq manages one, the admin
  networks, the interfaces pod traffic is trusted on, the ports between the nodes (the overlay's, the weights
  peers'), the pod and service ranges;
- ``weights``: how the controller's models spread over the GPU nodes (models.py weights_distribution): whether the
  nodes hand them on to one another (``peers``), on which ``port``, and each GPU node's ``addresses`` as the others
  reach it (None: it only fetches);
- ``problems``: ``{code, severity, host, variable, problem, fix}`` (inventory_spec's shape): GPU_CLASS, GPU_COUNT,
  GPU_MEMORY, GPU_TYPE, NODE_GROUP, MODEL, MODEL_PATH, PLACEMENT, SPREAD (warning), SERVING_PLAN, MODEL_SIZE (warning),
  NODE_LOSS (warning), EDGE, GATEWAY, CONSUMER, AUTOSCALING, SECRET, FIREWALL, MODEL_PEERS.

``gpu_nodes`` may also carry a GPU host's own STORE_PATH_VARIABLES (where they differ from ``values``): the model
store role copies and checks with each host's values, so each host's are checked, and named.

Roles read the plan and their own variables; none reads another role's facts.
"""

import difflib

from ansible_collections.aiinfra.k3s.plugins.module_utils.k8s import edge, gateway, monitoring
from ansible_collections.aiinfra.k3s.plugins.module_utils.k8s.autoscaling import (
    autoscaling_problems,
    cooldown_problems,
    gpu_bounds,
)
from ansible_collections.aiinfra.k3s.plugins.module_utils.k8s.model_servers import (
    GPU_TYPE_LABEL,
    MODEL_WORKLOAD_KIND,
    NODE_GROUP_LABEL,
    SHARED_LABEL,
)
from ansible_collections.aiinfra.k3s.plugins.module_utils.k8s.objects import dns_name
from ansible_collections.aiinfra.k3s.plugins.module_utils.node import firewall
from ansible_collections.aiinfra.k3s.plugins.module_utils.plan import consumers as consumer_rules
from ansible_collections.aiinfra.k3s.plugins.module_utils.plan.capacity import (
    capacity_findings,
    node_loss_capacity,
    plan_findings,
)
from ansible_collections.aiinfra.k3s.plugins.module_utils.plan.inventory_spec import LABEL_VALUE, problem, truthy
from ansible_collections.aiinfra.k3s.plugins.module_utils.plan.models import (
    PEER_VARIABLES,
    SOURCES_VARIABLE,
    STORE_PATH_FIX,
    as_int,
    filled,
    memory_utilization,
    store_path_error,
    weight_source_findings,
    weights_distribution,
)

# The components of a site with a namespace of their own: each role's <component>_namespace, decided once here
# (namespaces); "serving" is the site's namespace, aiinfra_namespace, that the serving roles default to.
COMPONENTS = (
    "vllm",
    "nim",
    "litellm",
    "model_registry",
    "traefik",
    "drill",
    "network_policies",
    "monitoring",
    "gpu_operator",
    "cert_manager",
    "autoscaling",
)
SERVING_NAMESPACE = "ai-serving"
# Where nvidia-smi is read on a GPU node when the GPU Operator installs the driver (its driver container's root).
DRIVER_ROOT = "/run/nvidia/driver"

# The variables the plan reads (role defaults apply where the inventory sets none).
VARIABLES = (
    "gpu_operator_enabled",
    "gpu_operator_time_slicing_classes",
    "gpu_operator_time_slicing_default",
    "vllm_models",
    "vllm_image",
    "vllm_namespace",
    "nim_models",
    "nim_namespace",
    "nim_max_replicas",
    "nim_store_read_only",
    "model_registry_seed_dir",
    "model_registry_seed_models",
    "model_registry_preseeded",
    "model_registry_sources",
    "litellm_enabled",
    "litellm_namespace",
    "litellm_deployment_name",
    "litellm_replicas",
    "litellm_placement",
    "litellm_consumers",
    "litellm_consumer_key_hashes",
    "litellm_consumer_rpm_limit",
    "litellm_consumer_tpm_limit",
    "litellm_redis",
    "litellm_redis_host",
    "litellm_redis_port",
    "litellm_redis_secret_name",
    "litellm_service_name",
    "autoscaling_engine",
    "autoscaling_gateway_min_replicas",
    "autoscaling_gateway_max_replicas",
    "autoscaling_model_max_replicas",
    "autoscaling_service_monitors",
    "autoscaling_cooldown_seconds",
    "traefik_host",
    "traefik_namespace",
    "traefik_tls_secret",
    "traefik_path_prefix",
    "traefik_public_paths",
    "traefik_expose_admin",
    "traefik_rate_limit_average",
    "traefik_rate_limit_burst",
    "traefik_rate_limit_period",
    "traefik_hsts_seconds",
    "cert_manager_enabled",
    "cert_manager_issuer_kind",
    "cert_manager_acme_email",
    "monitoring_enabled",
    "monitoring_token_prices",
    "litellm_port",
    "gpu_operator_driver_enabled",
    "k3s_install_mode",
    "k3s_airgap_dir",
    "model_registry_storage_class",
    "model_registry_size",
    *firewall.PLAN_VARIABLES,
    *PEER_VARIABLES,
    *sorted({"%s_namespace" % component for component in COMPONENTS} - {"vllm_namespace", "nim_namespace"}),
)
# Read only when the run handles secrets; never copied into the plan.
SECRET_VARIABLES = (
    "litellm_master_key",
    "litellm_consumer_keys",
    "litellm_redis_password",
    "monitoring_grafana_admin_password",
    "nim_ngc_api_key",
)

SITE = "all"
# Lists of model paths the model_registry role joins to the store on the GPU nodes and to the seed directory on the
# controller (the seed copy runs as root).
STORE_PATH_VARIABLES = ("model_registry_seed_models", "model_registry_preseeded")
# Where each model's weights come from (plan/models.py weight_source_findings), checked for the site and each GPU host.
SOURCE_VARIABLES = (SOURCES_VARIABLE,)
# A GPU host's GPU type (a free name such as H100-80GB) and node group (an operator's pool of nodes): the k3s roles
# set them as the node labels workloads.GPU_TYPE_LABEL and workloads.NODE_GROUP_LABEL, which a model's placement
# selects on (no GPU feature discovery needed).
GPU_TYPE_VARIABLE = "aiinfra_gpu_type"
NODE_GROUP_VARIABLE = "aiinfra_node_group"
# A model's placement: its keys, the node attribute each selects on and the host variable that sets it.
PLACEMENT_KEYS = {"gpu_types": ("gpu_type", GPU_TYPE_VARIABLE), "node_groups": ("node_group", NODE_GROUP_VARIABLE)}


def label_value_error(value):
    """Why a host's GPU type or node group cannot be a node label value (Kubernetes: at most 63 characters, letters,
    digits, '-', '_' and '.', alphanumeric at both ends; inventory_spec's grammar, with messages that say the
    value's own fault), or None. Empty values are not asked about (the variable is then unset)."""
    if not isinstance(value, str):
        return "is %r, not a name" % (value,)
    if len(value) > 63:
        return "has %d characters, more than the 63 a node label value allows" % len(value)
    if not LABEL_VALUE.match(value):
        return "is %r, not a node label value (letters, digits, '-', '_' and '.', alphanumeric at both ends)" % value
    return None


def _label_input(host, hv, variable, code, out):
    value = hv.get(variable)
    if value in (None, ""):
        return ""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = str(value)
    why = label_value_error(value)
    if why:
        out.append(
            problem(
                code,
                host,
                variable,
                "%s %s" % (variable, why),
                "name it as a node label value allows, e.g. H100-80GB" if code == "GPU_TYPE" else "e.g. pool-a",
            )
        )
        return ""
    return value


def gpu_node_inputs(gpu_nodes):
    """({node: {gpus, class, memory_mib, gpu_type, node_group}}, problems) from the GPU hosts' variables."""
    nodes, problems = {}, []
    for host, hv in sorted((gpu_nodes or {}).items()):
        count = hv.get("aiinfra_gpu_count", 1)
        gpus = as_int(count, None)
        if gpus is None or isinstance(count, bool) or gpus < 1:
            problems.append(
                problem(
                    "GPU_COUNT", host, "aiinfra_gpu_count", "aiinfra_gpu_count is %r" % (count,), "give a whole number"
                )
            )
            gpus = 1
        nodes[host] = {
            "gpus": gpus,
            "class": hv.get("aiinfra_gpu_class") or "",
            "memory_mib": hv.get("aiinfra_gpu_memory_mib") or 0,
            "gpu_type": _label_input(host, hv, GPU_TYPE_VARIABLE, "GPU_TYPE", problems),
            "node_group": _label_input(host, hv, NODE_GROUP_VARIABLE, "NODE_GROUP", problems),
        }
    return nodes, problems


def class_summary(nodes, capacity, default_class, enabled=True):
    classes = {}
    for node, cap in capacity.items():
        name = (nodes[node]["class"] or default_class or "") if enabled else ""
        entry = classes.setdefault(name, {"nodes": [], "gpus": 0, "replicas": cap["replicas"], "slices": 0})
        entry["nodes"].append(node)
        entry["gpus"] += cap["gpus"]
        entry["slices"] += cap["gpus"] * cap["replicas"]
    return classes


def model_workloads(values, models, capacity):
    """The model servers as scalable workloads: vLLM models under KEDA, NIM models under their own HPA."""
    engine = values.get("autoscaling_engine")
    vllm = [m for m in models if m["server"] == "vllm"]
    nim = [m for m in models if m["server"] == "nim"]
    bounds = gpu_bounds(vllm, nim, capacity) if engine == "keda" and capacity else {}
    out = []
    for model in vllm:
        replicas = as_int(model["replicas"], 1)
        work = {
            "name": dns_name("vllm-%s" % model["served_name"]),
            "served_name": model["served_name"],
            "server": "vllm",
            "kind": MODEL_WORKLOAD_KIND,
            "namespace": values.get("vllm_namespace"),
            "min": replicas,
            "max": replicas,
            "autoscaler": "none",
        }
        if engine == "keda":
            wanted = as_int(model.get("max_replicas", values.get("autoscaling_model_max_replicas")), replicas)
            work.update(autoscaler="keda", max=min(wanted, bounds.get(model["served_name"], replicas)))
            if "queue_threshold" in model:
                work["queue_threshold"] = model["queue_threshold"]
        out.append(work)
    for model in nim:
        replicas = as_int(model["replicas"], 2)
        maximum = as_int(model.get("max_replicas", values.get("nim_max_replicas")), replicas)
        out.append(
            {
                "name": dns_name("nim-%s" % model["served_name"]),
                "served_name": model["served_name"],
                "server": "nim",
                "kind": MODEL_WORKLOAD_KIND,
                "namespace": values.get("nim_namespace"),
                "min": replicas,
                "max": max(maximum, replicas),
                "autoscaler": "nim-hpa",
            }
        )
    return out


def gateway_min_replicas(values):
    """The gateway's minimum under an autoscaler: autoscaling_gateway_min_replicas, or litellm_replicas where the
    inventory sets none."""
    minimum = values.get("autoscaling_gateway_min_replicas")
    return values.get("litellm_replicas") if minimum in (None, "") else minimum


def service_monitors(values):
    """Whether KEDA's chart gets its ServiceMonitors: autoscaling_service_monitors, or monitoring_enabled where the
    inventory sets none."""
    asked = values.get("autoscaling_service_monitors")
    return truthy(values.get("monitoring_enabled", True) if asked in (None, "") else asked)


def gateway_workload(values):
    engine = values.get("autoscaling_engine")
    replicas = as_int(values.get("litellm_replicas"), 2)
    work = {
        "name": values.get("litellm_deployment_name"),
        "server": "litellm",
        "kind": "Deployment",
        "namespace": values.get("litellm_namespace"),
        "min": replicas,
        "max": replicas,
        "autoscaler": "none",
    }
    if engine in ("keda", "hpa"):
        work.update(
            autoscaler=engine,
            min=as_int(gateway_min_replicas(values), replicas),
            max=as_int(values.get("autoscaling_gateway_max_replicas"), replicas),
        )
    return work


def model_routes(values, models):
    out = []
    for model in models:
        server = model["server"]
        out.append(
            {
                "model": model["served_name"],
                "service": dns_name("%s-%s" % (server, model["served_name"])),
                "namespace": values.get("%s_namespace" % server),
                "port": model["port"],
                "component": server,
            }
        )
    return sorted(out, key=lambda r: r["model"])


# The model servers' key: its Secret is named after the gateway (whose role writes it), the key inside it, and the
# gateway's environment variable LiteLLM reads it from (litellm_params.api_key: os.environ/...). vLLM reads it as
# VLLM_API_KEY.
MODEL_KEY_SECRET_SUFFIX = "-model-api-key"
MODEL_KEY_NAME = "api-key"
MODEL_KEY_ENV = "MODEL_SERVER_API_KEY"


def model_auth_plan(values, models):
    """Whether the model servers require the gateway's key, and where it lives (module docstring: model_auth)."""
    vllm = [m for m in models if m["server"] == "vllm"]
    if not truthy(values.get("litellm_enabled")) or not vllm:
        return {"enabled": False}
    return {
        "enabled": True,
        "secret": "%s%s" % (values.get("litellm_deployment_name"), MODEL_KEY_SECRET_SUFFIX),
        "key": MODEL_KEY_NAME,
        "env": MODEL_KEY_ENV,
        "namespaces": sorted({values.get("vllm_namespace"), values.get("litellm_namespace")}),
    }


REDIS_MODES = ("deploy", "external", "none")


def redis_password_problems(values):
    """The Redis password (a secret): required for an operator's Redis, one line of printable characters."""
    password = values.get("litellm_redis_password") or ""
    mode = values.get("litellm_redis") or "deploy"
    if mode == "external" and not password:
        return [
            "litellm_redis is external but litellm_redis_password is empty: the gateway and Traefik need the "
            "Redis's password (a Redis without one is not supported); put it in a vault-encrypted group_vars file"
        ]
    if password and (not isinstance(password, str) or any(ord(c) < 33 or ord(c) == 127 for c in password)):
        return ["litellm_redis_password has spaces or control characters: use printable characters only"]
    if mode == "deploy" and password and len(password) < 16:
        return ["litellm_redis_password has fewer than 16 characters: leave it empty (derived from the master key)"]
    return []


REDIS_PORT = 6379


def limits_plan(values):
    """Where the gateway's and the edge's rate-limit counters live, and the problems of that choice.

    deploy: a Redis the litellm role deploys next to the gateway; external: the operator's (litellm_redis_host);
    none: each gateway replica and each Traefik counts alone (a consumer gets up to replicas x its limit).
    """
    if not truthy(values.get("litellm_enabled")):
        return {"store": "none"}, []
    mode = values.get("litellm_redis") or "deploy"
    out = []
    if mode not in REDIS_MODES:
        out.append(
            problem(
                "GATEWAY",
                SITE,
                "litellm_redis",
                "litellm_redis is %r" % (mode,),
                "use one of " + ", ".join(REDIS_MODES),
            )
        )
        return {"store": "none"}, out
    if mode == "none":
        many = as_int(values.get("litellm_replicas"), 1) > 1 or values.get("autoscaling_engine") in ("keda", "hpa")
        if many:
            out.append(
                problem(
                    "GATEWAY",
                    SITE,
                    "litellm_redis",
                    "litellm_redis is none with several gateway replicas: each replica (and each Traefik) counts "
                    "rate limits alone, so a consumer gets up to that many times its rpm and tpm limits",
                    "set litellm_redis to deploy, or external with litellm_redis_host",
                    "warning",
                )
            )
        return {"store": "memory"}, out
    namespace = values.get("litellm_namespace")
    if mode == "deploy":
        name = "%s-redis" % values.get("litellm_deployment_name")
        host, port = "%s.%s.svc.cluster.local" % (name, namespace), REDIS_PORT
    else:
        name, host, port = "", values.get("litellm_redis_host") or "", as_int(values.get("litellm_redis_port"), 0)
        if not host:
            out.append(
                problem(
                    "GATEWAY",
                    SITE,
                    "litellm_redis_host",
                    "litellm_redis is external but litellm_redis_host is empty",
                    "give the Redis host (and litellm_redis_port, litellm_redis_password)",
                )
            )
        if not 0 < port < 65536:
            out.append(
                problem(
                    "GATEWAY",
                    SITE,
                    "litellm_redis_port",
                    "litellm_redis_port is %r" % (values.get("litellm_redis_port"),),
                    "give a TCP port",
                )
            )
    redis = {"store": "redis", "deploy": mode == "deploy", "name": name, "host": host, "port": port}
    # The password's Secret, in the gateway's namespace and (a copy) in the edge's: Traefik reads a rateLimit's
    # Redis credentials from its Middleware's namespace only.
    redis.update(secret=values.get("litellm_redis_secret_name"), namespace=namespace)
    return redis, out


def price_plan(values, models):
    """({model: {prompt, completion}} in US dollars per token, problems): what the gateway counts each consumer's
    spend with and the cost rules price tokens with."""
    prices, out = {}, []
    served = {m["served_name"] for m in models}
    for model, price in sorted((values.get("monitoring_token_prices") or {}).items()):
        try:
            prices[model] = {kind: float(price[kind]) for kind in ("prompt", "completion")}
        except (KeyError, TypeError, ValueError):
            out.append(
                problem(
                    "MODEL",
                    SITE,
                    "monitoring_token_prices",
                    "monitoring_token_prices[%s] is %r" % (model, price),
                    "give {prompt: USD per prompt token, completion: USD per generated token}",
                )
            )
            continue
        if model not in served:
            out.append(
                problem(
                    "MODEL",
                    SITE,
                    "monitoring_token_prices",
                    "monitoring_token_prices names %s, which this site does not serve" % model,
                    "use served names of vllm_models or nim_models",
                    "warning",
                )
            )
            del prices[model]
    return prices, out


def edge_plan(values):
    host = values.get("traefik_host") or ""
    if not host:
        return {"host": "", "base_url": "", "certificate": False, "public_urls": []}
    return {
        "host": host,
        "namespace": values.get("traefik_namespace"),
        "tls_secret": values.get("traefik_tls_secret"),
        "certificate": truthy(values.get("cert_manager_enabled")),
        # https, the host and the prefix: what the public paths are appended to (the drill's target).
        "base_url": edge.base_url(values),
        # What clients call: https, the host, the prefix and each public path (edge.public_urls).
        "public_urls": edge.public_urls(values),
    }


def namespaces_plan(values):
    """{component: namespace} (COMPONENTS, and "serving": the site's own)."""
    out = {component: values.get("%s_namespace" % component) for component in COMPONENTS}
    out["serving"] = values.get("aiinfra_namespace") or SERVING_NAMESPACE
    return out


def gateway_plan(values):
    """The gateway as the other components reach and check it: its Deployment, Service and port, where it runs,
    and the pods of its own that may run on GPU nodes (gateway.gpu_node_pods)."""
    namespace, deployment = values.get("litellm_namespace"), values.get("litellm_deployment_name")
    placement = values.get("litellm_placement")
    return {
        "enabled": truthy(values.get("litellm_enabled")),
        "namespace": namespace,
        "deployment": deployment,
        "service": values.get("litellm_service_name"),
        "port": values.get("litellm_port"),
        "placement": placement,
        "gpu_node_pods": gateway.gpu_node_pods(namespace, deployment, placement),
    }


def gpu_operator_plan(values):
    """Whether the GPU Operator runs, and where a GPU node's nvidia-smi is read (its driver container's root when
    the operator installs the driver, the host's own otherwise)."""
    enabled = truthy(values.get("gpu_operator_enabled", True))
    driver = enabled and truthy(values.get("gpu_operator_driver_enabled", False))
    return {"enabled": enabled, "driver_root": DRIVER_ROOT if driver else ""}


def setting_problems(values, models, secrets):
    """Checks across roles' settings (edge with its issuer, gateway with the models, autoscaling bounds) and,
    when the run handles secrets, the secrets' strength."""
    out = []

    def add(code, variable, messages):
        out.extend(problem(code, SITE, variable, message, "") for message in messages)

    if values.get("traefik_host"):
        traefik = {key: values.get("traefik_" + key) for key in ("host", "path_prefix", "public_paths", "expose_admin")}
        for key in ("average", "burst", "period"):
            traefik["rate_" + key] = values.get("traefik_rate_limit_" + key)
        if values.get("traefik_hsts_seconds") is not None:
            traefik["hsts_seconds"] = values.get("traefik_hsts_seconds")
        certs = None
        if truthy(values.get("cert_manager_enabled")):
            certs = {
                "issuer_kind": values.get("cert_manager_issuer_kind"),
                "acme_email": values.get("cert_manager_acme_email"),
            }
        add("EDGE", "traefik_host", edge.edge_problems(traefik, certs))
    gateway_on = truthy(values.get("litellm_enabled"))
    if gateway_on:
        if values.get("litellm_placement") not in gateway.PLACEMENTS:
            add(
                "GATEWAY",
                "litellm_placement",
                ["litellm_placement is %r: use cpu (off GPU nodes), gpu or any" % (values.get("litellm_placement"),)],
            )
        if as_int(values.get("litellm_replicas")) < 2:
            add(
                "GATEWAY",
                "litellm_replicas",
                [
                    "litellm_replicas is %s: the gateway needs at least 2 to survive a pod loss"
                    % values.get("litellm_replicas")
                ],
            )
        if not models:
            add(
                "GATEWAY",
                "vllm_models",
                ["the gateway has no model to route to: add vllm_models or nim_models, or disable litellm"],
            )
    if (
        values.get("autoscaling_engine") == "keda"
        and service_monitors(values)
        and not truthy(values.get("monitoring_enabled"))
    ):
        out.append(
            problem(
                "AUTOSCALING",
                SITE,
                "autoscaling_service_monitors",
                "KEDA's ServiceMonitors are asked for but monitoring_enabled is false: KEDA is handed to K3s only once "
                "the ServiceMonitor CRD is served, which nothing of this site installs (the run waits "
                "manifests_crd_timeout, then fails)",
                "set autoscaling_service_monitors to false, enable monitoring, or install the Prometheus Operator first",
                "warning",
            )
        )
    for model in models:
        tag = str(model.get("image") or "").rpartition(":")[2].split(".")[0]
        if model["server"] == "nim" and tag.isdigit() and int(tag) < 2:
            out.append(
                problem(
                    "MODEL",
                    SITE,
                    "nim_models",
                    "%s: NIM %s images do not read NIM_PASSTHROUGH_ARGS, so a stopping pod gets the preStop sleep, "
                    "not shutdown_timeout, to finish its requests" % (model.get("served_name"), tag),
                    "use a NIM 2.x image, or accept that a rollout or drain cuts long generations",
                    "warning",
                )
            )
    if any(m["server"] == "nim" for m in models) and not truthy(values.get("nim_store_read_only", True)):
        # Writing needs the store to belong to the pods' user: an fsGroup would have the kubelet re-own every
        # weight file on the host at each start (serving.harden), so the pods get none and the store stays root's.
        add(
            "MODEL",
            "nim_store_read_only",
            [
                "nim_store_read_only is false, but the model store belongs to root and the NIM pods run as a "
                "non-root user without fsGroup (which would have the kubelet re-own every weight file on each "
                "start): NIM could not write to it; seed its cache into the store with model_registry and keep "
                "nim_store_read_only true"
            ],
        )
    add(
        "AUTOSCALING",
        "autoscaling_gateway_max_replicas",
        autoscaling_problems(
            {
                "engine": values.get("autoscaling_engine"),
                "gateway_min": gateway_min_replicas(values),
                "gateway_max": values.get("autoscaling_gateway_max_replicas"),
            }
        ),
    )
    add(
        "AUTOSCALING",
        "autoscaling_cooldown_seconds",
        cooldown_problems(values.get("autoscaling_engine"), values.get("autoscaling_cooldown_seconds", 600)),
    )
    if secrets:
        if gateway_on:
            add("SECRET", "litellm_master_key", gateway.master_key_problems(values.get("litellm_master_key") or ""))
            add("SECRET", "litellm_redis_password", redis_password_problems(values))
        if truthy(values.get("monitoring_enabled")):
            add(
                "SECRET",
                "monitoring_grafana_admin_password",
                monitoring.grafana_password_problems(values.get("monitoring_grafana_admin_password") or ""),
            )
        if any(m["server"] == "nim" for m in models) and not values.get("nim_ngc_api_key"):
            add(
                "SECRET",
                "nim_ngc_api_key",
                [
                    "nim_models is set but nim_ngc_api_key is empty: put the NGC API key in a vault-encrypted group_vars file"
                ],
            )
    return out


def model_path_problems(host, lists):
    """MODEL_PATH errors of one host's lists of model paths ({variable: [path]}): absolute paths and paths with a
    '.' or '..' segment (models.store_path_error)."""
    out = []
    for variable, paths in sorted(lists.items()):
        if not isinstance(paths, list):
            continue  # the argument-spec check names the type
        for index, path in enumerate(paths):
            why = store_path_error(path)
            if why:
                out.append(
                    problem(
                        "MODEL_PATH",
                        host,
                        variable,
                        "%s[%d] %s (the seed copy runs as root)" % (variable, index, why),
                        STORE_PATH_FIX,
                    )
                )
    return out


def source_problems(host, sources, seeded):
    """MODEL_SOURCE errors of one host's model_registry_sources."""
    return [
        problem("MODEL_SOURCE", host, SOURCES_VARIABLE, what, fix)
        for what, fix in weight_source_findings(sources, seeded)
    ]


def store_path_problems(values, gpu_nodes=None):
    """MODEL_PATH errors of the seed and preseeded model paths and MODEL_SOURCE errors of the weight sources, from the
    site's values and from each GPU host's own (gpu_nodes, where they differ), named with their host."""
    out = model_path_problems(SITE, {k: values.get(k) for k in STORE_PATH_VARIABLES})
    out += source_problems(SITE, values.get(SOURCES_VARIABLE), values.get("model_registry_seed_models") or [])
    for host, hv in sorted((gpu_nodes or {}).items()):
        own = {k: v for k, v in (hv or {}).items() if k in STORE_PATH_VARIABLES and v != values.get(k)}
        out += model_path_problems(host, own)
        if SOURCES_VARIABLE in (hv or {}) and hv[SOURCES_VARIABLE] != values.get(SOURCES_VARIABLE):
            seeded = hv.get("model_registry_seed_models", values.get("model_registry_seed_models")) or []
            out += source_problems(host, hv[SOURCES_VARIABLE], seeded)
    return out


def node_loss_problems(models, survival, node_count, named=()):
    """NODE_LOSS warnings: models that would have no replica anywhere after the loss of one GPU node. named: models
    a SPREAD warning already names for running on one node only (one finding per cause)."""
    out = []
    for model in models:
        if model["served_name"] in named:
            continue
        entry = survival.get(model["served_name"])
        if not entry or entry["replicas"] < 1 or entry["after_node_loss"] > 0:
            continue
        where = (
            "the site has a single GPU node"
            if node_count < 2
            else "the other GPU nodes have no room for its %d GPU(s) once the site's other models hold theirs"
            % model["gpus"]
        )
        out.append(
            problem(
                "NODE_LOSS",
                SITE,
                "%s_models" % model["server"],
                "%s: after the loss of %s it runs nowhere: %s, so it stops serving until the node is back"
                % (model["served_name"], entry["worst_node"] or "a GPU node", where),
                "add a GPU node or GPUs with room for one more replica, or lower other models' replicas",
                "warning",
            )
        )
    return out


def _names(value):
    """The names of one placement key: a name or a list of names; None when it is neither."""
    if value is None:
        return []
    if isinstance(value, (str, int, float)) and not isinstance(value, bool):
        return [str(value)]
    if isinstance(value, list) and all(isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in value):
        return [str(v) for v in value]
    return None


def _did_you_mean(name, known):
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6) or [k for k in known if k.lower() == name.lower()]
    return " (did you mean %s?)" % close[0] if close else ""


PLACEMENT_FIX = "write placement: {gpu_types: [H100-80GB], node_groups: [pool-a]} (either or both; lists of names)"


def model_selection(model, nodes):
    """(placement {gpu_types, node_groups}, explicit, GPU nodes the placement selects, problems) of one model. A node
    is selected when its aiinfra_gpu_type is one of gpu_types (when given) and its aiinfra_node_group one of
    node_groups (when given); a model without placement may use every GPU node."""
    name, variable = model["served_name"], "%s_models" % model["server"]
    raw = model.get("placement")
    placement = {key: [] for key in PLACEMENT_KEYS}
    out = []

    def error(message, fix):
        out.append(problem("PLACEMENT", SITE, variable, "%s: %s" % (name, message), fix))

    if raw in (None, {}):
        return placement, False, sorted(nodes), out
    if not isinstance(raw, dict):
        error("placement is %r, not a mapping" % (raw,), PLACEMENT_FIX)
        return placement, True, [], out
    for key in sorted(raw, key=str):
        if key not in PLACEMENT_KEYS:
            error(
                "placement has the key %r, which is not one of its settings%s"
                % (key, _did_you_mean(str(key), sorted(PLACEMENT_KEYS))),
                PLACEMENT_FIX,
            )
    for key, (attribute, host_variable) in sorted(PLACEMENT_KEYS.items()):
        names = _names(raw.get(key))
        if names is None:
            error("placement.%s is %r, not a list of names" % (key, raw.get(key)), PLACEMENT_FIX)
            continue
        placement[key] = sorted(set(names))
        known = {}
        for node, info in nodes.items():
            if info.get(attribute):
                known.setdefault(info[attribute], []).append(node)
        for wanted in placement[key]:
            if wanted in known:
                continue
            if known:
                have = "; ".join("%s on %s" % (v, ", ".join(sorted(n))) for v, n in sorted(known.items()))
                error(
                    "placement.%s names %s, which no GPU node has (%s of the GPU nodes: %s)%s"
                    % (key, wanted, host_variable, have, _did_you_mean(wanted, sorted(known))),
                    "use one of %s, or set %s on the GPU hosts that have it"
                    % (", ".join(sorted(known)), host_variable),
                )
            else:
                error(
                    "placement.%s names %s, but no GPU host sets %s" % (key, wanted, host_variable),
                    "set %s on the GPU hosts (host_vars), e.g. %s: %s" % (host_variable, host_variable, wanted),
                )
    explicit = any(placement.values())
    selected = sorted(
        node
        for node, info in nodes.items()
        if all(
            not placement[key] or info.get(attribute) in placement[key]
            for key, (attribute, _v) in PLACEMENT_KEYS.items()
        )
    )
    if explicit and not selected and not out:
        error(
            "no GPU node has %s"
            % " and ".join(
                "a %s in %s" % (host_variable, ", ".join(placement[key]))
                for key, (_a, host_variable) in sorted(PLACEMENT_KEYS.items())
                if placement[key]
            ),
            "widen the placement, or set aiinfra_gpu_type and aiinfra_node_group of the GPU hosts to match",
        )
    return placement, explicit, selected, out


def _units(capacity, node, gpus):
    """Replicas of a `gpus`-GPU pod one node can hold: its GPU slices for a one-GPU pod, its whole GPUs otherwise."""
    cap = capacity[node]
    return cap["gpus"] * cap["replicas"] if gpus == 1 else cap["gpus"] // gpus


def placement_plan(models, nodes, capacity, reserve_whole):
    """Where each model may run, decided once: sets on each model its ``placement`` ({gpu_types, node_groups}, as
    given), ``node_affinity`` (the required node affinity's matchExpressions the model servers get), ``nodes`` (the
    GPU nodes that match it and can hold a replica) and ``spread`` (hard: its replicas are spread over nodes with
    DoNotSchedule, as each matching node can hold one and there are at least as many such nodes as replicas; soft:
    ScheduleAnyway). Returns the PLACEMENT and SPREAD problems.

    The affinity keeps multi-GPU pods off time-sliced nodes and, when the site has multi-GPU models, one-GPU pods on
    the time-sliced nodes (workloads.whole_gpus_affinity) - unless the model's placement selects no time-sliced node
    (the operator put it on whole GPUs); then it adds the placement's labels (workloads.GPU_TYPE_LABEL,
    workloads.NODE_GROUP_LABEL)."""
    shared = sorted({str(c["replicas"]) for c in capacity.values() if c["replicas"] > 1}, key=int)
    sliced = {n for n, c in capacity.items() if c["replicas"] > 1}
    out = []
    for model in models:
        placement, explicit, selected, found = model_selection(model, nodes)
        out += found
        errors = len([p for p in out if p["severity"] == "error"])
        gpus, name, variable = int(model["gpus"]), model["served_name"], "%s_models" % model["server"]
        what = "tensor_parallel_size" if model["server"] == "vllm" else "gpus"
        expressions = []
        allowed = set(capacity)
        if gpus > 1 and sliced:
            expressions.append({"key": SHARED_LABEL, "operator": "NotIn", "values": shared})
            allowed -= sliced
        elif gpus == 1 and sliced and reserve_whole and (not explicit or sliced & set(selected)):
            expressions.append({"key": SHARED_LABEL, "operator": "In", "values": shared})
            allowed = set(sliced)
        for key, label in (("gpu_types", GPU_TYPE_LABEL), ("node_groups", NODE_GROUP_LABEL)):
            if placement[key]:
                expressions.append({"key": label, "operator": "In", "values": list(placement[key])})
        matching = [n for n in selected if n in allowed]
        usable = [n for n in matching if _units(capacity, n, gpus) >= 1]
        replicas = as_int(model["replicas"], 1)
        # Anywhere on the site (no placement): what the site-wide checks (serving_plan) already judge.
        anywhere = [n for n in allowed if _units(capacity, n, gpus) >= 1]
        if explicit and selected and not found:
            where = ", ".join(selected)
            if not matching and anywhere:
                out.append(
                    problem(
                        "PLACEMENT",
                        SITE,
                        variable,
                        "%s: %s %d needs whole GPUs, but every node of its placement (%s) is time-sliced (a pod gets "
                        "one slice at most there)" % (name, what, gpus, where),
                        "place it on nodes without time-slicing, or give its nodes a class of 1 replica",
                    )
                )
            elif matching and not usable and anywhere:
                out.append(
                    problem(
                        "PLACEMENT",
                        SITE,
                        variable,
                        "%s: %s %d needs %d GPUs on one node, but the nodes of its placement have at most %d (%s)"
                        % (name, what, gpus, gpus, max(capacity[n]["gpus"] for n in matching), where),
                        "place it on nodes with %d GPUs or more, or lower %s" % (gpus, what),
                    )
                )
            elif usable and len(usable) < len(matching):
                small = [n for n in matching if n not in usable]
                out.append(
                    problem(
                        "PLACEMENT",
                        SITE,
                        variable,
                        "%s: %s %s its placement but %s fewer than the %d GPUs one replica needs: no replica "
                        "runs there, and its replicas are spread as the scheduler prefers, not for sure"
                        % (
                            name,
                            ", ".join(small),
                            "matches" if len(small) == 1 else "match",
                            "has" if len(small) == 1 else "have",
                            gpus,
                        ),
                        "narrow the placement to the nodes with %d GPUs or more (%s)" % (gpus, ", ".join(usable)),
                        "warning",
                    )
                )
            room = sum(_units(capacity, n, gpus) for n in usable)
            if usable and room < replicas <= sum(_units(capacity, n, gpus) for n in anywhere):
                out.append(
                    problem(
                        "PLACEMENT",
                        SITE,
                        variable,
                        "%s: %d replica(s) of %d GPU(s) do not fit the nodes of its placement (%s), which hold %d"
                        % (name, replicas, gpus, ", ".join(usable), room),
                        "widen the placement, add nodes of its GPU type or group, or lower replicas",
                    )
                )
        hard = bool(usable) and len(usable) == len(matching) and len(usable) >= replicas
        refused = len([p for p in out if p["severity"] == "error"]) > errors
        if replicas > 1 and usable and not hard and not refused:
            if len(usable) < replicas:
                out.append(
                    problem(
                        "SPREAD",
                        SITE,
                        variable,
                        "%s: its %d replicas cannot be spread over nodes: only %s may run it, so replicas share a "
                        "node and that node's loss takes them all down"
                        % (
                            name,
                            replicas,
                            "%s (%d nodes)" % (", ".join(usable), len(usable)) if len(usable) > 1 else usable[0],
                        ),
                        "add GPU nodes it may use (or widen its placement), or lower its replicas",
                        "warning",
                    )
                )
            elif not explicit:
                out.append(
                    problem(
                        "SPREAD",
                        SITE,
                        variable,
                        "%s: its replicas are spread only as the scheduler prefers (ScheduleAnyway): %s may run its "
                        "pods (node affinity) but %s fewer than the %d GPUs one replica needs, and a hard spread "
                        "would wait for a replica there"
                        % (
                            name,
                            ", ".join(n for n in matching if n not in usable),
                            "has" if len(matching) - len(usable) == 1 else "have",
                            gpus,
                        ),
                        "place it on the nodes with %d GPUs or more (placement.gpu_types or placement.node_groups)"
                        % gpus,
                        "warning",
                    )
                )
        model.update(placement=placement, node_affinity=expressions, nodes=usable, spread="hard" if hard else "soft")
        # The pods that may share each of its GPUs: the most slices of the nodes it may use (vLLM's memory share is
        # divided by it), 1 for whole GPUs; without a node to run on, the site's most sliced node.
        slices = [capacity[n]["replicas"] for n in (usable or allowed) if n in capacity]
        model["gpu_share"] = 1 if gpus > 1 else max([1, *slices])
        if model["server"] == "vllm":
            # vLLM's --gpu-memory-utilization, decided here once (None: the model's own value is not a number,
            # which the capacity check reports).
            try:
                model["memory_utilization"] = memory_utilization(model, model["gpu_share"])
            except (TypeError, ValueError):
                model["memory_utilization"] = None
    return out


def gateway_placement(values, gpu_hosts, cluster_hosts):
    """(nodes the gateway's pods may run on, problems): litellm_placement cpu keeps them on the cluster's non-GPU
    nodes, gpu on the GPU nodes, any on every node. A gateway whose replicas can only run on one node cannot spread
    over failure domains: that node's loss stops every request (warning). cluster_hosts: every cluster node, or
    empty when unknown (no check)."""
    if not truthy(values.get("litellm_enabled")) or not cluster_hosts:
        return None, []
    gpu = set(gpu_hosts)
    where = values.get("litellm_placement")
    nodes = {
        "cpu": [n for n in cluster_hosts if n not in gpu],
        "gpu": [n for n in cluster_hosts if n in gpu],
        "any": list(cluster_hosts),
    }.get(where)
    if nodes is None:
        return None, []  # setting_problems names the placement
    nodes = sorted(set(nodes))
    engine = values.get("autoscaling_engine")
    replicas = as_int(values.get("litellm_replicas"), 2)
    if engine in ("keda", "hpa"):
        replicas = as_int(gateway_min_replicas(values), replicas)
    out = []
    if replicas > 1 and len(nodes) == 1:
        kind = {"cpu": "non-GPU node", "gpu": "GPU node", "any": "cluster node"}[where]
        out.append(
            problem(
                "GATEWAY",
                SITE,
                "litellm_placement",
                "the gateway's %d replicas all run on %s, the only %s litellm_placement %s allows: they cannot "
                "spread over failure domains, and that node's loss (or drain) stops every request"
                % (replicas, nodes[0], kind, where),
                (
                    "add a second server or a non-GPU agent, or set litellm_placement to any"
                    if where == "cpu"
                    else "add nodes the placement allows, or set litellm_placement to any"
                ),
                "warning",
            )
        )
    return nodes, out


def site_plan(values, gpu_nodes, weights_bytes=None, secrets=True, cluster_hosts=None, model_configs=None):
    """The whole computed plan of a site (see the module docstring). cluster_hosts: every cluster node (servers and
    agents), where the gateway may run; None or empty when unknown (its spread is then not checked). model_configs:
    {model path: parsed config.json} of the models the controller can read (tensor_parallel_size is checked
    against their attention heads)."""
    values = dict(values)
    nodes, problems = gpu_node_inputs(gpu_nodes)
    enabled = truthy(values.get("gpu_operator_enabled", True))
    classes = dict(values.get("gpu_operator_time_slicing_classes") or {}) if enabled else {}
    default_class = (values.get("gpu_operator_time_slicing_default") or "") if enabled else ""
    capacity, findings = capacity_findings(nodes, classes, default_class)
    # Without the GPU Operator there is no time-slicing, so the hosts' classes mean nothing.
    problems += [
        problem("GPU_CLASS" if variable == "aiinfra_gpu_class" else "GPU_MEMORY", node, variable, message, "")
        for node, variable, message in findings
        if enabled or variable != "aiinfra_gpu_class"
    ]
    # Sizes measured in the seed directory (a model's own weights_gib wins): resources are derived from them once.
    weights = {path: int(size) / 1073741824.0 for path, size in (weights_bytes or {}).items()}
    vllm = filled("vllm", values.get("vllm_models"), values.get("vllm_image"), weights)
    nim = filled("nim", values.get("nim_models"))
    # A model without its name cannot be planned (validate.yml's argument-spec check names it first).
    problems += [
        problem(
            "MODEL", SITE, "%s_models" % m["server"], "a %s model has no served_name" % m["server"], "add served_name"
        )
        for m in vllm + nim
        if not m.get("served_name")
    ]
    vllm, nim = [m for m in vllm if m.get("served_name")], [m for m in nim if m.get("served_name")]
    models = vllm + nim
    reserve_whole = any(m["gpus"] > 1 for m in models)
    problems += placement_plan(models, nodes, capacity, reserve_whole)
    problems += store_path_problems(values, gpu_nodes)
    stored = list(values.get("model_registry_seed_models") or []) + list(values.get("model_registry_preseeded") or [])
    stored += [
        s["path"] for s in values.get(SOURCES_VARIABLE) or [] if isinstance(s, dict) and isinstance(s.get("path"), str)
    ]
    classed = {
        n: dict(c, **{"class": (nodes[n]["class"] or default_class) if enabled else ""}) for n, c in capacity.items()
    }
    problems += [
        problem(f["code"], SITE, f["variable"], f["problem"], "", f["severity"])
        for f in plan_findings(
            vllm,
            classed,
            values.get("vllm_image"),
            nim,
            set(stored) if stored else None,
            weights,
            model_configs,
            severity=True,
        )
    ]
    problems += setting_problems(values, models, secrets)
    consumers, revoked, found = consumer_rules.consumer_plan(
        values.get("litellm_consumers"),
        [m["served_name"] for m in models],
        {"rpm_limit": values.get("litellm_consumer_rpm_limit"), "tpm_limit": values.get("litellm_consumer_tpm_limit")},
        values.get("litellm_consumer_key_hashes"),
        (values.get("litellm_consumer_keys") or {}) if secrets else None,
        truthy(values.get("litellm_enabled")),
        (values.get("litellm_master_key") or "") if secrets else "",
    )
    problems += found
    limits, found = limits_plan(values)
    problems += found
    prices, found = price_plan(values, models)
    problems += found
    work = model_workloads(values, models, capacity)
    if truthy(values.get("litellm_enabled")):
        work.append(gateway_workload(values))
        gateway_nodes, found = gateway_placement(values, nodes, cluster_hosts)
        problems += found
        if gateway_nodes is not None:
            work[-1]["nodes"] = gateway_nodes
    owned = {w["served_name"]: w["autoscaler"] != "none" for w in work if "served_name" in w}
    for model in models:
        model["autoscaled"] = owned.get(model["served_name"], False)
    shared = [c["replicas"] for c in capacity.values() if c["replicas"] > 1]
    survival = node_loss_capacity(
        # Each model's nodes (placement_plan) go along: serving_plan.place may keep a model's replicas to them.
        [
            {"name": m["served_name"], "gpus": m["gpus"], "replicas": as_int(m["replicas"], 1), "nodes": m["nodes"]}
            for m in models
        ],
        capacity,
        reserve_whole,
    )
    one_node = {
        m["served_name"]
        for m in models
        if len(m["nodes"]) == 1 and m["spread"] == "soft" and as_int(m["replicas"], 1) > 1
    }
    problems += node_loss_problems(models, survival, len(capacity), one_node)
    host_firewall, found = firewall.firewall_plan(values)
    problems += found
    weights, found = weights_distribution(values, gpu_nodes)
    problems += [problem("MODEL_PEERS", SITE, variable, what, fix) for variable, what, fix in found]
    return {
        "nodes": {
            node: dict(
                capacity[node],
                **{"class": (nodes[node]["class"] or default_class) if enabled else ""},
                **{key: nodes[node][key] for key in ("gpu_type", "node_group") if nodes[node][key]},
            )
            for node in capacity
        },
        "classes": class_summary(nodes, capacity, default_class, enabled),
        "capacity": {
            "gpus": sum(c["gpus"] for c in capacity.values()),
            "slices": sum(c["gpus"] * c["replicas"] for c in capacity.values()),
            "whole_gpus": sum(c["gpus"] for c in capacity.values() if c["replicas"] == 1),
        },
        "placement": {"shared_replicas": shared, "reserve_whole": reserve_whole},
        "models": models,
        "workloads": work,
        "model_routes": model_routes(values, models),
        "edge": edge_plan(values),
        "namespaces": namespaces_plan(values),
        "gateway": gateway_plan(values),
        "gpu_operator": gpu_operator_plan(values),
        "install": {
            "mode": values.get("k3s_install_mode") or "online",
            "airgap_dir": values.get("k3s_airgap_dir") or "",
        },
        "autoscaling": {"service_monitors": service_monitors(values)},
        "store": {
            "storage_class": values.get("model_registry_storage_class"),
            "size": values.get("model_registry_size"),
        },
        "consumers": consumers,
        "revoked_consumers": revoked,
        "model_auth": model_auth_plan(values, models),
        "limits": limits,
        "prices": prices,
        "node_loss": survival,
        "firewall": host_firewall,
        "weights": weights,
        "secrets": bool(secrets),
        "problems": problems,
    }
