"""plugins/module_utils/node/hub_snapshot.py and the hub_snapshot module against a real Hub API server.

The server is olah (PyPI, .cache/olah-venv, `make unit` installs it from tests/weights/requirements-olah.txt)
serving local git + git-lfs repositories made here ([basic] mirrors-path, [accessibility] offline = true), on
127.0.0.1. olah cannot gate a repository, so a gated one is served through nginx (Debian) in front of it, which
answers 401 with ``X-Error-Code: GatedRepo`` (what the Hub sends, and huggingface_hub raises GatedRepoError for)
unless the request carries the right bearer token. No HTTP is mocked; every request is bounded in time.

Without olah's venv the tests skip, or fail when AIINFRA_WEIGHTS_REQUIRED=1.
"""

import hashlib
import http.server
import json
import os
import random
import shutil
import socket
import struct
import subprocess
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from conftest import ROOT, local_gpu_hosts, run_module, run_playbook, write_inventory

from ansible_collections.aiinfra.k3s.plugins.module_utils.node import hub_snapshot

OLAH = ROOT / ".cache" / "olah-venv" / "bin" / "olah-cli"
TEMPLATE = ROOT / "tests" / "weights" / "olah.toml.j2"
NGINX = shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin:/usr/local/sbin")
TOKEN = "hf_aiinfratesttoken123"
ORG = "testorg"
SHARDS = ("model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors")
GIT_ENV = {
    "GIT_AUTHOR_NAME": "aiinfra test",
    "GIT_AUTHOR_EMAIL": "test@aiinfra.invalid",
    "GIT_COMMITTER_NAME": "aiinfra test",
    "GIT_COMMITTER_EMAIL": "test@aiinfra.invalid",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_TERMINAL_PROMPT": "0",
}


def missing(what):
    if os.environ.get("AIINFRA_WEIGHTS_REQUIRED") == "1":
        pytest.fail(what)
    pytest.skip(what)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def safetensors(path, floats, seed):
    """A valid safetensors file: one F32 tensor of `floats` random values."""
    data = random.Random(seed).randbytes(floats * 4)
    header = json.dumps({"w": {"dtype": "F32", "shape": [floats], "data_offsets": [0, len(data)]}}).encode()
    header += b" " * (-len(header) % 8)
    path.write_bytes(struct.pack("<Q", len(header)) + header + data)


def git(repo, *args):
    env = dict(os.environ, HOME=str(repo.parent), **GIT_ENV)
    return subprocess.run(
        ["git", "-C", str(repo), *args], env=env, check=True, capture_output=True, text=True, timeout=60
    ).stdout.strip()


