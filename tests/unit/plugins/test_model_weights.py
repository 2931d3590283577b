"""model_weights against a real nginx on 127.0.0.1 (Range, If-Range, limit_rate, a 500 location): fetch, no-op,
reuse by hard link, resume after a killed process, stale parts, checksum lies, HTTP errors, check mode, atomic
replacement, two concurrent runs, sizes asked with HEAD for the room check, and the progress file."""

import hashlib
import http.server
import json
import multiprocessing
import os
import shutil
import socket
import stat
import subprocess
import threading
import time

import pytest
from conftest import run_module

from ansible_collections.aiinfra.k3s.plugins.module_utils.node import model_weights as mw

NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
pytestmark = pytest.mark.skipif(not os.path.exists(NGINX), reason="nginx is not installed (make test-tools)")

BIG = 24 * 1024 * 1024  # the large file of a model: tens of MB
SLOW_RATE = 6 * 1024 * 1024  # bytes per second of the /slow/ location
CONF = """
worker_processes 1;
daemon off;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
{user}
events {{ worker_connections 256; }}
http {{
  log_format bytes '$request_method $uri $status $body_bytes_sent "$http_range" "$http_if_range"';
  access_log {d}/access.log bytes;
  client_body_temp_path {d}/tmp/body;
  proxy_temp_path {d}/tmp/proxy;
  fastcgi_temp_path {d}/tmp/fastcgi;
  uwsgi_temp_path {d}/tmp/uwsgi;
  scgi_temp_path {d}/tmp/scgi;
  default_type application/octet-stream;
  server {{
    listen 127.0.0.1:{port};
    root {www};
    location /slow/ {{ alias {www}/; limit_rate {rate}; }}
    location /fail/ {{ return 500; }}
    location ~ ^/moved/(.*)$ {{ return 302 /$1; }}
  }}
{tls}
}}
"""
TLS = """
  server {{
    listen 127.0.0.1:{port} ssl;
    root {www};
    ssl_certificate {d}/site.crt;
    ssl_certificate_key {d}/site.key;
  }}
"""


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Mirror:
    """A running nginx serving www/ at /, slowly at /slow/, and 500 at /fail/."""

    def __init__(self, base):
        self.dir = base / "nginx"
        self.www = base / "www"
        (self.dir / "tmp").mkdir(parents=True)
        self.www.mkdir()
        self.port = free_port()
        self.tls_port = free_port() if self.make_cert() else None
        user = "user root;" if os.geteuid() == 0 else ""
        tls = TLS.format(port=self.tls_port, www=self.www, d=self.dir) if self.tls_port else ""
        conf = CONF.format(d=self.dir, user=user, port=self.port, www=self.www, rate=SLOW_RATE, tls=tls)
        (self.dir / "nginx.conf").write_text(conf)
        self.proc = subprocess.Popen(
            [NGINX, "-p", str(self.dir), "-c", str(self.dir / "nginx.conf"), "-e", str(self.dir / "error.log")],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        deadline = time.time() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                if self.proc.poll() is not None or time.time() > deadline:
                    raise RuntimeError("nginx did not start: %s" % self.proc.stderr.read().decode()) from None
                time.sleep(0.05)

    def make_cert(self):
        """A self-signed certificate for 127.0.0.1 (the site CA of the HTTPS tests); False without openssl."""
        if not shutil.which("openssl"):
            return False
        made = subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
             "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(self.dir / "site.key"),
             "-out", str(self.dir / "site.crt")],
            capture_output=True, timeout=60, check=False,
        )  # fmt: skip
        return made.returncode == 0

    def url(self, name, where=""):
        return "http://127.0.0.1:%d/%s%s" % (self.port, where, name)

    def log(self, name=None, method="GET"):
        """[(uri, status, body bytes sent, range, if-range)] of the access log's requests of that method (all with
        None), for name's files only when given."""
        out = []
        for line in (self.dir / "access.log").read_text().splitlines():
            verb, uri, status, sent, rest = line.split(" ", 4)
            rng, if_range = rest[1:-1].split('" "')
            if (name is None or ("/%s/" % name) in uri) and method in (None, verb):
                out.append((uri, int(status), int(sent), rng, if_range))
        return out

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)


@pytest.fixture(scope="module")
def mirror(tmp_path_factory):
    server = Mirror(tmp_path_factory.mktemp("mirror"))
    yield server
    server.stop()


@pytest.fixture(autouse=True)
def no_proxy(monkeypatch):
    for name in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("no_proxy", "127.0.0.1")


def sha(data):
    return hashlib.sha256(data).hexdigest()


def make_model(mirror, name, files, sums=None):
    """A model directory name/ on the mirror with files ({path: bytes}) and its SHA256SUMS (or sums, a lie)."""
    root = mirror.www / name
    if root.exists():
        shutil.rmtree(root)
    for path, data in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_bytes(data)
    text = sums if sums is not None else "".join("%s  %s\n" % (sha(d), p) for p, d in sorted(files.items()))
    (root / "SHA256SUMS").write_text(text)
    return files


def small_files(seed=b"1"):
    return {
        "config.json": b'{"model_type": "llama"}\n' + seed,
        "tokenizer/tokenizer.json": b'{"vocab": {}}\n' + seed,
        "model-00001.safetensors": os.urandom(300 * 1024),
    }


def params(mirror, store, name, where="", **extra):
    out = {
        "store": str(store),
        "path": "org/" + name,
        "url": mirror.url(name, where),
        "verify": "fast",
        "source": "url " + mirror.url(name),
        "revision": "r1",
        "timeout": 10,
        "retries": 1,
        "host": "node-a",
    }
    out.update(extra)
    return out


def run(p, **kw):
    kw.setdefault("backoff", 0.05)
    return mw.converge(p, **kw)


def assert_model(store, name, files):
    model = store / "org" / name
    for path, data in files.items():
        assert (model / path).read_bytes() == data, path
    listed = sorted(os.path.relpath(os.path.join(top, n), model) for top, _dirs, names in os.walk(model) for n in names)
    assert listed == sorted([*files, "SHA256SUMS", mw.MANIFEST])
    check = subprocess.run(
        ["sha256sum", "--check", "--strict", "SHA256SUMS"], cwd=model, capture_output=True, timeout=60, check=False
    )
    assert check.returncode == 0, check.stdout


