"""The drill's load generator and availability arithmetic, against a local HTTP server the test starts on
127.0.0.1 and stops mid-stream (no other traffic)."""

import contextlib
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from conftest import run_module

from ansible_collections.aiinfra.k3s.plugins.module_utils.drill import load as drill_load
from ansible_collections.aiinfra.k3s.plugins.module_utils.drill import report as drill_report


class Gateway(BaseHTTPRequestHandler):
    seen_headers = []

    def do_GET(self):
        Gateway.seen_headers.append(self.headers.get("Authorization"))
        body = b'{"data": []}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class Server:
    """A loopback gateway that can be stopped and started again on the same port."""

    def __init__(self):
        self.port = None
        self.httpd = None

    def start(self):
        self.httpd = ThreadingHTTPServer(("127.0.0.1", self.port or 0), Gateway)
        self.httpd.allow_reuse_address = True
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    srv = Server()
    srv.start()
    yield srv
    with contextlib.suppress(OSError):
        srv.stop()


def test_outage_mid_stream_is_measured(server):
    url = f"http://127.0.0.1:{server.port}/v1/models"
    phases = [{"name": "baseline", "start": time.time()}]
    result = {}
    worker = threading.Thread(
        target=lambda: result.setdefault("records", drill_load.run_load(url, 20, 3.5, 1000, timeout=0.5))
    )
    worker.start()
    time.sleep(1.0)
    phases.append({"name": "gateway-down", "start": time.time()})
    server.stop()
    time.sleep(0.8)
    server.start()  # same port
    phases.append({"name": "restarting", "start": time.time()})
    # A request sent just before the restart may still end (refused, or at its 0.5 s timeout on a loaded CI
    # machine) after it: "recovered" starts once every such request is over.
    time.sleep(0.6)
    phases.append({"name": "recovered", "start": time.time()})
    worker.join(timeout=15)
    records = result["records"]
    assert 60 <= len(records) <= 71  # 20/s for 3.5 s, bounded
    report = {p["phase"]: p for p in drill_report.availability(records, phases)}
    assert report["baseline"]["availability"] == 100.0
    down = report["gateway-down"]
    assert down["availability"] < 50 and down["requests"] >= 10
    assert 0.5 <= down["longest_outage_s"] <= 1.5  # the server was away for 0.8 s
    assert report["recovered"]["availability"] == 100.0
    assert report["baseline"]["p95_latency_s"] < 0.5
    assert report["recovered"]["requests"] >= 8
    failing = [p["phase"] for p in drill_report.failing_phases(list(report.values()), 99.0)]
    assert "gateway-down" in failing and not {"baseline", "recovered"} & set(failing)


def test_load_is_bounded_in_count_and_time(server):
    url = f"http://127.0.0.1:{server.port}/"
    t0 = time.time()
    records = drill_load.run_load(url, 50, 10.0, 25, timeout=0.5)
    assert len(records) == 25 and time.time() - t0 < 2.0  # max_requests stops it long before the duration
    t0 = time.time()
    records = drill_load.run_load(url, 10, 0.5, 1000, timeout=0.5)
    assert len(records) == 5 and time.time() - t0 < 2.0  # the duration stops it
    with pytest.raises(ValueError):
        drill_load.run_load(url, 0, 1, 1)


def test_load_ends_when_told_to_stop(server):
    url = f"http://127.0.0.1:{server.port}/"
    t0 = time.time()
    records = drill_load.run_load(url, 20, 60.0, 1000, timeout=0.5, stop=lambda: time.time() - t0 > 0.5)
    assert 5 <= len(records) <= 15 and time.time() - t0 < 3.0  # the stop, not the 60 s duration, ended it


def pod(name, node, phase="Running", ready="True", deleting=False):
    meta = {"name": name, **({"deletionTimestamp": "2026-12-05T10:00:00Z"} if deleting else {})}
    return {"metadata": meta, "spec": {"nodeName": node},
            "status": {"phase": phase, "conditions": [{"type": "Ready", "status": ready}]}}  # fmt: skip


READY_CASES = [
    ("every ready pod", [pod("a", "g1"), pod("b", "g2")], "", ["a", "b"]),
    ("the lost node's pods left out", [pod("a", "g1"), pod("b", "g2")], "g1", ["b"]),
    # the node lifecycle controller turns Ready False on an unreachable node; the phase stays Running
    ("not ready", [pod("a", "g1", ready="False"), pod("b", "g2")], "", ["b"]),
    ("being deleted", [pod("a", "g1", deleting=True), pod("b", "g2")], "", ["b"]),
    ("pending replacement", [pod("a", "g2", phase="Pending", ready="False")], "g1", []),
    ("no pods", [], "g1", []),
]


