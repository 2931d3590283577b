"""Latency the gateway's per-consumer auth adds (printed, never asserted), on the real LiteLLM proxy.

    python benchmarks/gateway_auth.py [--requests 300] [--warmup 20] [--timeout 10]

Three cases, each its own LiteLLM process (.cache/litellm-venv, `make gateway`) on loopback, with the config
plugins/module_utils/k8s/gateway.py renders for one model:

  1. master key, no hook: the config without general_settings.custom_auth, custom_auth_run_common_checks and
     litellm_settings.enable_post_custom_auth_checks (the path before the hook), called with the master key;
  2. consumer key, hook, limits in memory: the rendered config and auth hook (aiinfra_auth.py next to
     config.yaml), one consumer whose rpm/tpm limits are too high ever to throttle, called with its key;
  3. consumer key, hook, limits in Redis: as 2 with general_settings.coordination_redis on a real redis-server
     (Debian's) on loopback with a password.

Simulated: the model server is a stand-in on loopback that answers /v1/chat/completions at once with a usage
block (the rendered api_base is pointed at it); LiteLLM is not sandboxed (tests/gateway runs it as its pod).
Requests are sequential on one keep-alive connection, after a warm-up. Prints p50/p90/p99/mean latency in ms
and requests/s per case, then each case's p50/p99 against case 1.
"""

import argparse
import contextlib
import http.client
import json
import os
import secrets
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
COLLECTIONS = ROOT / ".cache" / "collections"
LINK = COLLECTIONS / "ansible_collections" / "aiinfra" / "k3s"
if not LINK.exists():  # as tests/unit/conftest.py (and `make links`) make it
    LINK.parent.mkdir(parents=True, exist_ok=True)
    LINK.symlink_to(Path("../../../.."))
sys.path.insert(0, str(COLLECTIONS))

from ansible_collections.aiinfra.k3s.plugins.module_utils.k8s import consumer_auth, gateway  # noqa: E402
from ansible_collections.aiinfra.k3s.plugins.module_utils.plan.consumers import key_hash, new_key  # noqa: E402

LITELLM = ROOT / ".cache" / "litellm-venv" / "bin" / "litellm"
DEFAULTS = yaml.safe_load((ROOT / "roles" / "litellm" / "defaults" / "main.yml").read_text())
MODEL = "bench-model"
START_DEADLINE = 180  # seconds for LiteLLM to answer /health/liveliness
BODY = json.dumps({"model": MODEL, "messages": [{"role": "user", "content": "ping"}], "max_tokens": 4}).encode()
CASES = (
    ("master", "master key, no hook"),
    ("memory", "consumer key, hook, limits in memory"),
    ("redis", "consumer key, hook, limits in Redis"),
)


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class StandIn(BaseHTTPRequestHandler):
    """A stand-in model server: answers every chat completion at once, with a usage block (LiteLLM counts tokens)."""

    protocol_version = "HTTP/1.1"  # keep-alive, as LiteLLM's client pool uses it

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        self.reply(
            {
                "id": "chatcmpl-stand-in",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body.get("model"),
                "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "pong"}}],
                "usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7},
            }
        )

    def do_GET(self):
        self.reply({"object": "list", "data": [{"id": MODEL, "object": "model"}]})

    def reply(self, obj):
        data = json.dumps(obj).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


def config_for(case, backend_port, redis_port):
    """The rendered config for the case, api_base on the stand-in (and coordination_redis on loopback)."""
    routes = [{"model": MODEL, "service": "bench", "namespace": "bench", "port": 8000}]
    settings = {
        "request_timeout": DEFAULTS["litellm_request_timeout"],
        "num_retries": DEFAULTS["litellm_num_retries"],
    }
    if case == "redis":
        settings["limits"] = {"store": "redis", "host": "127.0.0.1", "port": redis_port}
    config = gateway.gateway_config(routes, settings)
    config["model_list"][0]["litellm_params"]["api_base"] = "http://127.0.0.1:%d/v1" % backend_port
    if case == "master":
        del config["general_settings"]["custom_auth"]
        del config["general_settings"]["custom_auth_run_common_checks"]
        del config["litellm_settings"]["enable_post_custom_auth_checks"]
    assert ("coordination_redis" in config["general_settings"]) == (case == "redis")
    return config


@contextlib.contextmanager
def process(argv, log, env=None):
    """A child in its own process group, stopped (SIGTERM, then SIGKILL) on the way out."""
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)


