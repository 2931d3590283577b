"""playbooks/consumers.yml on the controller (consumers_apply=false: the keys only; the gateway's converge is
serving.yml's, tested with it): a new consumer gets a key file and a hash, a second run changes nothing, a revoked
one loses its hash, and no key is ever printed."""

import secrets
import stat

import pytest
import yaml
from conftest import run_playbook, write_site

pytestmark = pytest.mark.slow


def run(inventory, home, check=False):
    args = ["-e", "consumers_apply=false"] + (["--check"] if check else [])
    proc, result = run_playbook("consumers.yml", inventory, extra=args, env={"HOME": str(home)})
    assert proc.returncode == 0, proc.stdout[-3000:]
    return proc, result


def issued_task(result):
    (task,) = [
        t["hosts"]["localhost"]
        for play in result["plays"]
        for t in play["tasks"]
        if t["task"]["name"].endswith("Issue, rotate and drop the consumers' keys")
    ]
    return task


def test_keys_are_issued_once_beside_the_inventory_then_revoked(tmp_path):
    """The defaults: the hashes go to <inventory>/group_vars/all/ (the README's layout), where the next run reads
    them as an inventory variable; the keys to ~/.aiinfra/<inventory>/consumer-keys/."""
    inventory, home = tmp_path / "site", tmp_path / "home"
    inventory.mkdir()
    home.mkdir()
    group_vars = {
        "k3s_token": secrets.token_hex(24),
        "k3s_agent_token": secrets.token_hex(24),
        "litellm_master_key": "sk-" + secrets.token_hex(24),
        "monitoring_grafana_admin_password": secrets.token_urlsafe(24),
        "vllm_models": [{"served_name": "m1", "path": "org/m1"}],
        "litellm_consumers": [{"name": "app"}, {"name": "web", "models": ["m1"], "rpm_limit": 5}],
    }
    write_site(inventory, ["cp-1"], {"gpu-1": 1}, group_vars)
    (inventory / "group_vars" / "all").mkdir()
    (inventory / "group_vars" / "all.yml").rename(inventory / "group_vars" / "all" / "main.yml")
    hashes_file = inventory / "group_vars" / "all" / "litellm_consumer_key_hashes.yml"
    keys_dir = home / ".aiinfra" / "site" / "consumer-keys"
    _proc, result = run(inventory, home, check=True)
    assert issued_task(result)["issued"] == ["app", "web"] and not hashes_file.exists() and not keys_dir.exists()
    proc, _result = run(inventory, home)
    hashes = yaml.safe_load(hashes_file.read_text())["litellm_consumer_key_hashes"]
    keys = {p.stem: p.read_text().strip() for p in keys_dir.iterdir()}
    assert sorted(hashes) == sorted(keys) == ["app", "web"]
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in keys_dir.iterdir())
    assert not any(key in proc.stdout for key in keys.values())
    # The hashes file is an inventory variable file: next run, nothing to do.
    _proc, result = run(inventory, home)
    assert issued_task(result)["changed"] is False and issued_task(result)["issued"] == []
    # Revoke web: its hash goes, app's stays.
    group_vars["litellm_consumers"][1]["revoked"] = True
    (inventory / "group_vars" / "all" / "main.yml").write_text(yaml.safe_dump(group_vars))
    run(inventory, home)
    assert yaml.safe_load(hashes_file.read_text())["litellm_consumer_key_hashes"] == {"app": hashes["app"]}
