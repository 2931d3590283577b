"""The manifests role's main entry point run for real on this machine (local connection): each component's file
written once with its objects, the sensitive ones in their own no_log step, the files of switched-off components
removed, the secret never in the output, and a re-run (and a check run) that changes nothing."""

import json
import os

import pytest
import yaml
from conftest import run_playbook, write_inventory

SECRET = "s3cret-token-value"
CONFIGMAP = {
    "apiVersion": "v1",
    "kind": "ConfigMap",
    "metadata": {"name": "web", "namespace": "ai"},
    "data": {"a": "1"},
}
SECRET_OBJ = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "keys", "namespace": "ai"}}
SECRET_OBJ["stringData"] = {"token": SECRET}
SETS = [
    {"name": "web", "objects": [CONFIGMAP, {**CONFIGMAP, "metadata": {"name": "web2", "namespace": "ai"}}]},
    {"name": "keys", "objects": [SECRET_OBJ], "sensitive": True},
    {"name": "gone", "objects": []},
    {"name": "old-keys", "objects": [], "sensitive": True},
]
PLAYBOOK = """
- name: Write the manifests
  hosts: first
  gather_facts: false
  tasks:
    - name: Write
      ansible.builtin.include_role:
        name: aiinfra.k3s.manifests
"""


def converge(tmp_path, check=False):
    sets = [{"sensitive": False, **s} for s in SETS]
    inventory = write_inventory(
        tmp_path / "inv",
        {"all": {"hosts": {"first": {"ansible_connection": "local"}}}},
        {"manifests_sets": sets, "manifests_server_dir": str(tmp_path / "manifests"), "manifests_prune": False},
    )
    (tmp_path / "play.yml").write_text(PLAYBOOK)
    proc, result = run_playbook(str(tmp_path / "play.yml"), inventory, extra=["--check"] if check else [])
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    out = proc.stdout + proc.stderr
    assert SECRET not in out, out[max(0, out.find(SECRET) - 1500) : out.find(SECRET) + 200]
    prefix = "aiinfra.k3s.manifests : "
    return {t["task"]["name"].removeprefix(prefix): t["hosts"].get("first") for t in result["plays"][0]["tasks"]}


@pytest.mark.skipif(os.geteuid() != 0, reason="the role writes the manifests as root:root, as K3s wants them")
def test_each_file_written_once_secrets_apart_switched_off_removed_then_nothing_to_do(tmp_path):
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    (manifests / "aiinfra-gone.yaml").write_text(yaml.safe_dump(CONFIGMAP))
    (manifests / "aiinfra-old-keys.yaml").write_text(yaml.safe_dump(SECRET_OBJ))

    tasks = converge(tmp_path)
    plain, secrets = tasks["Write the manifests of each component"], tasks["Write the secrets"]
    assert plain["changed"] and secrets["changed"]
    assert sorted(os.listdir(manifests)) == ["aiinfra-keys.yaml", "aiinfra-web.yaml"]
    assert [d["metadata"]["name"] for d in yaml.safe_load_all((manifests / "aiinfra-web.yaml").read_text())] == [
        "web",
        "web2",
    ]
    assert yaml.safe_load((manifests / "aiinfra-keys.yaml").read_text())["stringData"]["token"] == SECRET
    modes = {p.name: oct(p.stat().st_mode & 0o777) for p in [manifests, *manifests.iterdir()]}
    assert modes == {"manifests": "0o700", "aiinfra-web.yaml": "0o600", "aiinfra-keys.yaml": "0o600"}
    # The plain step (not no_log) never handles a sensitive component's file, written or removed.
    assert "keys" not in json.dumps(plain)
    assert list(plain["removed"]) == ["aiinfra-gone.yaml"]
    left = tasks["Say what the switched-off components left running"]["results"]
    assert {r["item"]["name"] for r in left} == {"gone", "old-keys"}

    for check in (False, True):
        again = converge(tmp_path, check=check)
        assert not again["Write the manifests of each component"]["changed"]
        assert not again["Write the secrets"]["changed"]
