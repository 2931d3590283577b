"""Upgrade paths (one minor per step) and the end-of-support table."""

import datetime

import pytest

from ansible_collections.aiinfra.k3s.plugins.module_utils.plan import k8s_support

CASES = [
    # running, target, steps, problem fragment (None: the plan runs)
    (["v1.36.1+k3s1"], "v1.36.4+k3s1", ["v1.36.4+k3s1"], None),
    (["v1.35.8+k3s1", "v1.35.8+k3s1"], "v1.36.4+k3s1", ["v1.36.4+k3s1"], None),
    (
        ["v1.33.5+k3s1"],
        "v1.36.4+k3s1",
        ["v1.34.9+k3s1", "v1.35.8+k3s1", "v1.36.4+k3s1"],
        "would skip 1.34, 1.35",
    ),
    # A node left behind on 1.34 while the others run 1.35: the oldest decides.
    (["v1.35.8+k3s1", "v1.34.9+k3s1"], "v1.36.4+k3s1", ["v1.35.8+k3s1", "v1.36.4+k3s1"], "would skip 1.35"),
    (["v1.36.4+k3s1"], "v1.35.8+k3s1", [], "does not downgrade"),
    ([], "v1.36.4+k3s1", ["v1.36.4+k3s1"], None),
    (["v1.36.4+k3s1"], "1.37", [], "is not a K3s release"),
]


@pytest.mark.parametrize(("running", "target", "steps", "fragment"), CASES)
def test_upgrade_path(running, target, steps, fragment):
    path = k8s_support.upgrade_path(running, target)
    assert path["steps"] == steps
    if fragment is None:
        assert path["problem"] == ""
    else:
        assert fragment in path["problem"]
        if steps:
            assert " -> ".join(steps) in path["problem"]


def test_the_support_table_covers_the_pinned_minor_and_the_upgrade_stops():
    for stop in k8s_support.NEWEST_K3S.values():
        assert k8s_support.end_of_support(stop), stop
    assert k8s_support.end_of_support("v1.33.5+k3s1") == "2026-06-28"
    assert k8s_support.end_of_support("v2.0.0") is None
    datetime.date.fromisoformat(k8s_support.WRITTEN)
