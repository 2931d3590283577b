"""Latency the edge adds, on the lab's real kubelets: the same chat completion sent directly to a model server pod
(the STAND-IN model server, canned answers), through the gateway Service (the real LiteLLM proxy), and through
the real Traefik (the lab's, HTTPS, the collection's IngressRoute and Middlewares, rate limit in Redis) to the
gateway; all from one client pod in the cluster, in one run, interleaved request by request, each path on its
own keep-alive connection (the gateway Service's one opened anew per request, so that kube-proxy spreads them
over the gateway replicas as Traefik spreads its own), paced to half the rate limit's average for the key
(below it, Traefik's limiter delays nothing). Also, with --fresh, the time from the start of `make lab` to the first HTTPS
completion through Traefik from this machine.

    python benchmarks/edge_latency.py [--fresh] [--requests 300]

Without --fresh the lab must be up (`make lab`); with it the lab is removed, `make lab` is timed while this
machine polls the edge every 2 s (bounded), and the lab is left up. Prints a table (ms): p50, p90, p99 per path,
Traefik's own time per request (its access log's Overhead), and the differences of the percentiles (what
LiteLLM adds, what Traefik adds on top). Traffic stays in the lab.
"""

import argparse
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the lab package, which tests/lab/test_lab_live.py imports
sys.path.insert(0, str(ROOT / "tests" / "lab"))
os.environ.setdefault("LAB_LIVE_REQUIRED", "")

CLIENT = r"""
import http.client, json, os, socket, ssl, time
env = os.environ
n, model, key, host, prefix = int(env["N"]), env["MODEL"], env["KEY"], env["HOST"], env["PREFIX"]
context = ssl.create_default_context()
context.check_hostname, context.verify_mode = False, ssl.CERT_NONE  # latency only: the lab tests check the chain
class Edge(http.client.HTTPSConnection):
    def connect(self):
        self.sock = context.wrap_socket(socket.create_connection((self.host, self.port), 10), server_hostname=host)
paths = {
    "direct": (http.client.HTTPConnection(env["DIRECT_HOST"], int(env["DIRECT_PORT"]), timeout=10), "",
               {"Authorization": "Bearer " + env["MODEL_KEY"]}),
    "gateway": (http.client.HTTPConnection(env["GATEWAY_HOST"], int(env["GATEWAY_PORT"]), timeout=10), "",
                {"Authorization": "Bearer " + key}),
    "edge": (Edge(env["EDGE_HOST"], 443, timeout=10), prefix, {"Authorization": "Bearer " + key, "Host": host}),
}
body = json.dumps({"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4})
out = {name: [] for name in paths}
errors = {name: 0 for name in paths}
pace = float(env["PACE"])
for i in range(n + 10):  # bounded: n + 10 rounds (10 warm-up), one request per path each
    round_start = time.perf_counter()
    for name, (conn, pre, headers) in paths.items():
        t0 = time.perf_counter()
        try:
            conn.request("POST", pre + "/v1/chat/completions", body, {"Content-Type": "application/json", **headers})
            r = conn.getresponse(); r.read(); ok = r.status == 200
            if name == "gateway":
                conn.close()  # a new connection each time: kube-proxy spreads them over the replicas, as Traefik does
        except Exception:
            ok = False; conn.close()
        if i >= 10:
            (out[name].append(time.perf_counter() - t0) if ok else None)
            errors[name] += 0 if ok else 1
    time.sleep(max(0.0, pace - (time.perf_counter() - round_start)))
print("RESULT " + json.dumps({"latency": out, "errors": errors}))
"""


def percentile(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, round(q / 100 * (len(values) - 1)))] if values else float("nan")


