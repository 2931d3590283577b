"""model_registry's seeding, run for real on this machine (local connection): verified copy, idempotent
re-run, and a tampered source refused before anything is copied."""

import functools
import hashlib
import http.server
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, run_playbook, write_inventory
from make_test_airgap import make_model

MODEL = "nvidia/Nemotron-4-35B"


def mirror_on_loopback(tmp_path):
    """A local connection says nothing of the controller's address: the controller's mirror on loopback."""
    return {
        "model_registry_mirror_address": "127.0.0.1",
        "model_registry_mirror_bind": "127.0.0.1",
        "model_registry_cache_dir": str(tmp_path / "controller-cache"),
        "model_registry_timeout": 10,
        "model_registry_transfer_timeout": 120,
    }


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
            **mirror_on_loopback(tmp_path),
        },
    )
    playbook = tmp_path / "seed.yml"
    playbook.write_text(
        yaml.safe_dump([{"hosts": "all", "gather_facts": False, "roles": [{"role": "aiinfra.k3s.model_registry"}]}])
    )
    return run_playbook(str(playbook), inventory, extra=["--check"] if check else [])


def stats(result):
    return result["stats"]["gpu-1"]


def task_result(result, name):
    """gpu-1's result of the task whose name holds `name` (the JSON callback's)."""
    for play in result["plays"]:
        for task in play["tasks"]:
            if name in task["task"]["name"]:
                return task["hosts"]["gpu-1"]
    raise AssertionError("no task %r ran" % name)


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
    assert (copied / ".aiinfra-weights.json").is_file()
    assert stats(result)["changed"] > 0
    assert task_result(result, "Serve the controller's models").get("skipped") is not True
    proc, result = seed(tmp_path, tmp_path / "src", store)
    assert proc.returncode == 0 and stats(result)["changed"] == 0, proc.stdout[-3000:]
    # The store is complete: the store step says so from the manifest, so no weights task (and no mirror) runs.
    assert task_result(result, "read its room and what it holds")["current"] == [MODEL]
    assert task_result(result, "Fetch the model weights").get("skipped") is True
    proc, result = seed(tmp_path, tmp_path / "src", store, check=True)
    assert proc.returncode == 0 and stats(result)["changed"] == 0


@pytest.mark.slow
def test_tampered_source_is_refused_and_nothing_is_published(tmp_path):
    make_model(tmp_path / "src", MODEL, tamper=True)
    store = tmp_path / "store"
    proc, _result = seed(tmp_path, tmp_path / "src", store)
    assert proc.returncode != 0
    out = " ".join(proc.stdout.split())
    assert "gpu-1: model weights not fetched:" in out, out[-3000:]
    assert "model.safetensors" in out and "sha256" in out
    assert not (store / MODEL).exists()
    assert not (tmp_path / "controller-cache").exists() or not any((tmp_path / "controller-cache").glob("mirror-*"))


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


def placed_site(tmp_path, source, seeded, required=True):
    """Two GPU nodes of different GPU types (local connection, a store each) and a model placed on each type."""
    local = {"ansible_connection": "local", "ansible_python_interpreter": "{{ ansible_playbook_python }}"}
    hosts = {
        "gpu-1": dict(local, aiinfra_gpu_type="T1", model_registry_path=str(tmp_path / "store-1")),
        "gpu-2": dict(local, aiinfra_gpu_type="T2", model_registry_path=str(tmp_path / "store-2")),
    }
    inventory = write_inventory(
        tmp_path / "inv",
        {"all": {"children": {"k3s_agents": {"hosts": hosts}, "gpu_nodes": {"hosts": {h: {} for h in hosts}}}}},
        {
            "model_registry_owner": str(os.getuid()),
            "model_registry_group": str(os.getgid()),
            "model_registry_min_free_gib": 0,
            "model_registry_seed_dir": str(source / "models"),
            "model_registry_seed_models": list(seeded),
            "model_registry_require_models": required,
            **mirror_on_loopback(tmp_path),
            "litellm_enabled": False,
            "vllm_models": [
                {"served_name": "a", "path": MODEL, "placement": {"gpu_types": ["T1"]}},
                {"served_name": "b", "path": OTHER, "placement": {"gpu_types": ["T2"]}},
            ],
        },
    )
    playbook = tmp_path / "seed.yml"
    playbook.write_text(
        yaml.safe_dump(
            [
                {"import_playbook": str(ROOT / "playbooks" / "groups.yml")},
                {"hosts": "__aiinfra_gpu", "gather_facts": False, "roles": [{"role": "aiinfra.k3s.model_registry"}]},
            ]
        )
    )
    return run_playbook(str(playbook), inventory, callback="default")[0]


OTHER = "Qwen/Qwen2.5-7B-Instruct"


@pytest.mark.slow
def test_weights_are_seeded_only_where_the_plan_may_place_the_model(tmp_path):
    """Issue 29, item 8: each model's weights go only to the GPU nodes of its placement (the site plan's nodes)."""
    make_model(tmp_path / "src", MODEL)
    make_model(tmp_path / "src", OTHER)
    proc = placed_site(tmp_path, tmp_path / "src", (MODEL, OTHER))
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert (tmp_path / "store-1" / MODEL / "SHA256SUMS").is_file()
    assert not (tmp_path / "store-1" / OTHER).exists()
    assert (tmp_path / "store-2" / OTHER / "SHA256SUMS").is_file()
    assert not (tmp_path / "store-2" / MODEL).exists()


