"""Build the container images the lab's real kubelets run, and pack them into one K3s airgap image archive.

    python -m lab.nodes.nodeimages build --bin DIR
                    build (or reuse) the images, write
                    .cache/node/images/<recipe key>/{k3s-airgap-images-amd64.tar, images.json};
                    the last line printed is the archive's path
    python -m lab.nodes.nodeimages refs [--bin DIR]
                    print images.json (role -> image reference) without building: the refs the recipe for DIR
                    gives, else those of the last build

DIR holds static binaries built by lab/nodes/nodebuild.py (.cache/node/<key>/bin): `pause`, `coredns`, `traefik`,
`cert-manager-controller`, `cert-manager-webhook`, `cert-manager-cainjector`, and versions.json; the klipper-helm
stand-in takes lab/live/helmbuild.py's helm (built when missing). Images (all `localhost/aiinfra-lab/<name>:<tag>`,
labelled as lab builds; tags: the version the collection or versions.json gives, else the fixed tag `lab` that
inventories/lab names, each build told apart by its io.aiinfra.image.recipe label):

  pause                 FROM scratch, the lab's pause binary as entrypoint
  coredns               FROM scratch, /coredns as entrypoint, tagged with its version from versions.json
  traefik-no-acme-dns-no-webui
                        FROM scratch, /traefik as entrypoint: the REAL Traefik proxy at the release K3s installs,
                        built without the ACME DNS-challenge providers and the dashboard's web UI (the name says
                        so; lab/nodes/nodebuild.py)
  cert-manager-controller-only-ca-selfsigned-labmain
                        FROM scratch, /cert-manager-controller as entrypoint, USER 65532:65532: cert-manager's
                        controllers at the collection's cert_manager_chart_version, started by the lab's own main
                        package, CA and SelfSigned issuers only (lab/nodes/nodebuild.py)
  cert-manager-webhook-labmain, cert-manager-cainjector-labmain
                        FROM scratch, /cert-manager-webhook and /cert-manager-cainjector as entrypoints, USER 65532:65532:
                        cert-manager's webhook and cainjector at the same version, each started by the lab's own
                        main package; tagged with the cert-manager version, as the chart's image values expect
                        (CERT_MANAGER_REPOSITORIES)
  klipper-helm-standin  a STAND-IN for rancher/klipper-helm, the image of helm-controller's Jobs (tag `lab`,
                        KLIPPER_HELM_IMAGE): Debian bash, jq, ca-certificates, the lab's helm (lab/live/helmbuild.py)
                        at /usr/bin/helm, the lab's entry script (lab/nodes/programs/klipper-helm/entry) as the entrypoint,
                        USER 1000:1000 (numeric: the Jobs set runAsNonRoot), HOME /home/klipper-helm owned by it
  litellm               the REAL LiteLLM proxy (PyPI, the release roles/litellm/defaults/main.yml pins, with the
                        proxy requirements frozen in tests/gateway/requirements-litellm.txt) in a venv on Debian
  model-server-standin  a STAND-IN for the vLLM and NIM images (lab/nodes/programs/model_server_standin.py), Debian python3
  redis                 Debian's redis-server, started the way the collection's Redis Deployment starts it

The Debian images are debootstrapped (minbase) from the host's apt mirror (lab/nodes/labctl.py), suite trixie: the
frozen proxy requirements need Python >= 3.12 (numpy 2.5 and others), bookworm has 3.11. The archive is a
multi-image docker-archive (`podman save -m`), the format of K3s's own k3s-airgap-images-<arch>.tar, which
containerd imports (`ctr -n k8s.io images import`). Everything is cached by a recipe hash; a second run builds
nothing. Podman is pointed at lab/nodes/containers.conf. Only the standard library is used.

Runtime contract (lab/nodes/podcheck.py runs the images as the rendered pods run them): LiteLLM's entrypoint
is the venv's `litellm` (the gateway pod gives only args), it writes nothing but needs a writable temporary
directory at import (tempfile.gettempdir(): the pod's emptyDir /tmp); HOME is not needed. The stand-in and Redis
(`dir /tmp`, no persistence) write nothing. Debian package versions follow the mirror: the recipe pins the suite
and package names, not their versions.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import lab
from lab import ROOT
from lab.live import helmbuild
from lab.nodes import labctl
from lab.pins import PinError, read_pin

CACHE = ROOT / ".cache" / "node" / "images"
DEB_CACHE = CACHE / "debs"
LATEST = CACHE / "latest"
PROGRAMS = Path(__file__).resolve().parent / "programs"  # lab/nodes/programs
STANDIN = PROGRAMS / "model_server_standin.py"
KLIPPER_HELM_ENTRY = PROGRAMS / "klipper-helm" / "entry"
LITELLM_REQUIREMENTS = ROOT / "tests" / "gateway" / "requirements-litellm.txt"
REPO = "localhost/aiinfra-lab"
ARCHIVE = "k3s-airgap-images-amd64.tar"
SUITE = "trixie"  # Python 3.13; see the module docstring
RECIPE_VERSION = 1  # bump when the build steps (not the specs) change
LABEL = "io.aiinfra.image"  # never io.aiinfra.lab: containers inherit image labels and labctl lists that label
BUILD_DIR = "/run/aiinfra-build"  # inside the root file system, only while the build script runs
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
LITELLM_VENV = "/opt/litellm"
KEEP_ARCHIVES = 3  # archive directories kept (about 1 GB each), the newest first
CLEAN_DIRS = ("var/lib/apt/lists", "var/cache/apt", "usr/share/man", "usr/share/info", "usr/share/locale", "tmp")


class ImageError(Exception):
    """An image step failed; the message says which and what to do."""


def log(msg: str) -> None:
    print(f"[nodeimages] {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------- pure functions (unit-tested)


def image_tag(reference: str) -> str:
    """ghcr.io/berriai/litellm:v1.110.2 -> v1.110.2 (a digest or no tag: 'latest')."""
    last = reference.split("@", 1)[0].rsplit("/", 1)[-1]
    return last.split(":", 1)[1] if ":" in last else "latest"


def safe_tag(text: str) -> str:
    """A valid image tag from a version string: [A-Za-z0-9_.-], first character not '.' or '-', at most 128."""
    tag = re.sub(r"[^A-Za-z0-9_.-]", "-", text.strip()).lstrip(".-")[:128]
    if not tag:
        raise ImageError(f"no usable tag in {text!r}")
    return tag


def binary_version(versions: dict, name: str) -> str | None:
    """The version versions.json gives a binary: {name: {"version": v}} or {name: v}."""
    entry = versions.get(name)
    if isinstance(entry, dict):
        entry = entry.get("version")
    return str(entry) if entry else None


def reference(name: str, tag: str) -> str:
    return f"{REPO}/{name}:{tag}"


def labels(title: str, description: str, version: str, standin: bool) -> dict[str, str]:
    return {
        "org.opencontainers.image.title": title,
        "org.opencontainers.image.description": description,
        "org.opencontainers.image.version": version,
        # lab/nodeimages.py is lab/nodes/nodeimages.py now; labels are part of every image's recipe digest, so the
        # text keeps the old path until the next change that rebuilds the images anyway.
        "org.opencontainers.image.vendor": "aiinfra.k3s lab build (lab/nodeimages.py)",
        f"{LABEL}.lab-build": "true",
        f"{LABEL}.standin": "true" if standin else "false",
    }


# Scratch images named for what their build leaves out (nodebuild's versions.json note says what).
CERT_MANAGER_ROLE = "cert-manager-controller"
CERT_MANAGER_WEBHOOK_ROLE = "cert-manager-webhook"
CERT_MANAGER_CAINJECTOR_ROLE = "cert-manager-cainjector"
CERT_MANAGER_ROLES = (CERT_MANAGER_ROLE, CERT_MANAGER_WEBHOOK_ROLE, CERT_MANAGER_CAINJECTOR_ROLE)
SCRATCH_NAMES = {
    "traefik": "traefik-no-acme-dns-no-webui",
    # cert-manager's three components, each started by the lab's own main package (lab/nodes/nodebuild.py); the controller
    # with only the CA and SelfSigned issuers
    CERT_MANAGER_ROLE: "cert-manager-controller-only-ca-selfsigned-labmain",
    CERT_MANAGER_WEBHOOK_ROLE: "cert-manager-webhook-labmain",
    CERT_MANAGER_CAINJECTOR_ROLE: "cert-manager-cainjector-labmain",
    # only the Kubernetes service discovery, no web UI assets; KEDA with four of its scalers
    "prometheus": "prometheus-kubernetes-sd-only-no-webui",
    "keda": "keda-only-cpu-cron-memory-prometheus-scalers",
    "keda-adapter": "keda-metrics-apiserver-only-cpu-cron-memory-prometheus-scalers",
}
# What the lab runs in place of kube-prometheus-stack's and KEDA's charts (lab/nodes/observability.py).
PROMETHEUS_OPERATOR_ROLES = ("prometheus-operator", "prometheus-config-reloader", "prometheus")
KEDA_ROLES = ("keda", "keda-adapter")
# Scratch images with a (numeric, non-root) user of their own, as upstream's images have (distroless nonroot for
# cert-manager and KEDA, nobody for the Prometheus ones).
SCRATCH_USERS = {role: "65532:65532" for role in (*CERT_MANAGER_ROLES, *KEDA_ROLES)}
SCRATCH_USERS.update({role: "65534:65534" for role in PROMETHEUS_OPERATOR_ROLES})
# Where a binary lies in its image when not at /<name>: where upstream's image has it and something names that path
# (the operator starts the config reloader as /bin/prometheus-config-reloader; Prometheus's image runs /bin/prometheus).
SCRATCH_PATHS = {"prometheus-config-reloader": "bin", "prometheus": "bin"}
SCRATCH_ROLES = ("pause", "coredns", "traefik", *CERT_MANAGER_ROLES, *PROMETHEUS_OPERATOR_ROLES, *KEDA_ROLES)
# The repositories (no tag) the cert-manager chart's image values take: `<repository>:<tag or appVersion>`, and the
# scratch images are tagged with the cert-manager version, so a HelmChartConfig needs only these (and pullPolicy).
CERT_MANAGER_REPOSITORIES = {
    "image": f"{REPO}/{SCRATCH_NAMES[CERT_MANAGER_ROLE]}",
    "webhook.image": f"{REPO}/{SCRATCH_NAMES[CERT_MANAGER_WEBHOOK_ROLE]}",
    "cainjector.image": f"{REPO}/{SCRATCH_NAMES[CERT_MANAGER_CAINJECTOR_ROLE]}",
}
CERT_MANAGER_VALUES = dict(zip(CERT_MANAGER_ROLES, CERT_MANAGER_REPOSITORIES))  # role -> chart value
# The STAND-IN for rancher/klipper-helm, the image of helm-controller's Jobs (its --default-job-image).
KLIPPER_HELM_ROLE = "klipper-helm"
KLIPPER_HELM_NAME = "klipper-helm-standin"
KLIPPER_HELM_HOME = "/home/klipper-helm"
KLIPPER_HELM_USER = "1000:1000"  # numeric: the Jobs run with runAsNonRoot
KLIPPER_HELM_IMAGE = (
    f"{REPO}/{KLIPPER_HELM_NAME}:lab"  # fixed tag "lab" (with_tag); the recipe label tells builds apart
)


def scratch_spec(role: str, binary: Path, digest: str, version: str | None, note: str | None = None) -> dict:
    """A FROM scratch image holding one static binary as /<name>, its entrypoint."""
    name = binary.name
    tag = safe_tag(version) if version else "lab-" + digest[:12]
    what = "the lab's build of the pause container" if role == "pause" else f"{name} {version or ''} (lab build)"
    if note and role in SCRATCH_NAMES:
        what = f"{name} {version or ''} (lab build, {note})"
    return {
        "role": role,
        "name": SCRATCH_NAMES.get(role, name),
        "tag": tag,
        "base": "scratch",
        "binary": {"name": name, "sha256": digest, **({"dir": SCRATCH_PATHS[role]} if role in SCRATCH_PATHS else {})},
        "local": {"binary": str(binary)},
        "entrypoint": [f"/{SCRATCH_PATHS[role]}/{name}" if role in SCRATCH_PATHS else f"/{name}"],
        "cmd": [],
        "env": {},
        "expose": [],
        "labels": labels(f"aiinfra-lab {name}", what.strip(), tag, False),
        **({"user": SCRATCH_USERS[role]} if role in SCRATCH_USERS else {}),
    }


def litellm_spec(litellm_image: str, requirements: str) -> dict:
    """The real LiteLLM proxy in a venv: the gateway pod gives only arguments (--config, --port, --num_workers), as
    the official image's entrypoint runs `litellm "$@"`."""
    tag = image_tag(litellm_image)
    script = "\n".join(
        [
            "set -eu",
            f"python3 -m venv {LITELLM_VENV}",
            f"{LITELLM_VENV}/bin/pip install --no-cache-dir -q --require-hashes -r {BUILD_DIR}/inputs/requirements.txt",
            f"{LITELLM_VENV}/bin/litellm --version >/dev/null",
        ]
    )
    return {
        "role": "litellm",
        "name": "litellm",
        "tag": tag,
        "base": "debian",
        "packages": ["python3", "python3-venv", "ca-certificates"],
        "inputs": {"requirements.txt": requirements},
        "pip": True,
        "files": [],
        "script": script,
        "entrypoint": [f"{LITELLM_VENV}/bin/litellm"],
        "cmd": ["--port", "4000"],
        "env": {
            "PATH": f"{LITELLM_VENV}/bin:{SYSTEM_PATH}",
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONUNBUFFERED": "1",
        },
        "expose": ["4000"],
        "labels": labels(
            "aiinfra-lab litellm",
            f"the real LiteLLM proxy {tag} from PyPI (lab build, not the ghcr.io/berriai/litellm image)",
            tag,
            False,
        ),
    }


