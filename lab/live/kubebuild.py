"""Build the live control plane's binaries from Go modules, at the Kubernetes version of `k3s_version`.

    python -m lab.live.kubebuild build [--k3s-version vX.Y.Z+k3sN]
                                        build (or find cached) binaries, print their directory
    python -m lab.live.kubebuild path   print the directory the current recipe would use
    python -m lab.live.kubebuild k3s-probe
                                        ask the Go module proxy for the pinned K3s module

First choice is K3s itself (github.com/k3s-io/k3s at the pinned tag). The Go module proxy this project
reaches refuses that module (`403 Forbidden: This module version is not available`), so the tool says so
and builds what K3s embeds, from the same upstream modules, instead:

  * kube-apiserver, kube-controller-manager, kube-scheduler, kubectl from k8s.io/kubernetes at the
    Kubernetes version of the K3s release (v1.33.5+k3s1 -> v1.33.5), every staging module pinned to its
    published v0.X.Y;
  * etcd at the version that Kubernetes release requires (go.etcd.io/etcd/server/v3);
  * kwok (sigs.k8s.io/kwok), pinned below, for the fake kubelets.

Nothing of an upstream go.mod is copied into this repository: the replace directives are derived, at
build time, from the upstream module's own go.mod, which `go mod download -json` names. Binaries are cached
under .cache/kube/<kubernetes version>-<recipe hash>/bin; a second run builds nothing.
Only the standard library is used.
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
from lab.pins import PinError, read_pin

CACHE = ROOT / ".cache" / "kube"

K3S_MODULE = "github.com/k3s-io/k3s"
KUBERNETES_MODULE = "k8s.io/kubernetes"
ETCD_MODULE = "go.etcd.io/etcd/server/v3"
KWOK_MODULE = "sigs.k8s.io/kwok"
# kwok's newest release on the module proxy (go list -m -versions sigs.k8s.io/kwok); needs Go >= 1.26.0.
KWOK_VERSION = "v0.8.0"
KUBE_COMMANDS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl")
# What decides the binaries besides the versions: bump RECIPE when the build steps below change.
RECIPE = {
    "recipe": 1,
    "cgo": "0",
    "flags": ["-trimpath"],
    "kube": list(KUBE_COMMANDS),
    "kwok": [f"{KWOK_MODULE}/cmd/kwok"],
    "etcd": [ETCD_MODULE],
}
K3S_TAG = re.compile(r"^v(\d+)\.(\d+)\.(\d+)\+k3s(\d+)$")


class BuildError(Exception):
    """A build step failed; the message says which and what to do."""


def log(msg: str) -> None:
    print(f"[kubebuild] {msg}", flush=True)


# ---------------------------------------------------------------- pure functions (unit-tested)


def kubernetes_version(k3s_version: str) -> str:
    """v1.33.5+k3s1 -> v1.33.5; anything that is not a K3s release tag is refused."""
    match = K3S_TAG.match(k3s_version.strip())
    if not match:
        raise BuildError(
            f"k3s_version {k3s_version!r} is not a K3s release tag (vMAJOR.MINOR.PATCH+k3sN, e.g. v1.33.5+k3s1)"
        )
    return "v{}.{}.{}".format(*match.groups()[:3])


def staging_version(kube_version: str) -> str:
    """Kubernetes v1.33.5 publishes its staging modules (k8s.io/api, ...) as v0.33.5."""
    _major, minor, patch = kube_version.lstrip("v").split(".")
    return f"v0.{minor}.{patch}"


def parse_gomod(text: str) -> tuple[str, dict[str, str], dict[str, str]]:
    """(go version, requires {path: version}, replaces {path: target}) of a go.mod, blocks or single lines."""
    go_version, requires, replaces = "", {}, {}
    block = None
    for raw in text.splitlines():
        line = raw.split("//", 1)[0].strip()
        if not line:
            continue
        if block:
            if line == ")":
                block = None
                continue
            words = line.split()
        else:
            words = line.split()
            if words[0] in ("require", "replace") and words[1:] == ["("]:
                block = words[0]
                continue
            if words[0] == "go":
                go_version = words[1]
                continue
            if words[0] not in ("require", "replace"):
                continue
            block_kind, words = words[0], words[1:]
            _add(block_kind, words, requires, replaces)
            continue
        _add(block, words, requires, replaces)
    return go_version, requires, replaces


def _add(kind: str, words: list[str], requires: dict[str, str], replaces: dict[str, str]) -> None:
    if kind == "require" and len(words) >= 2:
        requires[words[0]] = words[1]
    elif kind == "replace" and "=>" in words:
        arrow = words.index("=>")
        replaces[words[0]] = " ".join(words[arrow + 1 :])


def published_replaces(gomod_text: str, fallback_version: str | None = None) -> dict[str, str]:
    """Turn an upstream module's local-path replaces (`k8s.io/api => ./staging/...`) into published ones.

    A replace in a dependency is ignored by Go, so a module that builds the upstream commands must carry the
    same replaces. A local path becomes the version the upstream go.mod requires, or fallback_version where
    it requires the placeholder v0.0.0 (Kubernetes' staging modules). Replaces to other modules are kept.
    """
    _go, requires, replaces = parse_gomod(gomod_text)
    out = {}
    for path, target in replaces.items():
        if "FORBIDDEN" in target:
            continue
        if target.startswith((".", "/")):
            version = requires.get(path, "v0.0.0")
            if version == "v0.0.0":
                if fallback_version is None:
                    raise BuildError(f"{path} is replaced by a local path and required at v0.0.0: no version known")
                version = fallback_version
            out[path] = f"{path} {version}"
        else:
            out[path] = target
    return out


def render_gomod(module: str, go_version: str, requires: dict[str, str], replaces: dict[str, str]) -> str:
    lines = [f"module {module}", "", f"go {go_version}", "", "require ("]
    lines += [f"\t{path} {version}" for path, version in sorted(requires.items())]
    lines += [")", ""]
    if replaces:
        lines += ["replace ("]
        lines += [f"\t{path} => {target}" for path, target in sorted(replaces.items())]
        lines += [")", ""]
    return "\n".join(lines)


def version_ldflags(kube_version: str) -> str:
    """-X flags that make the binaries report their real version (otherwise v0.0.0-master)."""
    major, minor, _patch = kube_version.lstrip("v").split(".")
    flags = ["-s", "-w"]
    for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        flags += [
            f"-X {pkg}.gitVersion={kube_version}",
            f"-X {pkg}.gitMajor={major}",
            f"-X {pkg}.gitMinor={minor}",
            f"-X {pkg}.gitTreeState=clean",
        ]
    return " ".join(flags)


def recipe_key(kube_version: str, etcd_version: str, go_version: str) -> str:
    h = hashlib.sha256(
        json.dumps(
            {**RECIPE, "kube": kube_version, "etcd": etcd_version, "kwok_version": KWOK_VERSION, "go": go_version},
            sort_keys=True,
        ).encode()
    )
    return f"{kube_version}-{h.hexdigest()[:12]}"


def proxy_error(text: str) -> str:
    """The one line that matters of a go command's failure (the proxy's answer), not a stack of lines."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for line in lines:
        if "server response:" in line:
            return line.split("server response:", 1)[1].strip()
    for line in lines:
        if any(word in line for word in ("403", "404", "410", "unknown revision", "invalid version", "not found")):
            return line
    return lines[-1] if lines else "no output"


