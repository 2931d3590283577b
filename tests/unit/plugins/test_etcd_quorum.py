import pytest
from ansible.errors import AnsibleFilterError
from conftest import load_cases

from ansible_collections.aiinfra.k3s.plugins.filter.etcd_reset_quorum import FilterModule
from ansible_collections.aiinfra.k3s.plugins.module_utils.plan.etcd_quorum import quorum, reset_quorum


@pytest.mark.parametrize(("members", "need"), [(0, 0), (1, 1), (2, 2), (3, 2), (4, 3), (5, 3), (6, 4), (7, 4)])
def test_quorum_is_a_majority(members, need):
    assert quorum(members) == need


def test_quorum_refuses_a_negative_count():
    with pytest.raises(ValueError, match="negative"):
        quorum(-1)


@pytest.mark.parametrize("case", load_cases("etcd_quorum"))
def test_reset_quorum(case):
    result = reset_quorum(case["servers"], case["targeted"])
    assert {k: v for k, v in result.items() if k != "problems"} == case["expected"]
    assert [{k: p[k] for k in ("code", "host", "variable")} for p in result["problems"]] == case["problems"]
    for p in result["problems"]:
        assert p["severity"] == "error" and p["fix"]
    text = " ".join(p["problem"] + " " + p["fix"] for p in result["problems"])
    for message in case.get("messages", []):
        assert message in text


def test_filter_is_registered_and_rejects_a_doubled_server():
    flt = FilterModule().filters()["etcd_reset_quorum"]
    assert flt(["cp-1", "cp-2", "cp-3"], ["cp-1", "cp-2"])["problems"][0]["code"] == "QUORUM_LOST"
    with pytest.raises(AnsibleFilterError, match="names a host twice"):
        flt(["cp-1", "cp-1"], [])
