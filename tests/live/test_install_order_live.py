"""Install order on the live API: KEDA's chart creates ServiceMonitors when asked, so its HelmChart must not reach
the cluster before the Prometheus Operator's ServiceMonitor CRD is served (on a real site kube-prometheus-stack's
chart brings it; K3s's helm-controller would otherwise run KEDA's install, fail it and retry). apply.yml holds the
component back until the CRD is established.

Simulated, and named so: no helm-controller runs here (the HelmChart is stored, no chart is installed), and the
test itself plays kube-prometheus-stack's part: it removes the CRD before the run and serves it again while
apply.yml waits. The site has monitoring off so that nothing else of it needs the CRD.
"""

import json
import threading
import time

from conftest import helpers, run_playbook

CRD = "servicemonitors.monitoring.coreos.com"
SECRETS = {"litellm_master_key": "sk-3e8b1d6f9a2c4e7b0d5f8a1c3e6b9d2f4a7c"}
NAMESPACE = "live-order"
HOLD_SECONDS = 20  # how long the test keeps the CRD away while apply.yml runs


def served_again(crd):
    """The CRD as `kubectl apply` takes it again: spec and names, no server-set fields."""
    meta = {k: v for k, v in crd["metadata"].items() if k in ("name", "labels", "annotations")}
    meta.get("annotations", {}).pop("kubectl.kubernetes.io/last-applied-configuration", None)
    return {"apiVersion": crd["apiVersion"], "kind": crd["kind"], "metadata": meta, "spec": crd["spec"]}


def test_keda_is_handed_over_only_once_the_service_monitor_crd_is_served(live, tmp_path):
    directory = tmp_path / "inventory"
    directory.mkdir()
    group_vars = {
        "monitoring_enabled": False,
        "autoscaling_engine": "keda",
        "autoscaling_service_monitors": True,
        "vllm_models": [{"served_name": "m1", "path": "org/m1"}],
    }
    inventory = helpers.write_site(directory, ["cp-1"], {"gpu-1": 1}, group_vars)
    live.use_site(inventory)
    proc, _result = run_playbook("node_labels.yml", inventory, live, extra=["-e", json.dumps(SECRETS)])
    assert proc.returncode == 0, proc.stdout[-3000:]
    saved = served_again(live.get("crd", CRD))
    extra = [
        "-e",
        json.dumps({**SECRETS, "aiinfra_namespace": NAMESPACE}),
        "-e",
        f"manifests_kubeconfig={live.kubeconfig}",
        "-e",
        "manifests_rollout_timeout=120",
        "-e",
        "manifests_crd_timeout=120",
    ]
    outcome = {}
    runner = threading.Thread(
        target=lambda: outcome.update(run=run_playbook("apply.yml", inventory, live, extra=extra)), daemon=True
    )
    try:
        live.kubectl("delete", "helmchart", "-n", "kube-system", "keda", "--ignore-not-found", "--wait=true")
        live.kubectl("delete", "crd", CRD, "--wait=true", "--timeout=60s")
        runner.start()
        # While the CRD is away, every component before KEDA is applied (the network policies come last) and KEDA
        # is not.
        live.wait_until(
            "the network policies applied",
            lambda: live.items("networkpolicies", "-n", NAMESPACE),
            timeout=240,
        )
        deadline = time.monotonic() + HOLD_SECONDS
        while time.monotonic() < deadline:
            keda = live.kubectl("get", "helmchart", "-n", "kube-system", "keda", check=False)
            assert keda.returncode != 0, "the KEDA HelmChart was applied before the ServiceMonitor CRD was served"
            assert runner.is_alive(), "apply.yml ended while the CRD was away: %s" % outcome.get("run")
            time.sleep(1)
        live.apply([saved])  # kube-prometheus-stack's part: the CRD is served again
        runner.join(timeout=300)
        assert "run" in outcome, "apply.yml did not finish within 300 s of the CRD's return"
        proc, _result = outcome["run"]
        assert proc.returncode == 0, proc.stdout[-4000:]
        crd = live.get("crd", CRD)
        chart = live.get("helmchart", "-n", "kube-system", "keda")
        assert chart["metadata"]["creationTimestamp"] >= crd["metadata"]["creationTimestamp"]
    finally:
        # Whatever happened: the CRD back for the other tests, this site's objects gone.
        if live.kubectl("get", "crd", CRD, check=False).returncode != 0:
            live.apply([saved])
        if runner.ident is not None:
            runner.join(timeout=300)
        live.kubectl("delete", "helmchart", "-n", "kube-system", "keda", "--ignore-not-found", "--wait=true")
        live.remove_site(NAMESPACE)
