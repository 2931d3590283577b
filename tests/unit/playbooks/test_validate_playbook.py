"""Run playbooks/validate.yml for real against inventories written by the test (controller only)."""

import itertools
import os
import subprocess

import pytest
import yaml
from conftest import tool


def run_validate(root, tmp_path, inventory, group_vars=None):
    inv_dir = tmp_path / "inv"
    (inv_dir / "group_vars").mkdir(parents=True)
    (inv_dir / "hosts.yml").write_text(yaml.safe_dump(inventory))
    all_vars = {"k3s_token": "0123456789abcdef0123456789abcdef-test", **(group_vars or {})}
    (inv_dir / "group_vars" / "all.yml").write_text(yaml.safe_dump(all_vars))
    env = dict(
        os.environ,
        ANSIBLE_CONFIG=str(root / "ansible.cfg"),
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_COLLECTIONS_PATH=str(root / ".cache" / "collections"),
    )
    return subprocess.run(
        [tool("ansible-playbook"), str(root / "playbooks" / "validate.yml"), "-i", str(inv_dir)],
        capture_output=True,
        text=True,
        env=env,
        cwd=root,
        timeout=120,
        check=False,
    )


ADDRESSES = itertools.count(2)  # distinct loopback addresses, so no duplicate-IP problem is reported


def hosts(*names):
    # Any connection attempt would run /bin/false instead of ssh and show as unreachable: no traffic at all.
    return {
        "hosts": {
            n: {"ansible_host": f"127.0.0.{next(ADDRESSES)}", "ansible_ssh_executable": "/bin/false"} for n in names
        }
    }


@pytest.mark.slow
def test_sound_inventory_passes_without_touching_hosts(root, tmp_path):
    inv = {
        "all": {
            "children": {
                "k3s_servers": hosts("gamorcloud01"),
                "k3s_agents": hosts("gx10-db4d"),
                "gpu_nodes": hosts("gx10-db4d"),
            }
        }
    }
    proc = run_validate(root, tmp_path, inv)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Inventory sound: 1 server(s), 1 agent(s), 1 GPU node(s)" in proc.stdout
    recap = proc.stdout.split("PLAY RECAP")[1]
    assert "unreachable=0" in recap and "unreachable=1" not in recap  # no host was contacted


@pytest.mark.slow
def test_every_problem_reported_at_once_with_custom_group_names(root, tmp_path):
    inv = {"all": {"children": {"cp": hosts("cp-1", "cp-2"), "workers": hosts("w_1"), "accel": hosts("gpu-9")}}}
    proc = run_validate(
        root,
        tmp_path,
        inv,
        {"aiinfra_server_group": "cp", "aiinfra_agent_group": "workers", "aiinfra_gpu_group": "accel"},
    )
    assert proc.returncode != 0
    out = proc.stdout
    assert "The inventory has 3 problem(s)" in out, out
    assert "cp-1,cp-2: aiinfra_server_group" in out
    assert "gpu-9: aiinfra_gpu_group" in out
    assert "w_1: inventory_hostname" in out
