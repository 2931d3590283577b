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
  ``replicas``, ``port``, ``image``) and whether an autoscaler owns its replica count;
- ``workloads``: each scalable workload (models and gateway) with its kind, minimum and maximum replicas and the
  autoscaler that owns the count (``keda``, ``hpa``, ``nim-hpa`` or ``none``); a maximum is bounded by the GPUs
  left when every other workload keeps its minimum;
- ``routes``: what the gateway routes (model to Service);
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
  networks, the interfaces pod traffic is trusted on, the overlay's ports, the pod and service ranges;
- ``problems``: ``{code, severity, host, variable, problem, fix}`` (inventory_spec's shape): GPU_CLASS, GPU_COUNT,
  GPU_MEMORY, MODEL, MODEL_PATH, SERVING_PLAN, NODE_LOSS (warning), EDGE, GATEWAY, CONSUMER, AUTOSCALING, SECRET,
  FIREWALL.

``gpu_nodes`` may also carry a GPU host's own STORE_PATH_VARIABLES (where they differ from ``values``): the model
store role copies and checks with each host's values, so each host's are checked, and named.

Roles read the plan and their own variables; none reads another role's facts.
"""

from ansible_collections.aiinfra.k3s.plugins.module_utils import consumers as consumer_rules
from ansible_collections.aiinfra.k3s.plugins.module_utils import edge, firewall, gateway, monitoring
from ansible_collections.aiinfra.k3s.plugins.module_utils.autoscaling import autoscaling_problems, gpu_bounds
from ansible_collections.aiinfra.k3s.plugins.module_utils.inventory_spec import problem
from ansible_collections.aiinfra.k3s.plugins.module_utils.models import STORE_PATH_FIX, as_int, filled, store_path_error
from ansible_collections.aiinfra.k3s.plugins.module_utils.serving import dns_name
from ansible_collections.aiinfra.k3s.plugins.module_utils.serving_plan import (
    capacity_findings,
    node_loss_capacity,
    plan_findings,
)
from ansible_collections.aiinfra.k3s.plugins.module_utils.workloads import MODEL_WORKLOAD_KIND

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
    *firewall.PLAN_VARIABLES,
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


def _truthy(value):
    return value is True or str(value).lower() in ("true", "yes", "on", "1")


def gpu_node_inputs(gpu_nodes):
    """({node: {gpus, class, memory_mib}}, problems) from the GPU hosts' variables."""
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
            min=as_int(values.get("autoscaling_gateway_min_replicas"), replicas),
            max=as_int(values.get("autoscaling_gateway_max_replicas"), replicas),
        )
    return work


def routes(values, models):
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
    if not _truthy(values.get("litellm_enabled")) or not vllm:
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
    if not _truthy(values.get("litellm_enabled")):
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
        return {"host": "", "certificate": False}
    return {
        "host": host,
        "namespace": values.get("traefik_namespace"),
        "tls_secret": values.get("traefik_tls_secret"),
        "certificate": _truthy(values.get("cert_manager_enabled")),
    }


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
        if _truthy(values.get("cert_manager_enabled")):
            certs = {
                "issuer_kind": values.get("cert_manager_issuer_kind"),
                "acme_email": values.get("cert_manager_acme_email"),
            }
        add("EDGE", "traefik_host", edge.edge_problems(traefik, certs))
    gateway_on = _truthy(values.get("litellm_enabled"))
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
        and _truthy(values.get("autoscaling_service_monitors"))
        and not _truthy(values.get("monitoring_enabled"))
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
    if any(m["server"] == "nim" for m in models) and not _truthy(values.get("nim_store_read_only", True)):
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
                "gateway_min": values.get("autoscaling_gateway_min_replicas"),
                "gateway_max": values.get("autoscaling_gateway_max_replicas"),
            }
        ),
    )
    if secrets:
        if gateway_on:
            add("SECRET", "litellm_master_key", gateway.master_key_problems(values.get("litellm_master_key") or ""))
            add("SECRET", "litellm_redis_password", redis_password_problems(values))
        if _truthy(values.get("monitoring_enabled")):
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


