# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Monitoring of the serving stack: kube-prometheus-stack as a K3s HelmChart, scrape targets (PodMonitor for the
model servers and the gateway, ServiceMonitor for the DCGM exporter), the recording and alert rules of the
figures in docs/architecture.md (a PrometheusRule, also written as a plain rules file for promtool), and Grafana dashboards."""

import json

from ansible_collections.aiinfra.k3s.plugins.module_utils.k8s.objects import (
    helm_chart,
    labels_for,
    namespace,
    plain,
    secret,
)

NS_LABEL = 'namespace="%s"'


def serving_monitor(name, ns, labels, serving_namespace, components, path):
    """PodMonitor of the serving pods whose component is (In, [...]) or is not (NotIn, [...]) one of a list,
    scraped at `path`."""
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PodMonitor",
        "metadata": {"name": name, "namespace": ns, "labels": labels},
        "spec": {
            "namespaceSelector": {"matchNames": [serving_namespace]},
            "selector": {
                "matchLabels": {"app.kubernetes.io/part-of": "aiinfra-serving"},
                "matchExpressions": [
                    {"key": "app.kubernetes.io/component", "operator": components[0], "values": components[1]}
                ],
            },
            "podMetricsEndpoints": [{"port": "http", "path": path, "interval": "15s"}],
        },
    }


def _quantile(q, name):
    return {
        "record": "aiinfra:inference_latency_seconds:p%d" % round(q * 100),
        "expr": "histogram_quantile(%s, sum by (le, model_name) (rate(vllm:e2e_request_latency_seconds_bucket[5m])))"
        % q,
    }


def rule_groups(p):
    """Prometheus rule groups. p: serving_namespace, prices ({model: {prompt, completion}} in USD per token),
    gpu_temp_celsius, latency_p95_seconds, error_ratio, restarts_30m, consumers (optional: [{name, team,
    spend_alert_usd_per_hour, ...}], see consumer_rules)."""
    p = plain(p)
    ns = p["serving_namespace"]
    watched = 'namespace=~"%s|gpu-operator|cert-manager"' % ns
    prices = []
    for model, price in sorted((p.get("prices") or {}).items()):
        for kind in ("prompt", "completion"):
            prices.append(
                {
                    "record": "aiinfra:token_price_usd",
                    "expr": "vector(%r)" % float(price[kind]),
                    "labels": {"model_name": model, "kind": kind},
                }
            )
    recording = [
        {"record": "aiinfra:gpu_utilization:avg", "expr": "avg by (Hostname) (DCGM_FI_DEV_GPU_UTIL)"},
        {
            "record": "aiinfra:gpu_memory_used:ratio",
            "expr": "sum by (Hostname) (DCGM_FI_DEV_FB_USED) / "
            "sum by (Hostname) (DCGM_FI_DEV_FB_USED + DCGM_FI_DEV_FB_FREE)",
        },
        _quantile(0.5, "p50"),
        _quantile(0.95, "p95"),
        _quantile(0.99, "p99"),
        {
            "record": "aiinfra:inference_requests:rate5m",
            "expr": "sum by (model_name) (rate(vllm:request_success_total[5m]))",
        },
        {
            "record": "aiinfra:prompt_tokens:rate5m",
            "expr": "sum by (model_name) (rate(vllm:prompt_tokens_total[5m]))",
        },
        {
            "record": "aiinfra:generation_tokens:rate5m",
            "expr": "sum by (model_name) (rate(vllm:generation_tokens_total[5m]))",
        },
        {
            "record": "aiinfra:gateway_requests:rate2m",
            "expr": "sum(rate(litellm_proxy_total_requests_metric_total[2m]))",
        },
        {
            "record": "aiinfra:gateway_error_ratio:rate5m",
            "expr": "sum(rate(litellm_proxy_failed_requests_metric_total[5m])) / "
            "sum(rate(litellm_proxy_total_requests_metric_total[5m]))",
        },
        {
            "record": "aiinfra:gpu_allocated:sum",
            "expr": 'sum(kube_pod_container_resource_requests{resource="nvidia_com_gpu"})',
        },
        {
            # GPU hours handed out over the last day (allocated GPUs averaged over 24 h, times 24).
            "record": "aiinfra:gpu_hours:1d",
            "expr": "avg_over_time(aiinfra:gpu_allocated:sum[1d]) * 24",
        },
        {
            "record": "aiinfra:token_cost_usd:rate1h",
            "expr": "sum by (model_name) (rate(vllm:prompt_tokens_total[1h]) * on (model_name) group_left "
            'aiinfra:token_price_usd{kind="prompt"}) * 3600 + sum by (model_name) '
            "(rate(vllm:generation_tokens_total[1h]) * on (model_name) group_left "
            'aiinfra:token_price_usd{kind="completion"}) * 3600',
        },
    ]
    alerts = [
        {
            "alert": "GPUNotAllocatable",
            "expr": 'max_over_time(kube_node_status_allocatable{resource="nvidia_com_gpu"}[6h]) > on (node) '
            'kube_node_status_allocatable{resource="nvidia_com_gpu"}',
            "for": "10m",
            "labels": {"severity": "critical"},
            "annotations": {
                "summary": "{{ $labels.node }} lost allocatable GPUs",
                "description": "The node advertised more GPUs in the last 6 h than it does now: check the device "
                "plugin and the driver on it (playbooks/verify.yml).",
            },
        },
        {
            "alert": "GPUXidError",
            "expr": "DCGM_FI_DEV_XID_ERRORS > 0",
            "labels": {"severity": "critical"},
            "annotations": {
                "summary": "XID {{ $value }} on GPU {{ $labels.gpu }} of {{ $labels.Hostname }}",
                "description": "The driver reported an XID error; most need a GPU reset or a node reboot.",
            },
        },
        {
            "alert": "GPUTemperatureHigh",
            "expr": "DCGM_FI_DEV_GPU_TEMP > %d" % int(p["gpu_temp_celsius"]),
            "for": "5m",
            "labels": {"severity": "warning"},
            "annotations": {"summary": "GPU {{ $labels.gpu }} of {{ $labels.Hostname }} at {{ $value }} C"},
        },
        {
            "alert": "InferenceLatencyHigh",
            "expr": "aiinfra:inference_latency_seconds:p95 > %s" % float(p["latency_p95_seconds"]),
            "for": "10m",
            "labels": {"severity": "warning"},
            "annotations": {"summary": "p95 latency of {{ $labels.model_name }} is {{ $value }} s"},
        },
        {
            "alert": "GatewayErrorRateHigh",
            "expr": "aiinfra:gateway_error_ratio:rate5m > %s" % float(p["error_ratio"]),
            "for": "5m",
            "labels": {"severity": "critical"},
            "annotations": {"summary": "{{ $value | humanizePercentage }} of gateway requests fail"},
        },
        {
            "alert": "ReplicasBelowDisruptionBudget",
            "expr": "kube_poddisruptionbudget_status_current_healthy{%s} < "
            "kube_poddisruptionbudget_status_desired_healthy{%s}" % (NS_LABEL % ns, NS_LABEL % ns),
            "for": "5m",
            "labels": {"severity": "critical"},
            "annotations": {"summary": "{{ $labels.poddisruptionbudget }} has fewer healthy pods than it needs"},
        },
        {
            "alert": "PodRestarting",
            "expr": "increase(kube_pod_container_status_restarts_total{%s}[30m]) > %d"
            % (watched, int(p["restarts_30m"])),
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": "{{ $labels.namespace }}/{{ $labels.pod }} restarted {{ $value }} times in 30 min"
            },
        },
    ]
    groups = [{"name": "aiinfra-serving.rules", "interval": "30s", "rules": recording}]
    if prices:
        groups.insert(0, {"name": "aiinfra-prices.rules", "rules": prices})
    thresholds, consumer_alerts = _consumer_budgets(p.get("consumers") or [])
    if thresholds:
        groups.insert(0, {"name": "aiinfra-consumer-budgets.rules", "rules": thresholds})
    groups.append({"name": "aiinfra-consumers.rules", "interval": "30s", "rules": consumer_rules()})
    groups.append({"name": "aiinfra-serving.alerts", "rules": alerts})
    if consumer_alerts:
        groups.append({"name": "aiinfra-consumers.alerts", "rules": consumer_alerts})
    return groups


# The gateway (LiteLLM's prometheus callback) labels its series with the key's alias (api_key_alias: the consumer's
# name) and the model name the consumer asked for (requested_model: the gateway's model group); litellm_spend_metric
# is LiteLLM's own cost of each answer, priced from the model prices in the gateway config.
_BY_CONSUMER_MODEL = "api_key_alias, requested_model"


def consumer_rules():
    """Recording rules of usage and cost by consumer (and model), for every key the gateway has seen."""
    return [
        {
            "record": "aiinfra:consumer_model_spend_usd:rate1h",
            "expr": "sum by (%s) (rate(litellm_spend_metric_total[1h])) * 3600" % _BY_CONSUMER_MODEL,
        },
        {
            "record": "aiinfra:consumer_spend_usd:rate1h",
            "expr": "sum by (api_key_alias) (rate(litellm_spend_metric_total[1h])) * 3600",
        },
        {
            "record": "aiinfra:consumer_requests:rate5m",
            "expr": "sum by (%s) (rate(litellm_proxy_total_requests_metric_total[5m]))" % _BY_CONSUMER_MODEL,
        },
        {
            "record": "aiinfra:consumer_input_tokens:rate1h",
            "expr": "sum by (%s) (rate(litellm_input_tokens_metric_total[1h])) * 3600" % _BY_CONSUMER_MODEL,
        },
        {
            "record": "aiinfra:consumer_output_tokens:rate1h",
            "expr": "sum by (%s) (rate(litellm_output_tokens_metric_total[1h])) * 3600" % _BY_CONSUMER_MODEL,
        },
        {
            "record": "aiinfra:consumer_failed_requests:rate5m",
            "expr": "sum by (%s, exception_status) (rate(litellm_proxy_failed_requests_metric_total[5m]))"
            % _BY_CONSUMER_MODEL,
        },
        {
            # 429: the key passed its rpm or tpm limit at the gateway.
            "record": "aiinfra:consumer_throttled_requests:rate5m",
            "expr": 'sum by (%s) (rate(litellm_proxy_failed_requests_metric_total{exception_status="429"}[5m]))'
            % _BY_CONSUMER_MODEL,
        },
    ]


def _consumer_budgets(consumers):
    """The spend alert thresholds of the consumers that set one, as data (one series per consumer), and the one
    alert that compares each consumer's spend with its threshold; ([], []) when no consumer sets one."""
    thresholds = [
        {
            "record": "aiinfra:consumer_spend_alert_usd_per_hour",
            "expr": "vector(%r)" % float(c["spend_alert_usd_per_hour"]),
            "labels": dict({"api_key_alias": c["name"]}, **({"team": c["team"]} if c.get("team") else {})),
        }
        for c in sorted(consumers, key=lambda c: c["name"])
        if c.get("spend_alert_usd_per_hour") is not None
    ]
    if not thresholds:
        return [], []
    threshold = (
        "{{ with printf \"aiinfra:consumer_spend_alert_usd_per_hour{api_key_alias='%s'}\" $labels.api_key_alias "
        '| query }}{{ . | first | value | printf "%.2f" }}{{ end }}'
    )
    alert = {
        "alert": "ConsumerSpendHigh",
        "expr": "aiinfra:consumer_spend_usd:rate1h > on (api_key_alias) group_left (team) "
        "aiinfra:consumer_spend_alert_usd_per_hour",
        "for": "15m",
        "labels": {"severity": "warning"},
        "annotations": {
            "summary": 'Consumer {{ $labels.api_key_alias }} spends {{ $value | printf "%.2f" }} USD/h, above its '
            "alert threshold of " + threshold + " USD/h",
            "description": "The spend of the key over the last hour (LiteLLM's litellm_spend_metric, priced from the "
            "gateway's model prices) has been above the consumer's spend_alert_usd_per_hour for 15 min. A budget "
            "is an alert, not enforcement: the gateway keeps serving the key within its rpm/tpm limits; lower "
            "the limits or revoke the key to stop the spend.",
        },
    }
    return thresholds, [alert]


