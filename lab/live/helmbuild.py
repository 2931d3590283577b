"""Build the helm CLI from its Go module, the way helm's own Makefile builds a release.

    python -m lab.live.helmbuild build [--version vX.Y.Z]   build (or find cached) helm, print the binary's path
    python -m lab.live.helmbuild path [--version vX.Y.Z]    print the path the current recipe would use
    python -m lab.live.helmbuild versions                   list the helm.sh/helm/v4 versions the Go module proxy serves

The binary is package helm.sh/helm/v4/cmd/helm, built as helm's Makefile does (`make build` at a tag):
CGO_ENABLED=0, -trimpath, -ldflags '-w -s -X helm.sh/helm/v4/internal/version.version=<tag> ...'; it is
built with `go install MODULE/cmd/helm@VERSION`, so helm's own go.mod and go.sum decide every dependency.
It is cached under .cache/helm/<version>-<recipe hash>/helm; a second run builds nothing. A version the
proxy refuses ends in one error line. Only the standard library is used.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import lab
from lab import ROOT
from lab.live import kubebuild  # the lab tools share one way of asking the module proxy

CACHE = ROOT / ".cache" / "helm"

HELM_MODULE = "helm.sh/helm/v4"
HELM_PACKAGE = f"{HELM_MODULE}/cmd/helm"
# The newest helm.sh/helm/v4 the Go module proxy serves (`go list -m -versions helm.sh/helm/v4`, checked
# 2026-12: v4.2.1 ... v4.3.2), and the one this workplace approves.
HELM_VERSION = "v4.3.2"
# helm's Makefile sets these with -X (LDFLAGS); the package is internal to the module, which the linker allows.
VERSION_PACKAGE = f"{HELM_MODULE}/internal/version"
# What decides the binary besides the helm and Go versions: bump "recipe" when the build steps change.
RECIPE = {"recipe": 1, "cgo": "0", "flags": ["-trimpath"], "ldflags": ["-w", "-s"], "package": HELM_PACKAGE}


class BuildError(Exception):
    """A build step failed; the message says which and what to do."""


def log(msg: str) -> None:
    print(f"[helmbuild] {msg}", flush=True)


# ---------------------------------------------------------------- pure functions (unit-tested)


def version_ldflags(version: str, commit: str = "") -> str:
    """The -ldflags helm's Makefile passes for a build of a release tag (metadata empty, tree clean)."""
    flags = [*RECIPE["ldflags"], f"-X {VERSION_PACKAGE}.version={version}", f"-X {VERSION_PACKAGE}.metadata="]
    if commit:
        flags.append(f"-X {VERSION_PACKAGE}.gitCommit={commit}")
    flags.append(f"-X {VERSION_PACKAGE}.gitTreeState=clean")
    return " ".join(flags)


def recipe_key(version: str, go_version: str) -> str:
    """<version>-<12 hex digits of the recipe>: a new Go or a new recipe gets a new directory."""
    digest = hashlib.sha256(json.dumps({**RECIPE, "version": version, "go": go_version}, sort_keys=True).encode())
    return f"{version}-{digest.hexdigest()[:12]}"


