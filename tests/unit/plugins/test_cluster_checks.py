"""The table of bad inventories (data/cluster_checks.yml), checked by the plain functions and by
running playbooks/validate.yml for real on the controller."""

import pytest
import yaml
from conftest import DATA, ROOT, load_cases, run_playbook, write_inventory

from ansible_collections.aiinfra.k3s.plugins.module_utils.plan.inventory_check import check_cluster, format_problems

ROLE_DEFAULTS = yaml.safe_load((ROOT / "roles" / "k3s" / "defaults" / "main.yml").read_text())
VALID_TOKEN = "0123456789abcdef0123456789abcdef-test"
VALID_AGENT_TOKEN = "fedcba9876543210fedcba9876543210-agent"
CASES = load_cases("cluster_checks")


def defaults_for(case):
    values = {k: v for k, v in ROLE_DEFAULTS.items() if not str(v).startswith("{{")}
    values["k3s_token"] = VALID_TOKEN
    values["k3s_agent_token"] = VALID_AGENT_TOKEN
    values.update(case["vars"].get("all") or {})
    return values


@pytest.mark.parametrize("case", CASES)
def test_check_cluster(case):
    hostvars = {h: case["vars"].get(h, {}) for h in case["hosts"]}
    lines = format_problems(check_cluster(case["hosts"], hostvars, defaults_for(case)))
    expected = case.get("plain_messages", case["messages"])
    for fragment in expected:
        assert any(line.startswith(fragment) for line in lines), (fragment, lines)
    assert len(lines) == len(expected), lines


def run_validate(tmp_path, case):
    groups = {"k3s_servers": {"hosts": {}}, "k3s_agents": {"hosts": {}}, "gpu_nodes": {"hosts": {}}}
    for host, role in case["hosts"].items():
        # Any connection attempt would run /bin/false instead of ssh and show as unreachable: no traffic at all.
        hv = {"ansible_ssh_executable": "/bin/false", **case["vars"].get(host, {})}
        groups["k3s_servers" if role == "server" else "k3s_agents"]["hosts"][host] = hv
    # K3s checks only: no GPU Operator, model plan or gateway (their checks have their own tests).
    all_vars = {
        "k3s_token": VALID_TOKEN,
        "k3s_agent_token": VALID_AGENT_TOKEN,
        "vllm_models": [],
        "litellm_enabled": False,
        "gpu_operator_enabled": False,
    }
    all_vars.update({"monitoring_enabled": False, "cert_manager_enabled": False, "autoscaling_engine": "none"})
    all_vars.update(case["vars"].get("all") or {})
    return run_playbook("validate.yml", write_inventory(tmp_path / "inv", {"all": {"children": groups}}, all_vars))


def failure_messages(result):
    for play in result["plays"]:
        for task in play["tasks"]:
            for host_result in task["hosts"].values():
                if host_result.get("failed"):
                    msg = host_result.get("msg")
                    return msg if isinstance(msg, list) else [msg]
    return []


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES)
def test_validate_playbook_rejects_with_message(tmp_path, case):
    proc, result = run_validate(tmp_path, case)
    stats = result["stats"]
    assert all(s["unreachable"] == 0 for s in stats.values()), "validate.yml must not contact any host"
    if not case["messages"]:
        assert proc.returncode == 0, failure_messages(result)
        return
    assert proc.returncode != 0
    messages = failure_messages(result)
    assert messages[0] == f"The inventory has {len(case['messages'])} problem(s):"
    for fragment in case["messages"]:
        assert any(m.startswith(fragment) for m in messages[1:]), (fragment, messages)
    assert VALID_TOKEN not in proc.stdout + proc.stderr


def test_table_is_not_empty():
    assert len(yaml.safe_load((DATA / "cluster_checks.yml").read_text())) >= 10
