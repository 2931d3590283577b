"""Run playbooks/validate.yml for real against inventories written by the test (controller only)."""

import os
import subprocess

import pytest
import yaml


def run_validate(root, tmp_path, inventory, group_vars=None):
    inv_dir = tmp_path / "inv"
    (inv_dir / "group_vars").mkdir(parents=True)
    (inv_dir / "hosts.yml").write_text(yaml.safe_dump(inventory))
    (inv_dir / "group_vars" / "all.yml").write_text(yaml.safe_dump(group_vars or {}))
    env = dict(
        os.environ,
        ANSIBLE_CONFIG=str(root / "ansible.cfg"),
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_COLLECTIONS_PATH=str(root / ".cache" / "collections"),
    )
    return subprocess.run(
        ["ansible-playbook", str(root / "playbooks" / "validate.yml"), "-i", str(inv_dir)],
        capture_output=True,
        text=True,
        env=env,
        cwd=root,
        timeout=120,
        check=False,
    )


def hosts(*names):
    # Any connection attempt would hit a closed loopback port and show as unreachable.
    return {"hosts": {n: {"ansible_host": "127.0.0.1", "ansible_port": 1} for n in names}}


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
    assert "The inventory has 3 problem(s)" in out
    assert "cp-1,cp-2: aiinfra_server_group" in out
    assert "gpu-9: aiinfra_gpu_group" in out
    assert "w_1: inventory_hostname" in out
