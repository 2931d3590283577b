"""Pack the lab's K3s STAND-IN into a K3s-shaped airgap bundle: NOT K3s.

    python -m lab.nodes.k3sbundle build
                build the node components (lab/nodes/nodebuild.py) and images (lab/nodes/nodeimages.py) if needed,
                then write .cache/node/bundle/<key>/{k3s, k3s-airgap-images-amd64.tar, sha256sum-amd64.txt};
                the last line printed is that directory
    python -m lab.nodes.k3sbundle path
                the directory of the last bundle built (nothing built)

The bundle has the shape of a K3s release (the collection's k3s role verifies and installs it through its airgap
path, `k3s_install_mode: airgap`, `k3s_airgap_dir`), but its `k3s` is a self-extracting file: a shell header
(multi-call: k3s server|agent, kubectl, ctr) followed by a zstd tar of lab/nodes/programs/k3s_standin.py, the binaries
built from upstream Go modules (K3s's helm-controller and a stand-in for its supervisor among them), and the
manifests a lab server applies at start (CoreDNS, the lab's own minimal Traefik manifests in place of K3s's embedded
Traefik chart, a HelmChartConfig giving the collection's cert-manager chart the lab's images, and the CRDs the other
charts would install). Next to it, the cert-manager chart archive (packaged from its module, lab/live/charts.py) and its
digest, for the collection's airgap path (K3s's static charts). The image tarball holds the lab's images (pause,
CoreDNS, Traefik, cert-manager's three components, the klipper-helm stand-in of helm-controller's Jobs, the real
LiteLLM proxy, the stand-in model server, Redis), imported by each node's containerd at start, as K3s imports its
airgap image directory. Only the standard library is used.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

from lab import ROOT
from lab.live import charts, crds, kubebuild
from lab.nodes import labctl, nodebuild, nodeimages
from lab.pins import PinError, read_pin

CACHE = ROOT / ".cache" / "node" / "bundle"
STANDIN = nodebuild.NODE_SOURCES / "k3s_standin.py"
HEADER_SIZE = 8192
ARCH = "amd64"
# The components a node runs, from the node build (control plane included: the server runs it).
PAYLOAD_BINARIES = (
    "kubelet",
    "kube-proxy",
    "kubectl",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "etcd",
    "containerd",
    "containerd-shim-runc-v2",
    "ctr",
    "bridge",
    "host-local",
    "loopback",
    "portmap",
    "flanneld",
    "aiinfra-lab-supervisor",
    "helm-controller",
)


class BundleError(Exception):
    """A bundle step failed; the message says which."""


def log(msg: str) -> None:
    print(f"[k3sbundle] {msg}", flush=True)


HEADER = """#!/bin/sh
# aiinfra.k3s lab STAND-IN for K3s: NOT K3s. Built by lab/nodes/k3sbundle.py from upstream Go modules (kubelet,
# containerd, flannel, the control plane...) and lab/nodes/programs/k3s_standin.py; K3s itself is not available here.
# The payload after the first {size} bytes is a zstd tar, extracted once per payload into the data directory.
set -eu
VERSION='{version}'
DATA=/var/lib/rancher/k3s/data/aiinfra-standin-{payload_sha}
self=$(readlink -f "$0")
if [ ! -f "$DATA/.done" ]; then
  mkdir -p "$(dirname "$DATA")"
  exec 9>"$DATA.lock"
  flock 9  # one extraction at a time; a second caller finds it done
  if [ ! -f "$DATA/.done" ]; then
    tmp="$DATA.partial.$$"
    rm -rf "$tmp"
    mkdir -p "$tmp"
    tail -c +{skip} "$self" | zstd -q -dc | tar -x -C "$tmp"
    touch "$tmp/.done"
    rm -rf "$DATA"
    mv "$tmp" "$DATA"
  fi
  exec 9>&-
fi
export AIINFRA_STANDIN_DATA="$DATA"
cmd=$(basename "$0")
if [ "$cmd" = k3s ] && [ $# -gt 0 ]; then
  case "$1" in kubectl|ctr|crictl) cmd=$1; shift ;; esac
fi
case "$cmd" in
  kubectl) export KUBECONFIG="${{KUBECONFIG:-/etc/rancher/k3s/k3s.yaml}}"; exec "$DATA/bin/kubectl" "$@" ;;
  ctr) exec "$DATA/bin/ctr" --address /run/k3s/containerd/containerd.sock "$@" ;;
  crictl) echo "crictl is not part of the aiinfra lab stand-in for K3s" >&2; exit 1 ;;
