"""Monitoring rules and dashboards: the generated rules pass `promtool check rules` and the promtool unit tests
in data/promtool/, and every query of the rules and dashboards uses a metric that the recording rules define or
an exporter documents (data/metric_names.yml); on the rendered test sites (tests/unit/rendered_sites.py), every serving
pod is scraped once, at its own metrics path."""

import json
import re
import shutil
import subprocess

import pytest
import rendered_sites
import yaml
from conftest import DATA
from rendered_sites import of_kind, workloads

from ansible_collections.aiinfra.k3s.plugins.module_utils.k8s import monitoring

PARAMS = {
    "serving_namespace": "ia-services-payed",
    "prices": {"nemotron-35b": {"prompt": 0.000002, "completion": 0.000006}},
    "gpu_temp_celsius": 85,
    "latency_p95_seconds": 10,
    "error_ratio": 0.05,
    "restarts_30m": 3,
    "consumers": [
        {
            "name": "team-a-chat",
            "team": "team-a",
            "models": ["nemotron-35b"],
            "rpm_limit": 60,
            "tpm_limit": 100000,
            "spend_alert_usd_per_hour": 1.5,
        },
        {
            "name": "team-b-batch",
            "team": "team-b",
            "models": ["nemotron-35b"],
            "rpm_limit": 10,
            "tpm_limit": 50000,
            "spend_alert_usd_per_hour": None,
        },
    ],
}
DOCUMENTED = {name for names in yaml.safe_load((DATA / "metric_names.yml").read_text()).values() for name in names}
KEYWORDS = {
    "sum", "avg", "max", "min", "count", "by", "on", "without", "group_left", "group_right", "rate", "increase",
    "histogram_quantile", "max_over_time", "avg_over_time", "vector", "round", "and", "or", "unless", "bool",
}  # fmt: skip


def promtool():
    path = shutil.which("promtool")
    if not path:
        pytest.fail("promtool not found: apt-get install prometheus (make test and .ci/run install it)")
    return path


@pytest.fixture
def rules_dir(tmp_path):
    (tmp_path / "rules.yml").write_text(yaml.safe_dump({"groups": monitoring.rule_groups(PARAMS)}, sort_keys=False))
    return tmp_path


