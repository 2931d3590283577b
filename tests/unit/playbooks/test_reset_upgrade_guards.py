"""playbooks/reset.yml and upgrade.yml refuse before any node is touched: without the site's confirmation phrase on
the command line (a phrase an inventory sets is refused), and, for reset.yml, with a --limit that would leave the
servers kept without etcd quorum; the datastore is saved before the first destructive task.

The hosts are fake (ssh is /bin/false): the checks run on the controller, and where a run gets past them the first
task that reaches a host fails on the connection, which shows the task that would have run first."""

import re
import sqlite3
import stat
import subprocess
import sys

import pytest
import yaml
from conftest import ROOT, ansible_env, run_playbook, tool, write_inventory

SERVERS = ("cp-1", "cp-2", "cp-3")
PHRASE = "yes-reset-k3s-on-alpha"


def inventory(tmp_path, group_vars=None, host_vars=None, servers=SERVERS):
    """Three servers and a GPU agent of site alpha; host_vars {host: {var: value}} go into the inventory file."""

    def host(name, address):
        return {
            "ansible_host": f"127.0.0.{address}",
            "ansible_ssh_executable": "/bin/false",
            **(host_vars or {}).get(name, {}),
        }

    hosts = {
        "all": {
            "children": {
                "k3s_servers": {"hosts": {s: host(s, 20 + i) for i, s in enumerate(servers)}},
                "k3s_agents": {"hosts": {"gpu-1": host("gpu-1", 30)}},
                "gpu_nodes": {"hosts": {"gpu-1": {"aiinfra_gpu_count": 1}}},
            }
        }
    }
    return write_inventory(tmp_path / "inv", hosts, {"aiinfra_site": "alpha", **(group_vars or {})})


def reset(tmp_path, *extra, **inv):
    proc = run_playbook("reset.yml", inventory(tmp_path, **inv), callback="default", extra=list(extra))[0]
    return proc, " ".join((proc.stdout + proc.stderr).split())


def tasks_run(proc):
    """Names of the tasks that started, in order."""
    return re.findall(r"^TASK \[(.*?)\] \*+$", proc.stdout, re.M)


def nothing_touched(proc):
    """No task reached a node: no fact gathering, no removal, no snapshot."""
    started = tasks_run(proc)
    return not [t for t in started if "Read the host facts" in t or "Remove" in t or "Save the datastore on" in t]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ([], f"Re-run with -e k3s_reset_confirm={PHRASE} to proceed"),
        # The phrase of the releases before it named the site.
        (["-e", "k3s_reset_confirm=yes-delete-k3s-and-all-its-data"], "The phrase given is not this site's"),
        (["-e", "k3s_reset_confirm=yes-reset-k3s-on-beta"], f"-e k3s_reset_confirm={PHRASE}"),
    ],
)
def test_reset_refuses_a_missing_or_wrong_phrase(tmp_path, extra, message):
    proc, text = reset(tmp_path, *extra)
    assert proc.returncode != 0
    assert message in text, text[-3000:]
    assert nothing_touched(proc), tasks_run(proc)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("where", "hosts"),
    [
        ({"group_vars": {"k3s_reset_confirm": PHRASE}}, "cp-1, cp-2, cp-3, gpu-1"),
        ({"host_vars": {"cp-2": {"k3s_reset_confirm": PHRASE}}}, "cp-2"),
    ],
    ids=["group_vars", "inventory-file"],
)
def test_reset_refuses_the_right_phrase_from_the_inventory(tmp_path, where, hosts):
    proc, text = reset(tmp_path, **where)
    assert proc.returncode != 0
    assert (
        f"k3s_reset_confirm is set in the inventory (group_vars, host_vars or the inventory file, for {hosts})" in text
    )
    assert "it is refused there" in text and f"-e k3s_reset_confirm={PHRASE}" in text, text[-3000:]
    assert nothing_touched(proc), tasks_run(proc)


