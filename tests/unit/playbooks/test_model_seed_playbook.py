"""model_registry's seeding, run for real on this machine (local connection): verified copy, idempotent
re-run, and a tampered source refused before anything is copied."""

import hashlib
import os
import shutil
import tempfile
from pathlib import Path

import pytest
import yaml
from conftest import run_playbook, write_inventory
from make_test_airgap import make_model

MODEL = "nvidia/Nemotron-4-35B"


def seed(tmp_path, source, store, check=False, required=True, models=(MODEL,), min_free_gib=0):
    inventory = write_inventory(
        tmp_path / "inv",
        {
            "all": {
                "hosts": {
                    "gpu-1": {
                        "ansible_connection": "local",
                        "ansible_python_interpreter": "{{ ansible_playbook_python }}",
                    }
                }
            }
        },
        {
            "model_registry_path": str(store),
            "model_registry_owner": str(os.getuid()),
            "model_registry_group": str(os.getgid()),
            "model_registry_min_free_gib": min_free_gib,
            "model_registry_seed_dir": str(source / "models"),
            "model_registry_seed_models": list(models),
            "model_registry_expected_models": [MODEL],
            "model_registry_require_models": required,
        },
    )
    playbook = tmp_path / "seed.yml"
    playbook.write_text(
        yaml.safe_dump([{"hosts": "all", "gather_facts": False, "roles": [{"role": "aiinfra.k3s.model_registry"}]}])
    )
    return run_playbook(str(playbook), inventory, extra=["--check"] if check else [])


def stats(result):
    return result["stats"]["gpu-1"]


@pytest.mark.slow
def test_seed_copies_verifies_and_is_idempotent(tmp_path):
    make_model(tmp_path / "src", MODEL)
    store = tmp_path / "store"
    proc, result = seed(tmp_path, tmp_path / "src", store, check=True)  # a fresh node in --check
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert not (store / MODEL).exists()
    proc, result = seed(tmp_path, tmp_path / "src", store)
    assert proc.returncode == 0, proc.stdout[-3000:]
    copied = store / MODEL
    for name in ("config.json", "tokenizer.json", "model.safetensors", "SHA256SUMS"):
        assert (copied / name).read_bytes() == (tmp_path / "src" / "models" / MODEL / name).read_bytes()
    assert stats(result)["changed"] > 0
    proc, result = seed(tmp_path, tmp_path / "src", store)
    assert proc.returncode == 0 and stats(result)["changed"] == 0, proc.stdout[-3000:]
    proc, result = seed(tmp_path, tmp_path / "src", store, check=True)
    assert proc.returncode == 0 and stats(result)["changed"] == 0


@pytest.mark.slow
def test_tampered_source_is_refused_before_copying(tmp_path):
    make_model(tmp_path / "src", MODEL, tamper=True)
    store = tmp_path / "store"
    proc, _result = seed(tmp_path, tmp_path / "src", store)
    assert proc.returncode != 0
    assert f"{MODEL} under model_registry_seed_dir" in proc.stdout and "Nothing was copied" in proc.stdout
    assert "model.safetensors: FAILED" in proc.stdout
    assert not (store / MODEL).exists()


@pytest.mark.slow
@pytest.mark.parametrize("required", [False, True])
def test_missing_model_warns_or_fails(tmp_path, required):
    store = tmp_path / "store"
    proc, _result = seed(tmp_path, tmp_path / "src", store, required=required, models=())
    assert (proc.returncode == 0) is not required, proc.stdout[-2000:]
    assert f"{MODEL} missing under {store}" in proc.stdout or f"missing in the store: {MODEL}" in proc.stdout


@pytest.mark.slow
@pytest.mark.parametrize("min_free_gib, ok", [(1, True), (10**7, False)])
def test_free_space_in_check_mode_is_read_where_the_store_will_be(tmp_path, min_free_gib, ok):
    """A store that does not exist yet, on another file system than / (tmpfs /dev/shm): check mode measures the
    file system that will hold it, not /."""
    shm = Path("/dev/shm")
    if not shm.is_dir() or os.stat(shm).st_dev == os.stat("/").st_dev:
        pytest.skip("needs /dev/shm on its own file system")
    store = Path(tempfile.mkdtemp(dir=shm)) / "not-yet" / "store"
    try:
        proc, _result = seed(
            tmp_path, tmp_path / "src", store, check=True, required=False, models=(), min_free_gib=min_free_gib
        )
    finally:
        shutil.rmtree(store.parents[1])
    assert (proc.returncode == 0) is ok, proc.stdout[-3000:]
    assert "GiB free on /dev/shm" in proc.stdout if ok else f"{store} is on /dev/shm with" in proc.stdout
    assert not store.exists()


@pytest.mark.slow
def test_a_seed_path_leaving_the_seed_directory_is_refused_before_the_host_is_touched(tmp_path):
    """Issue 28, item 8: a '..' seed path would copy a controller directory outside the seed directory into a node
    directory outside the store, as root. The role refuses it (the site plan does too) before creating the store."""
    make_model(tmp_path / "src", MODEL)
    outside = tmp_path / "src" / "secret"  # beside the seed directory, with checksums that match
    outside.mkdir()
    (outside / "id_ed25519").write_text("not a model\n")
    digest = hashlib.sha256(b"not a model\n").hexdigest()
    (outside / "SHA256SUMS").write_text(f"{digest}  id_ed25519\n")
    store = tmp_path / "store"
    proc, _result = seed(tmp_path, tmp_path / "src", store, models=(MODEL, "../secret"))
    assert proc.returncode != 0
    assert "MODEL_PATH [gpu-1] model_registry_seed_models - model_registry_seed_models[1] is '../secret'" in proc.stdout
    assert "fix - write the model's directory relative to the model store" in proc.stdout
    assert not store.exists() and not (tmp_path / "secret").exists()