def make_repo(repo):
    """A model repository: config.json, tokenizer.json, README.md, nested/notes.txt, two LFS safetensors shards
    (1 MiB and 3 MiB); commit 1 tagged v1.0, commit 2 changes config.json. Returns {"v1": sha, "v2": sha}."""
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "lfs", "install", "--local")
    git(repo, "lfs", "track", "*.safetensors")
    (repo / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"], "hidden_size": 64}))
    (repo / "tokenizer.json").write_text(json.dumps({"version": "1.0", "model": {"type": "BPE", "vocab": {"a": 0}}}))
    (repo / "README.md").write_text("---\nlicense: mit\n---\n# tiny test model\n")
    (repo / "nested").mkdir()
    (repo / "nested" / "notes.txt").write_text("a file below a directory\n")
    safetensors(repo / SHARDS[0], 256 * 1024, 1)
    safetensors(repo / SHARDS[1], 768 * 1024, 2)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "v1")
    git(repo, "tag", "v1.0")
    v1 = git(repo, "rev-parse", "HEAD")
    (repo / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"], "hidden_size": 128}))
    git(repo, "commit", "-q", "-am", "v2")
    return {"v1": v1, "v2": git(repo, "rev-parse", "HEAD")}


def lfs_object(repo, name):
    """Path of the LFS object of `name` in the repository (its oid from the pointer git stores)."""
    pointer = git(repo, "show", "HEAD:" + name)
    oid = next(line.split(":", 1)[1] for line in pointer.splitlines() if line.startswith("oid sha256:"))
    return repo / ".git" / "lfs" / "objects" / oid[:2] / oid[2:4] / oid


def wait_http(url, proc, log, seconds=60):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail("%s exited (%s): %s" % (proc.args[0], proc.returncode, log.read_text()[-3000:]))
        try:
            urllib.request.urlopen(url, timeout=2).close()
            return
        except urllib.error.HTTPError:
            return  # the server answers
        except OSError:
            time.sleep(0.2)
    pytest.fail("%s did not answer on %s within %ss: %s" % (proc.args[0], url, seconds, log.read_text()[-3000:]))


def stop(proc):
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


NGINX_CONF = """worker_processes 1;
daemon off;
pid {dir}/nginx.pid;
error_log {dir}/error.log;
events {{ worker_connections 64; }}
http {{
  access_log {dir}/access.log;
  client_body_temp_path {dir}/tmp; proxy_temp_path {dir}/tmp; fastcgi_temp_path {dir}/tmp;
  uwsgi_temp_path {dir}/tmp; scgi_temp_path {dir}/tmp;
  map $http_authorization $gate_ok {{ default 0; "Bearer {token}" 1; }}
  server {{
    listen 127.0.0.1:{port};
    proxy_connect_timeout 10s; proxy_read_timeout 30s;
    location ~ ^/(api/models/)?{org}/gated-model(/|$) {{
      if ($gate_ok = 0) {{
        add_header X-Error-Code GatedRepo always;
        add_header X-Error-Message "Access to model {org}/gated-model is restricted." always;
        return 401;
      }}
      proxy_pass http://127.0.0.1:{olah}; proxy_buffering off; proxy_set_header Host $http_host;
    }}
    location / {{ proxy_pass http://127.0.0.1:{olah}; proxy_buffering off; proxy_set_header Host $http_host; }}
  }}
}}
"""


@pytest.fixture(scope="session")
def hub(tmp_path_factory):
    """olah on 127.0.0.1 serving testorg/tiny-model, testorg/gated-model and testorg/corrupt-model, and nginx in
    front of it gating testorg/gated-model. Yields {endpoint, gated_endpoint, shas, repos, olah_log}."""
    if hub_snapshot.HUB_IMPORT_ERROR:
        missing("huggingface_hub is not installed: run `make venv` (requirements-dev.txt)")
    if not OLAH.exists():
        missing("olah is not installed: run `make unit` (it installs .cache/olah-venv)")
    if not NGINX:
        missing("nginx is not installed: run `make test-tools` (apt-get install nginx)")
    if subprocess.run(["git", "lfs", "version"], capture_output=True, timeout=30, check=False).returncode:
        missing("git-lfs is not installed: apt-get install git-lfs")
    base = tmp_path_factory.mktemp("hub")
    models = base / "mirrors" / "models" / ORG
    repos = {name: models / name for name in ("tiny-model", "gated-model", "corrupt-model")}
    shas = {name: make_repo(path) for name, path in repos.items()}
    port, gate = free_port(), free_port()
    config = base / "olah.toml"
    config.write_text(
        TEMPLATE.read_text()
        .replace("{{ host }}", "127.0.0.1")
        .replace("{{ port }}", str(port))
        .replace("{{ repos_path }}", str(base / "olah-cache"))
        .replace("{{ mirrors_path }}", str(base / "mirrors"))
    )
    olah_log = base / "olah.log"
    env = dict(os.environ, NO_PROXY="127.0.0.1", no_proxy="127.0.0.1", HOME=str(base))
    with open(olah_log, "w") as log:
        olah = subprocess.Popen([str(OLAH), "-c", str(config)], cwd=base, stdout=log, stderr=subprocess.STDOUT, env=env)
    ngx = base / "nginx"
    (ngx / "tmp").mkdir(parents=True)
    (ngx / "nginx.conf").write_text(NGINX_CONF.format(dir=ngx, token=TOKEN, port=gate, org=ORG, olah=port))
    nginx_log = ngx / "stderr.log"
    try:
        wait_http("http://127.0.0.1:%d/api/models/%s/tiny-model/revision/main" % (port, ORG), olah, olah_log)
        with open(nginx_log, "w") as log:
            nginx = subprocess.Popen(
                [NGINX, "-p", str(ngx), "-e", str(ngx / "error.log"), "-c", str(ngx / "nginx.conf")],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        try:
            wait_http("http://127.0.0.1:%d/" % gate, nginx, nginx_log, seconds=20)
            yield {
                "endpoint": "http://127.0.0.1:%d" % port,
                "gated_endpoint": "http://127.0.0.1:%d" % gate,
                "shas": shas,
                "repos": repos,
                "olah_log": olah_log,
            }
        finally:
            stop(nginx)
    finally:
        stop(olah)


def params(hub, dest, repo="tiny-model", **kw):
    p = {
        "repo_id": "%s/%s" % (ORG, repo),
        "revision": hub["shas"][repo]["v2"],
        "endpoint": hub["endpoint"],
        "token": None,
        "allow_patterns": None,
        "ignore_patterns": None,
        "dest": str(dest),
        "verify": "fast",
        "timeout": 20.0,
    }
    p.update(kw)
    return p


def codes(result):
    return [p["code"] for p in result["problems"]]


def sha256sum(directory):
    """`sha256sum --check --strict SHA256SUMS` in the directory, as the nodes run it."""
    return subprocess.run(
        ["sha256sum", "--check", "--strict", "--quiet", "SHA256SUMS"],
        cwd=directory,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def snapshot_files(dest):
    """{relative path: (size, mtime_ns, inode)} of every file under dest but the client's .cache/."""
    out = {}
    for path in Path(dest).rglob("*"):
        rel = path.relative_to(dest).as_posix()
        if path.is_file() and not rel.startswith(".cache/"):
            st = path.stat()
            out[rel] = (st.st_size, st.st_mtime_ns, st.st_ino)
    return out


@pytest.fixture(scope="session")
def downloaded(hub, tmp_path_factory):
    """The whole of tiny-model at its second commit, downloaded once (with its timing)."""
    dest = tmp_path_factory.mktemp("dl") / "testorg" / "tiny-model" / hub["shas"]["tiny-model"]["v2"]
    result = hub_snapshot.run(params(hub, dest))
    return dest, result


def test_download_by_commit_writes_verified_files_sha256sums_and_manifest(hub, downloaded):
    dest, result = downloaded
    assert result["problems"] == []
    assert result["changed"] is True
    paths = sorted(f["path"] for f in result["files"])
    assert paths == sorted(
        [".gitattributes", "README.md", "config.json", "nested/notes.txt", "tokenizer.json", *SHARDS]
    )
    repo = hub["repos"]["tiny-model"]
    for f in result["files"]:
        local = dest / f["path"]
        assert f["size"] == local.stat().st_size
        assert f["sha256"] == hashlib.sha256(local.read_bytes()).hexdigest()
        assert f["downloaded"] is True
    for shard in SHARDS:  # the LFS content, not the pointer, and the same bytes as the repository's object
        assert (dest / shard).read_bytes() == lfs_object(repo, shard).read_bytes()
    assert json.loads((dest / "config.json").read_text())["hidden_size"] == 128  # the commit asked for
    assert result["bytes_total"] == result["bytes_downloaded"] == sum(f["size"] for f in result["files"])
    assert result["bytes_total"] > 4 * 1024 * 1024
    assert result["rate"] > 0 and result["seconds"] > 0
    check = sha256sum(dest)
    assert check.returncode == 0, check.stdout + check.stderr
    listed = [line.split("  ", 1)[1] for line in (dest / "SHA256SUMS").read_text().splitlines()]
    assert listed == paths  # sorted, relative, no .cache/, no SHA256SUMS, no manifest
    manifest = json.loads((dest / hub_snapshot.MANIFEST).read_text())
    assert manifest["repo_id"] == "testorg/tiny-model"
    assert manifest["revision"] == hub["shas"]["tiny-model"]["v2"]
    assert manifest["endpoint"] == hub["endpoint"]
    assert sorted(manifest["files"]) == paths
    for path, entry in manifest["files"].items():
        st = (dest / path).stat()
        assert (entry["size"], entry["mtime_ns"]) == (st.st_size, st.st_mtime_ns)
    print("\n[timing] download of %d bytes: %.2fs" % (result["bytes_downloaded"], result["seconds"]))


def test_rerun_fast_is_a_no_op_that_contacts_nothing(hub, downloaded):
    dest, _first = downloaded
    before = snapshot_files(dest)
    # an endpoint nobody listens on: the run must not need it
    t0 = time.monotonic()
    result = hub_snapshot.run(params(hub, dest, endpoint="http://127.0.0.1:%d" % free_port()))
    seconds = time.monotonic() - t0
    assert result["problems"] == []
    assert result["changed"] is False and result["no_op"] is True
    assert result["bytes_downloaded"] == 0
    assert snapshot_files(dest) == before
    assert len(result["files"]) == 7
    print("\n[timing] no-op rerun (verify=fast, 7 files): %.4fs" % seconds)


def test_full_verify_rehashes_and_changes_nothing(hub, downloaded):
    dest, _first = downloaded
    before = snapshot_files(dest)
    result = hub_snapshot.run(params(hub, dest, verify="full"))
    assert result["problems"] == []
    assert result["changed"] is False and result["no_op"] is False
    assert snapshot_files(dest) == before


def test_changed_local_file_is_downloaded_again(hub, tmp_path):
    dest = tmp_path / "snap"
    assert hub_snapshot.run(params(hub, dest))["problems"] == []
    shard = dest / SHARDS[1]
    good = shard.read_bytes()
    data = bytearray(good)
    data[1000:1004] = b"\xff\xff\xff\xff"  # same size, new mtime
    shard.write_bytes(bytes(data))
    (dest / "README.md").write_text("edited\n")  # another size
    untouched = (dest / SHARDS[0]).stat().st_ino
    result = hub_snapshot.run(params(hub, dest))
    assert result["problems"] == []
    assert result["changed"] is True
    assert sorted(f["path"] for f in result["files"] if f["downloaded"]) == ["README.md", SHARDS[1]]
    assert shard.read_bytes() == good
    assert (dest / SHARDS[0]).stat().st_ino == untouched
    assert sha256sum(dest).returncode == 0
    # only the mtime changed: hashed, found right, kept (the manifest learns the new mtime)
    os.utime(dest / "config.json", ns=(time.time_ns(), time.time_ns()))
    inode = (dest / "config.json").stat().st_ino
    again = hub_snapshot.run(params(hub, dest))
    assert again["problems"] == [] and not any(f["downloaded"] for f in again["files"])
    assert (dest / "config.json").stat().st_ino == inode
    assert hub_snapshot.run(params(hub, dest))["no_op"] is True


def test_allow_and_ignore_patterns(hub, tmp_path):
    dest = tmp_path / "snap"
    result = hub_snapshot.run(
        params(hub, dest, allow_patterns=["*.safetensors", "*.json"], ignore_patterns=["tokenizer*"])
    )
    assert result["problems"] == []
    assert sorted(f["path"] for f in result["files"]) == sorted(["config.json", *SHARDS])
    assert sorted(snapshot_files(dest)) == sorted(["config.json", "SHA256SUMS", hub_snapshot.MANIFEST, *SHARDS])
    assert sha256sum(dest).returncode == 0
    # narrower patterns: what the manifest listed and the patterns now exclude goes
    narrower = hub_snapshot.run(params(hub, dest, allow_patterns=["*.json"]))
    assert narrower["problems"] == [] and narrower["changed"] is True
    assert sorted(snapshot_files(dest)) == sorted(
        ["SHA256SUMS", hub_snapshot.MANIFEST, "config.json", "tokenizer.json"]
    )
    assert not list(dest.glob("*.safetensors"))
    nothing = hub_snapshot.run(params(hub, dest, allow_patterns=["*.gguf"]))
    assert codes(nothing) == ["HUB_NO_FILES"]


def test_branch_or_tag_is_refused_with_the_commit_to_pin(hub, tmp_path):
    shas = hub["shas"]["tiny-model"]
    for revision, sha in (("main", shas["v2"]), ("v1.0", shas["v1"])):
        result = hub_snapshot.run(params(hub, tmp_path / revision, revision=revision))
        assert codes(result) == ["HUB_REVISION_NOT_PINNED"]
        assert sha in result["problems"][0]["problem"] and sha in result["problems"][0]["fix"]
        assert result["problems"][0]["variable"] == "revision"
        assert not (tmp_path / revision).exists()
    short = hub_snapshot.run(params(hub, tmp_path / "short", revision=shas["v1"][:12]))
    assert codes(short)[0] == "HUB_REVISION_NOT_PINNED"


def test_repository_not_found(hub, tmp_path):
    result = hub_snapshot.run(params(hub, tmp_path / "x", repo_id="testorg/nope"))
    assert codes(result) == ["HUB_REPO_NOT_FOUND"], [p["problem"] for p in result["problems"]]
    assert "testorg/nope@" in result["problems"][0]["problem"] and hub["endpoint"] in result["problems"][0]["problem"]
    assert not (tmp_path / "x").exists()


def test_commit_not_in_repository(hub, tmp_path):
    result = hub_snapshot.run(params(hub, tmp_path / "x", revision="0123456789abcdef0123456789abcdef01234567"))
    assert codes(result) == ["HUB_REVISION_NOT_FOUND"], [p["problem"] for p in result["problems"]]
    assert not (tmp_path / "x").exists()


def test_gated_repository_needs_the_token(hub, tmp_path):
    gated = {"repo": "gated-model", "endpoint": hub["gated_endpoint"]}
    no_token = hub_snapshot.run(params(hub, tmp_path / "a", **gated))
    assert codes(no_token) == ["HUB_GATED"]
    assert "no token" in no_token["problems"][0]["problem"] and no_token["problems"][0]["variable"] == "token"
    wrong = hub_snapshot.run(params(hub, tmp_path / "b", token="hf_wrong", **gated))
    assert codes(wrong) == ["HUB_GATED"] and "refused" in wrong["problems"][0]["problem"]
    assert "hf_wrong" not in json.dumps(wrong)
    right = hub_snapshot.run(params(hub, tmp_path / "c", token=TOKEN, **gated))
    assert right["problems"] == [] and len(right["files"]) == 7
    assert sha256sum(tmp_path / "c").returncode == 0
    # the ungated repository through the same gate, without a token
    assert hub_snapshot.run(params(hub, tmp_path / "d", endpoint=hub["gated_endpoint"]))["problems"] == []


def test_checksum_mismatch_removes_the_file_and_names_it(hub, tmp_path):
    repo = hub["repos"]["corrupt-model"]
    obj = lfs_object(repo, SHARDS[0])
    data = bytearray(obj.read_bytes())
    data[-4:] = bytes(b ^ 0xFF for b in data[-4:])  # same size: the client's size check passes
    os.chmod(obj, 0o644)
    obj.write_bytes(bytes(data))
    dest = tmp_path / "snap"
    result = hub_snapshot.run(params(hub, dest, repo="corrupt-model"))
    assert codes(result) == ["HUB_CHECKSUM_MISMATCH"]
    text = result["problems"][0]["problem"]
    sha = hub["shas"]["corrupt-model"]["v2"]
    assert SHARDS[0] in text and "testorg/corrupt-model@%s" % sha in text and hub["endpoint"] in text
    assert not (dest / SHARDS[0]).exists()
    assert (dest / SHARDS[1]).exists()  # the good files stay for the next run
    assert not (dest / "SHA256SUMS").exists() and not (dest / hub_snapshot.MANIFEST).exists()
    # repaired on the mirror: the next run fetches only the removed file
    obj.write_bytes(lfs_object(hub["repos"]["tiny-model"], SHARDS[0]).read_bytes())
    again = hub_snapshot.run(params(hub, dest, repo="corrupt-model"))
    assert again["problems"] == []
    assert [f["path"] for f in again["files"] if f["downloaded"]] == [SHARDS[0]]
    assert sha256sum(dest).returncode == 0


def test_unreachable_endpoint_fails_in_bounded_time(hub, tmp_path):
    t0 = time.monotonic()
    result = hub_snapshot.run(params(hub, tmp_path / "x", endpoint="http://127.0.0.1:%d" % free_port(), timeout=5.0))
    assert codes(result) == ["HUB_UNREACHABLE"]
    assert time.monotonic() - t0 < 30
    assert not (tmp_path / "x").exists()
    # a listening socket that never answers: the timeout bounds it
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        t0 = time.monotonic()
        endpoint = "http://127.0.0.1:%d" % silent.getsockname()[1]
        result = hub_snapshot.run(params(hub, tmp_path / "y", endpoint=endpoint, timeout=2.0))
    assert codes(result) == ["HUB_UNREACHABLE"]
    assert time.monotonic() - t0 < 40
    print("\n[timing] silent endpoint, timeout=2: %.1fs" % (time.monotonic() - t0))


class StallingHub(http.server.BaseHTTPRequestHandler):
    """Answers a repository's refs, then never answers the tree listing (a hung mirror)."""

    def do_GET(self):
        if self.path.endswith("/refs"):
            body = b'{"branches": [], "converts": [], "tags": []}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        self.server.stalled.wait(120)

    def log_message(self, *args):
        pass


def test_stalled_listing_is_bounded_by_the_timeout(hub, tmp_path):
    """The listing's pagination passes timeout=None to the client: without the module's bound it waits forever;
    with it, each try waits `timeout` and the client's five retries (1+2+4+8+8 s of backoff) follow."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), StallingHub)
    server.daemon_threads = True
    server.stalled = threading.Event()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        t0 = time.monotonic()
        endpoint = "http://127.0.0.1:%d" % server.server_address[1]
        result = hub_snapshot.run(params(hub, tmp_path / "x", endpoint=endpoint, timeout=1.0))
        seconds = time.monotonic() - t0
    finally:
        server.stalled.set()
        server.shutdown()
        server.server_close()
    assert codes(result) == ["HUB_UNREACHABLE"], [p["problem"] for p in result["problems"]]
    assert seconds < 60
    print("\n[timing] stalled listing, timeout=1: %.1fs" % seconds)


def test_check_mode_reports_sizes_and_touches_nothing(hub, tmp_path):
    dest = tmp_path / "snap"
    result = hub_snapshot.run(params(hub, dest, allow_patterns=["*.safetensors", "*.json"]), check_mode=True)
    assert result["problems"] == []
    assert result["changed"] is True
    sizes = {f["path"]: f["size"] for f in result["files"] if f["downloaded"]}
    repo = hub["repos"]["tiny-model"]
    assert sizes[SHARDS[0]] == lfs_object(repo, SHARDS[0]).stat().st_size
    assert sorted(sizes) == sorted(["config.json", "tokenizer.json", *SHARDS])
    assert result["bytes_downloaded"] == result["bytes_total"] == sum(sizes.values())
    assert not dest.exists()
    # on a complete snapshot: nothing to download, nothing touched
    assert hub_snapshot.run(params(hub, dest))["problems"] == []
    (dest / SHARDS[0]).unlink()
    before = snapshot_files(dest)
    client = sorted(p.relative_to(dest) for p in (dest / ".cache").rglob("*"))
    again = hub_snapshot.run(params(hub, dest), check_mode=True)
    assert again["problems"] == [] and again["changed"] is True
    assert [f["path"] for f in again["files"] if f["downloaded"]] == [SHARDS[0]]
    assert again["bytes_downloaded"] == (lfs_object(repo, SHARDS[0])).stat().st_size
    assert snapshot_files(dest) == before
    assert sorted(p.relative_to(dest) for p in (dest / ".cache").rglob("*")) == client


def test_parameters_are_checked_before_any_request(tmp_path):
    p = {
        "repo_id": "not a repo",
        "revision": "0" * 40,
        "endpoint": "ftp://x",
        "token": None,
        "allow_patterns": None,
        "ignore_patterns": None,
        "dest": "relative/dir",
        "verify": "fast",
        "timeout": 0,
    }
    result = hub_snapshot.run(p)
    assert sorted(pr["variable"] for pr in result["problems"]) == ["dest", "endpoint", "repo_id", "timeout"]
    assert set(codes(result)) == {"HUB_PARAMETER"}
    # Problems are data of the collection's one shape: code, severity, host, variable, message (and fix).
    for found in result["problems"]:
        assert {"code", "severity", "host", "variable", "message", "fix"} <= set(found)
        assert found["message"] and found["message"] == found["problem"]


def test_module_downloads_and_check_mode(hub, tmp_path):
    """The module as Ansible runs it: no_log token, check mode, failure with problems."""
    dest = tmp_path / "snap"
    args = {
        "repo_id": "testorg/gated-model",
        "revision": hub["shas"]["gated-model"]["v1"],
        "endpoint": hub["gated_endpoint"],
        "token": TOKEN,
        "allow_patterns": ["*.json"],
        "dest": str(dest),
        "timeout": 20,
    }
    rc, check = run_module("aiinfra.k3s.hub_snapshot", args, check=True)
    assert rc == 0 and check["changed"] is True and check["problems"] == [], check
    assert not dest.exists()
    rc, res = run_module("aiinfra.k3s.hub_snapshot", args)
    assert rc == 0 and res["changed"] is True, res
    assert sorted(f["path"] for f in res["files"]) == ["config.json", "tokenizer.json"]
    assert json.loads((dest / "config.json").read_text())["hidden_size"] == 64  # v1
    assert TOKEN not in json.dumps(res)
    rc, again = run_module("aiinfra.k3s.hub_snapshot", args)
    assert rc == 0 and again["changed"] is False and again["no_op"] is True
    rc, failed = run_module("aiinfra.k3s.hub_snapshot", dict(args, revision="main"))
    assert rc != 0 and failed["failed"] is True
    assert [p["code"] for p in failed["problems"]] == ["HUB_REVISION_NOT_PINNED"]
    assert hub["shas"]["gated-model"]["v2"] in failed["msg"]


def fake_free_room(monkeypatch, under, free):
    """os.statvfs as a file system with `free` bytes available (rounded up to whole blocks) would answer, for paths
    under `under` (the boundary: the OS call); other paths get the real answer."""
    real = os.statvfs

    def statvfs(path):
        st = real(path)
        if os.path.abspath(path) == str(under) or os.path.abspath(path).startswith(str(under) + os.sep):
            fields = list(st)
            fields[4] = -(-free // st.f_frsize)  # f_bavail
            return os.statvfs_result(fields)
        return st

    monkeypatch.setattr(os, "statvfs", statvfs)


def test_a_snapshot_that_cannot_fit_is_refused_before_anything_is_downloaded(hub, tmp_path, monkeypatch):
    """Issue 25, item 4: the listed sizes of the files to download (after the patterns, less the files complete
    in dest already) against the free room of dest's file system."""
    repo = hub["repos"]["tiny-model"]
    shard = lfs_object(repo, SHARDS[1]).stat().st_size
    dest = tmp_path / "cache" / "snap"
    plan = hub_snapshot.run(params(hub, dest, ignore_patterns=["README.md"]), check_mode=True)
    total = plan["bytes_downloaded"]  # what the listing says the patterns keep
    assert plan["problems"] == [] and total > shard and not dest.exists()

    block = os.statvfs(tmp_path).f_frsize
    fake_free_room(monkeypatch, tmp_path, total - block)  # a block short
    for check in (True, False):
        refused = hub_snapshot.run(params(hub, dest, ignore_patterns=["README.md"]), check_mode=check)
        assert codes(refused) == ["NO_ROOM"] and refused["problems"][0]["variable"] == "dest"
        assert (
            "testorg/tiny-model@" in refused["problems"][0]["problem"]
            and str(dest) in refused["problems"][0]["problem"]
        )
        assert not dest.exists() and not refused["changed"]  # nothing created, nothing downloaded

    fake_free_room(monkeypatch, tmp_path, total)  # room for exactly that
    fetched = hub_snapshot.run(params(hub, dest, ignore_patterns=["README.md"]))
    assert fetched["problems"] == [] and fetched["bytes_downloaded"] == total
    assert sha256sum(dest).returncode == 0

    # One shard gone: only it is needed, whatever the other files take.
    (dest / SHARDS[1]).unlink()
    fake_free_room(monkeypatch, tmp_path, shard - block)
    short = hub_snapshot.run(params(hub, dest, ignore_patterns=["README.md"]))
    assert codes(short) == ["NO_ROOM"] and not (dest / SHARDS[1]).exists()
    fake_free_room(monkeypatch, tmp_path, shard)
    again = hub_snapshot.run(params(hub, dest, ignore_patterns=["README.md"]))
    assert again["problems"] == [] and [f["path"] for f in again["files"] if f["downloaded"]] == [SHARDS[1]]
    assert sha256sum(dest).returncode == 0


# ---------------------------------------------------------------- the role with a Hub source (roles/model_registry)


def role_run(hub, tmp_path, min_free_gib=0):
    """roles/model_registry on two GPU hosts with a local connection (127.0.0.1 and .2), each with its own store, a
    Hub source of tiny-model at its second commit taken through olah: the controller's cache, then node to node."""
    hosts = {"gpu-1": "127.0.0.1", "gpu-2": "127.0.0.2"}
    source = {
        "path": "testorg/tiny-model",
        "source": "hub",
        "repo": "testorg/tiny-model",
        "revision": hub["shas"]["tiny-model"]["v2"],
        "endpoint": hub["endpoint"],
    }
    inventory = write_inventory(
        tmp_path / "inv",
        {"all": {"hosts": local_gpu_hosts(hosts, tmp_path / "stores")}},
        {
            "site_plan_gpu_hosts": list(hosts),
            "model_registry_owner": str(os.getuid()),
            "model_registry_group": str(os.getgid()),
            "model_registry_min_free_gib": min_free_gib,
            "model_registry_sources": [source],
            "model_registry_peer_port": free_port(),
            "model_registry_mirror_address": "127.0.0.1",
            "model_registry_mirror_bind": "127.0.0.1",
            "model_registry_cache_dir": str(tmp_path / "controller-cache"),
            "model_registry_timeout": 20,
            "model_registry_transfer_timeout": 120,
        },
    )
    playbook = tmp_path / "hub-role.yml"
    playbook.write_text(
        json.dumps([{"hosts": "all", "gather_facts": False, "roles": [{"role": "aiinfra.k3s.model_registry"}]}])
    )
    return run_playbook(str(playbook), inventory)


def task_results(result, name):
    return {
        host: res
        for play in result["plays"]
        for task in play["tasks"]
        if name in task["task"]["name"]
        for host, res in task["hosts"].items()
    }


def test_the_role_takes_a_hub_revision_to_every_node_and_a_rerun_fetches_nothing(hub, tmp_path):
    proc, result = role_run(hub, tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:]
    for host in ("gpu-1", "gpu-2"):
        model = tmp_path / "stores" / host / "testorg" / "tiny-model"
        assert json.loads((model / "config.json").read_text())["hidden_size"] == 128  # v2
        assert json.loads((model / ".aiinfra-weights.json").read_text())["revision"] == hub["shas"]["tiny-model"]["v2"]
    # The store step, asked again with the Hub's file lists, found the model lacking on both nodes.
    assert {h: r["lacking"] for h, r in task_results(result, "with the Hub's file lists").items()} == {
        "gpu-1": ["testorg/tiny-model"],
        "gpu-2": ["testorg/tiny-model"],
    }
    proc, result = role_run(hub, tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert all(s["changed"] == 0 for s in result["stats"].values()), result["stats"]
    assert {h: r["current"] for h, r in task_results(result, "with the Hub's file lists").items()} == {
        "gpu-1": ["testorg/tiny-model"],
        "gpu-2": ["testorg/tiny-model"],
    }
    assert all(r.get("skipped") for r in task_results(result, "Fetch the model weights").values())


def test_a_node_without_room_fails_before_the_hub_download(hub, tmp_path):
    proc, result = role_run(hub, tmp_path, min_free_gib=10**7)
    assert proc.returncode != 0
    failed = task_results(result, "Check the room on the model store")
    assert all(r.get("failed") for r in failed.values()) and set(failed) == {"gpu-1", "gpu-2"}, proc.stdout[-3000:]
    assert "less than model_registry_min_free_gib" in json.dumps(failed)
    assert not (tmp_path / "controller-cache").exists()  # no Hub request went out