@pytest.mark.slow
@pytest.mark.parametrize("limit", ["cp-1,cp-2", "cp-2,cp-3,gpu-1", "k3s_servers:!cp-3"])
def test_reset_refuses_a_limit_that_breaks_etcd_quorum(tmp_path, limit):
    proc, text = reset(tmp_path, "-e", f"k3s_reset_confirm={PHRASE}", "--limit", limit)
    assert proc.returncode != 0
    assert "QUORUM_LOST" in text and "ansible_limit" in text, text[-3000:]
    assert "of the 3 etcd members" in text and "fewer than the quorum of 2" in text
    assert "reset the whole cluster: no --limit, or one that holds every server (cp-1, cp-2, cp-3)" in text
    assert nothing_touched(proc), tasks_run(proc)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("limit", "snapshot_host"),
    [
        ([], "cp-1"),  # the whole cluster
        (["--limit", "k3s_servers"], "cp-1"),  # every server: the whole control plane
        (["--limit", "cp-1,gpu-1"], "cp-2"),  # one of three: quorum kept, the snapshot on the first server kept
        (["--limit", "gpu-1"], "cp-1"),  # an agent only: the servers are reached by delegation, not by the limit
    ],
)
def test_reset_that_keeps_quorum_saves_the_datastore_before_any_node_is_touched(tmp_path, limit, snapshot_host):
    proc, text = reset(tmp_path, "-e", f"k3s_reset_confirm={PHRASE}", *limit)
    started = tasks_run(proc)
    assert "Refuse a reset that would leave the servers kept without etcd quorum" in started, text[-3000:]
    assert "QUORUM_LOST" not in text
    # The first task that reaches a node is the snapshot, on the server it must be taken on; the (fake) connection
    # fails there, and the run stops before any node play.
    reaching = [t for t in started if "Read the host facts" in t or "Remove" in t or "Save the datastore on" in t]
    assert reaching == [f"aiinfra.k3s.k3s : Save the datastore on {snapshot_host}"], started
    assert proc.returncode != 0 and "PLAY [Reset agents]" not in proc.stdout, text[-3000:]


@pytest.mark.slow
def test_inventory_cannot_switch_the_snapshot_off_but_the_command_line_can(tmp_path):
    proc, text = reset(tmp_path, "-e", f"k3s_reset_confirm={PHRASE}", group_vars={"k3s_snapshot": False})
    assert "aiinfra.k3s.k3s : Save the datastore on cp-1" in tasks_run(proc), text[-3000:]
    proc, text = reset(tmp_path, "-e", f"k3s_reset_confirm={PHRASE}", "-e", "k3s_snapshot=false")
    started = tasks_run(proc)
    assert "Record that no snapshot was taken" in started, started
    assert not [t for t in started if "Save the datastore on" in t]
    assert started.index("Record that no snapshot was taken") < started.index("Read the host facts")


@pytest.mark.slow
def test_the_snapshot_is_listed_before_every_destructive_task():
    """--list-tasks: in reset.yml and upgrade.yml the snapshot comes before the first task that changes a node."""
    for playbook, destructive in (("reset.yml", "Remove K3s"), ("upgrade.yml", "Drain")):
        proc = run_playbook(playbook, "inventories/example", callback="default", extra=["--list-tasks"])[0]
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        lines = [line.strip() for line in proc.stdout.splitlines()]
        snapshot = next(i for i, line in enumerate(lines) if line.startswith("Save the datastore before any node"))
        first = next(i for i, line in enumerate(lines) if line.startswith(destructive))
        assert snapshot < first, (playbook, lines)


SECRETS = {
    "k3s_token": "0123456789abcdef0123456789abcdef-test",
    "k3s_agent_token": "fedcba9876543210fedcba9876543210-agent",
    "litellm_master_key": "sk-9c1f4e7a2b8d6053f1e9a7c4b2d8e6f0a3c5",
    "monitoring_grafana_admin_password": "Jq7vX2mL9cR4tW8zB5nK",
}


