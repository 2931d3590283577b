"""gpu_allocation analysis on cluster snapshots kept as data (tests/unit/data/gpu_cluster.yml)."""

import pytest
import yaml
from conftest import DATA

from ansible_collections.aiinfra.k3s.plugins.module_utils.gpu import allocation as ga

CASES = yaml.safe_load((DATA / "gpu_cluster.yml").read_text())["cases"]


def run(case):
    return ga.analyze(
        case["nodes"]["items"], case["pods"]["items"], case.get("expected_gpus"), allowed_pods=case.get("allowed_pods")
    )


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_snapshot(case):
    result = run(case)
    found = sorted([f["code"], f["node"], f["pod"]] for f in result["findings"])
    assert found == sorted(case["expect"]), [f["message"] for f in result["findings"]]
    for f in result["findings"]:
        assert f["severity"] == ga.CODES[f["code"]] and f["message"]
    if "message" in case:
        assert any(case["message"] in f["message"] for f in result["findings"])
    for key, value in (case.get("summary") or {}).items():
        assert result["summary"][key] == value, key
    for key, value in (case.get("node") or {}).items():
        assert result["nodes"][0][key] == value, key


def test_every_code_has_a_case():
    covered = {e[0] for c in CASES for e in c["expect"]}
    assert covered == set(ga.CODES)


@pytest.mark.parametrize(
    ("pod", "expected"),
    [
        ({"spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": 2}}}]}}, {"nvidia.com/gpu": 2}),
        (
            {
                "spec": {
                    "containers": [
                        {"resources": {"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1"}}},
                        {"resources": {"limits": {"nvidia.com/gpu": "1"}}},
                    ]
                }
            },
            {"nvidia.com/gpu": 2},
        ),
        (
            {
                "spec": {
                    "initContainers": [{"resources": {"limits": {"nvidia.com/gpu": 1}}}],
                    "containers": [{"resources": {"limits": {"nvidia.com/gpu": 3}}}],
                }
            },
            {"nvidia.com/gpu": 3},
        ),
        (
            {
                "spec": {
                    "initContainers": [
                        {"restartPolicy": "Always", "resources": {"limits": {"nvidia.com/gpu": 1}}},
                        {"resources": {"limits": {"nvidia.com/gpu": 2}}},
                    ],
                    "containers": [{"resources": {}}],
                }
            },
            {"nvidia.com/gpu": 3},
        ),
        (
            {"spec": {"containers": [{"resources": {"limits": {"nvidia.com/mig-1g.10gb": 2, "cpu": "4"}}}]}},
            {"nvidia.com/mig-1g.10gb": 2},
        ),
        ({"spec": {"containers": [{"name": "cpu-only"}]}}, {}),
    ],
)
def test_pod_gpus(pod, expected):
    assert ga.pod_gpus(pod) == expected


@pytest.mark.parametrize(
    ("tolerations", "ok"),
    [
        ([{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}], True),
        ([{"key": "nvidia.com/gpu", "operator": "Equal", "value": "present"}], True),
        ([{"key": "nvidia.com/gpu", "value": "absent", "effect": "NoSchedule"}], False),
        ([{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"}], False),
        ([{"operator": "Exists"}], True),
        ([], False),
    ],
)
def test_tolerates(tolerations, ok):
    taint = ga.parse_taint("nvidia.com/gpu=present:NoSchedule")
    assert ga.tolerates({"spec": {"tolerations": tolerations}}, taint) is ok


def test_failing_selects_severities():
    result = run(next(c for c in CASES if c["id"] == "gpu-node-not-ready-and-cordoned"))
    assert len(ga.failing(result["findings"], ["error"])) == 2
    assert ga.failing(result["findings"], []) == []
