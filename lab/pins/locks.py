"""The project's Python lock files: every package at an exact version with the sha256 of its distribution files.

    python -m lab.pins.locks compile [dev|litellm|vllm ...]   regenerate the locks from their inputs (`make locks`)
    python -m lab.pins.locks check                             every lock line pinned and hashed, the same pins as its input

Each Python environment the project installs comes from a lock, installed with `pip install --require-hashes`, so
that a release replaced on PyPI after the lock was written (a trojanized upload under an existing version, as
LiteLLM 1.82.7 and 1.82.8 were in March 2026) fails to install instead of running:

- ``requirements-dev.txt`` (the project venv, `make venv`) from ``requirements-dev.in`` and
  ``tests/gateway/requirements-litellm.txt`` (the LiteLLM proxy of `make gateway` and of the lab's gateway image)
  from ``tests/gateway/requirements-litellm.in``: ``pip-compile --generate-hashes --allow-unsafe`` (pip-tools, in the
  project venv), which resolves the inputs and lists the hashes of every file PyPI has for each pinned version, so
  the lock installs on any Python and platform those files cover.
- ``tests/runtime/requirements-vllm.txt`` (the vLLM venv of `make runtime`) from ``tests/runtime/requirements-vllm.in``:
  that input is a frozen set with one pin PyPI lacks replaced, installed with ``--no-deps``, which pip-compile cannot
  resolve; pip itself (``pip install --dry-run --no-deps --report``, run by a Python 3.12, the image's, on this
  linux x86_64 machine, the platform CI runs on) picks the file of each pin and the lock records its sha256 as the
  index lists it. Nothing is downloaded but metadata.

Refreshing a lock is a reviewed change: edit the input (a version bump), run `make locks`, read the diff (every
changed hash belongs to a changed version; a hash that changed under the same version is a replaced release and must
not be committed), commit both files.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from lab import ROOT

COMPILED = {
    "dev": ROOT / "requirements-dev.in",
    "litellm": ROOT / "tests" / "gateway" / "requirements-litellm.in",
    "olah": ROOT / "tests" / "weights" / "requirements-olah.in",
}
VLLM_INPUT = ROOT / "tests" / "runtime" / "requirements-vllm.in"
LOCKS = {name: path.with_suffix(".txt") for name, path in dict(COMPILED, vllm=VLLM_INPUT).items()}
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?==([^\s;\\]+)")
HASH = re.compile(r"--hash=sha256:([0-9a-f]{64})\b")


def log(msg):
    print("[locks] %s" % msg, flush=True)


def canonical(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def requirements(text):
    """[(name, version, [sha256...])] of a requirements file, continuation lines joined."""
    out = []
    for line in re.sub(r"\\\n", " ", text).splitlines():
        line = line.split(" #", 1)[0].strip()
        if not line or line.startswith("#") or line.startswith("-"):
            continue
        match = PIN.match(line)
        out.append((canonical(match.group(1)), match.group(3), HASH.findall(line)) if match else (line, None, []))
    return out


def lock_problems(lock_text, input_text=None):
    """What makes a lock unfit for `pip install --require-hashes`: a line without an exact pin or without a hash, and
    (given its input) a pin of the input that the lock does not carry at the same version."""
    problems = []
    pins = {}
    for name, version, hashes in requirements(lock_text):
        if version is None:
            problems.append("%r is not pinned with ==" % name)
        elif not hashes:
            problems.append("%s==%s has no --hash=sha256" % (name, version))
        pins[name] = version
    for name, version, _hashes in requirements(input_text or ""):
        if version is not None and pins.get(name) != version:
            problems.append("%s==%s of the input is %s in the lock" % (name, version, pins.get(name) or "missing"))
    return problems


def pip_compile(name, source):
    lock = LOCKS[name]
    tool = Path(sys.executable).parent / "pip-compile"
    if not tool.exists():
        raise SystemExit(
            "pip-compile not found next to %s: run `make venv` (pip-tools is in requirements-dev.in)" % sys.executable
        )
    log("%s: pip-compile %s -> %s" % (name, source.relative_to(ROOT), lock.relative_to(ROOT)))
    env = dict(os.environ, CUSTOM_COMPILE_COMMAND="make locks")
    subprocess.run(
        [
            str(tool),
            "--quiet",
            "--generate-hashes",
            "--allow-unsafe",
            "--strip-extras",
            "--no-emit-index-url",
            "--no-emit-find-links",
            "--rebuild",
            "--output-file",
            str(lock.relative_to(ROOT)),
            str(source.relative_to(ROOT)),
        ],
        cwd=ROOT,
        env=env,
        check=True,
    )


def python312():
    from lab.live import runtime  # the Python 3.12 the vLLM image runs, found as `make runtime` finds it

    return runtime.python312()


def vllm_lock():
    python = python312()
    if not python:
        raise SystemExit(
            "Python 3.12 not found (the vLLM image's Python): apt-get install python3.12 or pyenv install 3.12"
        )
    lock = LOCKS["vllm"]
    log(
        "vllm: pip install --dry-run --no-deps --report (%s) %s -> %s"
        % (python, VLLM_INPUT.relative_to(ROOT), lock.relative_to(ROOT))
    )
    with tempfile.TemporaryDirectory(prefix="aiinfra-locks-") as tmp:
        venv = Path(tmp) / "venv"
        subprocess.run([python, "-m", "venv", str(venv)], check=True)
        report = Path(tmp) / "report.json"
        subprocess.run(
            [
                str(venv / "bin" / "python"),
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "--dry-run",
                "--ignore-installed",
                "--no-deps",
                "--report",
                str(report),
                "-r",
                str(VLLM_INPUT),
            ],
            check=True,
        )
        chosen = {}
        for item in json.loads(report.read_text())["install"]:
            meta, info = item["metadata"], item["download_info"]
            digest = (info.get("archive_info") or {}).get("hashes", {}).get("sha256")
            if not digest:
                raise SystemExit("%s: the index gave no sha256 for %s" % (meta["name"], info.get("url")))
            chosen[canonical(meta["name"])] = (meta["version"], digest, info["url"].rsplit("/", 1)[-1])
    lines = [line for line in VLLM_INPUT.read_text().splitlines() if line.startswith("#")]
    lines += [
        "#",
        "# Lock of tests/runtime/requirements-vllm.in for linux x86_64 and CPython 3.12 (lab/pins/locks.py, `make locks`):",
        "# install with `pip install --require-hashes --no-deps -r` this file. Do not edit by hand.",
    ]
    for name, version, _hashes in requirements(VLLM_INPUT.read_text()):
        got = chosen.get(name)
        if not got or got[0] != version:
            raise SystemExit("vllm: pip chose %s for %s==%s" % (got, name, version))
        lines.append("%s==%s \\\n    --hash=sha256:%s\n    # %s" % (name, version, got[1], got[2]))
    lock.write_text("\n".join(lines) + "\n")


def check():
    failed = False
    for _name, lock in LOCKS.items():
        source = lock.with_suffix(".in")
        problems = lock_problems(lock.read_text(), source.read_text())
        for p in problems:
            print("%s: %s" % (lock.relative_to(ROOT), p))
        failed |= bool(problems)
        log("%s: %s" % (lock.relative_to(ROOT), "%d problem(s)" % len(problems) if problems else "ok"))
    return 1 if failed else 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    sub = parser.add_subparsers(dest="command", required=True)
    comp = sub.add_parser("compile")
    comp.add_argument("names", nargs="*", help="some of %s (default: all)" % ", ".join(LOCKS))
    sub.add_parser("check")
    args = parser.parse_args(argv)
    if args.command == "check":
        return check()
    unknown = [n for n in args.names if n not in LOCKS]
    if unknown:
        parser.error("unknown lock(s) %s: use %s" % (", ".join(unknown), ", ".join(LOCKS)))
    for name in args.names or list(LOCKS):
        if name == "vllm":
            vllm_lock()
        else:
            pip_compile(name, COMPILED[name])
    return check()


if __name__ == "__main__":
    sys.exit(main())