def staging_left(store):
    """What the staging area holds besides the lock."""
    root = store / mw.STAGING
    return (
        sorted(os.path.relpath(os.path.join(top, n), root) for top, dirs, names in os.walk(root) for n in names + dirs)
        if root.exists()
        else []
    )


def codes(result):
    return [p["code"] for p in result["problems"]]


# ---------------------------------------------------------------- plain functions


@pytest.mark.parametrize(
    "path",
    ["/abs/model", ".", "..", "a/../b", "a/./b", "a//b", "a/", "", "a\x01b", "a\\b", ".staging", ".staging/x", None],
)
def test_model_path_refused(path):
    assert mw.model_path_error(path)


@pytest.mark.parametrize("path", ["Qwen/Qwen2.5-7B-Instruct", "m", "org/x/.staging", "a.b/c-d_e"])
def test_model_path_accepted(path):
    assert mw.model_path_error(path) is None


GOOD = "a" * 64


@pytest.mark.parametrize(
    "line",
    [
        GOOD + "  /etc/passwd",
        GOOD + "  ../x",
        GOOD + "  a/../b",
        GOOD + "  a//b",
        GOOD + "  SHA256SUMS",
        GOOD + "  " + mw.MANIFEST,
        GOOD + "  x" + mw.PART,
        GOOD + "  x\x7fy",
        "zz  model.bin",
        "just text",
    ],
)
def test_sums_entry_refused(line):
    with pytest.raises(mw.WeightsError) as err:
        mw.parse_sums(line + "\n" + GOOD + "  ok.bin\n", "node-a")
    assert [p["code"] for p in err.value.problems] == ["SUMS_ENTRY"]
    assert err.value.problems[0]["host"] == "node-a"


@pytest.mark.parametrize(
    "text, expected",
    [
        (GOOD + "  b.bin\n" + "B" * 64 + " *./a/c.json\n", [("a/c.json", "b" * 64), ("b.bin", GOOD)]),
        ("# comment\n\n" + GOOD + "  x\n", [("x", GOOD)]),
    ],
)
def test_sums_parsed(text, expected):
    assert [(e["path"], e["sha256"]) for e in mw.parse_sums(text, "h")] == expected


@pytest.mark.parametrize(
    "text",
    ["", GOOD + "  x\n" + GOOD + "  x\n", GOOD + "  a\n" + GOOD + "  a/b\n"],
    ids=["empty", "twice", "file-and-dir"],
)
def test_sums_lists_refused(text):
    with pytest.raises(mw.WeightsError):
        mw.parse_sums(text, "h")


@pytest.mark.parametrize(
    "files",
    [
        [{"path": "x", "sha256": "nothex"}],
        [{"path": "../x", "sha256": GOOD}],
        [{"path": "x", "sha256": GOOD, "size": -1}],
        [],
    ],
    ids=["bad-sha", "dotdot", "bad-size", "empty"],
)
def test_given_files_refused(files):
    with pytest.raises(mw.WeightsError) as err:
        mw.given_files(files, "h")
    assert {p["code"] for p in err.value.problems} == {"FILES"}


def test_shown_url_hides_credentials():
    assert mw.shown_url("https://u:secret@mirror/x?sig=abc") == "https://mirror/x"


# ---------------------------------------------------------------- against nginx


def test_first_fetch(mirror, tmp_path):
    files = make_model(mirror, "first", small_files())
    store = tmp_path / "store"
    result = run(params(mirror, store, "first", mode="0640", directory_mode="0750", owner=str(os.getuid())))
    assert result["problems"] == []
    assert result["changed"] and result["swapped"] == "new"
    assert sorted(f["path"] for f in result["fetched"]) == sorted(files)
    assert result["bytes_fetched"] == result["bytes_total"] == sum(len(d) for d in files.values())
    assert result["bytes_resumed"] == 0 and result["reused"] == 0 and result["hashed"] == []
    assert_model(store, "first", files)
    model = store / "org" / "first"
    for top, dirs, names in os.walk(model):
        assert stat.S_IMODE(os.stat(top).st_mode) == 0o750
        for n in names:
            assert stat.S_IMODE(os.stat(os.path.join(top, n)).st_mode) == 0o640
        assert dirs or names
    assert stat.S_IMODE(os.stat(store / "org").st_mode) == 0o750
    manifest = mw.read_manifest(str(model))
    assert manifest["source"] == "url " + mirror.url("first") and manifest["revision"] == "r1"
    for rec in manifest["files"]:
        st = os.stat(model / rec["path"])
        assert (rec["size"], rec["mtime_ns"], rec["sha256"]) == (st.st_size, st.st_mtime_ns, sha(files[rec["path"]]))
        assert rec["verified"]
    assert result["manifest"] == str(model / mw.MANIFEST)
    assert staging_left(store) == [".lock"]


def test_no_op_hashes_nothing_full_verifies(mirror, tmp_path):
    files = make_model(mirror, "noop", small_files())
    store = tmp_path / "store"
    assert run(params(mirror, store, "noop"))["changed"]
    before = len(logged(mirror, "noop", "", 1 + len(files)))  # SHA256SUMS and each file, once nginx logged them
    target = store / "org" / "noop" / "model-00001.safetensors"
    st = os.stat(target)
    data = bytearray(target.read_bytes())
    data[1000] ^= 0xFF  # same size, other content, mtime put back: only reading would tell
    target.write_bytes(bytes(data))
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))

    fast = run(params(mirror, store, "noop"))
    assert fast["problems"] == [] and not fast["changed"]
    assert fast["hashed"] == [] and fast["fetched"] == [] and fast["bytes_fetched"] == 0 and fast["swapped"] == "none"
    assert [entry[0] for entry in logged(mirror, "noop", "", before + 1)[before:]] == ["/noop/SHA256SUMS"]  # no file
    assert target.read_bytes() == bytes(data)

    full = run(params(mirror, store, "noop", verify="full"))
    assert full["problems"] == [] and full["changed"] and full["swapped"] == "exchange"
    assert sorted(full["hashed"]) == sorted(files)
    assert [f["path"] for f in full["fetched"]] == ["model-00001.safetensors"]
    assert full["reused"] == 2
    assert_model(store, "noop", files)
    again = run(params(mirror, store, "noop", verify="full"))
    assert not again["changed"] and again["fetched"] == []