def store_path_problems(values, gpu_nodes=None):
    """MODEL_PATH errors of the seed and preseeded model paths, from the site's values and from each GPU host's own
    (gpu_nodes, where they differ), named with their host."""
    out = model_path_problems(SITE, {k: values.get(k) for k in STORE_PATH_VARIABLES})
    for host, hv in sorted((gpu_nodes or {}).items()):
        own = {k: v for k, v in (hv or {}).items() if k in STORE_PATH_VARIABLES and v != values.get(k)}
        out += model_path_problems(host, own)
    return out


def node_loss_problems(models, survival, node_count):
    """NODE_LOSS warnings: models that would have no replica anywhere after the loss of one GPU node."""
    out = []
    for model in models:
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


def site_plan(values, gpu_nodes, weights_bytes=None, secrets=True):
    """The whole computed plan of a site (see the module docstring)."""
    values = dict(values)
    nodes, problems = gpu_node_inputs(gpu_nodes)
    enabled = _truthy(values.get("gpu_operator_enabled", True))
    classes = dict(values.get("gpu_operator_time_slicing_classes") or {}) if enabled else {}
    default_class = (values.get("gpu_operator_time_slicing_default") or "") if enabled else ""
    capacity, findings = capacity_findings(nodes, classes, default_class)
    # Without the GPU Operator there is no time-slicing, so the hosts' classes mean nothing.
    problems += [
        problem("GPU_CLASS" if variable == "aiinfra_gpu_class" else "GPU_MEMORY", node, variable, message, "")
        for node, variable, message in findings
        if enabled or variable != "aiinfra_gpu_class"
    ]
    vllm = filled("vllm", values.get("vllm_models"), values.get("vllm_image"))
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
    problems += store_path_problems(values, gpu_nodes)
    stored = list(values.get("model_registry_seed_models") or []) + list(values.get("model_registry_preseeded") or [])
    weights = {path: int(size) / 1073741824.0 for path, size in (weights_bytes or {}).items()}
    problems += [
        problem("SERVING_PLAN", SITE, variable, message, "")
        for variable, message in plan_findings(
            vllm, capacity, values.get("vllm_image"), nim, set(stored) if stored else None, weights
        )
    ]
    problems += setting_problems(values, models, secrets)
    consumers, revoked, found = consumer_rules.consumer_plan(
        values.get("litellm_consumers"),
        [m["served_name"] for m in models],
        {"rpm_limit": values.get("litellm_consumer_rpm_limit"), "tpm_limit": values.get("litellm_consumer_tpm_limit")},
        values.get("litellm_consumer_key_hashes"),
        (values.get("litellm_consumer_keys") or {}) if secrets else None,
        _truthy(values.get("litellm_enabled")),
        (values.get("litellm_master_key") or "") if secrets else "",
    )
    problems += found
    limits, found = limits_plan(values)
    problems += found
    prices, found = price_plan(values, models)
    problems += found
    work = model_workloads(values, models, capacity)
    if _truthy(values.get("litellm_enabled")):
        work.append(gateway_workload(values))
    owned = {w["served_name"]: w["autoscaler"] != "none" for w in work if "served_name" in w}
    for model in models:
        model["autoscaled"] = owned.get(model["served_name"], False)
    shared = [c["replicas"] for c in capacity.values() if c["replicas"] > 1]
    reserve_whole = any(m["gpus"] > 1 for m in models)
    survival = node_loss_capacity(
        [{"name": m["served_name"], "gpus": m["gpus"], "replicas": as_int(m["replicas"], 1)} for m in models],
        capacity,
        reserve_whole,
    )
    problems += node_loss_problems(models, survival, len(capacity))
    host_firewall, found = firewall.firewall_plan(values)
    problems += found
    return {
        "nodes": {
            node: dict(capacity[node], **{"class": (nodes[node]["class"] or default_class) if enabled else ""})
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
        "routes": routes(values, models),
        "edge": edge_plan(values),
        "consumers": consumers,
        "revoked_consumers": revoked,
        "model_auth": model_auth_plan(values, models),
        "limits": limits,
        "prices": prices,
        "node_loss": survival,
        "firewall": host_firewall,
        "secrets": bool(secrets),
        "problems": problems,
    }