@pytest.mark.parametrize(("pods", "off", "names"), [c[1:] for c in READY_CASES], ids=[c[0] for c in READY_CASES])
def test_ready_pods(pods, off, names):
    assert drill_report.ready_pods(pods, off) == names


@pytest.mark.parametrize(
    ("oks", "outage"),
    [
        ([True, True, True], 0.0),
        ([True, False, False, True], 2.0),
        ([False, True, False, False, False, True], 3.0),
        ([True, False, False], 1.5),  # still down at the end: until the last request's answer time
    ],
)
def test_longest_outage(oks, outage):
    records = [{"t": float(i), "latency": 0.5, "ok": ok} for i, ok in enumerate(oks)]
    assert drill_report.longest_outage(records) == outage


def test_percentile_is_nearest_rank():
    assert drill_report.percentile(list(range(1, 101)), 0.95) == 95
    assert drill_report.percentile([3.0], 0.95) == 3.0
    assert drill_report.percentile([], 0.95) is None


def test_module_records_to_a_file_and_never_returns_the_key(server, tmp_path):
    Gateway.seen_headers.clear()
    records_file = tmp_path / "records.json"
    key = "sk-drill-test-0f3a9c7e1b5d2f8a4c6e0b9d"
    rc, result = run_module(
        "aiinfra.k3s.drill_load",
        {
            "url": f"http://127.0.0.1:{server.port}/v1/models",
            "rate": 20,
            "duration": 0.5,
            "max_requests": 100,
            "timeout": 1,
            "headers": {"Authorization": f"Bearer {key}"},
            "records_file": str(records_file),
        },
    )
    assert rc == 0, result
    assert result["requests"] == 10 and result["answered"] == 10
    assert len(json.loads(records_file.read_text())) == 10
    assert set(Gateway.seen_headers) == {f"Bearer {key}"}
    assert key not in json.dumps(result)
    rc, result = run_module(
        "aiinfra.k3s.drill_load",
        {"url": "http://127.0.0.1:1/", "duration": 1, "max_requests": 5, "records_file": str(tmp_path / "x")},
        check=True,
    )
    assert rc == 0 and result["requests"] == 0 and not (tmp_path / "x").exists()


class Named(BaseHTTPRequestHandler):
    """Records the Host header and the TLS server name each request came with."""

    seen = []

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        Named.seen.append((self.headers.get("Host"), getattr(self.server, "sni", None)))
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args):
        pass


@pytest.fixture
def tls_gateway(tmp_path):
    """A loopback HTTPS server whose certificate names only gateway.example.test (self-signed, made by openssl)."""
    import shutil
    import ssl
    import subprocess

    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "1",
         "-subj", "/CN=gateway.example.test", "-addext", "subjectAltName=DNS:gateway.example.test",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Named)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)

    def remember(sock, name, _ctx):
        httpd.sni = name

    context.sni_callback = remember
    httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    Named.seen.clear()
    yield httpd.server_address[1], str(cert)
    httpd.shutdown()
    httpd.server_close()


# (ca file?, validate_certs, status): the URL names the site, the request goes to 127.0.0.1.
CONNECT_TO_CASES = {
    "the site's CA checks the certificate and its name": (True, True, 200),
    "no CA the certificate chains to": (False, True, 0),
    "not checked (validate_certs false)": (False, False, 200),
}


@pytest.mark.parametrize("case", sorted(CONNECT_TO_CASES))
def test_connect_to_keeps_the_sites_name_for_tls_and_the_host_header(tls_gateway, case):
    port, cert = tls_gateway
    with_ca, validate, expected = CONNECT_TO_CASES[case]
    url = f"https://gateway.example.test:{port}/api/litellm/v1/chat/completions"
    status, error = drill_load.send(
        url, {"Content-Type": "application/json"}, "{}", 5, cert if with_ca else None, validate, f"127.0.0.1:{port}"
    )
    assert status == expected, error
    if expected == 200:
        assert Named.seen[-1] == (f"gateway.example.test:{port}", "gateway.example.test")
    else:
        assert "CERTIFICATE_VERIFY_FAILED" in error


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("192.0.2.7:30443", ("192.0.2.7", 30443)),
        ("[2001:db8::7]:443", ("2001:db8::7", 443)),
        ("node-1", ("node-1", 8443)),
    ],
)
def test_connect_to_addresses(text, expected):
    assert drill_load.split_address(text, 8443) == expected
