"""Wall time of `make lab`: first converge on new nodes, then a no-op re-run (changed=0 expected).

    python benchmarks/lab_converge.py --nodes 3 --nodes 12

For each node count N (1 control plane + N-1 GPU workers) the lab is removed, `make lab` is timed on
fresh nodes (node start included; the image is built beforehand so its one-off build is not counted),
then `make lab` is timed again. The PLAY RECAP is parsed to report the tasks that ran (ok) and the changed
ones per run, and the no-op run's share of the first. The lab is
removed at the end. Prints a table; exits non-zero if a re-run changed anything.
"""

import argparse
import re
import subprocess
import sys
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
        raise SystemExit(f"make {' '.join(args)} failed (rc={proc.returncode})")
    return elapsed, parse_recap(proc.stdout)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, action="append", help="total lab nodes (repeatable)")
    args = parser.parse_args()
    counts = args.nodes or [3, 12]
    make("venv", "links")
    subprocess.run([sys.executable, "lab/labctl.py", "image"], cwd=ROOT, check=True)
    rows = []
    try:
        for n in counts:
            make("lab-down")
            lab = ("LAB_SERVERS=1", f"LAB_GPU_AGENTS={n - 1}")
            first, recap1 = make("lab", *lab)
            second, recap2 = make("lab", *lab)
            rows.append((n, first, recap1, second, recap2))
    finally:
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
    return 1 if any(changed(r[4]) for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