def standin_spec(source: str, digest: str, vllm_image: str) -> dict:
    """The stand-in model server: `vllm serve ...` (vLLM pods give arguments only) and no arguments with NIM_*
    environment (NIM pods). vllm_image: the image it stands in for (roles/vllm/defaults/main.yml)."""
    target = "/usr/local/lib/aiinfra-standin/model_server_standin.py"
    script = "\n".join(
        [
            "set -eu",
            # Entry points that run the module with Debian's python3 (the module itself has no shebang).
            f"printf '#!/bin/sh\\nAIINFRA_STANDIN_ENTRY=vllm exec /usr/bin/python3 {target} \"$@\"\\n' > /usr/local/bin/vllm",
            "chmod 0755 /usr/local/bin/vllm",
            "ln -s vllm /usr/local/bin/model-server-standin",
            "vllm --version >/dev/null",
        ]
    )
    return {
        "role": "model_server",
        "name": "model-server-standin",
        "tag": "",  # "lab" (with_tag)
        "base": "debian",
        "packages": ["python3"],
        "inputs": {},
        "pip": False,
        "files": [{"target": target, "mode": 0o644, "sha256": digest}],
        "local": {target: source},
        "script": script,
        "entrypoint": ["vllm", "serve"],
        "cmd": [],
        "env": {"PATH": SYSTEM_PATH, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1"},
        "expose": ["8000"],
        "labels": labels(
            "aiinfra-lab model-server-standin",
            "STAND-IN model server (OpenAI API, vLLM metric names), NOT vLLM and NOT NVIDIA NIM",
            "",
            True,
        )
        | {f"{LABEL}.stands-in-for": f"{vllm_image} and the nim_models images (nvcr.io/nim/...)"},
    }


def klipper_helm_spec(entry: str, entry_digest: str, helm: str, helm_digest: str, helm_version: str) -> dict:
    """The STAND-IN for rancher/klipper-helm: the lab's entry script (lab/nodes/programs/klipper-helm/entry) as the
    entrypoint, the lab's helm (lab/live/helmbuild.py) at /usr/bin/helm. helm-controller's Jobs give only arguments
    (`install ...` or `delete`), run as a non-root user with a read-only root file system and emptyDirs at
    $HOME/.helm, $HOME/.cache, $HOME/.config and /tmp."""
    home = KLIPPER_HELM_HOME
    uid, gid = KLIPPER_HELM_USER.split(":")
    script = "\n".join(
        [
            "set -eu",
            f"echo 'klipper-helm:x:{gid}:' >> /etc/group",
            f"echo 'klipper-helm:x:{uid}:{gid}:klipper-helm stand-in:{home}:/bin/bash' >> /etc/passwd",
            f"mkdir -p {home}/.helm {home}/.cache {home}/.config",
            f"chown -R {KLIPPER_HELM_USER} {home}",
            f"chmod 0755 {home}",
            "helm version --short >/dev/null",
            "jq --version >/dev/null",
            "bash -n /usr/bin/entry",
        ]
    )
    return {
        "role": KLIPPER_HELM_ROLE,
        "name": KLIPPER_HELM_NAME,
        "tag": "",  # "lab" (with_tag)
        "base": "debian",
        "packages": ["bash", "jq", "coreutils", "gzip", "ca-certificates"],
        "inputs": {},
        "pip": False,
        "files": [
            {"target": "/usr/bin/helm", "mode": 0o755, "sha256": helm_digest},
            {"target": "/usr/bin/entry", "mode": 0o755, "sha256": entry_digest},
        ],
        "local": {"/usr/bin/helm": helm, "/usr/bin/entry": entry},
        "script": script,
        "entrypoint": ["entry"],
        "cmd": [],
        "env": {"PATH": SYSTEM_PATH, "HOME": home},
        "expose": [],
        "user": KLIPPER_HELM_USER,
        "labels": labels(
            f"aiinfra-lab {KLIPPER_HELM_NAME}",
            f"STAND-IN for rancher/klipper-helm, NOT klipper-helm: the lab's entry script with helm {helm_version} "
            "(lab builds); no Helm v2, no helm-mapkubeapis",
            "",
            True,
        )
        | {f"{LABEL}.stands-in-for": "rancher/klipper-helm"},
    }


def redis_spec() -> dict:
    """Debian's redis-server: the collection's pod runs `redis-server /etc/redis/redis.conf` as uid 999."""
    return {
        "role": "redis",
        "name": "redis",
        "tag": "",  # "lab" (with_tag)
        "base": "debian",
        "packages": ["redis-server"],
        "inputs": {},
        "pip": False,
        "files": [],
        "script": "set -eu\nrm -f /etc/redis/redis.conf /etc/redis/sentinel.conf\nredis-server --version",
        "entrypoint": [],
        "cmd": ["redis-server"],
        "env": {"PATH": SYSTEM_PATH},
        "expose": ["6379"],
        "labels": labels("aiinfra-lab redis", f"Debian {SUITE} redis-server (lab build)", "", False),
    }


def spec_digest(spec: dict) -> str:
    """What decides an image: its spec (files by content digest, not by where they are here), the suite and the
    build steps' version."""
    kept = {k: v for k, v in spec.items() if k not in ("local", "ref", "digest")}
    text = json.dumps({"spec": kept, "suite": SUITE, "recipe": RECIPE_VERSION}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def with_tag(spec: dict) -> dict:
    """The spec with its digest, its ref (a spec with no tag gets 'lab') and its recipe label."""
    spec = dict(spec)
    spec["digest"] = spec_digest(spec)
    if not spec["tag"]:
        # A fixed tag the lab inventory can name (inventories/lab); the recipe label says which build it is.
        spec["tag"] = "lab"
        spec["labels"] = {**spec["labels"], "org.opencontainers.image.version": spec["tag"]}
    spec["ref"] = reference(spec["name"], spec["tag"])
    spec["labels"] = {**spec["labels"], f"{LABEL}.recipe": spec["digest"]}
    return spec


def recipe_key(specs: list[dict]) -> str:
    """The archive's cache key: the digests of its images, in role order."""
    h = hashlib.sha256()
    for spec in sorted(specs, key=lambda s: s["role"]):
        h.update(f"{spec['role']}={spec['digest']}\n".encode())
    return h.hexdigest()[:16]


def refs_of(specs: list[dict]) -> dict[str, str]:
    return {spec["role"]: spec["ref"] for spec in specs}


def changes(spec: dict) -> list[str]:
    """podman import --change values (podman 4.3 takes one key per LABEL/ENV and the rest of the line as value)."""
    out = []
    if spec["entrypoint"]:
        out.append("ENTRYPOINT " + json.dumps(spec["entrypoint"]))
    if spec["cmd"]:
        out.append("CMD " + json.dumps(spec["cmd"]))
    out += [f"ENV {k}={v}" for k, v in sorted(spec["env"].items())]
    out += [f"EXPOSE {p}" for p in spec["expose"]]
    if spec.get("user"):
        out.append(f"USER {spec['user']}")
    out += [f"LABEL {k}={v}" for k, v in sorted(spec["labels"].items())]
    return out


def pip_config(text: str) -> dict[str, str]:
    """`pip config list` lines (`section.key='value'`) -> {key: value}, the environment over the config files."""
    order = {"global": 0, "install": 1, "user": 2, "site": 3, ":env:": 4}
    found = []
    for line in text.splitlines():
        match = re.match(r"^([^.=\s]+|:env:)\.([A-Za-z0-9_-]+)=(.*)$", line.strip())
        if match:
            value = match.group(3)
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
                value = value[1:-1]
            found.append((order.get(match.group(1), 1), match.group(2), value))
    return {key: value for _rank, key, value in sorted(found, key=lambda f: f[0])}


def pip_build_env(config: dict[str, str], exists) -> tuple[dict[str, str], list[tuple[str, str]]]:
    """PIP_* variables for pip inside the root file system, and the host paths to bind there (read-only) while it
    runs: a path-valued setting (cert, find-links...) that exists here is bound under BUILD_DIR/pip and renamed.
    exists: os.path.exists (injected for the tests)."""
    env, binds = {}, []
    for key, value in sorted(config.items()):
        words = []
        for word in value.split():
            if word.startswith("/"):
                if not exists(word):
                    continue
                inside = f"{BUILD_DIR}/pip/{len(binds)}-{Path(word).name or 'root'}"
                binds.append((word, inside))
                word = inside
            words.append(word)
        if words:
            env["PIP_" + key.upper().replace("-", "_")] = " ".join(words)
    return env, binds


def build_script(spec: dict, binds: list[tuple[str, str, bool]], rootfs: str, env: dict[str, str]) -> str:
    """The shell script run in a private mount namespace (unshare): /proc and the binds mounted in rootfs, then the
    spec's script in a chroot with exactly env. binds: (host path, path inside, is a directory)."""
    q = shlex.quote
    lines = ["set -eu", "mount --make-rprivate /", f"mount -t proc proc {q(rootfs)}/proc"]
    for host, inside, is_dir in binds:
        target = q(rootfs + inside)
        make = f"mkdir -p {target}" if is_dir else f"mkdir -p {q(str(Path(rootfs + inside).parent))} && touch {target}"
        lines += [make, f"mount --bind {q(host)} {target}", f"mount -o remount,bind,ro {target}"]
    env_words = " ".join(q(f"{k}={v}") for k, v in sorted(env.items()))
    lines.append(f"chroot {q(rootfs)} /usr/bin/env -i {env_words} /bin/sh -c {q(spec['script'])}")
    return "\n".join(lines) + "\n"


def inventory_lines(refs: dict[str, str]) -> list[str]:
    """The inventory variables that map the collection's images onto the lab's."""
    out = []
    if "litellm" in refs:
        out.append(f"litellm_image: {refs['litellm']}")
    if "redis" in refs:
        out.append(f"litellm_redis_image: {refs['redis']}")
    if "model_server" in refs:
        model = refs["model_server"]
        out.append(f"vllm_image: {model}")
        out.append(f"# nim_models: each entry's `image:` -> {model} (NIM has no image variable of its own)")
    if "pause" in refs:
        out.append(f"# K3s sandbox (pause) image, node side: {refs['pause']}")
    if "coredns" in refs:
        out.append(f"# CoreDNS image, node side: {refs['coredns']}")
    if "traefik" in refs:
        out.append(f"# Traefik image (the lab's Traefik manifests, lab/nodes/k3sbundle.py): {refs['traefik']}")
    for role in CERT_MANAGER_ROLES:
        if role in refs:
            out.append(f"# {role} image (the cert-manager chart's values, lab/nodes/k3sbundle.py): {refs[role]}")
    if KLIPPER_HELM_ROLE in refs:
        out.append(f"# helm-controller's Job image (its --default-job-image, node side): {refs[KLIPPER_HELM_ROLE]}")
    return out


def images(refs: dict[str, str]) -> dict[str, str]:
    """What the bundle needs from a build's refs (images.json): role -> reference of the images helm-controller
    and the cert-manager chart run. Roles: klipper-helm, cert-manager-controller, cert-manager-webhook,
    cert-manager-cainjector (each only when built)."""
    return {role: refs[role] for role in (KLIPPER_HELM_ROLE, *CERT_MANAGER_ROLES) if role in refs}


# ---------------------------------------------------------------- inputs


def read_versions(bin_dir: Path) -> dict:
    path = bin_dir / "versions.json"
    return json.loads(path.read_text()) if path.is_file() else {}


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def specs_for(bin_dir: Path, helm: Path | None = None) -> tuple[list[dict], list[str]]:
    """Every image's spec (tag, ref and recipe label set), and the binaries DIR lacks (their images are left out).
    helm: the klipper-helm stand-in's helm binary (default: lab/live/helmbuild.py's cached build)."""
    versions, missing, specs = read_versions(bin_dir), [], []
    for role in SCRATCH_ROLES:
        binary = bin_dir / role
        if binary.is_file():
            note = (versions.get(role) or {}).get("note") if isinstance(versions.get(role), dict) else None
            specs.append(scratch_spec(role, binary, sha256_file(binary), binary_version(versions, role), note))
        else:
            missing.append(role)
    litellm_image = read_pin("litellm_image")
    specs.append(litellm_spec(litellm_image, LITELLM_REQUIREMENTS.read_text()))
    vllm_image = read_pin("vllm_image")
    specs.append(standin_spec(str(STANDIN), sha256_file(STANDIN), vllm_image))
    specs.append(redis_spec())
    helm = helm or helmbuild.helm_path()
    if helm.is_file():
        specs.append(
            klipper_helm_spec(
                str(KLIPPER_HELM_ENTRY),
                sha256_file(KLIPPER_HELM_ENTRY),
                str(helm),
                sha256_file(helm),
                helmbuild.HELM_VERSION,
            )
        )
    else:
        missing.append(f"{KLIPPER_HELM_ROLE} (no helm: run `python -m lab.live.helmbuild build`)")
    return [with_tag(s) for s in specs], missing


# ---------------------------------------------------------------- process boundary


def run(cmd: list[str], timeout: float = 1800, **kw) -> subprocess.CompletedProcess:
    try:
        proc = subprocess.run(cmd, capture_output=True, timeout=timeout, check=False, **kw)
    except subprocess.TimeoutExpired as exc:
        raise ImageError(f"timed out after {timeout}s: {' '.join(cmd[:4])} ...") from exc
    if proc.returncode != 0:
        err = (proc.stderr or b"").decode(errors="replace").strip()[-3000:]
        raise ImageError(f"command failed (rc={proc.returncode}): {' '.join(cmd[:6])} ...\n{err}")
    return proc


def podman(*args: str, **kw) -> subprocess.CompletedProcess:
    return run(["podman", *args], **kw)


def image_recipe(ref: str) -> str | None:
    """The recipe label of the image podman holds under ref, None when it holds none."""
    proc = subprocess.run(
        ["podman", "image", "inspect", "--format", "json", ref], capture_output=True, check=False, timeout=60
    )
    if proc.returncode != 0:
        return None
    config = (json.loads(proc.stdout or b"[{}]")[0] or {}).get("Config") or {}
    return (config.get("Labels") or {}).get(f"{LABEL}.recipe")


def podman_import(spec: dict, source: list[str], stdin=None) -> None:
    args = ["import", "--message", f"aiinfra lab build {spec['name']} recipe {spec['digest'][:16]}"]
    for change in changes(spec):
        args += ["--change", change]
    podman(*args, *source, spec["ref"], stdin=stdin, timeout=1800)


def build_scratch(spec: dict, work: Path) -> None:
    """A one-file tar (root-owned, mode 0755, fixed mtime) imported as the image."""
    binary = Path(spec["local"]["binary"])
    tar_path = work / "layer.tar"
    with tarfile.open(tar_path, "w") as tar:
        where = spec["binary"].get("dir")
        if where:
            folder = tarfile.TarInfo(where)
            folder.type, folder.mode, folder.mtime = tarfile.DIRTYPE, 0o755, 0
            tar.addfile(folder)
        info = tarfile.TarInfo(f"{where}/{binary.name}" if where else binary.name)
        data = binary.read_bytes()
        info.size, info.mode, info.mtime = len(data), 0o755, 0
        tar.addfile(info, io.BytesIO(data))
    podman_import(spec, [str(tar_path)])


def debootstrap(spec: dict, rootfs: Path) -> None:
    DEB_CACHE.mkdir(parents=True, exist_ok=True)
    cmd = ["debootstrap", "--variant=minbase", f"--cache-dir={DEB_CACHE}", f"--include={','.join(spec['packages'])}"]
    run([*cmd, SUITE, str(rootfs), labctl.host_mirror()], timeout=1800)


def host_pip_env() -> tuple[dict[str, str], list[tuple[str, str]]]:
    """This machine's pip settings (`pip config list`: environment and config files) for the build in the chroot."""
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True, check=False, timeout=120
    )
    return pip_build_env(pip_config(proc.stdout if proc.returncode == 0 else ""), os.path.exists)


def customize(spec: dict, rootfs: Path, work: Path) -> None:
    """Copy the spec's files in, then run its script in the chroot with only its build inputs bound."""
    for item in spec["files"]:
        target = rootfs / item["target"].lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(spec["local"][item["target"]], target)
        target.chmod(item["mode"])
    binds, env = [], {"PATH": SYSTEM_PATH, "HOME": "/root", "LANG": "C.UTF-8"}
    inputs = work / "inputs"
    inputs.mkdir()
    for name, text in spec["inputs"].items():
        (inputs / name).write_text(text)
    if spec["inputs"]:
        binds.append((str(inputs), BUILD_DIR + "/inputs", True))
    if spec["pip"]:
        pip_env, pip_binds = host_pip_env()
        env.update(pip_env)
        binds += [(host, inside, Path(host).is_dir()) for host, inside in pip_binds]
    script = build_script(spec, binds, str(rootfs), env)
    run(["unshare", "--mount", "--propagation", "private", "/bin/sh", "-c", script], timeout=3600)
    shutil.rmtree(rootfs / BUILD_DIR.lstrip("/"), ignore_errors=True)


def clean_rootfs(rootfs: Path) -> None:
    """Drop what an image does not need (apt lists and caches, manuals, translations) and this host's identity."""
    for rel in CLEAN_DIRS:
        path = rootfs / rel
        if path.is_dir():
            for child in path.iterdir():
                if child.is_dir() and not child.is_symlink():
                    shutil.rmtree(child)
                else:
                    child.unlink()
    for rel in ("etc/resolv.conf", "etc/hostname"):
        path = rootfs / rel
        if path.is_file() and not path.is_symlink():
            path.write_text("")
    for log_file in (rootfs / "var" / "log").rglob("*"):
        if log_file.is_file():
            log_file.unlink()


def build_debian(spec: dict, work: Path) -> None:
    rootfs = work / "rootfs"
    debootstrap(spec, rootfs)
    customize(spec, rootfs, work)
    clean_rootfs(rootfs)
    tar = subprocess.Popen(["tar", "-C", str(rootfs), "--numeric-owner", "-c", "."], stdout=subprocess.PIPE)
    try:
        podman_import(spec, ["-"], stdin=tar.stdout)
    finally:
        tar.stdout.close()
        tar.wait()
    if tar.returncode != 0:
        raise ImageError(f"tar of {rootfs} failed (rc={tar.returncode})")


def ensure_image(spec: dict) -> bool:
    """Build the image unless podman holds it with this recipe; True when built."""
    if image_recipe(spec["ref"]) == spec["digest"]:
        log(f"{spec['ref']}: cached (recipe {spec['digest'][:12]})")
        return False
    started = time.monotonic()
    log(f"{spec['ref']}: building ({spec['base']})")
    CACHE.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=CACHE, prefix=f"build-{spec['name']}-") as tmp:
        (build_scratch if spec["base"] == "scratch" else build_debian)(spec, Path(tmp))
    log(f"{spec['ref']}: built in {time.monotonic() - started:.0f}s")
    return True


