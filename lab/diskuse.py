"""What the test stages leave on disk, and (in CI only) the caches no later stage of `make test` needs.

    python -m lab.diskuse after <stage>
                    print the free space and the big caches; with AIINFRA_CI_PRUNE=1, remove what PRUNE_AFTER
                    names for that stage

A fresh CI machine's free disk varies widely (tens of GiB, and sometimes far less), and `make test` fetches a
lot: the vLLM package with its CUDA wheels (about 9.5 GiB installed), the Go module and build caches of the
Kubernetes and node builds (about 13 GiB together), the lab's node image and containers. Kept all at once
they once filled a CI machine in `make lab-live` ("No space left on device" copying the K3s binary into a lab
node). `make test` runs the runtime stage first among the heavy ones, and `.ci/run` sets AIINFRA_CI_PRUNE=1 so
each cache goes once the last stage that reads it has run; the peak is then the larger of the vLLM venv and
the Go caches with the lab, not their sum. Without AIINFRA_CI_PRUNE nothing is removed: a developer's caches
stay, and a second `make test` reuses them.

Only the standard library is used.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

from lab import ROOT

CACHE = ROOT / ".cache"


def go_env(name: str) -> Path | None:
    if shutil.which("go") is None:
        return None
    out = subprocess.run(["go", "env", name], capture_output=True, text=True, check=False).stdout.strip()
    return Path(out) if out else None


# What each stage of `make test` is the last to read (the order is the Makefile's `test` target).
# "go-build" and "go-mod" are Go's build and module caches (`go env GOCACHE`/`GOMODCACHE`); molecule, the last
# stage, builds nothing from Go (the node image's binaries are cached under .cache/node).
PRUNE_AFTER = {
    "runtime": ("vllm-venv",),
    "lab-live": ("go-build", "go-mod"),
}


def location(name: str) -> Path | None:
    if name == "go-build":
        return go_env("GOCACHE")
    if name == "go-mod":
        return go_env("GOMODCACHE")
    return CACHE / name


def size(path: Path) -> int:
    total = 0
    for base, _dirs, files in os.walk(path):
        for f in files:
            with contextlib.suppress(OSError):  # gone while walking
                total += os.lstat(os.path.join(base, f)).st_size
    return total


def gib(n: int) -> str:
    return "%.1f GiB" % (n / 2**30)


def report(stage: str) -> None:
    usage = shutil.disk_usage(ROOT)
    parts = []
    for name in ("vllm-venv", "litellm-venv", "olah-venv", "node", "kube", "go-build", "go-mod"):
        path = location(name)
        if path is not None and path.exists():
            parts.append("%s %s" % (name, gib(size(path))))
    print("[disk] after %s: %s free of %s; %s" % (stage, gib(usage.free), gib(usage.total), ", ".join(parts) or "-"))


def remove(name: str) -> None:
    path = location(name)
    if path is None or not path.exists():
        return
    freed = size(path)
    if name == "go-build":
        subprocess.run(["go", "clean", "-cache"], check=True)
    elif name == "go-mod":
        subprocess.run(["go", "clean", "-modcache"], check=True)
    else:
        shutil.rmtree(path)
    print("[disk] removed %s (%s): no later stage of make test reads it" % (name, gib(freed)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("cmd", choices=("after",))
    parser.add_argument("stage")
    args = parser.parse_args(argv)
    if os.environ.get("AIINFRA_CI_PRUNE") == "1":
        for name in PRUNE_AFTER.get(args.stage, ()):
            remove(name)
    report(args.stage)
    return 0


if __name__ == "__main__":
    sys.exit(main())
