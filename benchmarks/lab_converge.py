"""Wall time of `make lab` on real kubelets: first converge on new nodes (to the last serving pod Ready), then a
no-op re-run (changed=0 expected); the nodes' memory.

    python benchmarks/lab_converge.py --nodes 3

For each node count N (1 control plane + N-1 GPU workers) the lab is removed, `make lab` is timed on
fresh nodes (node start included; the image is built beforehand so its one-off build is not counted),
then `make lab` is timed again. The PLAY RECAP is parsed to report the tasks that ran (ok) and the changed
ones per run, and the no-op run's share of the first. The lab is removed at the end (--keep leaves the last one
up, e.g. for tests/lab). The lab bundle (node components and images) is built first and timed apart (a cache hit
when it was built before). Memory: the lab containers' total, sampled every 2 s by `podman stats` during the first
run (peak), and each node's idle usage plus its kubelet and containerd resident sizes after the re-run.
Prints tables; exits non-zero if a re-run changed anything.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RECAP = re.compile(r"^(\S+)\s+: ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M)


def parse_recap(output):
    """host -> (ok, changed, unreachable, failed) from the last PLAY RECAP in the output."""
    tail = output.rsplit("PLAY RECAP", 1)[-1]
    return {m.group(1): tuple(int(x) for x in m.groups()[1:]) for m in RECAP.finditer(tail)}


def tasks(recap):
    """Task results reported (ok + changed counts every task that ran on a host; skipped ones are not counted)."""
    return sum(v[0] for v in recap.values())


def changed(recap):
    return sum(v[1] for v in recap.values())


def make(*args, timeout=1800):
    t0 = time.monotonic()
    proc = subprocess.run(
        ["make", "--no-print-directory", *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False
    )
    elapsed = time.monotonic() - t0
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-4000:] + proc.stderr[-4000:])
        if args and args[0] == "lab":  # what K3s said on the server, before the lab is removed
            journal = subprocess.run(
                ["podman", "exec", "lab-cp-1", "journalctl", "-u", "k3s", "--no-pager", "-n", "60"],
                capture_output=True, text=True, env=ENV, check=False,
            )  # fmt: skip
            sys.stderr.write(journal.stdout[-6000:])
        raise SystemExit(f"make {' '.join(args)} failed (rc={proc.returncode})")
    return elapsed, parse_recap(proc.stdout)


ENV = dict(os.environ, CONTAINERS_CONF=str(ROOT / "lab" / "nodes" / "containers.conf"))
UNITS = {"b": 1, "kb": 1e3, "kib": 1024, "mb": 1e6, "mib": 1024**2, "gb": 1e9, "gib": 1024**3}


def to_bytes(text):
    """'251.3MB' / '1.2GiB' (podman stats) -> bytes."""
    m = re.match(r"([0-9.]+)\s*([a-zA-Z]+)", text.strip())
    return float(m.group(1)) * UNITS[m.group(2).lower()] if m else 0.0


def lab_memory():
    """{node: bytes in use} of the running lab containers (podman stats, one sample)."""
    proc = subprocess.run(
        ["podman", "stats", "--no-stream", "--format", "json"], capture_output=True, text=True, env=ENV, check=False
    )
    try:
        rows = json.loads(proc.stdout or "[]")
    except json.JSONDecodeError:
        return {}
    return {r["name"]: to_bytes(r["mem_usage"].split("/")[0]) for r in rows if r.get("name", "").startswith("lab-")}


class Peak(threading.Thread):
    """Samples the lab's total memory every 2 s until stopped; keeps the highest total."""

    def __init__(self):
        super().__init__(daemon=True)
        self.peak, self.stop = 0.0, threading.Event()

    def run(self):
        while not self.stop.wait(2):
            self.peak = max(self.peak, sum(lab_memory().values()))


def component_rss(node):
    """MiB resident of the node's kubelet and containerd (ps in the node)."""
    proc = subprocess.run(
        ["podman", "exec", node, "ps", "-o", "rss=,comm=", "-C", "kubelet,containerd"],
        capture_output=True, text=True, env=ENV, check=False,
    )  # fmt: skip
    return {line.split()[1]: int(line.split()[0]) / 1024 for line in proc.stdout.splitlines() if line.strip()}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, action="append", help="total lab nodes (repeatable)")
    parser.add_argument("--keep", action="store_true", help="leave the last lab up (to run tests/lab on it)")
    args = parser.parse_args()
    counts = args.nodes or [3, 12]
    make("venv", "links")
    subprocess.run([sys.executable, "-m", "lab.nodes.labctl", "image"], cwd=ROOT, check=True)
    bundle, _recap = make("lab-bundle")
    print(f"lab bundle (node components, images, stand-in): {bundle:.1f}s")
    rows, memory = [], []
    try:
        for n in counts:
            make("lab-down")
            lab = ("LAB_SERVERS=1", f"LAB_GPU_AGENTS={n - 1}")
            peak = Peak()
            peak.start()
            first, recap1 = make("lab", *lab)
            peak.stop.set()
            second, recap2 = make("lab", *lab)
            rows.append((n, first, recap1, second, recap2))
            idle = lab_memory()
            memory.append((n, peak.peak, {node: (idle[node], component_rss(node)) for node in sorted(idle)}))
    finally:
        if not args.keep:
            make("lab-down")
    print(
        f"{'nodes':>5}  {'first converge':>14}  {'tasks':>5}  {'changed':>7}  {'no-op re-run':>12}  {'tasks':>5}  "
        f"{'on localhost':>12}  {'changed':>7}  {'no-op/first':>11}"
    )
    for n, first, recap1, second, recap2 in rows:
        print(
            f"{n:>5}  {first:>13.1f}s  {tasks(recap1):>5}  {changed(recap1):>7}  {second:>11.1f}s  {tasks(recap2):>5}  "
            f"{recap2.get('localhost', (0,))[0]:>12}  {changed(recap2):>7}  {second / first:>10.0%}"
        )
    for n, peak, nodes in memory:
        print(f"\n{n} nodes: peak of the lab during the first run {peak / 2**20:.0f} MiB; idle after the re-run:")
        for node, (used, rss) in nodes.items():
            parts = ", ".join(f"{k} {v:.0f} MiB" for k, v in sorted(rss.items()))
            print(f"  {node:<12} {used / 2**20:>7.0f} MiB in the container ({parts})")
    return 1 if any(changed(r[4]) for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