def proxy_error(text: str) -> str:
    """The one line that matters of a go command's failure (the proxy's answer), not a stack of lines."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for index, line in enumerate(lines):
        if "server response:" in line:
            answer = line.split("server response:", 1)[1].strip()
            status = re.search(r"\b([1-5]\d\d [A-Z][A-Za-z ]*)$", lines[index - 1]) if index else None
            return f"{status.group(1)}: {answer}" if status else answer
    for line in lines:
        if any(word in line for word in ("403", "404", "410", "unknown revision", "invalid version", "not found")):
            return line
    return lines[-1] if lines else "no output"


# ---------------------------------------------------------------- process boundary


def go_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ, GOFLAGS="-mod=mod", GOWORK="off")
    env.setdefault("GOTOOLCHAIN", "local")
    env.update(extra)
    return env


def require_go() -> None:
    if shutil.which("go") is None:
        raise BuildError("the go command is not on PATH: install Go (>= 1.26) to build helm")


def go_version() -> str:
    require_go()
    return subprocess.run(["go", "env", "GOVERSION"], capture_output=True, text=True, check=True).stdout.strip()


def module_info(module: str, version: str) -> dict:
    """`go mod download -json MODULE@VERSION` in a scratch module; a refusal becomes one clear BuildError."""
    require_go()
    info, answer = kubebuild.download_info(module, version)
    if info is None:
        raise BuildError(f"{module}@{version} is not available from the Go module proxy: {answer}")
    return info


def served_versions(module: str = HELM_MODULE) -> list[str]:
    require_go()
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.run(
            ["go", "list", "-m", "-versions", module],
            cwd=tmp,
            env=go_env(),
            capture_output=True,
            text=True,
            check=False,
        )
    if proc.returncode != 0:
        raise BuildError(f"go list -m -versions {module}: {proxy_error(proc.stderr)}")
    return proc.stdout.split()[1:]


def origin_commit(info: dict) -> str:
    """The commit the proxy recorded for the version (its .info Origin), or '' when it recorded none."""
    try:
        return json.loads(Path(info["Info"]).read_text()).get("Origin", {}).get("Hash", "")
    except (KeyError, OSError, ValueError):
        return ""


def helm_path(version: str = HELM_VERSION) -> Path:
    return CACHE / recipe_key(version, go_version()) / "helm"


def build(version: str = HELM_VERSION) -> Path:
    """The cached helm binary of `version`, built first when missing."""
    out = helm_path(version)
    if out.is_file() and os.access(out, os.X_OK):  # built: read without waiting for a build that holds the lock
        log(f"cached: {out} (helm {version}); nothing built")
        return out
    module_info(HELM_MODULE, version)  # refuses an unserved version at once, not after another build's lock
    with lab.build_lock(CACHE, log, "helm"):
        return _build_locked(version)


def _build_locked(version: str) -> Path:
    out = helm_path(version)
    if out.is_file() and os.access(out, os.X_OK):
        log(f"cached: {out} (helm {version}); nothing built")
        return out
    info = module_info(HELM_MODULE, version)  # refuses an unserved version before any build starts
    ldflags = version_ldflags(version, origin_commit(info))
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.parent / "bin.partial"
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir()
    log(f"building helm {version} ({HELM_PACKAGE}) with {go_version()}, CGO_ENABLED=0 -trimpath -ldflags '{ldflags}'")
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        # `go install pkg@version` uses helm's own go.mod and go.sum as the main module; -mod must not be set.
        proc = subprocess.run(
            ["go", "install", *RECIPE["flags"], "-ldflags", ldflags, f"{HELM_PACKAGE}@{version}"],
            cwd=tmp,
            env=go_env(CGO_ENABLED=RECIPE["cgo"], GOFLAGS="", GOBIN=str(partial)),
            capture_output=True,
            text=True,
            timeout=3600,
            check=False,
        )
    if proc.returncode != 0:
        shutil.rmtree(partial, ignore_errors=True)
        raise BuildError(f"go install {HELM_PACKAGE}@{version} failed: {proxy_error(proc.stderr)}")
    (partial / "helm").replace(out)
    partial.rmdir()
    log(f"build time {time.monotonic() - started:.0f}s -> {out}")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("cmd", choices=("build", "path", "versions"))
    parser.add_argument("--version", default=HELM_VERSION, help=f"helm release tag (default {HELM_VERSION})")
    args = parser.parse_args(argv)
    try:
        if args.cmd == "build":
            print(build(args.version))
        elif args.cmd == "path":
            print(helm_path(args.version))
        else:
            print(" ".join(served_versions()))
    except BuildError as exc:
        print(f"[helmbuild] ERROR: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