@pytest.mark.slow
@pytest.mark.parametrize(
    ("extra", "group_vars", "message"),
    [
        ([], {}, "Re-run with -e k3s_upgrade_confirm=yes-upgrade-k3s-on-alpha to proceed"),
        (["-e", "k3s_upgrade_confirm=yes-upgrade-k3s-on-beta"], {}, "The phrase given is not this site's"),
        (
            [],
            {"k3s_upgrade_confirm": "yes-upgrade-k3s-on-alpha"},
            "k3s_upgrade_confirm is set in the inventory (group_vars, host_vars or the inventory file, for "
            "cp-1, cp-2, cp-3, gpu-1)",
        ),
    ],
)
def test_upgrade_refuses_without_the_phrase_before_contacting_anything(tmp_path, extra, group_vars, message):
    inv = inventory(tmp_path, group_vars={**SECRETS, **group_vars})
    proc = run_playbook("upgrade.yml", inv, callback="default", extra=extra)[0]
    text = " ".join((proc.stdout + proc.stderr).split())
    assert proc.returncode != 0
    assert message in text, text[-3000:]
    started = tasks_run(proc)
    assert "Require a reachable API server" not in started and not [t for t in started if "Drain" in t], started
    assert "unreachable=1" not in proc.stdout.split("PLAY RECAP")[-1]


def run_snapshot(tmp_path, extra_config):
    """roles/k3s/tasks/snapshot.yml for a 'server' that is this machine (local connection, no become), its K3s data
    directory under tmp_path; returns the process."""
    inv = write_inventory(
        tmp_path / "snapinv",
        {
            "all": {
                "hosts": {
                    "cp-1": {
                        "ansible_connection": "local",
                        "ansible_become": False,
                        "ansible_python_interpreter": sys.executable,
                        "k3s_server_extra_config": extra_config,
                    }
                }
            }
        },
        {"aiinfra_site": "alpha", "k3s_snapshot_dir": str(tmp_path / "copies")},
    )
    playbook = tmp_path / "snapshot.yml"
    task = {
        "ansible.builtin.include_role": {"name": "aiinfra.k3s.k3s", "tasks_from": "snapshot"},
        "vars": {"k3s_snapshot_operation": "reset", "k3s_snapshot_host": "cp-1"},
    }
    playbook.write_text(yaml.safe_dump([{"hosts": "localhost", "gather_facts": False, "tasks": [task]}]))
    return subprocess.run(
        [tool("ansible-playbook"), str(playbook), "-i", str(inv)],
        capture_output=True,
        text=True,
        env=ansible_env("default"),
        cwd=ROOT,
        timeout=180,
        check=False,
    )


@pytest.mark.slow
def test_a_sqlite_datastore_is_saved_copied_and_reported(tmp_path):
    db = tmp_path / "k3s" / "server" / "db"
    db.mkdir(parents=True)
    with sqlite3.connect(db / "state.db") as conn:
        conn.execute("CREATE TABLE kine (name TEXT)")
        conn.execute("INSERT INTO kine VALUES ('/registry/secrets/ai-serving/gateway')")
    proc = run_snapshot(tmp_path, {"data-dir": str(tmp_path / "k3s")})
    text = " ".join(proc.stdout.split())
    assert proc.returncode == 0, text[-3000:]
    saved = list((db / "snapshots").glob("reset-alpha-cp-1-*.db"))
    copies = list((tmp_path / "copies").glob("reset-alpha-cp-1-*.db"))
    assert len(saved) == 1 and [c.name for c in copies] == [saved[0].name], (saved, copies)
    assert stat.S_IMODE(copies[0].stat().st_mode) == 0o600
    with sqlite3.connect(copies[0]) as conn:
        assert conn.execute("SELECT name FROM kine").fetchall() == [("/registry/secrets/ai-serving/gateway",)]
    assert f"sqlite snapshot {saved[0].name} on cp-1 ({saved[0]}), copied to the controller: {copies[0]}" in text


@pytest.mark.slow
@pytest.mark.parametrize(
    ("extra_config", "reason"),
    [
        ({}, "K3s never ran a server there"),
        ({"datastore-endpoint": "postgres://db.example.org/k3s"}, "external datastore (datastore-endpoint)"),
    ],
    ids=["no-datastore", "external"],
)
def test_nothing_to_save_is_reported_with_the_reason(tmp_path, extra_config, reason):
    extra_config = {"data-dir": str(tmp_path / "k3s"), **extra_config}
    proc = run_snapshot(tmp_path, extra_config)
    text = " ".join(proc.stdout.split())
    assert proc.returncode == 0, text[-3000:]
    assert "before reset: " in text and reason in text, text[-3000:]
    assert not (tmp_path / "copies").exists()
