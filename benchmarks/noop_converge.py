"""The no-op converge of playbooks/site.yml on the running lab (`make lab` first), this tree against another revision.

    python benchmarks/noop_converge.py --against 592622f --rounds 4

Each round runs site.yml once from a worktree of --against and once from this tree, in alternating order (old new,
new old, ...), so that a drift of the machine's load weighs on both alike. Every run must report changed=0 on every
host (the lab is converged; a change would mean the two trees disagree, and the run stops). Prints each run's wall
time, the tasks that ran (ok), and each side's median and spread. Without --against, only this tree is timed.
The worktree is removed at the end.
"""

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RECAP = re.compile(r"^(\S+)\s+: ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M)
ENV = dict(os.environ, CONTAINERS_CONF=str(ROOT / "lab" / "nodes" / "containers.conf"))


def airgap_dir():
    out = subprocess.run(
        [sys.executable, "-m", "lab.nodes.k3sbundle", "path"], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return out.stdout.strip()


def worktree(rev, where):
    """A worktree of rev at where, with the lab's inventory and the venv of this tree, its collection linked."""
    subprocess.run(["git", "worktree", "add", "--detach", "-q", str(where), rev], cwd=ROOT, check=True)
    shutil.copy(ROOT / "inventories" / "lab" / "hosts.yml", where / "inventories" / "lab" / "hosts.yml")
    (where / ".venv").symlink_to(ROOT / ".venv")
    subprocess.run(["make", "--no-print-directory", "links"], cwd=where, check=True, capture_output=True)


def converge(tree, airgap, timeout=900):
    """(seconds, tasks ok, changed) of one site.yml run from tree."""
    argv = [str(ROOT / ".venv" / "bin" / "ansible-playbook"), "playbooks/site.yml", "-i", "inventories/lab",
            "-e", "k3s_install_mode=airgap", "-e", "k3s_airgap_dir=" + airgap]  # fmt: skip
    started = time.monotonic()
    proc = subprocess.run(argv, cwd=tree, capture_output=True, text=True, env=ENV, timeout=timeout, check=False)
    seconds = time.monotonic() - started
    recap = {
        m.group(1): [int(x) for x in m.groups()[1:]] for m in RECAP.finditer(proc.stdout.rsplit("PLAY RECAP", 1)[-1])
    }
    if proc.returncode != 0 or not recap:
        sys.stderr.write(proc.stdout[-4000:] + proc.stderr[-2000:])
        raise SystemExit("site.yml from %s failed (rc=%s)" % (tree, proc.returncode))
    return seconds, sum(v[0] for v in recap.values()), sum(v[1] for v in recap.values())


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", help="a git revision to time beside this tree")
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    if not (ROOT / "inventories" / "lab" / "hosts.yml").exists():
        raise SystemExit("no lab: run `make lab` first")
    airgap = airgap_dir()
    scratch = Path(tempfile.mkdtemp(prefix="noop-against-"))
    trees = {"this tree": ROOT}
    if args.against:
        trees[args.against] = scratch / "tree"
        worktree(args.against, trees[args.against])
    times = {name: [] for name in trees}
    try:
        names = list(trees)
        for round_no in range(args.rounds):
            for name in names if round_no % 2 == 0 else names[::-1]:
                seconds, ok, changed = converge(trees[name], airgap)
                print("round %d  %-12s %6.1f s  ok=%d changed=%d" % (round_no + 1, name, seconds, ok, changed))
                if changed:
                    raise SystemExit("%s changed %d things on a converged lab: not a no-op" % (name, changed))
                times[name].append(seconds)
    finally:
        if args.against:
            subprocess.run(["git", "worktree", "remove", "--force", str(trees[args.against])], cwd=ROOT, check=False)
        shutil.rmtree(scratch, ignore_errors=True)
    print("\n| tree | runs | median s | min s | max s |\n|---|---|---|---|---|")
    for name, values in times.items():
        print(
            "| %s | %d | %.1f | %.1f | %.1f |"
            % (name, len(values), statistics.median(values), min(values), max(values))
        )


if __name__ == "__main__":
    main()
