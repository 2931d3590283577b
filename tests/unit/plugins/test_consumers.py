"""plugins/module_utils/plan/consumers.py (cases in data/consumers.yml), the auth hook's plain functions
(consumer_auth.py; the real LiteLLM proxy runs it in tests/gateway) and the consumer_keys module."""

import asyncio
import hashlib
import io
import json
import logging
import os
import stat
import sys
import types
from pathlib import Path

import pytest
import yaml
from conftest import run_module

from ansible_collections.aiinfra.k3s.plugins.module_utils.k8s import consumer_auth
from ansible_collections.aiinfra.k3s.plugins.module_utils.plan import consumers

DATA = yaml.safe_load((Path(__file__).parents[1] / "data" / "consumers.yml").read_text())
CASES = DATA["cases"]


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_consumer_plan(case):
    found, revoked, problems = consumers.consumer_plan(
        case["entries"],
        DATA["models"],
        DATA["defaults"],
        case.get("hashes"),
        case.get("keys"),
        case.get("gateway", True),
        case.get("master", ""),
    )
    expect = case["expect"]
    assert sorted({(p["code"], p["variable"], p["severity"]) for p in problems}) == sorted(
        tuple(p) for p in expect["problems"]
    ), problems
    if "count" in expect:
        assert len(problems) == expect["count"], [p["problem"] for p in problems]
    if "consumers" in expect:
        assert found == expect["consumers"]
    assert revoked == expect.get("revoked", [])
    for p in problems:  # a problem names the entry and never quotes a key
        assert p["host"] == "all" and p["problem"] and p["fix"]
        assert all(str(k) not in p["problem"] for k in (case.get("keys") or {}).values())


def test_issue_keys_keeps_issued_ones_rotates_and_drops():
    plan = [
        {"name": "a", "key": "issued"},
        {"name": "b", "key": "missing"},
        {"name": "c", "key": "vault"},
        {"name": "d", "key": "issued"},
    ]
    old = {"a": "1" * 64, "d": "2" * 64, "gone": "3" * 64}
    hashes, issued = consumers.issue_keys(plan, old, rotate=["d"])
    assert sorted(issued) == ["b", "d"] and "c" not in hashes and "gone" not in hashes
    assert hashes["a"] == "1" * 64 and hashes["d"] != "2" * 64
    for name, key in issued.items():
        assert key.startswith("sk-") and len(key) == 51 and not consumers.key_problems("k", key)
        assert hashes[name] == hashlib.sha256(key.encode()).hexdigest()
    with pytest.raises(ValueError, match="not active"):
        consumers.issue_keys(plan, old, rotate=["nobody"])
    with pytest.raises(ValueError, match="vault"):
        consumers.issue_keys(plan, old, rotate=["c"])


def test_records_hold_hashes_only():
    plan = [
        {"name": "b", "team": "t", "models": ["m"], "rpm_limit": 1, "tpm_limit": 2, "key_sha256": "f" * 64},
        {"name": "a", "team": "t", "models": ["m"], "rpm_limit": 1, "tpm_limit": 2, "key_sha256": ""},
    ]
    assert consumers.consumer_records(plan) == [
        {"key_sha256": "f" * 64, "alias": "b", "team": "t", "models": ["m"], "rpm_limit": 1, "tpm_limit": 2}
    ]
    doc = yaml.safe_load(consumers.hashes_document({"b": "f" * 64, "a": "e" * 64}))
    assert doc == {"litellm_consumer_key_hashes": {"a": "e" * 64, "b": "f" * 64}}
    assert yaml.safe_load(consumers.hashes_document({})) == {"litellm_consumer_key_hashes": {}}
    # Names YAML would read as a boolean or a number stay names.
    tricky = {"no": "a" * 64, "on": "b" * 64, "123": "c" * 64, "0x1f": "d" * 64}
    assert yaml.safe_load(consumers.hashes_document(tricky))["litellm_consumer_key_hashes"] == tricky


# ---------------------------------------------------------------- the hook's plain functions


def write_consumers(path, records):
    path.write_text(json.dumps({"consumers": records}))


def test_the_hook_identifies_master_consumer_and_unknown_keys(tmp_path):
    path = tmp_path / "consumers.json"
    key = "sk-" + "ab12" * 12
    write_consumers(path, [{"key_sha256": consumer_auth.key_hash(key), "alias": "app", "team": "t"}])
    found = consumer_auth.Consumers(str(path))
    assert consumer_auth.identify(key, found, "sk-master") == ("consumer", found.current()[0])
    assert consumer_auth.identify("sk-master", found, "sk-master") == ("admin", None)
    assert consumer_auth.identify("sk-other", found, "sk-master") == (None, None)
    assert consumer_auth.identify("", found, "") == (None, None)  # no master key set: nothing is admin
    assert consumer_auth.bearer("Bearer  %s " % key) == key


