"""gpu_verify's vectorAdd namespace refused on the controller (issue 28, item 12): by validate.yml before any host
is touched, and by the role itself before it reaches the API (the ownership of an existing namespace is checked
against a real API server in tests/live/test_verify_live.py)."""

import pytest
import yaml
from conftest import run_playbook, write_inventory

GROUP_VARS = {
    "k3s_token": "0123456789abcdef0123456789abcdef-test",
    "k3s_agent_token": "fedcba9876543210fedcba9876543210-agent",
    "litellm_master_key": "sk-9c1f4e7a2b8d6053f1e9a7c4b2d8e6f0a3c5",
    "monitoring_grafana_admin_password": "Jq7vX2mL9cR4tW8zB5nK",
}
ADDRESSES = {"cp-1": "127.0.0.21", "gpu-1": "127.0.0.22"}


def site(tmp_path, **group_vars):
    # Any connection attempt would run /bin/false instead of ssh and show as unreachable: no traffic at all.
    def hosts(*names):
        return {"hosts": {n: {"ansible_host": ADDRESSES[n], "ansible_ssh_executable": "/bin/false"} for n in names}}

    inventory = {
        "all": {"children": {"k3s_servers": hosts("cp-1"), "k3s_agents": hosts("gpu-1"), "gpu_nodes": hosts("gpu-1")}}
    }
    return write_inventory(tmp_path / "inv", inventory, dict(GROUP_VARS, **group_vars))


@pytest.mark.slow
@pytest.mark.parametrize(
    "namespace, why",
    [
        ("ai-serving", "a namespace of the site (aiinfra_namespace, drill_namespace, litellm_namespace"),
        ("kube-system", "a system namespace"),
        ("monitoring", "a namespace of the site (monitoring_namespace)"),
    ],
)
def test_validate_refuses_a_namespace_of_the_system_or_the_site(tmp_path, namespace, why):
    proc, _result = run_playbook(
        "validate.yml", site(tmp_path, gpu_verify_vectoradd_namespace=namespace), callback="default"
    )
    out = " ".join(proc.stdout.split())
    assert proc.returncode != 0, out[-3000:]
    assert (
        f"ERROR GPU_VERIFY [localhost] gpu_verify_vectoradd_namespace - gpu_verify_vectoradd_namespace is {namespace}, {why}"
        in out
    ), out[-3000:]
    assert "fix - set gpu_verify_vectoradd_namespace to a namespace of its own" in out
    assert "unreachable=1" not in proc.stdout.split("PLAY RECAP")[1]  # no host was contacted


@pytest.mark.slow
def test_validate_accepts_the_default_namespace(tmp_path):
    proc, _result = run_playbook("validate.yml", site(tmp_path), callback="default")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "GPU_VERIFY" not in proc.stdout


@pytest.mark.slow
def test_the_role_refuses_the_serving_namespace_before_reaching_the_api(tmp_path):
    """gpu_allocation.yml runs the check without validate.yml (the plan computed on its own, as it does): the role
    refuses the namespace itself, before its first API call (the kubeconfig here leads nowhere)."""
    inventory = write_inventory(
        tmp_path / "inv",
        {"all": {"hosts": {"localhost": {"ansible_connection": "local"}}}},
        {"gpu_verify_vectoradd_namespace": "ai-serving", "gpu_verify_kubeconfig": str(tmp_path / "none.yaml")},
    )
    playbook = tmp_path / "vectoradd.yml"
    playbook.write_text(
        yaml.safe_dump(
            [
                {
                    "hosts": "localhost",
                    "gather_facts": False,
                    "tasks": [
                        {
                            "name": "Read the site plan",
                            "ansible.builtin.import_role": {"name": "aiinfra.k3s.site_plan"},
                            "vars": {"site_plan_secrets": False},
                        },
                        {
                            "name": "Run vectorAdd",
                            "ansible.builtin.include_role": {
                                "name": "aiinfra.k3s.gpu_verify",
                                "tasks_from": "vectoradd",
                            },
                        },
                    ],
                }
            ]
        )
    )
    proc, _result = run_playbook(str(playbook), inventory, callback="default")
    out = " ".join(proc.stdout.split())
    assert proc.returncode != 0
    assert "Refuse a vectorAdd namespace of the system or of the site" in out
    assert (
        "ERROR GPU_VERIFY [localhost] gpu_verify_vectoradd_namespace - gpu_verify_vectoradd_namespace is ai-serving"
        in out
    )
    assert "Read the vectorAdd namespace" not in out, out[-3000:]