def _panel(pid, title, exprs, unit, x, y, w=12, h=8, kind="timeseries"):
    return {
        "id": pid,
        "type": kind,
        "title": title,
        "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "gridPos": {"x": x, "y": y, "w": w, "h": h},
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "targets": [
            {"refId": chr(65 + i), "expr": expr, "legendFormat": legend} for i, (expr, legend) in enumerate(exprs)
        ],
    }


def _dashboard(uid, title, panels):
    return {
        "uid": uid,
        "title": title,
        "tags": ["aiinfra"],
        "timezone": "browser",
        "schemaVersion": 39,
        "refresh": "30s",
        "time": {"from": "now-6h", "to": "now"},
        "templating": {
            "list": [{"name": "datasource", "type": "datasource", "query": "prometheus", "label": "Data source"}]
        },
        "panels": panels,
    }


def dashboards():
    """The three dashboards: GPUs, serving, cost. Every query uses the recording rules above or exporter metrics."""
    gpu = _dashboard(
        "aiinfra-gpu",
        "AI infra / GPUs",
        [
            _panel(1, "GPU utilisation by node", [("aiinfra:gpu_utilization:avg", "{{Hostname}}")], "percent", 0, 0),
            _panel(2, "GPU memory used", [("aiinfra:gpu_memory_used:ratio", "{{Hostname}}")], "percentunit", 12, 0),
            _panel(3, "GPU temperature", [("DCGM_FI_DEV_GPU_TEMP", "{{Hostname}} gpu {{gpu}}")], "celsius", 0, 8),
            _panel(4, "Power draw", [("DCGM_FI_DEV_POWER_USAGE", "{{Hostname}} gpu {{gpu}}")], "watt", 12, 8),
            _panel(
                5,
                "GPUs allocated / allocatable",
                [
                    ("aiinfra:gpu_allocated:sum", "allocated"),
                    ('sum(kube_node_status_allocatable{resource="nvidia_com_gpu"})', "allocatable"),
                ],
                "short",
                0,
                16,
            ),
            _panel(6, "Last XID error", [("DCGM_FI_DEV_XID_ERRORS", "{{Hostname}} gpu {{gpu}}")], "short", 12, 16),
        ],
    )
    serving = _dashboard(
        "aiinfra-serving",
        "AI infra / Serving",
        [
            _panel(
                1,
                "Latency p50 / p95 / p99",
                [
                    ("aiinfra:inference_latency_seconds:p50", "p50 {{model_name}}"),
                    ("aiinfra:inference_latency_seconds:p95", "p95 {{model_name}}"),
                    ("aiinfra:inference_latency_seconds:p99", "p99 {{model_name}}"),
                ],
                "s",
                0,
                0,
            ),
            _panel(2, "Requests per second", [("aiinfra:inference_requests:rate5m", "{{model_name}}")], "reqps", 12, 0),
            _panel(
                3,
                "Tokens per second",
                [
                    ("aiinfra:prompt_tokens:rate5m", "prompt {{model_name}}"),
                    ("aiinfra:generation_tokens:rate5m", "generated {{model_name}}"),
                ],
                "short",
                0,
                8,
            ),
            _panel(
                4,
                "Queue: waiting / running",
                [
                    ("sum by (model_name) (vllm:num_requests_waiting)", "waiting {{model_name}}"),
                    ("sum by (model_name) (vllm:num_requests_running)", "running {{model_name}}"),
                ],
                "short",
                12,
                8,
            ),
            _panel(
                5,
                "Gateway requests and error ratio",
                [("aiinfra:gateway_requests:rate2m", "requests/s"), ("aiinfra:gateway_error_ratio:rate5m", "errors")],
                "short",
                0,
                16,
            ),
            _panel(
                6,
                "KV cache usage",
                [("avg by (model_name) (vllm:kv_cache_usage_perc)", "{{model_name}}")],
                "percentunit",
                12,
                16,
            ),
        ],
    )
    cost = _dashboard(
        "aiinfra-cost",
        "AI infra / Cost",
        [
            _panel(
                1,
                "Cost per hour by model (USD)",
                [("aiinfra:token_cost_usd:rate1h", "{{model_name}}")],
                "currencyUSD",
                0,
                0,
            ),
            _panel(2, "GPU hours, last 24 h", [("aiinfra:gpu_hours:1d", "GPU hours")], "short", 12, 0, kind="stat"),
            _panel(
                3,
                "Tokens per hour by model",
                [
                    ("aiinfra:prompt_tokens:rate5m * 3600", "prompt {{model_name}}"),
                    ("aiinfra:generation_tokens:rate5m * 3600", "generated {{model_name}}"),
                ],
                "short",
                0,
                8,
                w=24,
            ),
            _panel(
                4,
                "Spend per hour by consumer (USD)",
                [
                    ("aiinfra:consumer_spend_usd:rate1h", "{{api_key_alias}}"),
                    ("aiinfra:consumer_spend_alert_usd_per_hour", "alert threshold {{api_key_alias}}"),
                ],
                "currencyUSD",
                0,
                16,
            ),
            _panel(
                5,
                "Spend per hour by consumer and model (USD)",
                [("aiinfra:consumer_model_spend_usd:rate1h", "{{api_key_alias}} {{requested_model}}")],
                "currencyUSD",
                12,
                16,
            ),
            _panel(
                6,
                "Tokens per hour by consumer",
                [
                    ("sum by (api_key_alias) (aiinfra:consumer_input_tokens:rate1h)", "input {{api_key_alias}}"),
                    ("sum by (api_key_alias) (aiinfra:consumer_output_tokens:rate1h)", "output {{api_key_alias}}"),
                ],
                "short",
                0,
                24,
            ),
            _panel(
                7,
                "Requests per second by consumer",
                [("sum by (api_key_alias) (aiinfra:consumer_requests:rate5m)", "{{api_key_alias}}")],
                "reqps",
                12,
                24,
            ),
            _panel(
                8,
                "Throttled (429) and failed requests by consumer",
                [
                    ("sum by (api_key_alias) (aiinfra:consumer_throttled_requests:rate5m)", "429 {{api_key_alias}}"),
                    (
                        "sum by (api_key_alias, exception_status) "
                        '(aiinfra:consumer_failed_requests:rate5m{exception_status!="429"})',
                        "{{exception_status}} {{api_key_alias}}",
                    ),
                ],
                "reqps",
                0,
                32,
                w=24,
            ),
        ],
    )
    return {"gpu": gpu, "serving": serving, "cost": cost}


