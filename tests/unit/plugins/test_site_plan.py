"""plugins/module_utils/plan/site_plan.py: the one computed plan of a site (cases in data/site_plan.yml)."""

import copy
from pathlib import Path

import pytest
import yaml

from ansible_collections.aiinfra.k3s.plugins.module_utils.plan import site_plan

DATA = yaml.safe_load((Path(__file__).parents[1] / "data" / "site_plan.yml").read_text())
CASES = DATA["cases"]


def plan_of(case):
    values = dict(copy.deepcopy(DATA["base"]), **copy.deepcopy(case.get("values") or {}))
    return site_plan.site_plan(
        values, case.get("gpu_nodes") or {}, {}, case.get("secrets", True), case.get("cluster_hosts")
    )


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_site_plan(case):
    plan = plan_of(case)
    expect = dict(case["expect"])
    # Warnings most cases leave aside (a model of unknown size, N-1) are checked where a case names them.
    named = {p[0] for p in expect["problems"]}
    problems = [
        p
        for p in plan["problems"]
        if (p["code"] != "NODE_LOSS" or "node_loss" in expect) and (p["code"] != "MODEL_SIZE" or "MODEL_SIZE" in named)
    ]
    found = sorted({(p["code"], p["variable"]) for p in problems})
    assert found == sorted(tuple(p) for p in expect.pop("problems")), problems
    if "problem_hosts" in expect:
        assert [p["host"] for p in problems] == expect.pop("problem_hosts"), problems
    for p in problems:
        assert p["severity"] == case.get("severity", "error") and p["host"] and p["problem"]
        if p["code"] in ("PLACEMENT", "SPREAD", "GPU_TYPE", "NODE_GROUP"):
            assert p["fix"], p
    for text in expect.pop("problem_text", []):
        assert any(text in p["problem"] for p in problems), (text, problems)
    # Parts of the models and of the gateway's workload, by name.
    for part in ("nodes", "spread", "gpu_share"):
        for name, want in expect.pop("models_" + part, {}).items():
            assert [m[part] for m in plan["models"] if m["served_name"] == name] == [want], (name, part)
    if "gateway_min" in expect:
        assert [w["min"] for w in plan["workloads"] if w["server"] == "litellm"] == [expect.pop("gateway_min")]
    if "gateway_nodes" in expect:
        assert [w.get("nodes") for w in plan["workloads"] if w["server"] == "litellm"] == [expect.pop("gateway_nodes")]
    for key, want in expect.items():
        got = plan[key]
        if key == "nodes":  # memory_mib appears only where the inventory gives it
            got = {n: {k: v for k, v in c.items() if k != "memory_mib"} for n, c in got.items()}
        assert got == want, key


def test_secrets_never_reach_the_plan():
    case = {"values": {"monitoring_enabled": True, "monitoring_grafana_admin_password": "pw-0123456789abcdef"}}
    text = repr(plan_of(case))
    for name in site_plan.SECRET_VARIABLES:
        value = dict(DATA["base"], **case["values"]).get(name)
        assert not value or value not in text, name


def test_a_model_is_filled_in_without_changing_the_inventory():
    models = [{"served_name": "m", "path": "p"}]
    values = dict(DATA["base"], vllm_models=models)
    site_plan.site_plan(values, {"g": {}})
    assert models == [{"served_name": "m", "path": "p"}]


def test_every_variable_the_plan_reads_is_declared_by_a_role():
    from ansible_collections.aiinfra.k3s.plugins.filter.inventory_spec_problems import role_specs
    from ansible_collections.aiinfra.k3s.plugins.module_utils.plan.inventory_spec import merge_specs

    declared = merge_specs(role_specs())
    assert [v for v in site_plan.VARIABLES + site_plan.SECRET_VARIABLES if v not in declared] == []