def test_deleted_and_changed_files_fetched_others_linked(mirror, tmp_path):
    files = make_model(mirror, "reuse", small_files())
    store = tmp_path / "store"
    assert run(params(mirror, store, "reuse"))["swapped"] == "new"
    model = store / "org" / "reuse"
    kept_inode = os.stat(model / "model-00001.safetensors").st_ino
    (model / "config.json").unlink()
    (model / "tokenizer" / "tokenizer.json").write_bytes(b"local edit")
    result = run(params(mirror, store, "reuse"))
    assert result["problems"] == [] and result["swapped"] == "exchange"
    assert sorted(f["path"] for f in result["fetched"]) == ["config.json", "tokenizer/tokenizer.json"]
    assert result["reused"] == 1 and result["hashed"] == []
    assert os.stat(model / "model-00001.safetensors").st_ino == kept_inode  # a hard link, not a copy
    assert_model(store, "reuse", files)
    assert staging_left(store) == [".lock"]


def test_copied_model_adopted_by_hashing_once(mirror, tmp_path):
    files = make_model(mirror, "adopt", small_files())
    store = tmp_path / "store"
    shutil.copytree(mirror.www / "adopt", store / "org" / "adopt")  # seeded by other means: no manifest
    result = run(params(mirror, store, "adopt"))
    assert result["problems"] == [] and result["changed"] and result["swapped"] == "none"
    assert sorted(result["hashed"]) == sorted(files) and result["fetched"] == []
    assert mw.read_manifest(str(store / "org" / "adopt"))
    assert run(params(mirror, store, "adopt"))["hashed"] == []


def fetch_in_child(p):
    mw.converge(p, backoff=0.05)


def kill_mid_fetch(mirror, store, name, part_bytes):
    """Fetch name slowly in a child process and kill it once its part holds part_bytes or more."""
    proc = multiprocessing.get_context("fork").Process(
        target=fetch_in_child, args=(params(mirror, store, name, "slow/"),)
    )
    proc.start()
    part = store / mw.STAGING / "org" / name / ("big.bin" + mw.PART)
    deadline = time.time() + 30
    try:
        while not (part.exists() and part.stat().st_size >= part_bytes):
            assert time.time() < deadline, "the child fetched no part in time"
            assert proc.is_alive(), "the child ended before it was killed"
            time.sleep(0.02)
    finally:
        proc.kill()
        proc.join(timeout=10)
    return part


def logged(mirror, name, uri_end, count, method="GET"):
    """The access log's lines of name's requests (of that method) whose URI ends with uri_end, once there are count
    of them (nginx logs a request after answering it), or after 10 seconds."""
    deadline = time.time() + 10
    while True:
        lines = [entry for entry in mirror.log(name, method) if entry[0].endswith(uri_end)]
        if len(lines) >= count or time.time() > deadline:
            return lines
        time.sleep(0.05)


