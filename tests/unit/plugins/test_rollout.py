"""plugins/module_utils/k8s/rollout.py: rollouts read from one LIST of the API's workloads."""

import pytest

from ansible_collections.aiinfra.k3s.plugins.module_utils.k8s.rollout import effective_patches, pending, rolled_out

ANN = "aiinfra.io/secret-versions"


def deployment(name="litellm", generation=2, observed=2, replicas=2, updated=2, available=2, total=2, ns="ai-serving"):
    return {
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns, "generation": generation},
        "spec": {"replicas": replicas},
        "status": {
            "observedGeneration": observed,
            "updatedReplicas": updated,
            "availableReplicas": available,
            "replicas": total,
        },
    }


ONE_REPLICA = {
    "kind": "Deployment",
    "metadata": {"generation": 1},
    "spec": {},
    "status": {"observedGeneration": 1, "updatedReplicas": 1, "availableReplicas": 1, "replicas": 1},
}
READY_STATEFULSET = {
    "kind": "StatefulSet",
    "metadata": {"generation": 1},
    "spec": {"replicas": 1},
    "status": {"observedGeneration": 1, "updatedReplicas": 1, "readyReplicas": 1, "replicas": 1},
}
# name: (object, rolled out?)
ROLLOUTS = {
    "every replica updated and available": (deployment(), True),
    "new generation not observed": (deployment(observed=1), False),
    "one replica of the new revision missing": (deployment(updated=1), False),
    "an old replica still terminating": (deployment(total=3), False),
    "not available yet": (deployment(available=1), False),
    "replicas default to one": (ONE_REPLICA, True),
    "a StatefulSet counts ready replicas": (READY_STATEFULSET, True),
}


@pytest.mark.parametrize("case", sorted(ROLLOUTS))
def test_rolled_out(case):
    obj, done = ROLLOUTS[case]
    assert (rolled_out(obj) is None) == done


def test_pending_names_missing_and_unfinished_workloads_in_manifest_order():
    objects = [deployment("a"), {"kind": "Service", "metadata": {"name": "a"}}, deployment("b"), deployment("c")]
    found = [deployment("c"), deployment("a", updated=1), deployment("b", ns="other")]
    out = pending(objects, found)
    assert [line.split(":")[0] for line in out] == ["Deployment ai-serving/a", "Deployment ai-serving/b"]
    assert "not created yet" in out[1]
    assert pending(objects, found, missing_only=True) == ["Deployment ai-serving/b: not created yet"]
    assert pending(objects, found, kinds=("StatefulSet",)) == []


def patch(name, value):
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "ai-serving"},
        "spec": {"template": {"metadata": {"annotations": {ANN: value}}}},
    }


def with_annotation(obj, value):
    obj["spec"]["template"] = {"metadata": {"annotations": {ANN: value, "other": "x"}}}
    return obj


def test_effective_patches_drop_what_changes_nothing():
    found = [
        with_annotation(deployment("same"), "key=7"),
        with_annotation(deployment("old"), "key=6"),
        deployment("bare"),
    ]
    patches = [patch("same", "key=7"), patch("old", "key=7"), patch("bare", "key=7"), patch("missing", "key=7")]
    assert [p["metadata"]["name"] for p in effective_patches(patches, found)] == ["old", "bare"]
