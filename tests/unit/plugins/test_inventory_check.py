import pytest
from conftest import load_cases

from ansible_collections.aiinfra.k3s.plugins.filter.inventory_problems import inventory_problems
from ansible_collections.aiinfra.k3s.plugins.module_utils.plan.inventory_check import check_inventory, is_rfc1123_name


@pytest.mark.parametrize("case", load_cases("inventory"))
def test_inventory_problems(case):
    groups = case["groups"]
    names = (
        case.get("server_group", "k3s_servers"),
        case.get("agent_group", "k3s_agents"),
        case.get("gpu_group", "gpu_nodes"),
    )
    found = check_inventory(groups, *names)
    assert sorted([p["host"], p["variable"]] for p in found) == sorted(case["problems"])
    for p in found:
        assert p["problem"] and p["fix"], p


@pytest.mark.parametrize(
    ("name", "ok"),
    [
        ("gx10-db4d", True),
        ("gamorcloud01", True),
        ("a.b-c.d", True),
        ("Upper", False),
        ("under_score", False),
        ("-lead", False),
        ("trail-", False),
        ("", False),
        ("a" * 64, False),
        ("a" * 63, True),
    ],
)
def test_rfc1123(name, ok):
    assert is_rfc1123_name(name) is ok


def test_filter_lines_name_host_variable_and_fix():
    lines = inventory_problems({"k3s_servers": ["a", "b"], "k3s_agents": []}, "k3s_servers", "k3s_agents", "gpu")
    assert len(lines) == 1
    assert lines[0].startswith("a,b: aiinfra_server_group: 2 servers")
    assert "Fix: add or remove one server" in lines[0]