def test_killed_fetch_resumes(mirror, tmp_path, record_property):
    files = make_model(mirror, "resume", {"big.bin": os.urandom(BIG), "config.json": b"{}\n"})
    store = tmp_path / "store"
    part = kill_mid_fetch(mirror, store, "resume", BIG // 2)
    kept = part.stat().st_size
    assert not (store / "org" / "resume").exists()  # nothing published
    result = run(params(mirror, store, "resume"))
    assert result["problems"] == [] and result["swapped"] == "new"
    assert_model(store, "resume", files)
    big = logged(mirror, "resume", "/big.bin", 2)
    assert len(big) == 2 and big[1][1] == 206 and big[1][3] == "bytes=%d-" % kept and big[1][4]
    sent = big[0][2] + big[1][2]
    resent = sent - BIG
    assert result["bytes_resumed"] == kept
    assert result["bytes_fetched"] == len(files["config.json"]) + BIG - kept
    record_property(
        "resume", "kept %d, nginx sent %d + %d, resent %d of %d" % (kept, big[0][2], big[1][2], resent, BIG)
    )
    print("resume: kept %d, nginx sent %d + %d, resent %d of %d bytes" % (kept, big[0][2], big[1][2], resent, BIG))
    assert resent < BIG // 10
    assert staging_left(store) == [".lock"]


@pytest.mark.parametrize("change", ["touched", "content"])
def test_stale_part_starts_over(mirror, tmp_path, change):
    name = "stale-" + change
    files = make_model(mirror, name, {"big.bin": os.urandom(BIG)})
    store = tmp_path / "store"
    part = kill_mid_fetch(mirror, store, name, BIG // 4)
    assert part.stat().st_size > 0
    source = mirror.www / name / "big.bin"
    if change == "touched":  # same bytes, new Last-Modified and ETag: If-Range fails, a 200 starts over
        os.utime(source, (time.time() + 100, time.time() + 100))
    else:  # new bytes and a new SHA256SUMS: the part belongs to another sha256
        files = make_model(mirror, name, {"big.bin": os.urandom(BIG)})
    result = run(params(mirror, store, name))
    assert result["problems"] == [] and result["swapped"] == "new"
    assert result["bytes_resumed"] == 0 and result["bytes_fetched"] == BIG
    assert_model(store, name, files)
    last = logged(mirror, name, "/big.bin", 2)[-1]
    assert last[1] == 200 and last[2] == BIG
    if change == "touched":
        assert last[3].startswith("bytes=") and last[4]  # it asked for the rest, and was answered with all
    assert staging_left(store) == [".lock"]


def test_checksum_lie_publishes_nothing(mirror, tmp_path):
    files = small_files()
    lie = "".join("%s  %s\n" % (sha(b"other" if p == "config.json" else d), p) for p, d in sorted(files.items()))
    make_model(mirror, "liar", files, sums=lie)
    store = tmp_path / "store"
    result = run(params(mirror, store, "liar"))
    assert codes(result) == ["SHA256_MISMATCH"] and not result["changed"] and result["swapped"] == "none"
    found = result["problems"][0]
    assert "config.json" in found["message"] and "node-a" in found["message"] and found["host"] == "node-a"
    assert mirror.url("liar") + "/config.json" in found["message"]
    assert not (store / "org" / "liar").exists()
    assert not any(p.startswith("org/liar/config.json") for p in staging_left(store))


@pytest.mark.parametrize(
    "where, name, status, requests",
    [("", "absent-model", "404", 1), ("fail/", "broken", "500", 3)],
    ids=["404-once", "500-retried"],
)
def test_http_errors(mirror, tmp_path, where, name, status, requests):
    store = tmp_path / "store"
    before = len(mirror.log(name))
    result = run(params(mirror, store, name, where, retries=2))
    assert codes(result) == ["HTTP"] and not result["changed"]
    assert status in result["problems"][0]["message"]
    assert mirror.url(name, where) + "/SHA256SUMS" in result["problems"][0]["message"]
    # 5xx tried again, bounded; 4xx not. nginx logs a request after answering it: wait (bounded) for the last line.
    assert len(logged(mirror, name, "", before + requests)) - before == requests
    assert not (store / "org" / name).exists()


def test_missing_file_404(mirror, tmp_path):
    files = make_model(mirror, "hole", small_files())
    (mirror.www / "hole" / "config.json").unlink()
    store = tmp_path / "store"
    result = run(params(mirror, store, "hole"))
    assert codes(result) == ["HTTP"]
    assert "404" in result["problems"][0]["message"] and "/hole/config.json" in result["problems"][0]["message"]
    assert not (store / "org" / "hole").exists()
    assert files


def test_connection_refused(tmp_path):
    p = {"store": str(tmp_path / "s"), "path": "m", "url": "http://127.0.0.1:%d/m" % free_port(), "retries": 1}
    started = time.time()
    result = run(p)
    assert codes(result) == ["HTTP"] and "connection failed" in result["problems"][0]["message"]
    assert time.time() - started < 5


@pytest.mark.parametrize("path", ["/etc", "../up", ".staging/x", "a//b"])
def test_bad_path_touches_nothing(mirror, tmp_path, path):
    store = tmp_path / "store"
    result = run(dict(params(mirror, store, "first"), path=path))
    assert codes(result) == ["MODEL_PATH"] and result["problems"][0]["variable"] == "path"
    assert not store.exists()


def test_bad_sums_entries_refused(mirror, tmp_path):
    make_model(mirror, "evil", {"ok.bin": b"x"}, sums=GOOD + "  ../../etc/shadow\n" + sha(b"x") + "  ok.bin\n")
    store = tmp_path / "store"
    result = run(params(mirror, store, "evil"))
    assert codes(result) == ["SUMS_ENTRY"]
    assert not (store / "org").exists()


def test_files_given_instead_of_sums(mirror, tmp_path):
    files = make_model(mirror, "given", small_files(), sums="not a sums file\n")
    store = tmp_path / "store"
    listed = [{"path": p, "sha256": sha(d), "size": len(d)} for p, d in files.items()]
    result = run(params(mirror, store, "given", files=listed))
    assert result["problems"] == [] and result["swapped"] == "new"
    assert_model(store, "given", files)
    wrong = [dict(listed[0], size=listed[0]["size"] + 1)]
    result = run(params(mirror, store, "given-wrong", files=wrong, url=mirror.url("given")))
    assert codes(result) == ["SIZE_MISMATCH"]


def test_a_model_that_cannot_fit_is_refused_before_a_byte_moves(mirror, tmp_path):
    """The list's sizes against the store's file system: a model larger than its free room (here 1 PB) is refused
    with NO_ROOM, and the server is never asked for a file."""
    files = make_model(mirror, "huge", small_files())
    store = tmp_path / "store"
    listed = [{"path": p, "sha256": sha(d), "size": 10**15 if p == "config.json" else len(d)} for p, d in files.items()]
    result = run(params(mirror, store, "huge", files=listed))
    assert codes(result) == ["NO_ROOM"] and result["bytes_fetched"] == 0
    assert "huge" in result["problems"][0]["message"] and "GB free" in result["problems"][0]["message"]
    assert not (store / "org" / "huge").exists()
    assert not list((store / ".staging").rglob("*.aiinfra-part")) if (store / ".staging").exists() else True
    time.sleep(0.2)  # nginx writes its access log line after the answer
    assert mirror.log("huge", None) == []  # not even a HEAD


def test_check_mode_touches_nothing(mirror, tmp_path):
    files = make_model(mirror, "dry", small_files())
    store = tmp_path / "store"
    result = run(params(mirror, store, "dry"), check_mode=True)
    assert result["problems"] == [] and result["changed"]
    assert sorted((f["path"], f["size"]) for f in result["fetched"]) == sorted((p, len(d)) for p, d in files.items())
    assert not store.exists()
    assert run(params(mirror, store, "dry"))["changed"]
    (store / "org" / "dry" / "config.json").unlink()
    before = snapshot(store)
    again = run(params(mirror, store, "dry"), check_mode=True)
    assert again["changed"] and again["fetched"] == [{"path": "config.json", "size": len(files["config.json"])}]
    assert snapshot(store) == before


def snapshot(root):
    """Every path under root with its size, mode and mtime_ns."""
    out = []
    for top, dirs, names in os.walk(root):
        for n in sorted(dirs + names):
            st = os.lstat(os.path.join(top, n))
            out.append((os.path.join(top, n), st.st_size, st.st_mode, st.st_mtime_ns))
    return sorted(out)


@pytest.mark.parametrize("exchange, swapped", [(None, "exchange"), (lambda a, b: False, "fallback")])
def test_replacement_is_atomic(mirror, tmp_path, exchange, swapped):
    name = "replace-" + swapped
    store = tmp_path / "store"
    old = make_model(mirror, name, dict(small_files(b"old"), **{"old-only.bin": b"old"}))
    assert run(params(mirror, store, name))["swapped"] == "new"
    assert_model(store, name, old)
    new = make_model(mirror, name, dict(small_files(b"new"), **{"new-only.bin": b"new"}))
    new["model-00001.safetensors"] = old["model-00001.safetensors"]
    make_model(mirror, name, new)
    result = run(params(mirror, store, name, revision="r2"), exchange=exchange)
    assert result["problems"] == [] and result["swapped"] == swapped
    assert result["reused"] == 1
    assert sorted(f["path"] for f in result["fetched"]) == ["config.json", "new-only.bin", "tokenizer/tokenizer.json"]
    assert_model(store, name, new)  # the old-only file and the old contents are gone
    assert mw.read_manifest(str(store / "org" / name))["revision"] == "r2"
    assert staging_left(store) == [".lock"]


def concurrent_child(p, queue):
    queue.put(mw.converge(p, backoff=0.05))


def test_two_concurrent_runs_one_model(mirror, tmp_path):
    files = make_model(mirror, "race", {"big.bin": os.urandom(BIG // 3), "config.json": b"{}\n"})
    store = tmp_path / "store"
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    both = params(mirror, store, "race", "slow/")
    procs = [
        ctx.Process(target=concurrent_child, args=(both, queue)),
        ctx.Process(target=concurrent_child, args=(both, queue)),
    ]
    for proc in procs:
        proc.start()
    results = [queue.get(timeout=60), queue.get(timeout=60)]
    for proc in procs:
        proc.join(timeout=10)
    assert [r["problems"] for r in results] == [[], []]
    assert sorted(r["swapped"] for r in results) == ["new", "none"]
    waited = next(r for r in results if r["swapped"] == "none")
    assert not waited["changed"] and waited["fetched"] == [] and waited["bytes_fetched"] == 0
    assert len(logged(mirror, "race", "/big.bin", 1)) == 1
    assert_model(store, "race", files)


def test_lock_timeout(mirror, tmp_path):
    make_model(mirror, "locked", small_files())
    store = tmp_path / "store"
    fd = mw.lock_store(str(store), 1)
    try:
        result = run(params(mirror, store, "locked", lock_timeout=0.3))
    finally:
        mw.unlock_store(fd)
    assert codes(result) == ["LOCK_TIMEOUT"]
    assert not (store / "org" / "locked").exists()


class CuttingRelay:
    """A TCP relay on 127.0.0.1 to the mirror that closes its first connection after `cut` bytes of the answer (a
    connection lost mid-file), and relays later ones whole."""

    def __init__(self, port, cut):
        self.port, self.cut, self.connections, self.stopped = port, cut, 0, False
        self.server = socket.create_server(("127.0.0.1", 0))
        self.server.settimeout(0.1)
        self.threads = [threading.Thread(target=self.serve, daemon=True)]
        self.threads[0].start()

    @property
    def url_port(self):
        return self.server.getsockname()[1]

    def serve(self):
        while not self.stopped:
            try:
                client, _addr = self.server.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            self.connections += 1
            limit = self.cut if self.connections == 1 else None
            self.threads.append(threading.Thread(target=self.relay, args=(client, limit), daemon=True))
            self.threads[-1].start()

    def relay(self, client, limit):
        upstream = socket.create_connection(("127.0.0.1", self.port), timeout=30)
        client.settimeout(30)
        request = client.recv(65536)
        upstream.sendall(request)
        sent = 0
        try:
            while limit is None or sent < limit:
                block = upstream.recv(65536 if limit is None else min(65536, limit - sent))
                if not block:
                    break
                client.sendall(block)
                sent += len(block)
        except OSError:
            pass
        finally:
            client.close()
            upstream.close()

    def close(self):
        """Stop accepting and wait for every relaying thread (the tests fork later: no thread may be left)."""
        self.stopped = True
        for thread in list(self.threads):
            thread.join(timeout=30)
        self.server.close()


def test_cut_connection_retried_and_resumed(mirror, tmp_path):
    files = make_model(mirror, "cut", {"big.bin": os.urandom(BIG)})
    relay = CuttingRelay(mirror.port, BIG // 2)
    try:
        # The size given: no HEAD, the relay's first connection is the GET it cuts.
        listed = [{"path": "big.bin", "sha256": sha(files["big.bin"]), "size": BIG}]
        p = params(mirror, tmp_path / "store", "cut", files=listed)
        p["url"] = "http://127.0.0.1:%d/cut" % relay.url_port
        result = run(p)
    finally:
        relay.close()
    assert result["problems"] == [] and result["swapped"] == "new"
    assert relay.connections == 2  # one cut, one retry for the rest
    big = logged(mirror, "cut", "/big.bin", 2)
    assert big[-1][1] == 206 and big[-1][3].startswith("bytes=") and big[-1][4]
    resumed_at = int(big[-1][3][len("bytes=") : -1])
    assert BIG // 4 < resumed_at <= BIG // 2
    assert result["bytes_fetched"] == BIG and result["bytes_resumed"] == 0  # all of it in this run, nothing twice
    assert_model(tmp_path / "store", "cut", files)


def test_resume_through_a_redirect(mirror, tmp_path):
    files = make_model(mirror, "redirect", {"big.bin": os.urandom(BIG)})
    store = tmp_path / "store"
    kept = kill_mid_fetch(mirror, store, "redirect", BIG // 3).stat().st_size
    result = run(params(mirror, store, "redirect", "moved/", headers={"Authorization": "Bearer x"}))
    assert result["problems"] == [] and result["bytes_resumed"] == kept and result["bytes_fetched"] == BIG - kept
    last = logged(mirror, "redirect", "/big.bin", 3)[-1]
    assert last[0] == "/redirect/big.bin" and last[1] == 206 and last[3] == "bytes=%d-" % kept
    assert_model(store, "redirect", files)


@pytest.mark.parametrize(
    "extra, code",
    [
        ({"mode": "u=rw"}, "MODE"),
        ({"directory_mode": "99999"}, "MODE"),
        ({"owner": "no-such-user-here"}, "OWNER"),
        ({"url": "ftp://127.0.0.1/x"}, "URL"),
        ({"store": "relative/store"}, "STORE"),
        ({"verify": "sometimes"}, "VERIFY"),
        ({"run_timeout": 0}, "RUN_TIMEOUT_VALUE"),
        ({"run_timeout": -5}, "RUN_TIMEOUT_VALUE"),
        ({"run_timeout": True}, "RUN_TIMEOUT_VALUE"),
    ],
)
def test_bad_params_touch_nothing(mirror, tmp_path, extra, code):
    store = tmp_path / "store"
    result = run(dict(params(mirror, store, "first"), **extra))
    assert codes(result) == [code] and not result["changed"]
    assert not store.exists()


def test_nested_models_refused(mirror, tmp_path):
    files = make_model(mirror, "outer", small_files())
    store = tmp_path / "store"
    assert run(params(mirror, store, "outer"))["problems"] == []
    inner = dict(params(mirror, store, "outer"), path="org/outer/inner")
    assert codes(run(inner)) == ["NESTED_MODEL"]
    assert codes(run(dict(params(mirror, store, "outer"), path="org"))) == ["NESTED_MODEL"]
    assert_model(store, "outer", files)


def test_https_with_a_site_ca(mirror, tmp_path):
    if not mirror.tls_port:
        pytest.skip("openssl is not installed")
    files = make_model(mirror, "tls", small_files())
    p = dict(params(mirror, tmp_path / "store", "tls"), url="https://127.0.0.1:%d/tls" % mirror.tls_port)
    refused = run(p)  # the system CA store does not know the site's CA
    assert codes(refused) == ["HTTP"] and "CERTIFICATE_VERIFY_FAILED" in refused["problems"][0]["message"]
    result = run(dict(p, ca_path=str(mirror.dir / "site.crt")))
    assert result["problems"] == [] and result["swapped"] == "new"
    assert_model(tmp_path / "store", "tls", files)


def test_module_through_ansible(mirror, tmp_path):
    files = make_model(mirror, "module", small_files())
    args = {
        "store": str(tmp_path / "store"),
        "path": "org/module",
        "url": mirror.url("module"),
        "headers": {"Authorization": "Bearer sekrit-token"},
        "timeout": 10,
    }
    rc, result = run_module("aiinfra.k3s.model_weights", args, check=True)
    assert rc == 0 and result["changed"] and len(result["fetched"]) == len(files)
    assert not (tmp_path / "store").exists()
    rc, result = run_module("aiinfra.k3s.model_weights", args)
    assert rc == 0 and result["changed"] and result["swapped"] == "new"
    assert "sekrit-token" not in str(result)
    assert_model(tmp_path / "store", "module", files)
    rc, result = run_module("aiinfra.k3s.model_weights", dict(args, path="../x"))
    assert rc != 0 and [p["code"] for p in result["problems"]] == ["MODEL_PATH"]


# ---------------------------------------------------------------- sizes asked with HEAD, room (issue 25)


def test_sizes_the_list_lacks_are_asked_once_each(mirror, tmp_path):
    """SHA256SUMS gives no sizes: one HEAD per file, then one GET each; a list with sizes needs no HEAD."""
    files = make_model(mirror, "heads", small_files())
    result = run(params(mirror, tmp_path / "store", "heads"))
    assert result["problems"] == [] and result["sizes_unknown"] == []
    heads = logged(mirror, "heads", "", len(files), method="HEAD")
    assert sorted(entry[0] for entry in heads) == sorted("/heads/" + p for p in files)
    assert len(logged(mirror, "heads", "", len(files) + 1)) == len(files) + 1  # SHA256SUMS and each file
    assert_model(tmp_path / "store", "heads", files)
    listed = [{"path": p, "sha256": sha(d), "size": len(d)} for p, d in files.items()]
    again = run(params(mirror, tmp_path / "other", "heads", files=listed))
    assert again["problems"] == [] and again["swapped"] == "new"
    time.sleep(0.2)  # nginx writes its access log line after the answer
    assert len(mirror.log("heads", "HEAD")) == len(files)


def fake_free_room(monkeypatch, store, free):
    """os.statvfs as the store's file system would answer with `free` bytes available (the boundary: the OS call);
    other paths get the real answer."""
    real = os.statvfs

    def statvfs(path):
        st = real(path)
        if os.path.abspath(path) == str(store) or os.path.abspath(path).startswith(str(store) + os.sep):
            fields = list(st)
            fields[4] = free // st.f_frsize  # f_bavail
            return os.statvfs_result(fields)
        return st

    monkeypatch.setattr(os, "statvfs", statvfs)


@pytest.mark.parametrize("short", [1, 0], ids=["one-block-short", "just-enough"])
def test_a_url_model_without_sizes_that_cannot_fit_is_refused_before_a_byte_moves(mirror, tmp_path, monkeypatch, short):
    """Issue 25, item 1: the sizes come from HEAD, so a SHA256SUMS model larger than the free room is refused with
    NO_ROOM before any file is asked for; with room for exactly it, it is fetched."""
    name = "roomless-%d" % short
    files = make_model(mirror, name, small_files())
    store = tmp_path / "store"
    frsize = os.statvfs(tmp_path).f_frsize
    total = sum(len(d) for d in files.values())
    free = ((total + frsize - 1) // frsize - short) * frsize  # whole blocks: total fits in `free` only when short=0
    fake_free_room(monkeypatch, store, free)
    result = run(params(mirror, store, name))
    heads = logged(mirror, name, "", len(files), method="HEAD")
    assert len(heads) == len(files)  # one HEAD per file of unknown size, no more
    if not short:
        assert result["problems"] == [] and result["swapped"] == "new"
        assert_model(store, name, files)
        return
    assert codes(result) == ["NO_ROOM"] and result["bytes_fetched"] == 0 and not result["changed"]
    found = result["problems"][0]
    assert found["variable"] == "store" and found["host"] == "node-a" and name in found["message"]
    assert not (store / "org" / name).exists()
    assert [p for p in staging_left(store) if p != ".lock" and p.endswith(mw.PART)] == []
    time.sleep(0.2)  # nginx writes its access log line after the answer
    assert [entry[0] for entry in mirror.log(name)] == ["/%s/SHA256SUMS" % name]  # no file was asked for


class NoLength(http.server.BaseHTTPRequestHandler):
    """Serves the files under server.root (GET and HEAD) without Content-Length: HTTP/1.0, the body ends with the
    connection. With server.head_extra a number, HEAD and GET give a Content-Length, HEAD's that much larger; with
    server.head_status, HEAD is answered with that status alone."""

    def send_head(self, extra=0):
        path = os.path.join(self.server.root, self.path.lstrip("/"))
        if not os.path.isfile(path):
            self.send_error(404)
            return None
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        if getattr(self.server, "head_extra", None) is not None:
            self.send_header("Content-Length", str(os.path.getsize(path) + extra))
        self.end_headers()
        return path

    def do_HEAD(self):
        self.server.heads.append(self.path)
        if getattr(self.server, "head_status", None):
            self.send_response(self.server.head_status)
            self.end_headers()
            return
        self.send_head(getattr(self.server, "head_extra", None) or 0)

    def do_GET(self):
        path = self.send_head()
        if path:
            with open(path, "rb") as handle:
                self.wfile.write(handle.read())

    def log_message(self, *args):
        pass


@pytest.mark.parametrize("head_status", [None, 405, 501], ids=["no-length", "head-405", "head-501"])
def test_sizes_no_server_gives_are_reported_and_not_counted(mirror, tmp_path, monkeypatch, head_status):
    """A server without Content-Length (or one refusing HEAD as not allowed or not implemented): the sizes stay
    unknown, the result names those files, the room check counts nothing for them (as before), and the fetch goes
    on and is verified by sha256."""
    files = make_model(mirror, "nolength", small_files())
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), NoLength)
    server.root, server.heads, server.head_status = str(mirror.www), [], head_status
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    store = tmp_path / "store"
    try:
        p = dict(params(mirror, store, "nolength"), url="http://127.0.0.1:%d/nolength" % server.server_address[1])
        dry = run(p, check_mode=True)
        fake_free_room(monkeypatch, store, 0)
        result = run(p)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
    assert dry["problems"] == [] and dry["sizes_unknown"] == sorted(files)
    assert sorted((f["path"], f["size"]) for f in dry["fetched"]) == sorted((path, None) for path in files)
    assert result["problems"] == [] and result["swapped"] == "new"
    assert result["sizes_unknown"] == sorted(files)
    assert sorted(server.heads) == sorted(["/nolength/" + path for path in files] * 2)  # one each, per run
    assert_model(store, "nolength", files)


# ---------------------------------------------------------------- the progress file (issue 25)


def test_progress_file_while_fetching_then_removed(mirror, tmp_path):
    """A slow fetch (nginx's limit_rate) in a child process: the progress file is JSON with the model's numbers,
    rewritten at most once a second while a file is fetched, mode 0600, and gone when the run ends."""
    big = BIG * 3 // 4  # about 3 s at the slow location's rate
    files = make_model(mirror, "progress", {"big.bin": os.urandom(big), "config.json": b"{}\n"})
    store = tmp_path / "store"
    progress = store / mw.STAGING / ".progress-org__progress.json"
    p = params(mirror, store, "progress", "slow/", progress_file=str(progress))
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=concurrent_child, args=(p, queue))
    child.start()
    seen, modes = [], set()
    deadline = time.time() + 60
    while child.is_alive() and time.time() < deadline:
        try:
            text = progress.read_text()
            modes.add(stat.S_IMODE(progress.stat().st_mode))
        except OSError:
            text = None
        if text:
            data = json.loads(text)  # replaced in one step: never half written
            if not seen or data != seen[-1]:
                seen.append(data)
        time.sleep(0.02)
    result = queue.get(timeout=60)
    child.join(timeout=10)
    assert result["problems"] == [] and result["swapped"] == "new"
    assert not progress.exists() and staging_left(store) == [".lock"]
    total = big + len(files["config.json"])
    assert seen and modes == {0o600}
    assert {d["path"] for d in seen} == {"org/progress"} and {d["bytes_total"] for d in seen} == {total}
    assert len({d["started"] for d in seen}) == 1
    for data in seen:
        assert data["bytes_done"] == data["bytes_fetched"]  # a fresh model: all in place was fetched in this run
        assert 0 <= data["bytes_done"] <= total and data["updated"] >= data["started"]
    during = [d for d in seen if d["file"] == "big.bin" and 0 < d["bytes_done"] < big]
    assert len(during) >= 2, seen
    assert all(b["bytes_done"] > a["bytes_done"] for a, b in zip(during, during[1:]))
    assert all(b["updated"] - a["updated"] >= 0.99 for a, b in zip(during, during[1:]))  # once a second at most
    assert all(d["rate"] > 0 for d in during)
    assert during[-1]["rate"] < 2 * SLOW_RATE  # the run's rate, at the location's limit
    print("progress: %d snapshots, last %s" % (len(seen), seen[-1]))


def test_progress_file_removed_on_failure_left_to_the_run_that_holds_the_lock(mirror, tmp_path):
    files = small_files()
    lie = "".join("%s  %s\n" % (sha(b"other" if p == "config.json" else d), p) for p, d in sorted(files.items()))
    make_model(mirror, "progress-liar", files, sums=lie)
    store = tmp_path / "store"
    progress = store / mw.STAGING / ".progress.json"
    (store / mw.STAGING).mkdir(parents=True)
    progress.write_text('{"path": "another run"}\n')
    fd = mw.lock_store(str(store), 1)
    try:  # another run holds the store: its progress file stays
        waited = run(params(mirror, store, "progress-liar", lock_timeout=0.3, progress_file=str(progress)))
    finally:
        mw.unlock_store(fd)
    assert codes(waited) == ["LOCK_TIMEOUT"] and progress.read_text() == '{"path": "another run"}\n'
    failed = run(params(mirror, store, "progress-liar", progress_file=str(progress)))
    assert codes(failed) == ["SHA256_MISMATCH"] and not progress.exists()
    progress.write_text('{"path": "a killed run"}\n')  # left by a run that was killed: stale under the lock
    make_model(mirror, "progress-liar", files)
    assert run(params(mirror, store, "progress-liar", progress_file=str(progress)))["problems"] == []
    assert not progress.exists()


def test_run_timeout_stops_the_fetch_itself_and_the_next_run_resumes(mirror, tmp_path):
    """run_timeout: the run stops itself between two reads once past it (no one kills it), publishes nothing, keeps
    its part and removes its progress file; the next run resumes the part with a Range request."""
    big = BIG  # about 4 s at the slow location's rate, more than the 2 s allowed
    files = make_model(mirror, "limited", {"big.bin": os.urandom(big), "config.json": b"{}\n"})
    store = tmp_path / "store"
    progress = store / mw.STAGING / ".progress-limited.json"
    (store / mw.STAGING).mkdir(parents=True)
    stopped = run(params(mirror, store, "limited", "slow/", run_timeout=2, progress_file=str(progress)))
    assert codes(stopped) == ["RUN_TIMEOUT"], stopped["problems"]
    found = stopped["problems"][0]
    assert found["variable"] == "run_timeout" and "time limit (2 s)" in found["message"]
    assert "big.bin" in found["message"]  # stopped while fetching the big file, not at its end (about 4 s)
    assert not stopped["changed"] and not (store / "org" / "limited").exists() and not progress.exists()
    part = store / mw.STAGING / "org" / "limited" / "big.bin.aiinfra-part"
    kept = part.stat().st_size
    assert 0 < kept < big and kept == stopped["bytes_fetched"]
    assert part.read_bytes() == files["big.bin"][:kept]  # what was read was written: the resumed hash holds
    resumed = run(params(mirror, store, "limited", "slow/"))
    assert resumed["problems"] == [] and resumed["swapped"] == "new"
    assert resumed["bytes_resumed"] == kept and resumed["bytes_fetched"] == big - kept + len(files["config.json"])
    last = logged(mirror, "limited", "/big.bin", 2)[-1]
    assert last[1] == 206 and last[3] == "bytes=%d-" % kept
    assert_model(store, "limited", files)


def test_run_timeout_is_not_waited_out_by_retries(tmp_path):
    """A mirror that fails: the retries stop at run_timeout instead of going on (the run would sleep 1, 2, 4 ...)."""
    store = tmp_path / "store"
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]  # nothing listens: each try is refused at once
    p = {"store": str(store), "path": "org/none", "url": "http://127.0.0.1:%d/none" % port, "timeout": 2,
         "retries": 50, "host": "node-a", "run_timeout": 1}  # fmt: skip
    started = time.monotonic()
    result = mw.converge(p, backoff=0.4)
    seconds = time.monotonic() - started
    # Not HTTP: the 50 retries (about 7 minutes of backoff) were not waited out.
    assert codes(result) == ["RUN_TIMEOUT"] and "trying" in result["problems"][0]["message"], result["problems"]
    assert seconds < 60, seconds


def test_a_run_past_its_limit_after_the_lock_wait_publishes_nothing(mirror, tmp_path):
    """The lock wait is bounded by lock_timeout alone; a run that got the lock past its run_timeout stops there, before
    a byte moves, and the next run publishes."""
    files = make_model(mirror, "late", small_files())
    store = tmp_path / "store"
    fd = mw.lock_store(str(store), 1)  # another run holds the store for 2.5 s
    releaser = threading.Timer(2.5, mw.unlock_store, args=(fd,))
    releaser.start()
    try:
        late = run(params(mirror, store, "late", run_timeout=1, lock_timeout=60))
    finally:
        releaser.join(timeout=10)
    assert codes(late) == ["RUN_TIMEOUT"] and "lock" in late["problems"][0]["message"], late["problems"]
    assert late["bytes_fetched"] == 0 and not (store / "org" / "late").exists()
    assert run(params(mirror, store, "late"))["swapped"] == "new"
    assert_model(store, "late", files)


def test_progress_is_written_once_a_second_and_at_each_file_end(tmp_path):
    now = [1000.0]
    stats = {"bytes_fetched": 0}
    path = tmp_path / "progress.json"
    progress = mw.Progress(str(path), "org/m", stats, clock=lambda: now[0])
    progress.start(100)
    assert not path.exists()  # not taken under the store's lock: nothing written
    progress.take()
    progress.start(100)
    progress.begin_file("a.bin")

    def read():
        return json.loads(path.read_text())

    assert read() == {
        "path": "org/m", "file": None, "bytes_done": 0, "bytes_total": 100, "bytes_fetched": 0,
        "started": 1000.0, "updated": 1000.0, "rate": 0.0,
    }  # fmt: skip
    stats["bytes_fetched"] = 10
    now[0] += 0.5
    progress.at(10)
    assert read()["bytes_done"] == 0  # half a second after the last write: not written
    stats["bytes_fetched"] = 30
    now[0] += 0.6
    progress.at(30)
    assert (read()["bytes_done"], read()["updated"], read()["rate"]) == (30, 1001.1, round(30 / 1.1, 1))
    stats["bytes_fetched"] = 60
    progress.add(5)  # a file linked from the published model
    progress.end_file(55)  # at once: the end of a file is always written
    assert (read()["bytes_done"], read()["bytes_fetched"]) == (60, 60)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    progress.remove()
    assert not path.exists() and os.listdir(tmp_path) == []
    nowhere = mw.Progress(str(tmp_path / "missing" / "p.json"), "org/m", stats)
    nowhere.take()
    nowhere.start(None)  # a directory that is not there: no progress, no failure
    nowhere.remove()


@pytest.mark.parametrize(
    "where", ["relative.json", "store/org/bad/p.json", "store/.staging/org/bad/p.json", "store/.staging/.lock"]
)
def test_progress_file_where_the_model_goes_is_refused(mirror, tmp_path, where):
    store = tmp_path / "store"
    path = where if where == "relative.json" else str(tmp_path / where)
    result = run(dict(params(mirror, store, "bad"), progress_file=path))
    assert codes(result) == ["PROGRESS_FILE"] and result["problems"][0]["variable"] == "progress_file"
    assert not store.exists()


def test_a_length_other_than_the_head_answer_is_refused(mirror, tmp_path):
    """The size a HEAD gave is the one the fetch must get: a GET of another length is refused (SIZE_MISMATCH, on
    url: the server, not the list), nothing published."""
    make_model(mirror, "twofaced", small_files())
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), NoLength)
    server.root, server.heads, server.head_extra = str(mirror.www), [], 7
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    store = tmp_path / "store"
    try:
        p = dict(params(mirror, store, "twofaced"), url="http://127.0.0.1:%d/twofaced" % server.server_address[1])
        result = run(p)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
    assert codes(result) == ["SIZE_MISMATCH"] and result["problems"][0]["variable"] == "url"
    assert "HEAD" in result["problems"][0]["message"] and result["sizes_unknown"] == []
    assert not (store / "org" / "twofaced").exists()
