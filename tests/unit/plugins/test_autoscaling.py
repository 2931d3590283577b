"""plugins/module_utils/k8s/autoscaling.py: one autoscaler per workload whose maximum fits the GPUs the others leave
(on the rendered test sites, tests/unit/rendered_sites.py, and as a function), KEDA's own metrics scraped."""

import rendered_sites
import yaml
from rendered_sites import ALLOCATABLE, NAMESPACE, of_kind, workloads

from ansible_collections.aiinfra.k3s.plugins.module_utils.k8s import autoscaling

rendered = rendered_sites.site_fixture()


def test_one_autoscaler_per_target_and_maxima_fit_the_gpus(rendered):
    site, docs, _out, _proc = rendered
    scaled = of_kind(docs, "ScaledObject")
    hpas = of_kind(docs, "HorizontalPodAutoscaler")
    targets = [(o["metadata"]["namespace"], o["spec"]["scaleTargetRef"]["name"]) for o in scaled + hpas]
    assert len(targets) == len(set(targets)), targets
    deployments = {(d["metadata"]["namespace"], d["metadata"]["name"]): d for d in workloads(docs)}
    for target in targets:
        assert target in deployments, target
        assert "replicas" not in deployments[target]["spec"], target  # the autoscaler owns the count
    for obj in scaled + hpas:  # KEDA takes a scaleTargetRef without kind for a Deployment (its default)
        ref = obj["spec"]["scaleTargetRef"]
        target = deployments[(obj["metadata"]["namespace"], ref["name"])]
        assert (ref.get("apiVersion", "apps/v1"), ref.get("kind", "Deployment")) == ("apps/v1", target["kind"]), ref
    assert (NAMESPACE[site], "litellm-ha") in targets
    total = sum(ALLOCATABLE[site].values())
    gpus_at_min = 0
    for dep in deployments.values():
        limits = dep["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
        key = (dep["metadata"]["namespace"], dep["metadata"]["name"])
        minimum = dep["spec"].get("replicas") or next(
            (o["spec"].get("minReplicaCount") or o["spec"].get("minReplicas"))
            for o in scaled + hpas
            if (o["metadata"]["namespace"], o["spec"]["scaleTargetRef"]["name"]) == key
        )
        gpus_at_min += int(limits.get("nvidia.com/gpu", 0)) * minimum
    for obj in scaled:
        dep = deployments[(obj["metadata"]["namespace"], obj["spec"]["scaleTargetRef"]["name"])]
        gpus = int(dep["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"].get("nvidia.com/gpu", 0))
        if gpus:  # scaling this model to its maximum, with every other workload at its minimum, fits the cluster
            extra = (obj["spec"]["maxReplicaCount"] - obj["spec"]["minReplicaCount"]) * gpus
            assert gpus_at_min + extra <= total, (obj["metadata"]["name"], gpus_at_min, extra, total)
            trigger = obj["spec"]["triggers"][0]["metadata"]
            assert "vllm:num_requests_waiting" in trigger["query"]
        else:  # the notes' gateway threshold; the lab's is small enough for tests/lab to go past it
            assert obj["spec"]["triggers"][0]["metadata"]["threshold"] == ("1" if site == "lab" else "50")
    for obj in scaled:  # KEDA's cooldown only applies to scaling to zero: the HPA's scale-down window carries it
        window = obj["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]["scaleDown"]
        assert window == {"stabilizationWindowSeconds": 60 if site == "lab" else 600}, obj["metadata"]["name"]
        assert obj["spec"]["minReplicaCount"] > 0 and "cooldownPeriod" not in obj["spec"]  # KEDA would warn
    zero = autoscaling.scaled_object("m", "ns", "vllm", 0, 2, "http://p:9090", "q", 5, 120)["spec"]
    assert (
        zero["cooldownPeriod"]
        == 120
        == zero["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]["scaleDown"]["stabilizationWindowSeconds"]
    )


def test_gpu_bounds_leave_room_for_every_other_workload():
    capacity = {"g1": {"gpus": 2, "replicas": 1}, "g2": {"gpus": 2, "replicas": 1}}
    models = [
        {"served_name": "big", "tensor_parallel_size": 2, "replicas": 1},
        {"served_name": "small", "tensor_parallel_size": 1, "replicas": 1},
    ]
    assert autoscaling.gpu_bounds(models, [], capacity) == {"big": 1, "small": 2}
    nim = [{"served_name": "n", "gpus": 1, "replicas": 2}]
    assert autoscaling.gpu_bounds(models[1:], nim, capacity) == {"small": 2}


def test_keda_metrics_are_scraped_through_service_monitors(rendered):
    _site, docs, _out, _proc = rendered
    charts = {c["metadata"]["name"]: c["spec"] for c in of_kind(docs, "HelmChart")}
    if "keda" not in charts:
        return
    values = yaml.safe_load(charts["keda"]["valuesContent"])
    for part in ("operator", "metricServer", "webhooks"):
        assert values["prometheus"][part]["enabled"] is True, part
        assert values["prometheus"][part]["serviceMonitor"]["enabled"] is True, part