def redis_server(tmp, password, log):
    """Debian's redis-server on a free loopback port, password in its conf file, counters in memory only."""
    port = free_port()
    conf = tmp / "redis.conf"
    conf.write_text('port %d\nbind 127.0.0.1\nsave ""\nappendonly no\nrequirepass %s\n' % (port, password))
    conf.chmod(0o600)
    return port, process(["redis-server", str(conf)], log)


def redis_commands(port, password):
    """Commands the Redis has processed (INFO stats), over a plain RESP connection."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(b"*2\r\n$4\r\nAUTH\r\n$%d\r\n%s\r\n" % (len(password), password.encode()))
        sock.sendall(b"*2\r\n$4\r\nINFO\r\n$5\r\nstats\r\n")
        data = b""
        while b"total_commands_processed:" not in data or not data.endswith(b"\r\n\r\n"):
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    for line in data.decode(errors="replace").splitlines():
        if line.startswith("total_commands_processed:"):
            return int(line.split(":", 1)[1])
    return None


def wait_for_redis(port, proc):
    deadline = time.monotonic() + 20
    while True:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
            return
        if proc.poll() is not None or time.monotonic() > deadline:
            sys.exit("redis-server did not start")
        time.sleep(0.1)


def wait_for_litellm(port, proc, log_path):
    deadline = time.monotonic() + START_DEADLINE
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit("LiteLLM exited with %s; its log:\n%s" % (proc.returncode, log_path.read_text()[-3000:]))
        try:
            urllib.request.urlopen("http://127.0.0.1:%d/health/liveliness" % port, timeout=2).close()
            return
        except urllib.error.HTTPError:
            return
        except OSError:
            time.sleep(0.5)
    sys.exit("LiteLLM did not answer on port %d within %ds; see %s" % (port, START_DEADLINE, log_path))


class Client(object):
    """Sequential chat completions on one keep-alive connection (reopened after an error)."""

    def __init__(self, port, key, timeout):
        self.port, self.key, self.timeout = port, key, timeout
        self.conn = None

    def call(self):
        """(status, seconds, text); status 0 for a connection error or a timeout."""
        if self.conn is None:
            self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout)
        headers = {"Authorization": "Bearer " + self.key, "Content-Type": "application/json"}
        t0 = time.perf_counter()
        try:
            self.conn.request("POST", "/v1/chat/completions", BODY, headers)
            resp = self.conn.getresponse()
            text = resp.read().decode(errors="replace")
            status = resp.status
        except (OSError, http.client.HTTPException) as err:
            self.close()
            return 0, time.perf_counter() - t0, repr(err)
        return status, time.perf_counter() - t0, text

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def measure(port, key, requests, warmup, timeout):
    client = Client(port, key, timeout)
    try:
        status, _seconds, text = client.call()
        if status != 200:
            sys.exit("the first request got %s: %s" % (status, text[:500]))
        for _attempt in range(warmup):
            client.call()
        times, errors = [], {}
        t0 = time.perf_counter()
        for _attempt in range(requests):
            status, seconds, _text = client.call()
            if status == 200:
                times.append(seconds)
            else:
                errors[status] = errors.get(status, 0) + 1
        wall = time.perf_counter() - t0
    finally:
        client.close()
    return times, errors, wall


def summary(times, errors, wall):
    ms = sorted(t * 1000 for t in times)
    if len(ms) >= 2:
        cuts = statistics.quantiles(ms, n=100, method="inclusive")
        p50, p90, p99 = cuts[49], cuts[89], cuts[98]
    else:
        p50 = p90 = p99 = ms[0] if ms else float("nan")
    return {
        "ok": len(ms),
        "errors": sum(errors.values()),
        "error_statuses": errors,
        "p50": p50,
        "p90": p90,
        "p99": p99,
        "mean": statistics.fmean(ms) if ms else float("nan"),
        "rps": (len(ms) + sum(errors.values())) / wall if wall else float("nan"),
    }


def run_case(case, tmp, backend_port, args):
    """Start the case's Redis (case 3) and LiteLLM, measure, stop them; the summary."""
    work = tmp / case
    work.mkdir()
    master_key = new_key()
    consumer_key = new_key()
    redis_password = secrets.token_hex(24)
    log_path = work / "litellm.log"
    with contextlib.ExitStack() as stack:
        log = stack.enter_context(open(log_path, "w"))
        redis_port = None
        if case == "redis":
            redis_port, redis_ctx = redis_server(work, redis_password, log)
            wait_for_redis(redis_port, stack.enter_context(redis_ctx))
        (work / "config.yaml").write_text(yaml.safe_dump(config_for(case, backend_port, redis_port)))
        (work / (gateway.HOOK_MODULE + ".py")).write_text(gateway.hook_source())
        limit = 10**9  # never reached by a bounded sequential loop
        consumer = {
            "name": "bench",
            "team": "bench",
            "models": [MODEL],
            "rpm_limit": limit,
            "tpm_limit": limit,
            "key_sha256": key_hash(consumer_key),
        }
        (work / consumer_auth.CONSUMERS_NAME).write_text(gateway.consumers_file([consumer]))
        port = free_port()
        env = {
            "PATH": "%s:/usr/bin:/bin" % LITELLM.parent,
            "HOME": str(work),
            "TMPDIR": str(work),
            "LITELLM_MASTER_KEY": master_key,
            "JSON_LOGS": "True",
            "LITELLM_LOG": DEFAULTS["litellm_log_level"],
            "LITELLM_MODE": "PRODUCTION",
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "GRACEFUL_SHUTDOWN_TIMEOUT": "5",
            consumer_auth.CONSUMERS_ENV: str(work / consumer_auth.CONSUMERS_NAME),
        }
        if case == "redis":
            env["REDIS_PASSWORD"] = redis_password
        argv = [str(LITELLM), "--config", str(work / "config.yaml"), "--port", str(port), "--host", "127.0.0.1"]
        t0 = time.monotonic()
        litellm = stack.enter_context(process(argv, log, env))
        wait_for_litellm(port, litellm, log_path)
        started = time.monotonic() - t0
        before = redis_commands(redis_port, redis_password) if case == "redis" else None
        key = master_key if case == "master" else consumer_key
        result = summary(*measure(port, key, args.requests, args.warmup, args.timeout))
        if case == "redis":
            result["redis_commands"] = redis_commands(redis_port, redis_password) - before
        result["start_s"] = started
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=300, help="timed requests per case (default 300)")
    parser.add_argument("--warmup", type=int, default=20, help="untimed requests first (default 20)")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds per request (default 10)")
    args = parser.parse_args()
    if args.requests < 1 or args.warmup < 0 or args.timeout <= 0:
        parser.error("--requests must be >= 1, --warmup >= 0, --timeout > 0")
    if not LITELLM.exists():
        sys.exit("the LiteLLM proxy is not installed: run `make gateway` (it installs .cache/litellm-venv)")
    t_all = time.monotonic()
    backend = ThreadingHTTPServer(("127.0.0.1", 0), StandIn)
    threading.Thread(target=backend.serve_forever, daemon=True).start()
    results = {}
    try:
        with tempfile.TemporaryDirectory(prefix="gateway-auth-bench-") as tmp:
            for case, label in CASES:
                print(f"[{label}] starting LiteLLM ...", flush=True)
                results[case] = run_case(case, Path(tmp), backend.server_address[1], args)
                r = results[case]
                extra = f", {r['redis_commands']} Redis commands" if "redis_commands" in r else ""
                print(f"[{label}] started in {r['start_s']:.1f} s, measured{extra}", flush=True)
    finally:
        backend.shutdown()
        backend.server_close()

    print()
    print(f"LiteLLM 1.110.2 on loopback, stand-in backend; {args.requests} sequential requests after {args.warmup}")
    print(f"{'case':<38} {'ok':>5} {'err':>4} {'p50 ms':>7} {'p90 ms':>7} {'p99 ms':>7} {'mean ms':>7} {'req/s':>7}")
    for case, label in CASES:
        r = results[case]
        print(
            f"{label:<38} {r['ok']:>5} {r['errors']:>4} {r['p50']:>7.2f} {r['p90']:>7.2f} {r['p99']:>7.2f} "
            f"{r['mean']:>7.2f} {r['rps']:>7.1f}"
        )
        if r["error_statuses"]:
            print(f"{'':<38} error statuses: {r['error_statuses']} (0: connection error or timeout)")
    base = results["master"]
    print()
    print(f"{'against case 1':<38} {'p50 +ms':>8} {'p50 %':>7} {'p99 +ms':>8} {'p99 %':>7}")
    for case, label in CASES[1:]:
        r = results[case]
        d50, d99 = r["p50"] - base["p50"], r["p99"] - base["p99"]
        print(
            f"{label:<38} {d50:>+8.2f} {100 * d50 / base['p50']:>+6.1f}% {d99:>+8.2f} {100 * d99 / base['p99']:>+6.1f}%"
        )
    print(f"\ntotal wall time {time.monotonic() - t_all:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
