"""Build lab/edge: Traefik's own HTTP router (request decorator, rule muxer and rate limiter of
github.com/traefik/traefik/v3, the release K3s bundles) as a small loopback edge, so tests route requests through
the rules and the rate limit we render (in memory, or in a Redis the edges share when the rendered rateLimit has
a redis block: the edge's config then carries the Secrets that block names, see lab/edge/main.go).

    edgebuild.py build    build (or find cached) the edge binary, print its path
    edgebuild.py path     print the path the current sources would use

lab/edge/go.mod pins the Traefik module (a unit test keeps it equal to the Traefik of the pinned K3s, and
carries Traefik's own replace of gorilla/mux, and one of its nested dynamic/ext module by lab/edge/ext, which the
Go proxy does not serve); go.sum pins every dependency. The binary is cached under
.cache/edge/<traefik version>-<digest of the sources and the Go version>/edge; a second run builds nothing.
Only the standard library is used.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import helmbuild

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "lab" / "edge"
CACHE = ROOT / ".cache" / "edge"
TRAEFIK_MODULE = "github.com/traefik/traefik/v3"
SOURCES = ("main.go", "go.mod", "go.sum", "ext/go.mod", "ext/ext.go")


class BuildError(Exception):
    """A build step failed; the message says which and what to do."""


def log(msg: str) -> None:
    print(f"[edgebuild] {msg}", flush=True)


def traefik_version(gomod_text: str) -> str:
    """The Traefik version lab/edge/go.mod requires ('' when it requires none)."""
    match = re.search(r"^\s*(?:require\s+)?%s\s+(v\S+)" % re.escape(TRAEFIK_MODULE), gomod_text, re.MULTILINE)
    return match.group(1) if match else ""


def source_key(texts: dict[str, bytes], go_version: str) -> str:
    digest = hashlib.sha256(go_version.encode())
    for name in sorted(texts):
        digest.update(name.encode() + b"\0" + texts[name] + b"\0")
    return digest.hexdigest()[:12]


def go_version() -> str:
    if shutil.which("go") is None:
        raise BuildError("the go command is not on PATH: install Go (>= 1.26) to build the edge")
    return subprocess.run(["go", "env", "GOVERSION"], capture_output=True, text=True, check=True).stdout.strip()


def edge_path() -> Path:
    texts = {name: (SOURCE / name).read_bytes() for name in SOURCES}
    version = traefik_version(texts["go.mod"].decode()) or "unknown"
    return CACHE / f"traefik-{version}-{source_key(texts, go_version())}" / "edge"


def build() -> Path:
    out = edge_path()
    if out.is_file():
        log(f"cached: {out}; nothing built")
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name("edge.partial")
    log(f"building {out.parent.name} with {go_version()} (Traefik's router from {TRAEFIK_MODULE})")
    started = time.monotonic()
    env = helmbuild.go_env(CGO_ENABLED="0", GOFLAGS="-mod=readonly")
    proc = subprocess.run(
        ["go", "build", "-trimpath", "-o", str(partial), "."],
        cwd=SOURCE,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.strip().splitlines()[-8:])
        raise BuildError(f"go build in lab/edge failed:\n{tail}")
    partial.replace(out)
    log(f"build time {time.monotonic() - started:.0f}s -> {out}")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("cmd", choices=("build", "path"))
    args = parser.parse_args(argv)
    try:
        print(build() if args.cmd == "build" else edge_path())
    except BuildError as exc:
        print(f"[edgebuild] ERROR: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
