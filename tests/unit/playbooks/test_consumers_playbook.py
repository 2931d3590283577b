"""playbooks/consumers.yml on the controller (consumers_apply=false: the keys only; the gateway's converge is
serving.yml's, tested with it): a new consumer gets a key file and a hash, a second run changes nothing, a revoked
one loses its hash, and no key is ever printed."""

import json
import secrets
import stat

import pytest
import yaml
from conftest import run_playbook, write_site

pytestmark = pytest.mark.slow


def run(tmp_path, inventory, **extra):
    args = ["-e", "consumers_apply=false", "-e", json.dumps(extra)]
    proc, result = run_playbook("consumers.yml", inventory, extra=args)
    assert proc.returncode == 0, proc.stdout[-3000:]
    return proc, result


def test_keys_are_issued_once_then_revoked(tmp_path):
    inventory = tmp_path / "site"
    inventory.mkdir()
    group_vars = {
        "k3s_token": secrets.token_hex(24),
        "litellm_master_key": "sk-" + secrets.token_hex(24),
        "monitoring_grafana_admin_password": secrets.token_urlsafe(24),
        "vllm_models": [{"served_name": "m1", "path": "org/m1"}],
        "litellm_consumers": [{"name": "app"}, {"name": "web", "models": ["m1"], "rpm_limit": 5}],
    }
    write_site(inventory, ["cp-1"], {"gpu-1": 1}, group_vars)
    hashes_file, keys_dir = tmp_path / "hashes.yml", tmp_path / "keys"
    paths = {"litellm_consumer_hashes_file": str(hashes_file), "litellm_consumer_keys_dir": str(keys_dir)}
    proc, _result = run(tmp_path, inventory, **paths)
    hashes = yaml.safe_load(hashes_file.read_text())["litellm_consumer_key_hashes"]
    keys = {p.stem: p.read_text().strip() for p in keys_dir.iterdir()}
    assert sorted(hashes) == sorted(keys) == ["app", "web"]
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in keys_dir.iterdir())
    assert not any(key in proc.stdout for key in keys.values())
    # The hashes file is an inventory variable file: next run, nothing to do.
    proc, result = run(tmp_path, inventory, litellm_consumer_key_hashes=hashes, **paths)
    (issued,) = [
        t["hosts"]["localhost"]
        for play in result["plays"]
        for t in play["tasks"]
        if t["task"]["name"].endswith("Issue, rotate and drop the consumers' keys")
    ]
    assert issued["changed"] is False and issued["issued"] == []
    # Revoke web.
    group_vars["litellm_consumers"][1]["revoked"] = True
    (inventory / "group_vars" / "all.yml").write_text(yaml.safe_dump(group_vars))
    run(tmp_path, inventory, litellm_consumer_key_hashes=hashes, **paths)
    assert list(yaml.safe_load(hashes_file.read_text())["litellm_consumer_key_hashes"]) == ["app"]