def test_the_hook_rereads_the_file_when_the_kubelet_swaps_it(tmp_path):
    path = tmp_path / "consumers.json"
    key = "sk-" + "cd34" * 12
    write_consumers(path, [{"key_sha256": consumer_auth.key_hash(key), "alias": "app", "team": "t"}])
    found = consumer_auth.Consumers(str(path))
    assert found.find(key)["alias"] == "app"
    replacement = tmp_path / "new.json"  # the kubelet writes a new file and swaps it in
    write_consumers(replacement, [])
    os.replace(replacement, path)
    assert found.find(key) is None
    path.unlink()
    assert found.find(key) is None  # no file: no consumer (the master key still works)


@pytest.mark.parametrize(
    ("given", "kept"),
    [("abc-123", True), ("", False), ("x" * 129, False), ("with space", False), ("tab\tbed", False)],
)
def test_request_ids_are_kept_when_sane_and_made_otherwise(given, kept):
    rid, generated = consumer_auth.request_id({"x-request-id": given} if given else {})
    assert (rid == given) is kept and generated is not kept and 0 < len(rid) <= 128


def test_the_request_id_is_written_into_the_headers_in_place():
    headers = [(b"x-request-id", b"bad id"), (b"content-type", b"application/json")]
    scope = {"headers": headers}
    consumer_auth.set_request_id(scope, "new", replace=True)
    assert scope["headers"] is headers  # Starlette's Headers read this same list
    assert (b"x-request-id", b"new") in headers and (b"x-litellm-call-id", b"new") in headers
    assert (b"x-request-id", b"bad id") not in headers
    consumer_auth.set_request_id(scope, "other")  # the client's own id stays
    assert [v for k, v in headers if k == b"x-request-id"] == [b"new"]


class Request:
    def __init__(self, path, headers):
        self.scope = {"headers": [(k.encode(), v.encode()) for k, v in headers.items()]}
        self.url = types.SimpleNamespace(path=path)

    @property
    def headers(self):
        return {k.decode(): v.decode() for k, v in self.scope["headers"]}


@pytest.fixture
def fake_litellm(monkeypatch):
    """LiteLLM's two names the hook imports, at the import boundary only (tests/gateway runs the real proxy)."""

    class HTTPException(Exception):
        def __init__(self, status_code, detail):
            super().__init__(detail)
            self.status_code = status_code

    class UserAPIKeyAuth(dict):
        def __init__(self, **kwargs):
            super().__init__(kwargs)

    roles = types.SimpleNamespace(PROXY_ADMIN="proxy_admin")
    fastapi = types.ModuleType("fastapi")
    fastapi.HTTPException = HTTPException
    litellm_types = types.ModuleType("litellm.proxy._types")
    litellm_types.UserAPIKeyAuth, litellm_types.LitellmUserRoles = UserAPIKeyAuth, roles
    for name, module in {
        "fastapi": fastapi,
        "litellm": types.ModuleType("litellm"),
        "litellm.proxy": types.ModuleType("litellm.proxy"),
        "litellm.proxy._types": litellm_types,
    }.items():
        monkeypatch.setitem(sys.modules, name, module)
    return HTTPException


def test_the_hook_answers_litellm(tmp_path, monkeypatch, fake_litellm):
    key = "sk-" + "ef56" * 12
    path = tmp_path / "consumers.json"
    record = {
        "key_sha256": consumer_auth.key_hash(key),
        "alias": "app",
        "team": "web",
        "models": ["m"],
        "rpm_limit": 3,
        "tpm_limit": 30,
    }
    write_consumers(path, [record])
    monkeypatch.setattr(consumer_auth, "CONSUMERS", consumer_auth.Consumers(str(path)))
    monkeypatch.setenv("LITELLM_MASTER_KEY", "sk-" + "9" * 40)
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    consumer_auth.LOG.addHandler(handler)
    try:
        auth = asyncio.run(consumer_auth.user_api_key_auth(Request("/v1/chat/completions", {}), key))
        assert auth["key_alias"] == "app" and auth["team_id"] == "web" and auth["models"] == ["m"]
        assert (auth["rpm_limit"], auth["tpm_limit"], auth["api_key"]) == (3, 30, record["key_sha256"])
        admin = asyncio.run(consumer_auth.user_api_key_auth(Request("/key/list", {}), "sk-" + "9" * 40))
        assert admin["user_role"] == "proxy_admin"
        for path_, given, status in (("/key/list", key, 403), ("/health", key, 403), ("/v1/models", "sk-x", 401)):
            with pytest.raises(fake_litellm) as err:
                asyncio.run(consumer_auth.user_api_key_auth(Request(path_, {"x-request-id": "r-1"}), given))
            assert err.value.status_code == status
    finally:
        consumer_auth.LOG.removeHandler(handler)
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert [(line["consumer"], line["outcome"]) for line in lines] == [
        ("app", "ok"),
        ("admin", "ok"),
        ("app", "admin route refused"),
        ("app", "admin route refused"),
        ("unknown", "unknown key"),
    ]
    assert lines[-1]["request_id"] == "r-1" and key not in stream.getvalue()