def monitoring_manifests(p):
    """Namespace, the kube-prometheus-stack HelmChart, scrape targets, the PrometheusRule and dashboard ConfigMaps.
    p: namespace, chart_version, chart_repo, serving_namespace, gpu_operator_namespace, retention, storage_size,
    grafana_secret, plus the rule thresholds and prices of rule_groups."""
    p = plain(p)
    ns = p["namespace"]
    labels = labels_for("monitoring", "observability")
    values = {
        "prometheus": {
            "prometheusSpec": {
                "retention": p["retention"],
                # Pick up the collection's PodMonitors, ServiceMonitors and rules, not only the chart's own.
                "podMonitorSelectorNilUsesHelmValues": False,
                "serviceMonitorSelectorNilUsesHelmValues": False,
                "ruleSelectorNilUsesHelmValues": False,
                "storageSpec": {
                    "volumeClaimTemplate": {
                        "spec": {
                            "accessModes": ["ReadWriteOnce"],
                            "resources": {"requests": {"storage": p["storage_size"]}},
                        }
                    }
                },
            }
        },
        "grafana": {
            "admin": {"existingSecret": p["grafana_secret"], "userKey": "admin-user", "passwordKey": "admin-password"},
            "sidecar": {"dashboards": {"enabled": True, "label": "grafana_dashboard", "labelValue": "1"}},
        },
    }
    out = [
        # node-exporter reads the host's /proc and /sys with host networking: privileged.
        namespace(ns, "privileged"),
        helm_chart(
            "kube-prometheus-stack",
            "kube-prometheus-stack",
            p["chart_repo"],
            p["chart_version"],
            ns,
            values,
            p["chart_file"] if p.get("install_mode") == "airgap" else "",
        ),
        # vLLM serves /metrics, NIM /v1/metrics, the gateway (LiteLLM's prometheus callback) /metrics/.
        serving_monitor(
            "aiinfra-serving", ns, labels, p["serving_namespace"], ("NotIn", ["nim", "gateway"]), "/metrics"
        ),
        serving_monitor("aiinfra-nim", ns, labels, p["serving_namespace"], ("In", ["nim"]), "/v1/metrics"),
        serving_monitor("aiinfra-gateway", ns, labels, p["serving_namespace"], ("In", ["gateway"]), "/metrics/"),
        {
            "apiVersion": "monitoring.coreos.com/v1",
            "kind": "ServiceMonitor",
            "metadata": {"name": "dcgm-exporter", "namespace": ns, "labels": labels},
            "spec": {
                "namespaceSelector": {"matchNames": [p["gpu_operator_namespace"]]},
                "selector": {"matchLabels": {"app": "nvidia-dcgm-exporter"}},
                "endpoints": [{"port": "gpu-metrics", "interval": "15s"}],
            },
        },
        {
            "apiVersion": "monitoring.coreos.com/v1",
            "kind": "PrometheusRule",
            "metadata": {"name": "aiinfra-serving", "namespace": ns, "labels": labels},
            "spec": {"groups": rule_groups(p)},
        },
    ]
    for name, board in sorted(dashboards().items()):
        out.append(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    "name": "aiinfra-dashboard-%s" % name,
                    "namespace": ns,
                    "labels": dict(labels, grafana_dashboard="1"),
                },
                "data": {"aiinfra-%s.json" % name: json.dumps(board, indent=2, sort_keys=True)},
            }
        )
    return out


def grafana_secret(p, password):
    return secret(
        p["grafana_secret"],
        p["namespace"],
        labels_for("grafana", "credentials"),
        {"admin-user": "admin", "admin-password": password},
    )


def grafana_password_problems(password):
    """Grafana's admin password: set, and long enough to be random (never shown)."""
    if len(password or "") < 16:
        return [
            "monitoring_grafana_admin_password is %s: put 16 or more random characters in a vault-encrypted "
            "group_vars file (e.g. openssl rand -base64 24)" % ("not set" if not password else "too short")
        ]
    return []
