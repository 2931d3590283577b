"""plugins/module_utils/node/model_mirror.py: the short-lived HTTP server the GPU nodes fetch model files from,
exercised over real sockets on loopback (and with model_weights fetching from it, as the role does)."""

import hashlib
import http.client
import json
import os
import threading
import time

import pytest

from ansible_collections.aiinfra.k3s.plugins.module_utils.node import model_mirror
from ansible_collections.aiinfra.k3s.plugins.module_utils.node.model_weights import converge

TOKEN = "t0k3n-" + "a" * 26
BIG = os.urandom(3 * 1024 * 1024 + 17)


@pytest.fixture
def model(tmp_path):
    root = tmp_path / "models" / "org" / "tiny"
    (root / "sub").mkdir(parents=True)
    (root / "model.safetensors").write_bytes(BIG)
    (root / "config.json").write_text('{"a": 1}\n')
    (root / "sub" / "tokenizer.json").write_text("{}\n")
    (root / ".cache").mkdir()
    (root / ".cache" / "secret").write_text("hidden\n")
    os.symlink("/etc/hostname", root / "link")
    lines = [
        "%s  %s" % (hashlib.sha256((root / p).read_bytes()).hexdigest(), p)
        for p in ("model.safetensors", "config.json", "sub/tokenizer.json")
    ]
    (root / "SHA256SUMS").write_text("\n".join(lines) + "\n")
    return root


@pytest.fixture
def server(tmp_path, model):
    stop = tmp_path / "stop"
    port_file = tmp_path / "port.json"
    out = {}

    def run():
        out.update(model_mirror.serve("127.0.0.1", 0, {"org/tiny": str(model)}, TOKEN, 60, str(stop), str(port_file)))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not port_file.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    port = json.loads(port_file.read_text())["port"]
    yield port, out
    stop.write_text("")
    thread.join(10)
    assert not thread.is_alive()


AUTH = {"Authorization": "Bearer " + TOKEN}


def request(port, path, method="GET", headers=None, auth=True):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request(method, path, headers=dict(AUTH if auth else {}, **(headers or {})))
        resp = conn.getresponse()
        return resp.status, dict(resp.getheaders()), resp.read()
    finally:
        conn.close()


BASE = "/org/tiny/"

# name: (path, request headers, status, body or None to skip)
ANSWERS = {
    "a whole file": (BASE + "config.json", {}, 200, b'{"a": 1}\n'),
    "a nested file": (BASE + "sub/tokenizer.json", {}, 200, b"{}\n"),
    "a range": (BASE + "model.safetensors", {"Range": "bytes=10-19"}, 206, BIG[10:20]),
    "an open range": (BASE + "model.safetensors", {"Range": "bytes=%d-" % (len(BIG) - 5)}, 206, BIG[-5:]),
    "a suffix range": (BASE + "model.safetensors", {"Range": "bytes=-7"}, 206, BIG[-7:]),
    "past the end": (BASE + "model.safetensors", {"Range": "bytes=%d-" % len(BIG)}, 416, b""),
    "a multi-range gets the whole file": (BASE + "config.json", {"Range": "bytes=0-1,3-4"}, 200, b'{"a": 1}\n'),
    "a stale If-Range gets the whole file": (
        BASE + "config.json",
        {"Range": "bytes=2-3", "If-Range": '"0-0"'},
        200,
        None,
    ),
    "a wrong token": (BASE + "config.json", {"Authorization": "Bearer " + "b" * 32}, 401, b""),
    "another scheme": (BASE + "config.json", {"Authorization": "Basic " + TOKEN}, 401, b""),
    "leaving the directory": (BASE + "../tiny/config.json", {}, 404, b""),
    "a hidden .cache": (BASE + ".cache/secret", {}, 404, b""),
    "a link": (BASE + "link", {}, 404, b""),
    "a directory": (BASE + "sub", {}, 404, b""),
    "an unknown model": ("/org/other/config.json", {}, 404, b""),
    "the token in the path": ("/%s/org/tiny/config.json" % TOKEN, {}, 404, b""),
}


@pytest.mark.parametrize("case", sorted(ANSWERS))
def test_answers(server, case):
    port = server[0]
    path, headers, status, body = ANSWERS[case]
    got_status, got_headers, got_body = request(port, path, headers=headers)
    assert got_status == status
    if body is not None:
        assert got_body == body
    if status == 206:
        assert got_headers["Content-Range"].endswith("/%d" % len(BIG))


def test_if_range_with_the_current_etag_resumes(server):
    port = server[0]
    headers = request(port, BASE + "model.safetensors", method="HEAD")[1]
    assert headers["Accept-Ranges"] == "bytes" and headers["Content-Length"] == str(len(BIG))
    status, _headers, body = request(
        port, BASE + "model.safetensors", headers={"Range": "bytes=5-", "If-Range": headers["ETag"]}
    )
    assert status == 206 and body == BIG[5:]


def test_stops_on_the_stop_file_and_counts(tmp_path, model):
    stop, port_file = tmp_path / "s", tmp_path / "p"
    result = {}
    thread = threading.Thread(
        target=lambda: result.update(
            model_mirror.serve("127.0.0.1", 0, {"m": str(model)}, TOKEN, 30, str(stop), str(port_file))
        )
    )
    thread.start()
    deadline = time.monotonic() + 10
    while not port_file.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    port = json.loads(port_file.read_text())["port"]
    assert oct(port_file.stat().st_mode & 0o777) == "0o600"
    request(port, "/m/config.json")
    request(port, "/m/config.json", auth=False)
    stop.write_text("")
    thread.join(10)
    assert result["stopped_by"] == "stop_file" and result["requests"] == 2 and result["refused"] == 1
    assert result["bytes_sent"] == len(b'{"a": 1}\n') and result["seconds"] < 10


def test_lifetime_bounds_the_server(tmp_path, model):
    started = time.monotonic()
    result = model_mirror.serve("127.0.0.1", 0, {"m": str(model)}, TOKEN, 1, str(tmp_path / "never"))
    assert result["stopped_by"] == "lifetime" and time.monotonic() - started < 5


def test_model_weights_fetches_from_the_mirror_and_resumes(server, tmp_path, model):
    """The role's path: a node's model_weights takes the model from the mirror, verified, then a cut file resumes."""
    port = server[0]
    store = tmp_path / "store"
    params = {
        "store": str(store),
        "path": "org/tiny",
        "url": "http://127.0.0.1:%d%s" % (port, BASE.rstrip("/")),
        "headers": dict(AUTH),
        "verify": "fast",
        "mode": "0644",
        "directory_mode": "0755",
        "timeout": 10,
        "retries": 1,
        "lock_timeout": 10,
    }
    first = converge(dict(params))
    assert not first.get("problems"), first
    assert (store / "org" / "tiny" / "model.safetensors").read_bytes() == BIG
    assert (store / "org" / "tiny" / "sub" / "tokenizer.json").read_text() == "{}\n"
    assert not (store / "org" / "tiny" / ".cache").exists()
    again = converge(dict(params))
    assert again["changed"] is False and again["bytes_fetched"] == 0
