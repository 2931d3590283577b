"""The collection's version pins against the newest releases this machine can find, and their support dates.

    python -m lab.pins.versions [--today YYYY-MM-DD] [--offline]

For each pin (read from the role defaults by lab.pins) prints the pinned version and the newest one a registry this project
reaches lists: PyPI (`pip index versions`) for vLLM and LiteLLM, the Go module proxy (`go list -m -versions`) for
K3s's Kubernetes, cert-manager, KEDA and the Prometheus Operator. Where no registry serves a project (K3s itself,
the GPU Operator's tags, the kube-prometheus-stack chart, NGC images) the line says "not checkable offline".

Exit status 1 when the pinned K3s release's Kubernetes minor is past its upstream end of support (the table in
plugins/module_utils/plan/k8s_support.py, with the date it was written); 0 otherwise. Every lookup has a time limit;
a lookup that fails is reported on its line and does not change the exit status.
"""

from __future__ import annotations

import argparse
import datetime
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from lab import ROOT, collection_module
from lab.pins import read_pin

k8s_support = collection_module("k8s_support")  # the end-of-support table, wherever module_utils keeps it

TIMEOUT = 60
NOT_CHECKABLE = "not checkable offline"
SEMVER = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)$")


@dataclass(frozen=True)
class Pin:
    name: str
    var: str  # the role variable that pins it (lab.pins reads it from its role defaults)
    lookup: str  # "pypi:<package>", "go:<module>" or "none:<why>"
    image: bool = False  # the variable is an image reference: the version is its tag


PINS = (
    Pin(
        "K3s",
        "k3s_version",
        "none:the Go module proxy serves no github.com/k3s-io/k3s",
    ),
    Pin("Kubernetes (in K3s)", "k3s_version", "go:k8s.io/kubernetes"),
    Pin(
        "GPU Operator",
        "gpu_operator_chart_version",
        "none:its tags are not served by the Go module proxy (module path without /vNN)",
    ),
    Pin(
        "cert-manager",
        "cert_manager_chart_version",
        "go:github.com/cert-manager/cert-manager",
    ),
    Pin("KEDA", "autoscaling_chart_version", "go:github.com/kedacore/keda/v2"),
    Pin(
        "kube-prometheus-stack",
        "monitoring_chart_version",
        "none:a Helm chart, not a Go module or a PyPI package",
    ),
    Pin("vLLM", "vllm_image", "pypi:vllm", image=True),
    Pin("LiteLLM", "litellm_image", "pypi:litellm", image=True),
    Pin(
        "CUDA vectorAdd sample",
        "gpu_verify_vectoradd_image",
        "none:an NGC image",
        image=True,
    ),
)


def pinned(pin: Pin, root: Path = ROOT) -> str:
    value = read_pin(pin.var, root)
    if pin.var == "k3s_version" and pin.lookup.startswith("go:"):
        return value.split("+", 1)[0]  # the Kubernetes release K3s embeds
    return value.rsplit(":", 1)[1] if pin.image else value


def newest(versions: list[str]) -> str:
    """The highest plain release (no pre-release) of a list, or ''."""
    plain = [v for v in versions if SEMVER.match(v)]
    return max(plain, key=lambda v: tuple(int(x) for x in SEMVER.match(v).groups()), default="")


def pypi_versions(package: str) -> list[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "index", "versions", package, "--disable-pip-version-check"],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    match = re.search(r"Available versions: (.*)", proc.stdout)
    if not match:
        raise RuntimeError((proc.stderr or proc.stdout).strip().splitlines()[-1:] or "no answer")
    return [v.strip() for v in match.group(1).split(",")]


def go_versions(module: str) -> list[str]:
    with tempfile.TemporaryDirectory() as work:
        env = dict(os.environ, GOFLAGS="-mod=mod", GOTOOLCHAIN="local")
        subprocess.run(["go", "mod", "init", "versions.local"], cwd=work, capture_output=True, check=False, env=env)
        proc = subprocess.run(
            ["go", "list", "-m", "-versions", module],
            cwd=work,
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            check=False,
            env=env,
        )
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "no answer")
    return proc.stdout.split()[1:]


def lookup(pin: Pin, offline: bool) -> tuple[str, str]:
    """(newest version found or '', where it came from or why nothing was looked up)."""
    kind, what = pin.lookup.split(":", 1)
    if kind == "none":
        return "", f"{NOT_CHECKABLE}: {what}"
    if offline:
        return "", "not looked up (--offline)"
    try:
        found = pypi_versions(what) if kind == "pypi" else go_versions(what)
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
        return "", f"lookup failed ({kind} {what}): {exc}"
    return newest(found), f"{'PyPI' if kind == 'pypi' else 'Go module proxy'} {what}"


def support_problems(k3s_version: str, today: datetime.date) -> list[str]:
    """Why the pinned K3s release must not stay pinned (its Kubernetes minor past end of support)."""
    date = k8s_support.end_of_support(k3s_version)
    if date is None:
        return [
            f"k3s_version {k3s_version}: its Kubernetes minor is not in the end-of-support table of "
            f"k8s_support.py (written {k8s_support.WRITTEN}): add it"
        ]
    if today > datetime.date.fromisoformat(date):
        return [
            f"k3s_version {k3s_version}: Kubernetes 1.{k8s_support.minor(k3s_version)} left upstream support on {date}"
        ]
    return []


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--today", type=datetime.date.fromisoformat, default=datetime.date.today())
    parser.add_argument("--offline", action="store_true", help="read the pins and the support table only")
    args = parser.parse_args(argv)
    rows = []
    for pin in PINS:
        found, source = lookup(pin, args.offline)
        current = pinned(pin)
        mark = "" if not found else ("current" if newest([current, found]) == current else "NEWER AVAILABLE")
        rows.append((pin.name, current, found or "-", mark, source))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    for row in rows:
        print("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row[:4])) + "  " + row[4])
    k3s = read_pin("k3s_version")
    print(
        f"Kubernetes 1.{k8s_support.minor(k3s)} of k3s_version {k3s}: upstream support until "
        f"{k8s_support.end_of_support(k3s)} (table written {k8s_support.WRITTEN})"
    )
    problems = support_problems(k3s, args.today)
    for problem in problems:
        print(f"ERROR: {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
