"""Issue 26, item 5, on the lab's REAL kubelets: the collection's PodMonitors, PrometheusRule and ScaledObjects meet
the real prometheus-operator, Prometheus and KEDA (the lab's builds of their Go modules, run by
lab/nodes/observability.py with the lab's own minimal manifests in place of kube-prometheus-stack's and KEDA's charts,
which the lab cannot fetch; Grafana is not served here, so the collection's dashboards are not shown by one).

The scrape targets are the real LiteLLM proxy and the STAND-IN model server (lab/nodes/programs/model_server_standin.py,
which serves vLLM's metric names). The load goes HTTPS through the lab's real Traefik; every loop is bounded in count
and time, and every request goes to a lab node. Named so that it runs before test_lab_live.py, whose last test removes a
GPU node.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.parse

import pytest
import yaml
from test_lab_live import (
    KUBECONFIG,
    NAMESPACE,
    ROOT,
    edge,
    get,
    kubectl,
    lab_var,
    master_key,
    served_model,
    traefik_ready,
    wait_for,
)

from lab.nodes import observability

pytestmark = pytest.mark.skipif(not KUBECONFIG.exists(), reason=f"no lab cluster ({KUBECONFIG}): run `make lab`")
MONITORING = observability.MONITORING_NAMESPACE
PROM = f"/api/v1/namespaces/{MONITORING}/services/http:{observability.PROMETHEUS}:{observability.PROMETHEUS_PORT}/proxy"


def prometheus(path: str, **params) -> dict:
    """One answer of the lab's Prometheus HTTP API, through the API server's service proxy."""
    query = ("?" + urllib.parse.urlencode(params)) if params else ""
    answer = json.loads(kubectl("get", "--raw", f"{PROM}{path}{query}").stdout)
    assert answer["status"] == "success", answer
    return answer["data"]


def inventory_var(name: str):
    """A setting of the lab site: its inventory's value, else the autoscaling role's default."""
    for path in (
        ROOT / "inventories" / "lab" / "group_vars" / "all.yml",
        ROOT / "roles" / "autoscaling" / "defaults" / "main.yml",
    ):
        values = yaml.safe_load(path.read_text())
        if name in values:
            return values[name]
    raise KeyError(name)


def gateway_scaled_object() -> dict:
    (scaled,) = [
        s
        for s in get("scaledobjects.keda.sh", "-n", NAMESPACE)["items"]
        if s["metadata"]["labels"].get("app.kubernetes.io/component") == "gateway"
    ]
    return scaled


def gateway_replicas() -> tuple[int, int]:
    """(spec.replicas, readyReplicas) of the gateway Deployment."""
    dep = get("deployment", gateway_scaled_object()["spec"]["scaleTargetRef"]["name"], "-n", NAMESPACE)
    return int(dep["spec"].get("replicas", 1)), int(dep["status"].get("readyReplicas", 0))


def pods_labelled(component: str) -> list[dict]:
    return get("pods", "-n", NAMESPACE, "-l", f"app.kubernetes.io/component={component}")["items"]


def up_targets(pool: str):
    """The active targets of one scrape pool (the operator names it podMonitor/<ns>/<name>/<endpoint>) that are up."""
    targets = [t for t in prometheus("/api/v1/targets", state="active")["activeTargets"] if t["scrapePool"] == pool]
    return [t for t in targets if t["health"] == "up"]


def test_prometheus_scrapes_the_gateway_and_the_model_servers_from_the_collections_pod_monitors():
    """The operator turns the collection's PodMonitors into scrape pools; every gateway and model-server pod is a
    target and up (the gateway's /metrics/ is LiteLLM's prometheus callback, the model servers' /metrics the stand-in's
    vLLM names). Prometheus's pods carry the labels the collection's NetworkPolicy admits scrapes from."""
    for monitor, component in (("aiinfra-gateway", "gateway"), ("aiinfra-serving", "vllm")):
        pool = f"podMonitor/{MONITORING}/{monitor}/0"
        ready = {p["status"].get("podIP") for p in pods_labelled(component) if p["status"].get("podIP")}

        def all_up(pool=pool, ready=ready):
            up = up_targets(pool)
            found = {t["labels"].get("instance", "").rsplit(":", 1)[0] for t in up}
            return up if ready <= found else None

        up = wait_for(f"every {component} pod a target of {pool} and up", all_up, timeout=120, every=5)
        print(f"\n[lab-live] {pool}: {len(up)} target(s) up: {sorted(t['scrapeUrl'] for t in up)}")
        assert len(up) >= len(ready) >= 2
    wanted = yaml.safe_load((ROOT / "roles" / "network_policies" / "defaults" / "main.yml").read_text())[
        "network_policies_prometheus_labels"
    ]
    pods = get("pods", "-n", MONITORING, "-l", f"operator.prometheus.io/name={observability.PROMETHEUS}")["items"]
    assert pods and all(wanted.items() <= p["metadata"]["labels"].items() for p in pods), [
        p["metadata"]["labels"] for p in pods
    ]


def test_the_collections_alert_and_recording_rules_load_and_evaluate():
    """Prometheus loads every group of the collection's PrometheusRule (the operator's rule files), and every rule
    evaluates without error (health ok once evaluated)."""
    (rule,) = [
        r for r in get("prometheusrules", "-n", MONITORING)["items"] if r["metadata"]["name"] == "aiinfra-serving"
    ]
    wanted = {g["name"]: len(g["rules"]) for g in rule["spec"]["groups"]}

    def evaluated():
        groups = {g["name"]: g for g in prometheus("/api/v1/rules")["groups"]}
        if not wanted.keys() <= groups.keys():
            return None
        rules = [r for name in wanted for r in groups[name]["rules"]]
        return rules if all(r["health"] != "unknown" for r in rules) else None

    rules = wait_for("the collection's rule groups loaded and evaluated", evaluated, timeout=150, every=5)
    bad = [(r["name"], r.get("lastError")) for r in rules if r["health"] != "ok"]
    assert not bad, bad
    assert len(rules) == sum(wanted.values())
    alerts = [r for r in rules if r["type"] == "alerting"]
    print(f"\n[lab-live] {len(wanted)} rule groups, {len(rules)} rules ({len(alerts)} alerts) loaded and evaluated")
    assert alerts


def load(seconds: float, rate: float, stop: threading.Event, results: list) -> None:
    """Chat requests through the lab's Traefik at `rate` per second, for at most `seconds` or until `stop`; bounded
    (rate x seconds requests, each with edge()'s 30 s timeout), under the lab's per-key edge budget: never more than
    its burst in flight, so that requests held up together (the 2-core host stalls under this load; a p90 latency of
    53 s was seen) cannot reach Traefik together past the burst, which it answers 429."""
    chat = {"model": served_model(), "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
    key, interval, due = master_key(), 1.0 / rate, time.monotonic()
    in_flight, threads = threading.BoundedSemaphore(int(lab_var("traefik_rate_limit_burst"))), []
    ends = time.monotonic() + seconds

    def one():
        try:
            results.append(edge("/v1/chat/completions", chat, key)[0])
        except OSError as exc:
            results.append(type(exc).__name__)
        finally:
            in_flight.release()

    for _request in range(int(seconds * rate)):
        if stop.is_set() or time.monotonic() > ends:
            break
        time.sleep(max(0.0, due - time.monotonic()))
        while not in_flight.acquire(timeout=1.0):
            if stop.is_set() or time.monotonic() > ends:
                break
        else:
            # A stall (of this process, or of the requests in flight) is not made up with a burst: the requests stay
            # an interval apart, within the edge budget they are meant to stay under.
            due = max(due, time.monotonic()) + interval
            threads.append(threading.Thread(target=one, daemon=True))
            threads[-1].start()
            continue
        break
    for thread in threads:
        thread.join(40)


def test_keda_scales_the_gateway_up_under_load_and_back_down_after_its_cooldown():
    """The collection's ScaledObject for the gateway (prometheus trigger on LiteLLM's request rate, the lab's
    threshold of 1 request/s per replica, minimum litellm_replicas, maximum 4): KEDA's metrics API serves the
    trigger's value; under a bounded load of 4 requests/s through Traefik (the lab's edge budget is 5/s per key) the
    HPA KEDA made takes the gateway from 3 to 4 replicas; after the load, back to 3 once the cooldown (written as the
    HPA's scale-down window) has passed. The reaction times are printed (figures, not assertions)."""
    wait_for("the lab's Traefik Ready", traefik_ready, timeout=120)
    scaled = gateway_scaled_object()
    conditions = {c["type"]: c["status"] for c in scaled["status"]["conditions"]}
    assert conditions.get("Ready") == "True", scaled["status"]
    minimum, maximum = scaled["spec"]["minReplicaCount"], scaled["spec"]["maxReplicaCount"]
    assert (minimum, maximum) == (
        int(lab_var("litellm_replicas")),
        int(inventory_var("autoscaling_gateway_max_replicas")),
    )
    cooldown = int(inventory_var("autoscaling_cooldown_seconds"))
    hpa = get("hpa", scaled["status"]["hpaName"], "-n", NAMESPACE)
    assert hpa["spec"]["behavior"]["scaleDown"]["stabilizationWindowSeconds"] == cooldown
    trigger = scaled["spec"]["triggers"][0]["metadata"]
    metric = scaled["status"]["externalMetricNames"][0]
    wait_for("the gateway at its minimum", lambda: gateway_replicas() == (minimum, minimum), timeout=300, every=5)

    stop, results = threading.Event(), []
    started = time.monotonic()
    worker = threading.Thread(target=load, args=(240, 4.0, stop, results), daemon=True)
    worker.start()
    try:
        # the series the trigger queries has data (Prometheus, through the same query) ...
        series = wait_for(
            "the trigger's query answered by Prometheus with a rate",
            lambda: [
                s for s in prometheus("/api/v1/query", query=trigger["query"])["result"] if float(s["value"][1]) > 0
            ],
            timeout=120,
            every=5,
        )
        # ... and KEDA's metrics API serves it to the HPA
        selector = f"scaledobject.keda.sh/name={scaled['metadata']['name']}"
        raw = f"/apis/external.metrics.k8s.io/v1beta1/namespaces/{NAMESPACE}/{metric}?labelSelector={selector}"
        served = json.loads(kubectl("get", "--raw", raw).stdout)["items"]
        print(f"\n[lab-live] trigger query {trigger['query']} = {series[0]['value'][1]}; KEDA metrics API: "
              f"{served[0]['value'] if served else None}")  # fmt: skip
        assert served
        wait_for("the gateway scaled to its maximum", lambda: gateway_replicas()[0] == maximum, timeout=200, every=3)
        up = time.monotonic() - started
        wait_for(
            "the new gateway replica Ready", lambda: gateway_replicas() == (maximum, maximum), timeout=180, every=3
        )
        ready = time.monotonic() - started
    finally:
        stop.set()
        worker.join(60)
    ended = time.monotonic()
    failed = [r for r in results if r != 200]
    wait_for(
        "the gateway back at its minimum", lambda: gateway_replicas()[0] == minimum, timeout=cooldown + 240, every=5
    )
    down = time.monotonic() - ended
    print(f"\n[lab-live] KEDA scale-up: {up:.0f} s from the load's start to {maximum} replicas wanted, {ready:.0f} s to "
          f"the new replica Ready; scale-down: {down:.0f} s after the load ended (cooldown {cooldown} s); load "
          f"{len(results)} requests, {len(failed)} not 200 {sorted({str(r) for r in failed})}")  # fmt: skip
    assert down >= cooldown - 5, "scaled in before the cooldown"
    assert len(failed) <= len(results) // 100, failed[:10]