def save_archive(refs: list[str], archive: Path) -> None:
    partial = archive.with_name(archive.name + ".partial")
    partial.unlink(missing_ok=True)
    podman("save", "-m", "--format", "docker-archive", "-o", str(partial), *refs, timeout=1800)
    partial.replace(archive)


def image_size(ref: str) -> str:
    proc = subprocess.run(
        ["podman", "image", "inspect", "--format", "{{.Size}}", ref], capture_output=True, check=False
    )
    return f"{int(proc.stdout) / 1e6:.0f} MB" if proc.returncode == 0 else "not in podman's storage"


def point_latest(out: Path) -> None:
    tmp = CACHE / "latest.tmp"
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(out.name)
    tmp.replace(LATEST)


def build_lock():
    """One build at a time on this machine (lab/nodes/k3sbundle.py calls build() too)."""
    return lab.build_lock(CACHE, log, "nodeimages")


def archive_dirs() -> list[Path]:
    """The archive directories, newest first."""
    found = [p for p in CACHE.iterdir() if p.is_dir() and re.fullmatch(r"[0-9a-f]{16}", p.name)]
    return sorted(found, key=lambda p: p.stat().st_mtime, reverse=True)


def prune(current: Path) -> None:
    """Keep the KEEP_ARCHIVES newest archives (and the current one) and the lab images they name; drop the rest,
    and what an interrupted build left (under the build lock, so nothing else is building)."""
    for stale in CACHE.glob("build-*"):
        shutil.rmtree(stale, ignore_errors=True)
    keep = [*archive_dirs()[:KEEP_ARCHIVES], current]
    for directory in archive_dirs():
        if directory not in keep:
            shutil.rmtree(directory, ignore_errors=True)
            log(f"pruned old archive {directory.name}")
    kept_refs = set()
    for directory in keep:
        if (directory / "images.json").is_file():
            kept_refs.update(json.loads((directory / "images.json").read_text()).values())
    listing = subprocess.run(
        ["podman", "images", "--filter", f"label={LABEL}.lab-build=true", "--format", "{{.Repository}}:{{.Tag}}"],
        capture_output=True,
        text=True,
        check=False,
    )
    for ref in listing.stdout.split():
        if ref.startswith(REPO + "/") and ref not in kept_refs and rmi(ref):
            log(f"pruned old image {ref}")
    # Builds under a fixed tag ("lab") leave the previous image untagged.
    subprocess.run(
        ["podman", "image", "prune", "-f", "--filter", f"label={LABEL}.lab-build=true"],
        capture_output=True,
        check=False,
    )