@pytest.mark.slow
def test_the_store_check_names_a_model_only_on_the_nodes_where_it_may_run(tmp_path):
    """A model missing everywhere is reported on its own nodes only: gpu-1, which never runs it, passes."""
    make_model(tmp_path / "src", MODEL)
    proc = placed_site(tmp_path, tmp_path / "src", (MODEL,))
    assert proc.returncode != 0
    out = " ".join(proc.stdout.split())
    assert f"gpu-2: {OTHER} missing under {tmp_path / 'store-2'}" in out, out[-3000:]
    assert "gpu-1: every model the plan needs is in the store" in out
    assert f"{MODEL} missing" not in out


# ---------------------------------------------------------------- progress of a fetch (issue 25)


class SlowFiles(http.server.SimpleHTTPRequestHandler):
    """Files of a directory (GET, HEAD, with Content-Length) at about 2.5 MB/s: a fetch of a few MB takes seconds."""

    def copyfile(self, source, outputfile):
        while True:
            block = source.read(64 * 1024)
            if not block:
                return
            outputfile.write(block)
            time.sleep(0.025)

    def log_message(self, *args):
        pass


class QuietServer(http.server.ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        pass  # a client gone mid-answer (a fetch stopped on purpose)


@pytest.fixture
def slow_mirror(tmp_path):
    """A loopback HTTP server of tmp_path/www at about 2.5 MB/s; yields its base URL."""
    www = tmp_path / "www"
    www.mkdir()
    server = QuietServer(("127.0.0.1", 0), functools.partial(SlowFiles, directory=str(www)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield www, "http://127.0.0.1:%d" % server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def slow_model(www, name, size):
    """www/<name>/ with big.bin (size random bytes), config.json and SHA256SUMS (no sizes, as sha256sum writes)."""
    model = www / name
    model.mkdir(parents=True)
    (model / "big.bin").write_bytes(os.urandom(size))
    (model / "config.json").write_text("{}\n")
    (model / "SHA256SUMS").write_text(
        "".join(
            "%s  %s\n" % (hashlib.sha256((model / n).read_bytes()).hexdigest(), n) for n in ("big.bin", "config.json")
        )
    )


def fetch_play(tmp_path, url, name, async_dir, **extra):
    """ansible-playbook on localhost (local connection): aiinfra.k3s.model_weights of <url>/<name> into
    tmp_path/store, with a header that must stay secret; returns (process, JSON result)."""
    inventory = write_inventory(
        tmp_path / "inv",
        {
            "all": {
                "hosts": {
                    "gpu-1": {
                        "ansible_connection": "local",
                        "ansible_python_interpreter": "{{ ansible_playbook_python }}",
                        "ansible_async_dir": str(async_dir),
                    }
                }
            }
        },
    )
    task = {
        "name": "Fetch the model",
        "aiinfra.k3s.model_weights": {
            "store": str(tmp_path / "store"),
            "path": "org/" + name,
            "url": "%s/%s" % (url, name),
            "headers": {"Authorization": "Bearer sekrit-progress-token"},
            "timeout": 10,
            **extra,
        },
    }
    playbook = tmp_path / ("fetch-%s.yml" % name)
    playbook.write_text(yaml.safe_dump([{"hosts": "all", "gather_facts": False, "tasks": [task]}]))
    return run_playbook(str(playbook), inventory)


PROGRESS_LINE = re.compile(
    r"^gpu-1: org/(\S+) \d+\.\d\d/(\d+\.\d\d|\?) GB, \d+\.\d MB/s, ETA (\d+|\?) s \((big\.bin|config\.json|-)\)$", re.M
)


@pytest.mark.slow
def test_progress_interval_shows_the_fetch_as_it_goes(tmp_path, slow_mirror):
    """Issue 25, item 3: with progress_interval the action plugin runs the module asynchronously and shows a line of
    progress every second (on stderr: the stdout callback's JSON stays JSON); the result is the module's, the model
    lands verified, the job's file and the progress file are gone. Without it, no line, no async job."""
    www, url = slow_mirror
    slow_model(www, "slow", 6 * 1024 * 1024)  # about 2.5 s
    async_dir = tmp_path / "async"
    started = time.monotonic()
    proc, result = fetch_play(tmp_path, url, "slow", async_dir, progress_interval=1)
    seconds = time.monotonic() - started
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    lines = PROGRESS_LINE.findall(proc.stderr)
    assert lines and {found[0] for found in lines} == {"slow"}, proc.stderr[-3000:]
    assert "sekrit-progress-token" not in proc.stdout + proc.stderr
    fetched = task_result(result, "Fetch the model")
    assert fetched["changed"] and fetched["swapped"] == "new" and fetched["problems"] == []
    assert fetched["bytes_fetched"] == fetched["bytes_total"] == 6 * 1024 * 1024 + 3
    assert not {"ansible_job_id", "started", "finished", "results_file"} & set(fetched)  # the module's result
    model = tmp_path / "store" / "org" / "slow"
    check = subprocess.run(["sha256sum", "--check", "--strict", "SHA256SUMS"], cwd=model, capture_output=True,
                           timeout=60, check=False)  # fmt: skip
    assert check.returncode == 0, check.stdout
    assert sorted(os.listdir(tmp_path / "store" / ".staging")) == [".lock"]  # no progress file left
    assert async_dir.is_dir() and os.listdir(async_dir) == []  # the job ran there and its file was cleaned up
    print("progress run: %.1f s, %d lines: %s" % (seconds, len(lines), PROGRESS_LINE.search(proc.stderr).group(0)))

    slow_model(www, "plain", 1024 * 1024)
    plain_async = tmp_path / "async-plain"
    proc, result = fetch_play(tmp_path, url, "plain", plain_async)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert not PROGRESS_LINE.search(proc.stderr + proc.stdout)
    assert not plain_async.exists()  # not run asynchronously
    plain = task_result(result, "Fetch the model")
    assert plain["changed"] and plain["problems"] == [] and sorted(plain) == sorted(fetched)
    assert json.dumps(plain).count("sekrit") == 0


@pytest.mark.slow
def test_a_short_fetch_does_not_wait_for_the_progress_interval(tmp_path, slow_mirror):
    """The job is asked soon and then less often: a fetch of a second or two with the role's default interval (30 s)
    or a longer one ends when the module does, and shows no line (none was due)."""
    www, url = slow_mirror
    slow_model(www, "quick", 1024 * 1024)
    started = time.monotonic()
    proc, result = fetch_play(tmp_path, url, "quick", tmp_path / "async", progress_interval=120)
    seconds = time.monotonic() - started
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert task_result(result, "Fetch the model")["swapped"] == "new"
    assert not PROGRESS_LINE.search(proc.stderr)
    assert seconds < 60, "a short fetch waited for the 120 s interval (%.1f s)" % seconds


@pytest.mark.slow
def test_progress_interval_keeps_the_failure_of_the_module(tmp_path, slow_mirror):
    """A fetch that fails on the node (a checksum that does not match) fails the task with the module's problems,
    as without progress_interval; the progress file and the job's file are gone."""
    www, url = slow_mirror
    slow_model(www, "liar", 2 * 1024 * 1024)
    (www / "liar" / "SHA256SUMS").write_text("%s  big.bin\n%s  config.json\n" % ("0" * 64, "1" * 64))
    async_dir = tmp_path / "async"
    proc, result = fetch_play(tmp_path, url, "liar", async_dir, progress_interval=1)
    assert proc.returncode != 0
    failed = task_result(result, "Fetch the model")
    assert failed["failed"] and [p["code"] for p in failed["problems"]] == ["SHA256_MISMATCH"]
    assert "SHA256_MISMATCH" in failed["msg"] and "ansible_job_id" not in failed
    assert not (tmp_path / "store" / "org" / "liar").exists()
    assert [n for n in os.listdir(tmp_path / "store" / ".staging") if n.startswith(".progress")] == []
    assert os.listdir(async_dir) == []


@pytest.mark.slow
def test_progress_timeout_stops_the_fetch_and_leaves_its_part(tmp_path, slow_mirror):
    """progress_timeout bounds the asynchronous run: the node's module stops itself at it (its part stays in
    staging), the task fails saying so, the progress file is removed; the next run publishes the model (this server
    has no Range: it starts the file over). The module stops itself: async_wrapper's kill, 30 s later, is only a
    backstop, and it misses a module started before its setpgid (seen under load: the killed job published)."""
    www, url = slow_mirror
    slow_model(www, "long", 24 * 1024 * 1024)  # about 10 s, longer than the 5 s allowed (room to start when loaded)
    async_dir = tmp_path / "async"
    proc, result = fetch_play(tmp_path, url, "long", async_dir, progress_interval=1, progress_timeout=5)
    assert proc.returncode != 0
    stopped = task_result(result, "Fetch the model")
    assert stopped["failed"] and "progress_timeout (5 s) and stopped" in stopped["msg"], stopped
    assert [(p["code"], p["variable"]) for p in stopped["problems"]] == [("RUN_TIMEOUT", "progress_timeout")]
    assert os.listdir(async_dir) == []  # the job ended by itself and its file was cleaned up
    staging = tmp_path / "store" / ".staging"
    assert [n for n in os.listdir(staging) if n.startswith(".progress")] == []
    part = staging / "org" / "long" / "big.bin.aiinfra-part"
    assert 0 < part.stat().st_size < 24 * 1024 * 1024
    assert not (tmp_path / "store" / "org" / "long").exists()
    proc, result = fetch_play(tmp_path, url, "long", async_dir)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    again = task_result(result, "Fetch the model")
    assert again["swapped"] == "new" and again["problems"] == []
    assert (tmp_path / "store" / "org" / "long" / "big.bin").read_bytes() == (www / "long" / "big.bin").read_bytes()