esac
case "${{1:-}}" in
  --version|-v|version) echo "k3s version $VERSION (aiinfra lab stand-in, not K3s)"; exit 0 ;;
esac
exec python3 "$DATA/k3s_standin.py" "$@"
"""


def header(version: str, payload_sha: str) -> bytes:
    """The shell header, padded with a comment to exactly HEADER_SIZE bytes (the payload starts after it)."""
    text = HEADER.format(size=HEADER_SIZE, version=version, payload_sha=payload_sha[:16], skip=HEADER_SIZE + 1)
    raw = text.encode()
    if len(raw) + 2 > HEADER_SIZE:
        raise BundleError(f"the stand-in's shell header is {len(raw)} bytes, over {HEADER_SIZE}")
    pad = HEADER_SIZE - len(raw) - 1
    return raw + b"#" * pad + b"\n"


def coredns_manifest(image: str, cluster_dns: str = "10.43.0.10", domain: str = "cluster.local") -> str:
    """CoreDNS as K3s deploys it (Deployment, Service at the cluster DNS address, RBAC, Corefile)."""
    corefile = (
        ".:1053 {\n    errors\n    health\n    ready\n"
        f"    kubernetes {domain} in-addr.arpa ip6.arpa {{\n"
        "      pods insecure\n      fallthrough in-addr.arpa ip6.arpa\n    }\n"
        "    prometheus :9153\n    forward . /etc/resolv.conf\n    cache 30\n    loop\n    reload\n    loadbalance\n}\n"
    )
    labels = {"k8s-app": "kube-dns"}
    objects = [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "coredns", "namespace": "kube-system"}},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": "system:coredns"},
            "rules": [
                {
                    "apiGroups": [""],
                    "resources": ["endpoints", "services", "pods", "namespaces"],
                    "verbs": ["list", "watch"],
                },
                {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ["list", "watch"]},
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "system:coredns"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:coredns"},
            "subjects": [{"kind": "ServiceAccount", "name": "coredns", "namespace": "kube-system"}],
        },
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "coredns", "namespace": "kube-system"},
            "data": {"Corefile": corefile},
        },
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "coredns", "namespace": "kube-system", "labels": labels},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "serviceAccountName": "coredns",
                        "priorityClassName": "system-cluster-critical",
                        "tolerations": [{"operator": "Exists"}],
                        "dnsPolicy": "Default",
                        "securityContext": {
                            "runAsNonRoot": True,
                            "runAsUser": 65532,
                            "runAsGroup": 65532,
                            "seccompProfile": {"type": "RuntimeDefault"},
                        },
                        "containers": [
                            {
                                "name": "coredns",
                                "image": image,
                                "imagePullPolicy": "IfNotPresent",
                                "args": ["-conf", "/etc/coredns/Corefile"],
                                "ports": [
                                    {"name": "dns", "containerPort": 1053, "protocol": "UDP"},
                                    {"name": "dns-tcp", "containerPort": 1053, "protocol": "TCP"},
                                    {"name": "metrics", "containerPort": 9153, "protocol": "TCP"},
                                ],
                                "readinessProbe": {"httpGet": {"path": "/ready", "port": 8181}, "periodSeconds": 2},
                                "livenessProbe": {"httpGet": {"path": "/health", "port": 8080}, "periodSeconds": 10},
                                "resources": {
                                    "requests": {"cpu": "50m", "memory": "70Mi"},
                                    "limits": {"memory": "170Mi"},
                                },
                                "securityContext": {
                                    "allowPrivilegeEscalation": False,
                                    "readOnlyRootFilesystem": True,
                                    "capabilities": {"drop": ["ALL"]},
                                },
                                "volumeMounts": [{"name": "config", "mountPath": "/etc/coredns", "readOnly": True}],
                            }
                        ],
                        "volumes": [{"name": "config", "configMap": {"name": "coredns"}}],
                    },
                },
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "kube-dns", "namespace": "kube-system", "labels": labels},
            "spec": {
                "selector": labels,
                "clusterIP": cluster_dns,
                "ports": [
                    {"name": "dns", "port": 53, "targetPort": 1053, "protocol": "UDP"},
                    {"name": "dns-tcp", "port": 53, "targetPort": 1053, "protocol": "TCP"},
                    {"name": "metrics", "port": 9153, "protocol": "TCP"},
                ],
            },
        },
    ]
    return "\n---\n".join(json.dumps(o, indent=1) for o in objects) + "\n"


# The lab's Traefik: K3s deploys Traefik from a Helm chart embedded in K3s (a HelmChart in its manifests directory,
# installed by its helm-controller) behind ServiceLB (klipper-lb). Neither the chart nor klipper-lb is available
# here, so the lab server applies these minimal manifests of its own in their place (NOT K3s's chart): the chart's
# entry points, providers, non-root read-only container and RBAC, the real Traefik binary (lab/nodes/nodebuild.py), and a
# NodePort Service (fixed ports) where K3s has a LoadBalancer Service served by ServiceLB. The collection's
# HelmChartConfig asks the chart for JSON general and access logs: the arguments below ask the same.
TRAEFIK_NODE_PORTS = {"web": 30080, "websecure": 30443}
TRAEFIK_LABELS = {"app.kubernetes.io/name": "traefik", "app.kubernetes.io/instance": "traefik-kube-system"}
TRAEFIK_ENTRYPOINTS = {"web": 8000, "websecure": 8443, "traefik": 8080, "metrics": 9100}
TRAEFIK_RESOURCES = (
    "ingressroutes",
    "ingressroutetcps",
    "ingressrouteudps",
    "middlewares",
    "middlewaretcps",
    "serverstransports",
    "serverstransporttcps",
    "tlsoptions",
    "tlsstores",
    "traefikservices",
)


def traefik_args() -> list[str]:
    """The proxy's arguments: the chart's defaults as K3s sets them (but the dashboard), plus the collection's
    HelmChartConfig logs."""
    args = [f"--entryPoints.{name}.address=:{port}/tcp" for name, port in TRAEFIK_ENTRYPOINTS.items()]
    return [
        *args,
        "--entryPoints.websecure.http.tls=true",
        "--api.dashboard=false",  # the chart's default is true; the lab build has no web UI (lab/nodes/nodebuild.py)
        "--ping=true",
        "--metrics.prometheus=true",
        "--metrics.prometheus.entryPoint=metrics",
        "--providers.kubernetescrd",
        "--providers.kubernetescrd.allowEmptyServices=true",
        "--providers.kubernetesingress",
        "--providers.kubernetesingress.allowEmptyServices=true",
        "--log.level=INFO",
        "--log.format=json",
        "--accesslog=true",
        "--accesslog.format=json",
    ]


def traefik_manifest(image: str, node_ports: dict[str, int] | None = None) -> str:
    """The lab's Traefik in kube-system: ServiceAccount, ClusterRole(Binding), IngressClass, Deployment, NodePort
    Service (web 80 -> 8000, websecure 443 -> 8443)."""
    node_ports = node_ports or TRAEFIK_NODE_PORTS
    ns = "kube-system"
    meta = {"name": "traefik", "namespace": ns, "labels": TRAEFIK_LABELS}
    read = ["get", "list", "watch"]
    rules = [
        {"apiGroups": [""], "resources": ["services", "configmaps", "secrets", "nodes"], "verbs": read},
        {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": read},
        {"apiGroups": ["networking.k8s.io"], "resources": ["ingresses", "ingressclasses"], "verbs": read},
        {"apiGroups": ["networking.k8s.io"], "resources": ["ingresses/status"], "verbs": ["update"]},
        {"apiGroups": ["traefik.io"], "resources": list(TRAEFIK_RESOURCES), "verbs": read},
    ]
    container = {
        "name": "traefik",
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "args": traefik_args(),
        "ports": [
            {"name": name, "containerPort": port, "protocol": "TCP"} for name, port in TRAEFIK_ENTRYPOINTS.items()
        ],
        "readinessProbe": {"httpGet": {"path": "/ping", "port": "traefik"}, "periodSeconds": 5, "failureThreshold": 1},
        "livenessProbe": {"httpGet": {"path": "/ping", "port": "traefik"}, "periodSeconds": 10, "failureThreshold": 3},
        "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}},
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
        },
        "volumeMounts": [{"name": "data", "mountPath": "/data"}, {"name": "tmp", "mountPath": "/tmp"}],
    }
    objects = [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": "traefik-kube-system", "labels": TRAEFIK_LABELS},
            "rules": rules,
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "traefik-kube-system", "labels": TRAEFIK_LABELS},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "traefik-kube-system"},
            "subjects": [{"kind": "ServiceAccount", "name": "traefik", "namespace": ns}],
        },
        {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "IngressClass",
            "metadata": {"name": "traefik", "labels": TRAEFIK_LABELS},
            "spec": {"controller": "traefik.io/ingress-controller"},
        },
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": meta,
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": TRAEFIK_LABELS},
                "template": {
                    "metadata": {"labels": TRAEFIK_LABELS},
                    "spec": {
                        "serviceAccountName": "traefik",
                        "priorityClassName": "system-cluster-critical",
                        "tolerations": [{"key": "CriticalAddonsOnly", "operator": "Exists"}],
                        "terminationGracePeriodSeconds": 60,
                        "securityContext": {
                            "runAsNonRoot": True,
                            "runAsUser": 65532,
                            "runAsGroup": 65532,
                            "seccompProfile": {"type": "RuntimeDefault"},
                        },
                        "containers": [container],
                        "volumes": [{"name": "data", "emptyDir": {}}, {"name": "tmp", "emptyDir": {}}],
                    },
                },
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": meta,
            "spec": {
                "type": "NodePort",
                "selector": TRAEFIK_LABELS,
                "ports": [
                    {"name": name, "port": port, "targetPort": name, "nodePort": node_ports[name], "protocol": "TCP"}
                    for name, port in (("web", 80), ("websecure", 443))
                ],
            },
        },
    ]
    return "\n---\n".join(json.dumps(o, indent=1) for o in objects) + "\n"


# The lab's cert-manager is the site's: the collection's cert-manager HelmChart, installed by K3s's helm-controller
# (the stand-in runs the release K3s embeds) from the chart archive in K3s's static charts (the collection's airgap
# path; the bundle carries the archive, packaged from cert-manager's module by lab/live/charts.py). What the lab adds is
# this HelmChartConfig, as an operator customises a chart: the images of cert-manager's three components are the
# lab's builds (each started by the lab's own main package, lab/nodes/nodebuild.py), imported with the bundle and never
# pulled, and the startupapicheck Job is off (its image is not built: upstream's cmd/startupapicheck module is not
# served). Its CRDs come with the chart (crds.enabled), not with the bundle.
CERT_MANAGER_CHART = "cert-manager"
CERT_MANAGER_DIGEST = "cert-manager-chart.sha256"  # the archive's digest, which the lab site pins (inventories/lab)
CHARTS = CACHE.parent / "charts"  # packaged chart archives (outside CACHE: prune() keeps only bundles there)


def cert_manager_chart_config(tag: str) -> str:
    """HelmChartConfig kube-system/cert-manager: the lab's images (tagged tag, the chart's appVersion) and no
    startupapicheck."""
    values: dict = {"startupapicheck": {"enabled": False}}
    for path, repository in nodeimages.CERT_MANAGER_REPOSITORIES.items():
        node = values
        for key in path.split("."):
            node = node.setdefault(key, {})
        node.update(repository=repository, tag=tag, pullPolicy="Never")
    doc = {
        "apiVersion": "helm.cattle.io/v1",
        "kind": "HelmChartConfig",
        "metadata": {"name": CERT_MANAGER_CHART, "namespace": "kube-system"},
        "spec": {"valuesContent": json.dumps(values, indent=1, sort_keys=True) + "\n"},
    }
    return json.dumps(doc, indent=1) + "\n"


def bundled_crds(cached: list[tuple[str, Path]]) -> list[Path]:
    """The CRD files the bundle's server applies at start: every chart's but cert-manager's, which its chart brings
    (helm refuses to install over CRDs it does not own)."""
    return [path for label, path in cached if not label.startswith(CERT_MANAGER_CHART + " ")]


def inputs_key(bin_dir: Path, images_archive: Path, crd_files: list[Path], charts: list[Path] = ()) -> str:
    h = hashlib.sha256()
    h.update(HEADER.encode())
    h.update(STANDIN.read_bytes())
    h.update(Path(__file__).read_bytes())
    h.update(str(bin_dir).encode())
    h.update(str(images_archive).encode())
    for path in [*crd_files, *charts]:
        h.update(path.read_bytes())
    return h.hexdigest()[:12]


def k3s_version() -> str:
    return read_pin("k3s_version")


KEEP = 2  # bundles kept (each about 1.1 GB with its image tarball); older ones are removed after a build


def prune(keep: int = KEEP) -> None:
    bundles = sorted((p for p in CACHE.iterdir() if p.is_dir() and not p.is_symlink()), key=lambda p: p.stat().st_mtime)
    for old in bundles[:-keep] if keep else bundles:
        if old.resolve() != (CACHE / "current").resolve():
            shutil.rmtree(old, ignore_errors=True)
            log(f"removed the old bundle {old.name}")


def build() -> Path:
    started = time.monotonic()
    labctl.ensure_host_packages()  # podman, debootstrap, zstd: installed with apt-get when missing, and named
    bin_dir = nodebuild.build(k3s_version())
    archive = nodeimages.build(bin_dir)
    refs = json.loads((archive.parent / "images.json").read_text())
    crd_files = bundled_crds(crds.cached())
    chart = charts.package_chart(CERT_MANAGER_CHART, CHARTS / "archives", CHARTS / "work")
    out = CACHE / inputs_key(bin_dir, archive, crd_files, [chart])
    if (out / f"sha256sum-{ARCH}.txt").exists():
        log(f"cached: {out}")
        point_current(out)
        return out
    missing = [b for b in PAYLOAD_BINARIES if not (bin_dir / b).is_file()]
    if missing:
        raise BundleError(
            f"the node build in {bin_dir} lacks {', '.join(missing)}: run `python -m lab.nodes.nodebuild build`"
        )
    partial = out.with_name(out.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    stage = partial / "payload"
    (stage / "bin").mkdir(parents=True)
    for name in PAYLOAD_BINARIES:
        shutil.copy2(bin_dir / name, stage / "bin" / name)
    shutil.copy2(STANDIN, stage / "k3s_standin.py")
    (stage / "sandbox-image").write_text(refs["pause"] + "\n")
    manifests = stage / "manifests"
    manifests.mkdir()
    (manifests / "coredns.json").write_text(coredns_manifest(refs["coredns"]))
    if "traefik" not in refs:
        raise BundleError(
            "the node images lack Traefik (lab/nodes/nodeimages.py): the node build has no traefik binary"
        )
    (manifests / "traefik.json").write_text(traefik_manifest(refs["traefik"]))
    missing_images = [r for r in (*nodeimages.CERT_MANAGER_ROLES, nodeimages.KLIPPER_HELM_ROLE) if r not in refs]
    if missing_images:
        raise BundleError(f"the node images lack {', '.join(missing_images)} (lab/nodes/nodeimages.py): rebuild them")
    chart_tag = chart.name.removeprefix(CERT_MANAGER_CHART + "-").removesuffix(".tgz")
    (manifests / "cert-manager-config.json").write_text(cert_manager_chart_config(chart_tag))
    for i, path in enumerate(crd_files):
        shutil.copy2(path, manifests / f"crd-{i:02d}-{path.name}")
    payload = partial / "payload.tar.zst"
    with tarfile.open(partial / "payload.tar", "w", format=tarfile.PAX_FORMAT) as tar:
        tar.add(stage, arcname=".")
    subprocess.run(["zstd", "-q", "-T0", "-3", "--rm", str(partial / "payload.tar"), "-o", str(payload)], check=True)
    k3s = partial / "k3s"
    with k3s.open("wb") as f:
        f.write(header(k3s_version(), nodeimages.sha256_file(payload)))
        with payload.open("rb") as src:
            shutil.copyfileobj(src, f, 1 << 20)
    k3s.chmod(0o755)
    images = partial / f"k3s-airgap-images-{ARCH}.tar"
    try:
        images.hardlink_to(archive)
    except OSError:
        shutil.copy2(archive, images)
    (partial / f"sha256sum-{ARCH}.txt").write_text(
        "".join(f"{nodeimages.sha256_file(p)}  {p.name}\n" for p in (k3s, images))
    )
    shutil.copy2(chart, partial / chart.name)  # for K3s's static charts (the collection's airgap directory)
    shutil.copy2(chart.with_name(chart.name + ".sha256"), partial / CERT_MANAGER_DIGEST)
    payload.unlink()
    shutil.rmtree(stage)
    shutil.rmtree(out, ignore_errors=True)
    partial.rename(out)
    point_current(out)
    prune()
    log(f"bundle in {time.monotonic() - started:.0f}s: {out} (k3s {(out / 'k3s').stat().st_size >> 20} MiB)")
    return out


def point_current(out: Path) -> None:
    current = CACHE / "current"
    tmp = CACHE / "current.tmp"
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(out.name)
    tmp.replace(current)


def current() -> Path:
    link = CACHE / "current"
    if not link.exists():
        raise BundleError("no lab bundle built yet: run `make lab-bundle` (python -m lab.nodes.k3sbundle build)")
    return link.resolve()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("cmd", choices=("build", "path"))
    args = parser.parse_args(argv)
    try:
        print(build() if args.cmd == "build" else current())
    except (
        BundleError,
        PinError,
        kubebuild.BuildError,
        nodeimages.ImageError,
        labctl.LabError,
        subprocess.CalledProcessError,
    ) as exc:
        print(f"[k3sbundle] ERROR: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