def rmi(ref: str) -> bool:
    """Remove an image podman holds (refused while a container uses it)."""
    return subprocess.run(["podman", "rmi", ref], capture_output=True, check=False).returncode == 0


def report(specs: list[dict], missing: list[str], archive: Path) -> None:
    for spec in specs:
        log(f"{spec['role']:<13} {spec['ref']}  ({image_size(spec['ref'])})")
    log(f"archive {archive} ({archive.stat().st_size / 1e6:.0f} MB)")
    if missing:
        log(
            f"MISSING from the archive: {', '.join(missing)} "
            "(not in the --bin directory: run `python -m lab.nodes.nodebuild build`)"
        )


def build_archive(specs: list[dict], out: Path) -> None:
    started = time.monotonic()
    for spec in specs:
        ensure_image(spec)
    out.mkdir(parents=True, exist_ok=True)
    save_archive([s["ref"] for s in specs], out / ARCHIVE)
    (out / "images.json").write_text(json.dumps(refs_of(specs), indent=2, sort_keys=True) + "\n")
    log(f"images and archive in {time.monotonic() - started:.0f}s")


def build(bin_dir: Path) -> Path:
    """Build (or reuse) every image and the archive; its path (images.json beside it). Images whose binary DIR
    lacks are left out (and named). Logs go to stderr."""
    os.environ.setdefault("CONTAINERS_CONF", str(labctl.LAB_DIR / "containers.conf"))
    try:
        helmbuild.build()  # the klipper-helm stand-in's helm (cached after the first build)
    except helmbuild.BuildError as exc:
        raise ImageError(f"helm for the klipper-helm stand-in: {exc}") from None
    specs, missing = specs_for(Path(bin_dir))
    out = CACHE / recipe_key(specs)
    archive = out / ARCHIVE
    with build_lock():
        if archive.is_file() and (out / "images.json").is_file():
            log(f"cached: {archive}")
            os.utime(out)  # recently used: pruned last
        else:
            build_archive(specs, out)
            prune(out)
        point_latest(out)
    report(specs, missing, archive)
    return archive


def refs(bin_dir: Path | None) -> dict[str, str]:
    if bin_dir is not None:
        return refs_of(specs_for(Path(bin_dir))[0])
    if not (LATEST / "images.json").is_file():
        raise ImageError("no images built yet: run `python -m lab.nodes.nodeimages build --bin DIR` or pass --bin")
    return json.loads((LATEST / "images.json").read_text())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("build", help="build the images and the airgap archive").add_argument("--bin", required=True)
    sub.add_parser("refs", help="print images.json without building").add_argument("--bin")
    args = parser.parse_args(argv)
    try:
        if args.cmd == "build":
            archive = build(Path(args.bin))
            print("# inventory variables mapping the collection's images onto the lab's:")
            print("\n".join(inventory_lines(json.loads((archive.parent / "images.json").read_text()))))
            print(archive)
        else:
            print(json.dumps(refs(Path(args.bin) if args.bin else None), indent=2, sort_keys=True))
    except (ImageError, PinError, labctl.LabError) as exc:
        print(f"[nodeimages] ERROR: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
