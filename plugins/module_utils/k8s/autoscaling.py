# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Autoscaling: KEDA (a K3s HelmChart) with a ScaledObject on the gateway's request rate and one per vLLM model on
its queue depth, maxima bounded by the GPUs the cluster really has; without KEDA, a CPU HorizontalPodAutoscaler on
the gateway. One autoscaler per target, never two."""

from ansible_collections.aiinfra.k3s.plugins.module_utils.k8s.objects import (
    autoscaler,
    helm_chart,
    labels_for,
    namespace,
    plain,
)
from ansible_collections.aiinfra.k3s.plugins.module_utils.plan.models import filled


def gpu_bounds(vllm_models, nim_models, capacity):
    """Largest replica count each vLLM model can reach while every other workload keeps its minimum.

    capacity: {node: {"gpus", "replicas"}}. Returns {served name: max replicas (at least its minimum)}."""
    vllm_models, nim_models = filled("vllm", vllm_models), filled("nim", nim_models)
    total = sum(int(c["gpus"]) * int(c.get("replicas", 1)) for c in capacity.values())
    minimum = {m["served_name"]: m["gpus"] * int(m["replicas"]) for m in vllm_models}
    nim_floor = sum(m["gpus"] * int(m["replicas"]) for m in nim_models)
    bounds = {}
    for m in vllm_models:
        free = total - nim_floor - sum(v for k, v in minimum.items() if k != m["served_name"])
        bounds[m["served_name"]] = max(free // m["gpus"], int(m["replicas"]))
    return bounds


# Kubernetes refuses an HPA whose scale-down stabilization window is longer than an hour.
MAX_COOLDOWN_SECONDS = 3600


def scaled_object(name, namespace, component, minimum, maximum, server, query, threshold, cooldown):
    """A ScaledObject with one Prometheus trigger. KEDA's cooldownPeriod only applies to scaling to zero (or to an
    idleReplicaCount); above its minimum the HPA KEDA makes scales in after its own stabilization window (300 s unless
    set): the cooldown is written as that window, so scaling in waits that long after the trigger's value last asked
    for more replicas, and as cooldownPeriod too where the minimum is zero."""
    obj = {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": {"name": name, "namespace": namespace, "labels": labels_for(name, component)},
        "spec": {
            "scaleTargetRef": {"name": name},
            "pollingInterval": 15,
            "minReplicaCount": int(minimum),
            "maxReplicaCount": int(maximum),
            "advanced": {
                "horizontalPodAutoscalerConfig": {
                    "behavior": {"scaleDown": {"stabilizationWindowSeconds": int(cooldown)}},
                }
            },
            "triggers": [
                {
                    "type": "prometheus",
                    "metadata": {"serverAddress": server, "query": query, "threshold": str(threshold)},
                }
            ],
        },
    }
    if int(minimum) == 0:  # KEDA's webhook warns that cooldownPeriod does nothing above zero
        obj["spec"]["cooldownPeriod"] = int(cooldown)
    return obj


def keda_values(service_monitors):
    """KEDA chart values: the metrics endpoints of its three parts, and a ServiceMonitor for each so that the
    Prometheus Operator scrapes them (the chart creates none unless asked)."""
    on = bool(service_monitors) and str(service_monitors).lower() not in ("false", "0", "no", "off")
    part = {"enabled": True, "serviceMonitor": {"enabled": on}}
    return {"prometheus": {name: dict(part) for name in ("operator", "metricServer", "webhooks")}}


def autoscaling_manifests(workloads, p):
    """The autoscaling objects of the site plan's workloads (those whose autoscaler is keda or hpa).

    workloads: the plan's [{name, kind, namespace, min, max, autoscaler, server, served_name, queue_threshold}];
    p: engine (keda, hpa or none), namespace (KEDA's), chart_version, chart_repo, chart_file, install_mode,
    service_monitors, prometheus_url, gateway_threshold, queue_threshold, cooldown.
    """
    p, workloads = plain(p), plain(workloads)
    out = []
    if p["engine"] == "keda":
        out += [
            # KEDA's pods run as non-root without privileges; warn on anything short of restricted.
            namespace(p["namespace"], "baseline", "restricted"),
            helm_chart(
                "keda",
                "keda",
                p["chart_repo"],
                p["chart_version"],
                p["namespace"],
                keda_values(p.get("service_monitors", True)),
                p["chart_file"] if p.get("install_mode") == "airgap" else "",
            ),
        ]
    # The gateway first, then the models in the plan's order.
    ordered = [w for w in workloads if w["server"] == "litellm"] + [w for w in workloads if w["server"] != "litellm"]
    for work in ordered:
        if work["autoscaler"] == "keda":
            if work["server"] == "litellm":
                query = "sum(rate(litellm_proxy_total_requests_metric_total[2m]))"
                threshold = p["gateway_threshold"]
            else:
                query = 'sum(vllm:num_requests_waiting{model_name="%s"})' % work["served_name"]
                threshold = work.get("queue_threshold", p["queue_threshold"])
            scaler = scaled_object(
                work["name"],
                work["namespace"],
                "gateway" if work["server"] == "litellm" else work["server"],
                work["min"],
                work["max"],
                p["prometheus_url"],
                query,
                threshold,
                p["cooldown"],
            )
            # The target's kind as the workload builders make it (model_servers.MODEL_WORKLOAD_KIND for models).
            scaler["spec"]["scaleTargetRef"].update({"apiVersion": "apps/v1", "kind": work["kind"]})
            out.append(scaler)
        elif work["autoscaler"] == "hpa":
            out.append(
                autoscaler(
                    work["name"],
                    work["namespace"],
                    labels_for(work["name"], "gateway"),
                    work["min"],
                    work["max"],
                    {"cpu": 70},
                    work["kind"],
                )
            )
    return out


def cooldown_problems(engine, cooldown):
    """The cooldown is also the scale-down window of the HPA KEDA makes, which Kubernetes bounds to an hour."""
    if engine != "keda":
        return []
    try:
        seconds = int(cooldown)
    except (TypeError, ValueError):
        return ["autoscaling_cooldown_seconds is %r, not a whole number of seconds" % (cooldown,)]
    if not 0 <= seconds <= MAX_COOLDOWN_SECONDS:
        return [
            "autoscaling_cooldown_seconds is %d: KEDA writes it as its HPA's scale-down window, which Kubernetes "
            "bounds to 0-%d s (an HPA with more is refused and nothing scales): use at most %d"
            % (seconds, MAX_COOLDOWN_SECONDS, MAX_COOLDOWN_SECONDS)
        ]
    return []


def autoscaling_problems(p):
    problems = []
    if p.get("engine") not in ("keda", "hpa", "none"):
        problems.append("autoscaling_engine is %r: use keda, hpa or none" % p.get("engine"))
    bounds = {}
    for key, variable in (
        ("gateway_min", "autoscaling_gateway_min_replicas"),
        ("gateway_max", "autoscaling_gateway_max_replicas"),
    ):
        try:
            bounds[key] = int(p.get(key, 0))
        except (TypeError, ValueError):
            # The argument-spec check names the type too; the rest of the plan is still computed.
            problems.append("%s is %r, not a whole number of replicas" % (variable, p.get(key)))
    if len(bounds) == 2 and bounds["gateway_max"] < bounds["gateway_min"]:
        problems.append(
            "autoscaling_gateway_max_replicas (%s) is below litellm_replicas (%s): raise it"
            % (p.get("gateway_max"), p.get("gateway_min"))
        )
    return problems
