"""plugins/module_utils/k8s/node_reconcile.py: what a registered Node needs, from the object the API returned."""

import json

import pytest

from ansible_collections.aiinfra.k3s.plugins.module_utils.k8s.node_reconcile import reconcile

LA, TA = "aiinfra.io/labels", "aiinfra.io/taints"
GPU_TAINT = "nvidia.com/gpu=present:NoSchedule"
API_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}


def node(labels=None, taints=None, records=None):
    annotations = {k: v if isinstance(v, str) else json.dumps(v) for k, v in (records or {}).items()}
    return {
        "metadata": {"name": "gpu-1", "labels": labels or {}, "annotations": annotations},
        "spec": {"taints": taints or []},
    }


RECONCILED = node({"gpu": "true", "kubernetes.io/os": "linux"}, [API_TAINT], {LA: ["gpu"], TA: [GPU_TAINT]})

# name: (node, labels, taints, expected subset of the result)
CASES = {
    "already reconciled: nothing to write": (
        RECONCILED,
        {"gpu": "true"},
        [GPU_TAINT],
        {"patch": False, "add_taints": False, "remove_taints": []},
    ),
    "records written by Jinja's to_json spacing count as equal": (
        node({"gpu": "true"}, [API_TAINT], {LA: '["gpu"]', TA: '["%s"]' % GPU_TAINT}),
        {"gpu": "true"},
        [GPU_TAINT],
        {"patch": False},
    ),
    "a label of another value": (
        node({"gpu": "false"}, [API_TAINT], {LA: ["gpu"], TA: [GPU_TAINT]}),
        {"gpu": "true"},
        [GPU_TAINT],
        {"patch": True, "labels": {"gpu": "true"}},
    ),
    "a label value that is not a string compares as its text": (
        RECONCILED,
        {"gpu": True},
        [GPU_TAINT],
        {"patch": True},
    ),
    "a dropped label still on the node is removed": (
        node({"gpu": "true", "old": "x"}, [API_TAINT], {LA: ["gpu", "old"], TA: [GPU_TAINT]}),
        {"gpu": "true"},
        [GPU_TAINT],
        {"patch": True, "labels": {"gpu": "true", "old": None}},
    ),
    "a dropped label already gone only updates the record": (
        node({"gpu": "true"}, [API_TAINT], {LA: ["gpu", "old"], TA: [GPU_TAINT]}),
        {"gpu": "true"},
        [GPU_TAINT],
        {"patch": True, "annotations": {LA: '["gpu"]', TA: '["%s"]' % GPU_TAINT}},
    ),
    "labels set by others are left alone": (
        node({"gpu": "true", "team": "a"}, [API_TAINT], {LA: ["gpu"], TA: [GPU_TAINT]}),
        {"gpu": "true"},
        [GPU_TAINT],
        {"patch": False, "labels": {"gpu": "true"}},
    ),
    "a node never reconciled (no records)": (
        node({"gpu": "true"}, [API_TAINT]),
        {"gpu": "true"},
        [GPU_TAINT],
        {"patch": True, "add_taints": False},
    ),
    "a missing taint is added": (
        node({"gpu": "true"}, [], {LA: ["gpu"], TA: [GPU_TAINT]}),
        {"gpu": "true"},
        [GPU_TAINT],
        {"add_taints": True, "taints": [API_TAINT]},
    ),
    "a taint of another value is set": (
        node({"gpu": "true"}, [dict(API_TAINT, value="absent")], {LA: ["gpu"], TA: [GPU_TAINT]}),
        {"gpu": "true"},
        [GPU_TAINT],
        {"add_taints": True},
    ),
    "a dropped taint still on the node is removed, one already gone is not": (
        node(
            {},
            [{"key": "old", "effect": "NoExecute", "timeAdded": "2026-01-01T00:00:00Z"}],
            {LA: [], TA: ["old:NoExecute", "gone:NoSchedule"]},
        ),
        {},
        [],
        {"remove_taints": [{"key": "old", "effect": "NoExecute"}], "add_taints": False, "patch": True},
    ),
    "a record edited into garbage is rewritten": (
        node({"gpu": "true"}, [API_TAINT], {LA: "not json", TA: [GPU_TAINT]}),
        {"gpu": "true"},
        [GPU_TAINT],
        {"patch": True},
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_reconcile(case):
    obj, labels, taints, expected = CASES[case]
    result = reconcile(obj, labels, taints, LA, TA)
    assert {k: result[k] for k in expected} == expected
    assert result["name"] == "gpu-1"


def test_a_bad_taint_is_refused():
    with pytest.raises(ValueError, match="Effect"):
        reconcile(RECONCILED, {}, ["no-effect"], LA, TA)