# ---------------------------------------------------------------- the module


def test_consumer_keys_issues_once_rotates_and_keeps_only_hashes(tmp_path):
    inventory = tmp_path / "site" / "group_vars" / "all"
    inventory.mkdir(parents=True)
    hashes_file, keys_dir = inventory / "litellm_consumer_key_hashes.yml", tmp_path / "keys"
    plan = [{"name": "app", "key": "missing"}, {"name": "web", "key": "missing"}]
    args = {"consumers": plan, "hashes": {}, "hashes_file": str(hashes_file), "keys_dir": str(keys_dir)}
    rc, result = run_module("aiinfra.k3s.consumer_keys", args, check=True)
    assert rc == 0 and result["changed"] and result["issued"] == ["app", "web"] and not hashes_file.exists()
    rc, result = run_module("aiinfra.k3s.consumer_keys", args)
    assert rc == 0 and result["changed"] and result["issued"] == ["app", "web"]
    keys = {name: Path(path).read_text().strip() for name, path in result["key_files"].items()}
    assert all(key not in json.dumps(result) for key in keys.values())  # keys only in their files
    assert stat.S_IMODE(keys_dir.stat().st_mode) == 0o700
    assert all(stat.S_IMODE(Path(p).stat().st_mode) == 0o600 for p in result["key_files"].values())
    written = yaml.safe_load(hashes_file.read_text())["litellm_consumer_key_hashes"]
    assert written == {name: consumers.key_hash(key) for name, key in keys.items()}
    # Next run: both issued, nothing to do.
    plan = [{"name": "app", "key": "issued"}, {"name": "web", "key": "issued"}]
    args.update(consumers=plan, hashes=written)
    rc, result = run_module("aiinfra.k3s.consumer_keys", args)
    assert rc == 0 and not result["changed"] and result["issued"] == []
    # Rotate one, revoke the other (gone from the plan).
    args.update(consumers=plan[:1], rotate=["app"])
    rc, result = run_module("aiinfra.k3s.consumer_keys", args)
    assert rc == 0 and result["changed"] and result["issued"] == ["app"] and result["dropped"] == ["web"]
    written = yaml.safe_load(hashes_file.read_text())["litellm_consumer_key_hashes"]
    assert list(written) == ["app"] and written["app"] != consumers.key_hash(keys["app"])


def test_consumer_keys_refuses_a_directory_that_would_hide_group_vars_all_yml(tmp_path):
    group_vars = tmp_path / "group_vars"
    (group_vars / "all").mkdir(parents=True)
    (group_vars / "all.yml").write_text("{}\n")
    args = {
        "consumers": [{"name": "app", "key": "missing"}],
        "hashes_file": str(group_vars / "all" / "h.yml"),
        "keys_dir": str(tmp_path / "keys"),
    }
    rc, result = run_module("aiinfra.k3s.consumer_keys", args)
    assert rc != 0 and "all.yml" in result["msg"] and not (tmp_path / "keys").exists()


def test_every_public_inference_path_is_open_to_consumers():
    """The edge's public paths (edge.PUBLIC_PATHS) that need a key are the hook's consumer routes: a consumer is
    never refused what the edge publishes, and the hook adds nothing the edge would not route."""
    from ansible_collections.aiinfra.k3s.plugins.module_utils.k8s import edge

    keyed = {p for p in edge.PUBLIC_PATHS if not p.startswith("/health/")}
    assert keyed <= consumer_auth.CONSUMER_ROUTES
    assert {p for p in consumer_auth.CONSUMER_ROUTES if p.startswith("/v1/")} == keyed