def test_promtool_accepts_the_rules(rules_dir):
    proc = subprocess.run(
        [promtool(), "check", "rules", str(rules_dir / "rules.yml")], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS" in proc.stdout


def test_promtool_refuses_a_broken_rule(tmp_path):
    """The check can fail: a rule with a syntax error is refused."""
    broken = {"groups": [{"name": "x", "rules": [{"record": "a:b", "expr": "sum(rate(x[5m])"}]}]}
    (tmp_path / "bad.yml").write_text(yaml.safe_dump(broken))
    proc = subprocess.run(
        [promtool(), "check", "rules", str(tmp_path / "bad.yml")], capture_output=True, text=True, check=False
    )
    assert proc.returncode != 0


@pytest.mark.parametrize("test_file", sorted((DATA / "promtool").glob("*.yml")), ids=lambda p: p.stem)
def test_promtool_rule_unit_tests(rules_dir, test_file):
    shutil.copy(test_file, rules_dir / test_file.name)
    proc = subprocess.run(
        [promtool(), "test", "rules", test_file.name],
        capture_output=True,
        text=True,
        cwd=rules_dir,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def metric_names(expr):
    """Metric names in a PromQL expression (label matchers, strings, ranges and grouping clauses removed)."""
    expr = re.sub(r'"[^"]*"', "", expr)
    expr = re.sub(r"\{[^}]*\}", "", expr)
    expr = re.sub(r"\[[^\]]*\]", "", expr)
    expr = re.sub(r"\b(by|on|without|group_left|group_right)\s*\([^)]*\)", "", expr)
    names = set()
    for match in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", expr):
        following = expr[match.end() :].lstrip()[:1]
        token = match.group(0)
        if token in KEYWORDS or following == "(" or re.fullmatch(r"[0-9.e+-]+", token):
            continue
        names.add(token)
    return names


def recorded():
    return {r["record"] for g in monitoring.rule_groups(PARAMS) for r in g["rules"] if "record" in r}


def test_rules_use_only_known_metrics():
    known = DOCUMENTED | recorded()
    for group in monitoring.rule_groups(PARAMS):
        for rule in group["rules"]:
            assert metric_names(rule["expr"]) <= known, (
                rule.get("record") or rule["alert"],
                metric_names(rule["expr"]),
            )


def test_metric_name_extraction_is_not_vacuous():
    names = metric_names('sum by (le) (rate(vllm:e2e_request_latency_seconds_bucket{model_name="x"}[5m])) > 3')
    assert names == {"vllm:e2e_request_latency_seconds_bucket"}
    assert metric_names("no_such_metric * 2") - (DOCUMENTED | recorded()) == {"no_such_metric"}


def test_dashboards_are_valid_and_query_known_metrics():
    known = DOCUMENTED | recorded()
    boards = monitoring.dashboards()
    assert set(boards) == {"gpu", "serving", "cost"}
    for name, board in boards.items():
        board = json.loads(json.dumps(board))  # valid JSON, as Grafana loads it
        assert board["uid"].startswith("aiinfra-") and board["panels"], name
        ids = [p["id"] for p in board["panels"]]
        assert len(ids) == len(set(ids)), name
        for panel in board["panels"]:
            assert panel["targets"], (name, panel["title"])
            for target in panel["targets"]:
                used = metric_names(target["expr"])
                assert used and used <= known, (name, panel["title"], used - known)
            grid = panel["gridPos"]
            assert grid["x"] + grid["w"] <= 24, (name, panel["title"])


def test_every_recording_rule_is_shown_or_alerted_on():
    """A figure nobody looks at is dead weight: each recorded series feeds a dashboard or another rule."""
    exprs = [t["expr"] for b in monitoring.dashboards().values() for p in b["panels"] for t in p["targets"]]
    exprs += [r["expr"] for g in monitoring.rule_groups(PARAMS) for r in g["rules"]]
    used = set().union(*(metric_names(e) for e in exprs))
    assert recorded() <= used, recorded() - used


def test_alerts_cover_the_issue_list():
    alerts = {r["alert"] for g in monitoring.rule_groups(PARAMS) for r in g["rules"] if "alert" in r}
    assert alerts == {
        "GPUNotAllocatable",
        "GPUXidError",
        "GPUTemperatureHigh",
        "InferenceLatencyHigh",
        "GatewayErrorRateHigh",
        "ReplicasBelowDisruptionBudget",
        "PodRestarting",
        "ConsumerSpendHigh",
    }


CONSUMER_RECORDS = {
    "aiinfra:consumer_model_spend_usd:rate1h",
    "aiinfra:consumer_spend_usd:rate1h",
    "aiinfra:consumer_requests:rate5m",
    "aiinfra:consumer_input_tokens:rate1h",
    "aiinfra:consumer_output_tokens:rate1h",
    "aiinfra:consumer_failed_requests:rate5m",
    "aiinfra:consumer_throttled_requests:rate5m",
}


def rules_of(params):
    return [r for g in monitoring.rule_groups(params) for r in g["rules"]]


@pytest.mark.parametrize("consumers", [None, []], ids=["missing", "empty"])
def test_no_consumers_no_budget_rules_nor_alert(consumers):
    params = {k: v for k, v in PARAMS.items() if k != "consumers"}
    if consumers is not None:
        params["consumers"] = consumers
    groups = monitoring.rule_groups(params)
    names = [g["name"] for g in groups]
    assert "aiinfra-consumer-budgets.rules" not in names and "aiinfra-consumers.alerts" not in names
    rules = rules_of(params)
    assert not [r for r in rules if r.get("record") == "aiinfra:consumer_spend_alert_usd_per_hour"]
    assert "ConsumerSpendHigh" not in {r.get("alert") for r in rules}
    # The usage and cost of every key the gateway sees are recorded all the same.
    assert {r.get("record") for r in rules} >= CONSUMER_RECORDS


def test_only_consumers_with_a_threshold_get_one():
    thresholds = [r for r in rules_of(PARAMS) if r.get("record") == "aiinfra:consumer_spend_alert_usd_per_hour"]
    assert thresholds == [
        {
            "record": "aiinfra:consumer_spend_alert_usd_per_hour",
            "expr": "vector(1.5)",
            "labels": {"api_key_alias": "team-a-chat", "team": "team-a"},
        }
    ]
    no_threshold = dict(PARAMS, consumers=[c for c in PARAMS["consumers"] if c["name"] == "team-b-batch"])
    assert "ConsumerSpendHigh" not in {r.get("alert") for r in rules_of(no_threshold)}
    assert "aiinfra:consumer_spend_alert_usd_per_hour" not in {r.get("record") for r in rules_of(no_threshold)}


def test_one_spend_alert_for_all_consumers():
    two = dict(PARAMS, consumers=[dict(c, spend_alert_usd_per_hour=2) for c in PARAMS["consumers"]])
    rules = rules_of(two)
    assert sorted(
        r["labels"]["api_key_alias"] for r in rules if r.get("record", "").endswith("alert_usd_per_hour")
    ) == [
        "team-a-chat",
        "team-b-batch",
    ]
    assert [r["alert"] for r in rules if r.get("alert") == "ConsumerSpendHigh"] == ["ConsumerSpendHigh"]
    (alert,) = [r for r in rules if r.get("alert") == "ConsumerSpendHigh"]
    assert "on (api_key_alias)" in alert["expr"] and alert["for"] == "15m"
    assert alert["labels"] == {"severity": "warning"}
    assert "not enforcement" in alert["annotations"]["description"]


def test_manifests_carry_the_consumer_rules():
    params = dict(
        PARAMS,
        namespace="monitoring",
        chart_version="1.0.0",
        chart_repo="https://example.invalid/charts",
        retention="15d",
        storage_size="20Gi",
        grafana_secret="grafana-admin",
        gpu_operator_namespace="gpu-operator",
    )
    (rule,) = [o for o in monitoring.monitoring_manifests(params) if o["kind"] == "PrometheusRule"]
    assert rule["spec"]["groups"] == monitoring.rule_groups(PARAMS)
    assert "aiinfra-consumers.alerts" in [g["name"] for g in rule["spec"]["groups"]]


rendered = rendered_sites.site_fixture()


def test_every_serving_pod_is_scraped_once_at_its_own_metrics_path(rendered):
    """Each model server and gateway pod is selected by exactly one PodMonitor, on the path it serves (NIM: /v1)."""
    _site, docs, _out, _proc = rendered
    monitors = of_kind(docs, "PodMonitor")
    if not monitors:
        return

    def selects(monitor, labels):
        selector = monitor["spec"]["selector"]
        if any(labels.get(k) != v for k, v in selector.get("matchLabels", {}).items()):
            return False
        for expr in selector.get("matchExpressions", []):
            inside = labels.get(expr["key"]) in expr["values"]
            if inside != (expr["operator"] == "In"):
                return False
        return True

    for dep in workloads(docs):
        template = dep["spec"]["template"]
        path = template["metadata"].get("annotations", {}).get("prometheus.io/path")
        if not path:
            continue
        chosen = [m for m in monitors if selects(m, template["metadata"]["labels"])]
        assert len(chosen) == 1, (dep["metadata"]["name"], [m["metadata"]["name"] for m in chosen])
        assert chosen[0]["spec"]["podMetricsEndpoints"][0]["path"] == path, dep["metadata"]["name"]