# ---------------------------------------------------------------- process boundary


def go_env() -> dict[str, str]:
    env = dict(os.environ, CGO_ENABLED=RECIPE["cgo"], GOFLAGS="-mod=mod", GOWORK="off")
    env.setdefault("GOTOOLCHAIN", "local")
    return env


def go(*args: str, cwd: Path, timeout: float = 3600) -> str:
    if shutil.which("go") is None:
        raise BuildError("the go command is not on PATH: install Go (>= 1.26) to build the control plane")
    proc = subprocess.run(
        ["go", *args], cwd=cwd, env=go_env(), capture_output=True, text=True, timeout=timeout, check=False
    )
    if proc.returncode != 0:
        raise BuildError(f"go {' '.join(args[:2])} failed: {proc_tail(proc.stderr)}")
    return proc.stdout


def proc_tail(text: str, lines: int = 15) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def download_info(module: str, version: str, timeout: float = 900) -> tuple[dict | None, str]:
    """(`go mod download -json MODULE@VERSION` info, "") or (None, the proxy's answer in one line), from a
    scratch directory. The one place the lab tools ask the module proxy for a module."""
    with tempfile.TemporaryDirectory() as tmp:
        try:
            proc = subprocess.run(
                ["go", "mod", "download", "-json", f"{module}@{version}"],
                cwd=tmp,
                env=go_env(),
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return None, f"timed out after {timeout:.0f}s"
    try:
        info = json.loads(proc.stdout)
    except json.JSONDecodeError:
        return None, proxy_error(proc.stderr)
    if info.get("Error"):
        return None, proxy_error(info["Error"])
    if not info.get("Dir"):
        return None, proxy_error(proc.stderr)
    return info, ""


def module_info(module: str, version: str) -> dict:
    """`go mod download -json MODULE@VERSION`; a refusal becomes one clear BuildError."""
    info, answer = download_info(module, version)
    if info is None:
        raise BuildError(f"{module}@{version} is not available from the Go module proxy: {answer}")
    return info


def k3s_probe(k3s_version: str) -> str:
    """Why K3s itself is not built: the proxy's answer for the pinned K3s tag (empty when it is served)."""
    try:
        module_info(K3S_MODULE, k3s_version)
    except BuildError as exc:
        return str(exc)
    return ""


def go_version() -> str:
    return subprocess.run(["go", "env", "GOVERSION"], capture_output=True, text=True, check=True).stdout.strip()


def build_kubernetes(kube_version: str, work: Path, out: Path) -> str:
    """Build the Kubernetes commands; returns the etcd version that release requires."""
    info = module_info(KUBERNETES_MODULE, kube_version)
    gomod = Path(info["GoMod"]).read_text()
    go_min, requires, _replaces = parse_gomod(gomod)
    replaces = published_replaces(gomod, staging_version(kube_version))
    work.mkdir(parents=True, exist_ok=True)
    (work / "go.mod").write_text(
        render_gomod("aiinfra.k3s/kubebuild", go_min, {KUBERNETES_MODULE: kube_version}, replaces)
    )
    packages = [f"{KUBERNETES_MODULE}/cmd/{name}" for name in KUBE_COMMANDS]
    go("mod", "download", KUBERNETES_MODULE, cwd=work)
    go("build", *RECIPE["flags"], "-ldflags", version_ldflags(kube_version), "-o", str(out) + "/", *packages, cwd=work)
    return requires.get(ETCD_MODULE) or requires["go.etcd.io/etcd/client/v3"]


def build_etcd(etcd_version: str, work: Path, out: Path) -> None:
    info = module_info(ETCD_MODULE, etcd_version)
    gomod = Path(info["GoMod"]).read_text()
    go_min, _requires, _replaces = parse_gomod(gomod)
    work.mkdir(parents=True, exist_ok=True)
    (work / "go.mod").write_text(
        render_gomod("aiinfra.k3s/etcdbuild", go_min, {ETCD_MODULE: etcd_version}, published_replaces(gomod))
    )
    go("mod", "download", ETCD_MODULE, cwd=work)
    go("build", *RECIPE["flags"], "-ldflags", "-s -w", "-o", str(out / "etcd"), ETCD_MODULE, cwd=work)


def build_kwok(work: Path, out: Path) -> None:
    info = module_info(KWOK_MODULE, KWOK_VERSION)
    go_min, _requires, _replaces = parse_gomod(Path(info["GoMod"]).read_text())
    work.mkdir(parents=True, exist_ok=True)
    (work / "go.mod").write_text(render_gomod("aiinfra.k3s/kwokbuild", go_min, {KWOK_MODULE: KWOK_VERSION}, {}))
    go("mod", "download", KWOK_MODULE, cwd=work)
    go("build", *RECIPE["flags"], "-ldflags", "-s -w", "-o", str(out / "kwok"), f"{KWOK_MODULE}/cmd/kwok", cwd=work)


def etcd_version_for(kube_version: str) -> str:
    info = module_info(KUBERNETES_MODULE, kube_version)
    _go, requires, _replaces = parse_gomod(Path(info["GoMod"]).read_text())
    return requires.get(ETCD_MODULE) or requires["go.etcd.io/etcd/client/v3"]


BINARIES = (*KUBE_COMMANDS, "etcd", "kwok")


def bin_dir(k3s_version: str) -> Path:
    kube = kubernetes_version(k3s_version)
    return CACHE / recipe_key(kube, etcd_version_for(kube), go_version()) / "bin"


def build(k3s_version: str) -> Path:
    # The version is checked (a tag, served) and the cache read before the lock: a bad version fails at once and a
    # built cache is used even while another build of this machine holds the lock.
    out = bin_dir(k3s_version)
    if all((out / name).is_file() for name in BINARIES):
        log(f"cached: {out} (Kubernetes {kubernetes_version(k3s_version)}, kwok {KWOK_VERSION}); nothing built")
        return out
    with lab.build_lock(CACHE, log, "Kubernetes"):
        return _build_locked(k3s_version)


def _build_locked(k3s_version: str) -> Path:
    kube = kubernetes_version(k3s_version)
    out = bin_dir(k3s_version)
    if all((out / name).is_file() for name in BINARIES):
        log(f"cached: {out} (Kubernetes {kube}, kwok {KWOK_VERSION}); nothing built")
        return out
    why = k3s_probe(k3s_version)
    if not why:
        raise BuildError(
            f"{K3S_MODULE}@{k3s_version} is served by the module proxy now: this tool builds Kubernetes' own "
            "components in its place and must learn the K3s build first (see the docstring)"
        )
    log(f"K3s itself cannot be built: {why}")
    log(f"building what K3s {k3s_version} embeds from upstream modules instead: Kubernetes {kube}, etcd, kwok")
    tmp_out = out.with_name("bin.partial")
    shutil.rmtree(tmp_out, ignore_errors=True)
    tmp_out.mkdir(parents=True)
    work = out.parent / "work"
    steps = (
        ("kubernetes", lambda: build_kubernetes(kube, work / "kubernetes", tmp_out)),
        ("etcd", lambda: build_etcd(etcd_version_for(kube), work / "etcd", tmp_out)),
        ("kwok", lambda: build_kwok(work / "kwok", tmp_out)),
    )
    total = time.monotonic()
    for name, step in steps:
        started = time.monotonic()
        step()
        log(f"built {name} in {time.monotonic() - started:.0f}s")
    shutil.rmtree(out, ignore_errors=True)
    tmp_out.rename(out)
    log(f"build time {time.monotonic() - total:.0f}s -> {out}")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("cmd", choices=("build", "path", "k3s-probe"))
    parser.add_argument("--k3s-version", default=None, help="default: k3s_version of roles/k3s/defaults/main.yml")
    args = parser.parse_args(argv)
    try:
        k3s_version = args.k3s_version or read_pin("k3s_version")
        if args.cmd == "build":
            print(build(k3s_version))
        elif args.cmd == "path":
            print(bin_dir(k3s_version))
        else:
            print(k3s_probe(k3s_version) or f"{K3S_MODULE}@{k3s_version} is served")
    except (BuildError, PinError) as exc:
        print(f"[kubebuild] ERROR: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