def first_https(deadline_s):
    """Poll the edge from this machine every 2 s until a completion comes back (bounded); seconds or None."""
    import test_lab_live as lab

    started = time.monotonic()
    while time.monotonic() - started < deadline_s:
        try:
            lab.node_address.cache_clear()
            chat = {"model": "nemotron-35b", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
            if lab.edge("/v1/chat/completions", chat, lab.master_key())[0] == 200:
                return time.monotonic() - started
        except Exception:  # nothing up yet: no kubeconfig, no node, no route
            pass
        time.sleep(2)
    return None


def traefik_overhead(seconds):
    """Seconds Traefik itself spent on each answered completion of the last `seconds` (its JSON access log)."""
    import test_lab_live as lab

    logs = lab.kubectl("logs", "-n", "kube-system", "deploy/traefik", f"--since={seconds}s", check=False).stdout
    out = []
    for line in logs.splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if entry.get("DownstreamStatus") == 200 and str(entry.get("RequestPath", "")).endswith("/v1/chat/completions"):
            out.append(entry.get("Overhead", 0) / 1e9)
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--fresh", action="store_true", help="remove the lab, then time `make lab` to the first HTTPS completion"
    )
    parser.add_argument("--requests", type=int, default=300)
    args = parser.parse_args()
    if args.fresh:
        subprocess.run(["make", "--no-print-directory", "lab-down"], cwd=ROOT, check=True, capture_output=True)
        t0 = time.monotonic()
        make = subprocess.Popen(["make", "--no-print-directory", "lab"], cwd=ROOT, stdout=subprocess.DEVNULL)
        time.sleep(30)  # the old kubeconfig is gone; the bundle check and node start come first
        first = first_https(1800)
        rc = make.wait(timeout=1800)
        print(f"make lab: {time.monotonic() - t0:.0f} s (rc {rc}); first HTTPS completion through Traefik "
              f"{'%.0f s' % (30 + first) if first is not None else 'never'} after its start")  # fmt: skip
    import test_lab_live as lab

    gateway = lab.service("gateway").removeprefix("http://").split(":")
    pod = next(p for p in lab.pods_of("vllm") if p["status"].get("podIP"))
    env = {
        "N": str(args.requests),
        "MODEL": lab.served_model(),
        "HOST": lab.lab_var("traefik_host"),
        "PREFIX": lab.lab_var("traefik_path_prefix"),
        "DIRECT_HOST": pod["status"]["podIP"],
        "DIRECT_PORT": str(pod["spec"]["containers"][0]["ports"][0]["containerPort"]),
        "GATEWAY_HOST": gateway[0],
        "GATEWAY_PORT": gateway[1],
        "EDGE_HOST": "traefik.kube-system.svc.cluster.local",
        # One round per 2 / average seconds: the key stays at half its rate-limit budget, so Traefik's limiter
        # never delays a request (at the budget it waits up to 1 / (2 x average) s for a token, and that is
        # what a benchmark at full speed would measure).
        "PACE": str(2 / float(lab.lab_var("traefik_rate_limit_average"))),
    }
    begun = time.monotonic()
    ns = f"aiinfra-lab-bench-{uuid.uuid4().hex[:6]}"
    lab.kubectl("create", "namespace", ns)
    lab.kubectl("label", "namespace", ns, "pod-security.kubernetes.io/enforce=restricted", "--overwrite")
    try:
        # The model servers answer only the gateway's key (the site's model_auth): the direct path sends it too.
        name = lab.start_client(ns, CLIENT, env, secrets={"MODEL_KEY": lab.model_server_key()})
        result = lab.client_result(ns, name, timeout=600)
    finally:
        lab.kubectl("delete", "namespace", ns, "--wait=false", check=False)
    lat, errors = result["latency"], result["errors"]
    print(f"\n{args.requests} completions per path, interleaved, from one pod (ms):")
    print(f"{'path':<10}{'p50':>8}{'p90':>8}{'p99':>8}{'errors':>8}")
    for path in ("direct", "gateway", "edge"):
        values = lat[path]
        p = [1000 * percentile(values, q) for q in (50, 90, 99)]
        print(f"{path:<10}{p[0]:>8.1f}{p[1]:>8.1f}{p[2]:>8.1f}{errors[path]:>8}")
    overhead = traefik_overhead(int(time.monotonic() - begun) + 5)
    if overhead:
        print(f"{'in Traefik':<10}{1000 * percentile(overhead, 50):>8.1f}{1000 * percentile(overhead, 90):>8.1f}"
              f"{1000 * percentile(overhead, 99):>8.1f}        (its access log's Overhead: middlewares, Redis "
              f"included, without the backend; {len(overhead)} requests)")  # fmt: skip
    for label, a, b in (
        ("LiteLLM adds", "gateway", "direct"),
        ("Traefik adds", "edge", "gateway"),
        ("both add", "edge", "direct"),
    ):
        d50 = 1000 * (percentile(lat[a], 50) - percentile(lat[b], 50))
        d99 = 1000 * (percentile(lat[a], 99) - percentile(lat[b], 99))
        print(f"{label:<14} p50 {d50:+.1f} ms, p99 {d99:+.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
