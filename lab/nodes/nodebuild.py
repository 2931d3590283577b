"""Build the node components K3s bundles from their Go modules, for real kubelets in the lab's podman nodes.

    python -m lab.nodes.nodebuild build [--k3s-version vX.Y.Z+k3sN]
                                          build (or find cached) binaries, print their directory
    python -m lab.nodes.nodebuild path    print the directory the current recipe would use
    python -m lab.nodes.nodebuild build|path --part NAME
                                          the same for one component alone (the gateway tests build only
                                          `traefik`); each component is built once into
                                          .cache/node/parts/<its own key>, which the whole build reuses

K3s itself, and the forks its go.mod swaps in for Kubernetes and containerd, are refused by the Go module
proxy (see kubebuild.py). This tool builds the same components from the upstream modules the forks are based
on, at the versions K3s v1.36.4+k3s1 carries where those could be established (the sources are named next to
each version below), or the nearest the proxy serves. The last line of `build` is the absolute path of
.cache/node/<recipe-key>/bin, which holds static linux/amd64 executables (CGO_ENABLED=0, -trimpath, -s -w):

  * kubelet, kube-proxy, kubectl from k8s.io/kubernetes at the Kubernetes version of `k3s_version`, with the
    replaces and version flags kubebuild derives; kube-apiserver, kube-controller-manager, kube-scheduler and
    etcd copied from kubebuild's output (kubebuild.build);
  * containerd, containerd-shim-runc-v2, ctr (github.com/containerd/containerd/v2);
  * the CNI plugins bridge, host-local, loopback, portmap (github.com/containernetworking/plugins);
  * flanneld (github.com/flannel-io/flannel's main.go without its udp backend, cgo-only on amd64, and its
    tencentvpc backend, whose SDK the proxy refuses; K3s registers neither) and coredns (github.com/coredns/coredns);
  * traefik, the proxy K3s deploys as its ingress controller (github.com/traefik/traefik/v3 at the release K3s's
    Traefik chart runs), built inside a copy of its module with named omissions: no ACME DNS-challenge providers
    (their cloud SDKs are refused by the proxy), no dashboard web UI (not in the module), and a local copy of its
    nested dynamic/ext module (not served; empty extension structs upstream);
  * helm-controller (github.com/k3s-io/helm-controller at the release K3s embeds, lab/live/crds.py's K3S_EMBEDDED),
    unchanged: K3s runs it inside its server process, the lab's node runs it as a separate process;
  * cert-manager-controller, cert-manager-webhook, cert-manager-cainjector: cert-manager's code
    (github.com/cert-manager/cert-manager at the collection's cert_manager_chart_version) built inside a copy of
    its module with the LAB'S OWN main packages (lab/nodes/certmanager/{controller,webhook,cainjector}, written there
    as cmd/aiinfra-lab/<dir>): upstream's mains live in nested modules .../cmd/<component>, which the module zip
    leaves out and the proxy does not serve. The controller main starts cert-manager's own Certificate,
    CertificateRequest (approver, CA, SelfSigned), Issuer and ClusterIssuer controllers, not ACME, Vault, Venafi,
    the CSR signers or the shims; the webhook and cainjector mains run upstream's webhook server and injectors;
  * pause (lab/nodes/programs/pause: the lab's Go build of the pause container's behaviour, not the upstream C binary);
  * aiinfra-lab-device-plugin (lab/nodes/programs/deviceplugin: a STAND-IN NVIDIA device plugin, no GPU);
  * aiinfra-lab-supervisor (lab/nodes/programs/supervisor: a STAND-IN for K3s's supervisor on port 6443: /static/ served
    anonymously, everything else proxied to kube-apiserver);
  * versions.json: per binary, {"module", "version", "k3s_carries", "note"}.

The recipe (versions, flags, Go version, kubebuild's key, a digest of lab/nodes/programs) is hashed into the directory
name; a second run builds nothing and says "cached". Only the standard library is used.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import lab
from lab import ROOT
from lab.live import crds, kubebuild
from lab.live.kubebuild import BuildError
from lab.pins import PinError, read_pin

CACHE = ROOT / ".cache" / "node"
HERE = Path(__file__).resolve().parent  # lab/nodes
NODE_SOURCES = HERE / "programs"
LDFLAGS = "-s -w"
BUILD_FLAGS = ("-trimpath",)
RECIPE_VERSION = 1  # bump when the build steps below change

# What K3s v1.36.4+k3s1 carries, and where that was read (sources outside this repository, found with a code
# search; the forks are refused by the proxy, so the upstream release each fork is based on is built):
#  * containerd: github.com/k3s-io/containerd/v2 v2.3.4-k3s1.36 (K3s v1.36.4+k3s1 release notes, quoted in
#    changelogs/fragments/12-current-releases-serving-plan.yml; a v1.36.4+k3s1 node reports
#    containerd://2.3.4-k3s1.36). Upstream v2.3.4 is served.
#  * CNI plugins: k3s-io/plugins v1.9.1-k3s1 (VERSION_CNIPLUGINS in K3s's scripts/version.sh of 2026).
#  * flannel: v0.28.4 in K3s v1.36.0+k3s1's release notes and in K3s main's go.mod (Kubernetes 1.37.0-rc.1
#    replaces); no source names v1.36.4's, so k3s_carries stays null.
#  * CoreDNS: rancher/mirrored-coredns-coredns:1.14.6 observed on a v1.36.4+k3s1 cluster.
#  * etcd: k3s-io/etcd v3.6.14-k3s1 (release notes, as above); kubebuild builds the version Kubernetes needs.
CONTAINERD = ("github.com/containerd/containerd/v2", "v2.3.4", "v2.3.4-k3s1.36")
CNI_PLUGINS = ("github.com/containernetworking/plugins", "v1.9.1", "v1.9.1-k3s1")
FLANNEL = ("github.com/flannel-io/flannel", "v0.28.4", None)
# flanneld is flannel's own main.go, built without two of its backend registrations: udp, whose amd64 code needs
# cgo (undefined: runCProxy with CGO_ENABLED=0), and tencentvpc, whose SDK
# github.com/tencentcloud/tencentcloud-sdk-go/tencentcloud/common@v1.3.79 the proxy refuses ("403 Forbidden: This
# module version is not available"). K3s, which embeds flannel, registers neither (vxlan, host-gw, wireguard,
# extension, ipsec are kept).
FLANNEL_DROPPED = ("pkg/backend/udp", "pkg/backend/tencentvpc")
COREDNS = ("github.com/coredns/coredns", "v1.14.6", "v1.14.6")
# Traefik: the release K3s installs from its embedded chart (lab/live/crds.py's K3S_EMBEDDED, which the lab's Traefik
# CRDs follow too; v3.7.8 for K3s v1.36.4+k3s1). Built inside a copy of its module (its go.mod replaces only apply there) with:
#  * its nested module github.com/traefik/traefik/dynamic/ext, which the go.mod replaces with
#    ./pkg/config/dynamic/ext, a directory the module zip leaves out and the proxy does not serve: the lab's copy
#    (lab/nodes/traefik/ext: the three empty extension structs upstream holds) is written there;
#  * pkg/provider/acme/provider.go without lego's providers/dns, which pulls cloud SDK modules the proxy refuses
#    (akamai, huaweicloud, oci, sacloud, ucloud, yandex, ...): an ACME resolver with a DNS challenge fails with an
#    error saying so; HTTP-01 and TLS-ALPN-01, routing, middlewares, TLS and the providers are Traefik's own code.
#  The dashboard's web UI is not in the module either (webui/static holds only a placeholder; Traefik's release
#  builds it with npm): the API answers, the dashboard pages do not.
TRAEFIK_MODULE = "github.com/traefik/traefik/v3"
TRAEFIK_EXT = ("pkg/config/dynamic/ext", HERE / "traefik" / "ext")
TRAEFIK_EDITS = (
    ("pkg/provider/acme/provider.go", '\t"github.com/go-acme/lego/v5/providers/dns"\n', ""),
    (
        "pkg/provider/acme/provider.go",
        "provider, err = dns.NewDNSChallengeProviderByName(p.DNSChallenge.Provider)",
        'err = fmt.Errorf("DNS challenge provider %q: this Traefik build (aiinfra.k3s lab) has no ACME DNS '
        'providers", p.DNSChallenge.Provider)',
    ),
)
# cert-manager: the release the collection pins (roles/cert_manager/defaults/main.yml, cert_manager_chart_version;
# the proxy serves it). Its controller's main package and the app/options packages it wires the controllers with
# are in the nested module github.com/cert-manager/cert-manager/cmd/controller (make/server.mk builds
# `cd cmd/controller && go build main.go`; its go.mod replaces the main module with ../../): the main module's
# zip leaves cmd/ out, and the proxy answers 404 for .../cmd/controller/@v/<version>.info. So the lab writes its
# own main package (lab/nodes/certmanager/controller: a few of the upstream flags, leader election on the upstream lease,
# the controllers started as upstream's app starts them) into a copy of the main module and builds it there, with
# the module's own go.sum. The controllers are cert-manager's code, registered by the packages the lab's main
# imports (its header lists them).
CERT_MANAGER_MODULE = "github.com/cert-manager/cert-manager"
# The lab's main packages (lab/nodes/certmanager/<dir>) are written into the copy as cmd/aiinfra-lab/<dir>: one nested
# tree, so one digest of lab/nodes/certmanager decides the three binaries.
CERT_MANAGER_MAINS = ("cmd/aiinfra-lab", HERE / "certmanager")
CERT_MANAGER_BINARIES = {  # binary -> directory under lab/nodes/certmanager
    "cert-manager-controller": "controller",
    "cert-manager-webhook": "webhook",
    "cert-manager-cainjector": "cainjector",
}
CERT_MANAGER_BINARY = "cert-manager-controller"
# helm-controller (github.com/k3s-io/helm-controller), which K3s runs inside its server process to apply HelmChart
# resources: the release K3s embeds (lab/live/crds.py's K3S_EMBEDDED, the version its helm.cattle.io CRDs follow too),
# built unchanged inside a copy of its module. Here it is a separate process the node's K3s stand-in starts.
HELM_CONTROLLER_MODULE = "github.com/k3s-io/helm-controller"
# Monitoring and autoscaling (K3s bundles neither: the collection installs kube-prometheus-stack's and KEDA's charts,
# which the lab cannot fetch; lab/nodes/observability.py runs these builds with the lab's own minimal manifests):
#  * prometheus-operator: the release kube-prometheus-stack `monitoring_chart_version` ships (lab/live/crds.py's
#    KUBE_PROMETHEUS_STACK_OPERATOR: v0.95.1 for 93.9.0) is refused by the proxy ("403 Forbidden: This module version
#    is not available", v0.95.0 to v0.95.2 alike), so the newest it serves, v0.94.1, is built. Its go.mod replaces two
#    nested modules with directories the module zip leaves out: pkg/apis/monitoring is served at the same version and
#    copied in; pkg/client is served for no version (404), so it is generated, as upstream's `make k8s-client-gen`
#    does, with k8s.io/code-generator at the k8s.io/client-go version the go.mod requires.
#  * Prometheus: the newest release the proxy serves, 3.16.0 (module v0.316.0; Prometheus's Go module numbers its
#    3.x releases v0.3xx.y). Built with upstream's tags remove_all_sd,enable_kubernetes_sd (only the Kubernetes service
#    discovery, which the operator's configuration uses) and without the web UI's assets (upstream builds them with
#    npm; the API and /metrics answer, the UI pages do not).
#  * KEDA: the release of `autoscaling_chart_version` (the kedacore/keda chart X.Y.Z ships KEDA vX.Y.Z), whose go.mod
#    asks for Go 1.27.4 (fetched as a toolchain module from the proxy), built inside a copy of its module (its replace
#    and exclude apply there) with only the scalers the collection's ScaledObjects use (prometheus) and the
#    resource/cron ones: every scaler of KEDA is in one package, pkg/scalers, which pulls the cloud SDKs of all the
#    others into the build; the trim keeps the files of the four and their cases of the scaler registry.
PROMETHEUS_OPERATOR_MODULE = "github.com/prometheus-operator/prometheus-operator"
PROMETHEUS_OPERATOR_BUILT = "v0.94.1"
PROMETHEUS_OPERATOR_NESTED = (("pkg/apis/monitoring", f"{PROMETHEUS_OPERATOR_MODULE}/pkg/apis/monitoring"),)
# (output directory, API group versions under pkg/apis) of the client upstream generates into its nested pkg/client.
PROMETHEUS_OPERATOR_CLIENT = ("pkg/client", ("monitoring/v1", "monitoring/v1alpha1", "monitoring/v1beta1"))
PROMETHEUS = ("github.com/prometheus/prometheus", "v0.316.0", "3.16.0")
KEDA_MODULE = "github.com/kedacore/keda/v2"
KEDA_TOOLCHAIN = "go1.27.4"
KEDA_SCALERS = ("scaler.go", "cpu_memory_scaler.go", "cron_scaler.go", "prometheus_scaler.go")
KEDA_TRIGGERS = ("cpu", "cron", "memory", "prometheus")
KEDA_EDITS = (
    # Declared in azure_queue_scaler.go, which the trim removes; the prometheus scaler's metric spec uses it.
    (
        "pkg/scalers/prometheus_scaler.go",
        "External: externalMetric, Type: externalMetricType,",
        "External: externalMetric, Type: v2.ExternalMetricSourceType,",
    ),
)
ETCD_K3S = "v3.6.14-k3s1"
LOCAL_PROGRAMS = ("pause", "deviceplugin", "supervisor")  # directories under lab/nodes/programs
CONTROL_PLANE = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "etcd")


class Log:
    """Prints the lines `build` shows; a class so tests can silence it."""

    quiet = False

    @classmethod
    def line(cls, msg: str) -> None:
        if not cls.quiet:
            print(f"[nodebuild] {msg}", flush=True)


@dataclass(frozen=True)
class Component:
    """One thing to build: a module at a version, and the binaries (name -> package) it yields."""

    name: str
    module: str
    version: str
    binaries: dict[str, str]
    k3s_carries: str | None = None
    note: str | None = None
    tags: tuple[str, ...] = ()
    xflags: dict[str, str] = field(default_factory=dict)  # -X package.var=value
    local: str = ""  # directory under lab/nodes/programs for the lab's own programs
    main_file: str = ""  # build this file of the module as a main package of its own (flannel's main.go) ...
    drop_imports: tuple[str, ...] = ()  # ... without these blank imports (module-relative package paths)
    # Build inside a writable copy of the module (its own replaces apply), after these edits: (file, old, new),
    # each old text found exactly once; and a nested module written from a lab directory (module path, source).
    in_module: bool = False
    edits: tuple[tuple[str, str, str], ...] = ()
    nested: tuple[str, Path] | None = None
    # Further steps inside the copy (empty or None where a component has none): other modules the proxy serves,
    # copied in at the component's version (directory, module); Kubernetes clients generated with k8s.io/code-generator
    # (output directory, API group versions under pkg/apis); only some files of one package kept (directory, files:
    # every other non-test .go file there is removed); only some cases of a switch between the TRIGGERS-START and
    # TRIGGERS-END comments (file, cases); a Go toolchain the go.mod asks for (GOTOOLCHAIN).
    served_nested: tuple[tuple[str, str], ...] = ()
    client_gen: tuple[str, tuple[str, ...]] | None = None
    pruned: tuple[str, tuple[str, ...]] | None = None
    kept_cases: tuple[str, tuple[str, ...]] | None = None
    toolchain: str = ""

    def ldflags(self) -> str:
        return " ".join([LDFLAGS, *(f"-X {var}={value}" for var, value in sorted(self.xflags.items()))])

    def steps(self) -> dict:
        """The further steps that are set, for the recipe (a component without them keeps its earlier key)."""
        steps = {
            "served_nested": [list(n) for n in self.served_nested],
            "client_gen": self.client_gen and [self.client_gen[0], list(self.client_gen[1])],
            "pruned": self.pruned and [self.pruned[0], list(self.pruned[1])],
            "kept_cases": self.kept_cases and [self.kept_cases[0], list(self.kept_cases[1])],
            "toolchain": self.toolchain,
        }
        return {key: value for key, value in steps.items() if value}


# ---------------------------------------------------------------- pure functions (unit-tested)


def k3s_fork_version(k3s_version: str) -> str:
    """v1.36.4+k3s1 -> v1.36.4-k3s1, the tag of github.com/k3s-io/kubernetes that release builds."""
    kubebuild.kubernetes_version(k3s_version)  # refuses what is not a K3s tag
    return k3s_version.strip().replace("+", "-")


def kube_xflags(kube_version: str) -> dict[str, str]:
    """The -X flags of kubebuild.version_ldflags (the binaries report their real version), as a dict."""
    words = kubebuild.version_ldflags(kube_version).split()
    return dict(words[i + 1].split("=", 1) for i, word in enumerate(words) if word == "-X")


def nearest_note(k3s_carries: str | None, version: str, why: str) -> str | None:
    """The versions.json note: None where the build is what K3s carries, else what was built instead and why."""
    if k3s_carries == version:
        return None
    return f"nearest served: {version}; {why}"


def k3s_embedded(k3s_version: str, component: str) -> str:
    """The release of `component` a K3s release embeds (lab/live/crds.py's table of K3s's embedded component versions)."""
    try:
        return crds.K3S_EMBEDDED[k3s_version][component]
    except KeyError:
        raise BuildError(
            f"no {component} version known for K3s {k3s_version}: add its embedded component versions to "
            "lab/live/crds.py's K3S_EMBEDDED (from the K3s release notes)"
        ) from None


def traefik_version(k3s_version: str) -> str:
    """The Traefik release a K3s release installs."""
    return k3s_embedded(k3s_version, "traefik")


def helm_controller_version(k3s_version: str) -> str:
    """The helm-controller release a K3s release embeds."""
    return k3s_embedded(k3s_version, "helm-controller")


def cert_manager_version(pin: str) -> str:
    """The cert-manager module version of the cert_manager_chart_version pin (the chart and app versions are the
    same): a vX.Y.Z or the pin is refused."""
    if not pin.startswith("v"):
        raise BuildError(f"cert_manager_chart_version {pin!r} is not vX.Y.Z (roles/cert_manager/defaults/main.yml)")
    return pin


def keda_version(pin: str) -> str:
    """The KEDA module version of the autoscaling_chart_version pin (the kedacore/keda chart X.Y.Z ships vX.Y.Z)."""
    return crds.module_version("same", pin)


def prometheus_operator_wanted(pin: str) -> str:
    """The prometheus-operator release the kube-prometheus-stack chart of monitoring_chart_version ships."""
    try:
        return crds.module_version("kube-prometheus-stack", pin)
    except crds.CrdError as exc:
        raise BuildError(str(exc)) from None


def observability(keda: str, po_wanted: str) -> list[Component]:
    """prometheus-operator, Prometheus and KEDA: what the lab runs in place of the charts it cannot fetch."""
    prom_mod, prom_ver, prom_release = PROMETHEUS
    po_mod, po_ver = PROMETHEUS_OPERATOR_MODULE, PROMETHEUS_OPERATOR_BUILT
    version_pkg = "github.com/prometheus/common/version"
    return [
        Component(
            "prometheus-operator",
            po_mod,
            po_ver,
            {"prometheus-operator": "./cmd/operator", "prometheus-config-reloader": "./cmd/prometheus-config-reloader"},
            None,
            nearest_note(
                po_wanted,
                po_ver,
                f"kube-prometheus-stack's {po_wanted} (the collection's monitoring_chart_version) is refused by the "
                "module proxy; its nested pkg/apis/monitoring module copied in from the proxy, its nested "
                "pkg/client (served for no version) generated with k8s.io/code-generator as upstream's make "
                "k8s-client-gen does",
            ),
            xflags={f"{version_pkg}.Version": po_ver.lstrip("v"), f"{version_pkg}.Revision": f"module-{po_ver}"},
            in_module=True,
            served_nested=PROMETHEUS_OPERATOR_NESTED,
            client_gen=PROMETHEUS_OPERATOR_CLIENT,
        ),
        Component(
            "prometheus",
            prom_mod,
            prom_ver,
            {"prometheus": "./cmd/prometheus"},
            None,
            f"Prometheus {prom_release}, the newest release the module proxy serves (K3s bundles no Prometheus); "
            "only the Kubernetes service discovery (upstream's remove_all_sd,enable_kubernetes_sd tags); no web UI "
            "assets (upstream builds them with npm): the API answers, the UI pages do not",
            tags=("remove_all_sd", "enable_kubernetes_sd"),
            xflags={f"{version_pkg}.Version": prom_release, f"{version_pkg}.Revision": f"module-{prom_ver}"},
            in_module=True,
        ),
        Component(
            "keda",
            KEDA_MODULE,
            keda,
            {"keda": "./cmd/operator", "keda-adapter": "./cmd/adapter"},
            None,
            "the collection's autoscaling_chart_version (K3s bundles no KEDA); only the scalers "
            + ", ".join(KEDA_TRIGGERS)
            + " (the other scalers of KEDA and the cloud SDKs they import are left out), built with Go "
            + KEDA_TOOLCHAIN.removeprefix("go")
            + " as its go.mod asks",
            xflags={f"{KEDA_MODULE}/version.Version": keda},
            in_module=True,
            edits=KEDA_EDITS,
            pruned=("pkg/scalers", KEDA_SCALERS),
            kept_cases=("pkg/scaling/scalers_builder.go", KEDA_TRIGGERS),
            toolchain=KEDA_TOOLCHAIN,
        ),
    ]


def components(k3s_version: str, etcd_version: str, sources: str, cm_version: str | None = None) -> list[Component]:
    """Everything the bin directory holds, in build order (cheap first, containerd last). A binary whose
    package is "" is copied from kubebuild's output, not built here."""
    kube = kubebuild.kubernetes_version(k3s_version)
    fork = k3s_fork_version(k3s_version)
    kube_note = nearest_note(
        fork, kube, f"K3s builds its fork github.com/k3s-io/kubernetes {fork}, refused by the module proxy"
    )
    local = f"local-{sources[:12]}"
    cd_mod, cd_ver, cd_k3s = CONTAINERD
    cni_mod, cni_ver, cni_k3s = CNI_PLUGINS
    fl_mod, fl_ver, fl_k3s = FLANNEL
    dns_mod, dns_ver, dns_k3s = COREDNS
    tr_mod, tr_ver = TRAEFIK_MODULE, traefik_version(k3s_version)
    hc_mod, hc_ver = HELM_CONTROLLER_MODULE, helm_controller_version(k3s_version)
    cm_ver = cm_version or cert_manager_version(read_pin("cert_manager_chart_version"))
    return [
        Component(
            "control-plane",
            kubebuild.KUBERNETES_MODULE,
            kube,
            {name: "" for name in CONTROL_PLANE[:3]},
            fork,
            kube_note,
        ),
        Component(
            "etcd",
            kubebuild.ETCD_MODULE,
            etcd_version,
            {"etcd": ""},
            ETCD_K3S,
            nearest_note(
                ETCD_K3S,
                etcd_version,
                f"the etcd Kubernetes {kube} requires, built by kubebuild; K3s carries its fork github.com/k3s-io/etcd",
            ),
        ),
        Component(
            "kubernetes",
            kubebuild.KUBERNETES_MODULE,
            kube,
            {name: f"{kubebuild.KUBERNETES_MODULE}/cmd/{name}" for name in ("kubelet", "kube-proxy", "kubectl")},
            fork,
            kube_note,
            xflags=kube_xflags(kube),
        ),
        Component(
            "pause",
            "aiinfra.k3s/lab/pause",
            local,
            {"pause": "."},
            None,
            "the lab's Go build of the pause container's behaviour; K3s's sandbox image is rancher/mirrored-pause",
            local="pause",
        ),
        Component(
            "deviceplugin",
            "aiinfra.k3s/lab/deviceplugin",
            local,
            {"aiinfra-lab-device-plugin": "."},
            None,
            "stand-in NVIDIA device plugin (no GPU); K3s bundles no device plugin",
            local="deviceplugin",
        ),
        Component(
            "supervisor",
            "aiinfra.k3s/lab/supervisor",
            local,
            {"aiinfra-lab-supervisor": "."},
            None,
            "STAND-IN for K3s's supervisor (the lab's own program, standard library only): the node's port 6443, "
            "/static/ served anonymously from a directory, everything else proxied to kube-apiserver with "
            "request-header authentication; none of K3s's /cacerts, /v1-k3s or join endpoints",
            local="supervisor",
        ),
        Component(
            "cni-plugins",
            cni_mod,
            cni_ver,
            {
                "bridge": f"{cni_mod}/plugins/main/bridge",
                "host-local": f"{cni_mod}/plugins/ipam/host-local",
                "loopback": f"{cni_mod}/plugins/main/loopback",
                "portmap": f"{cni_mod}/plugins/meta/portmap",
            },
            cni_k3s,
            nearest_note(cni_k3s, cni_ver, "upstream release of K3s's fork github.com/k3s-io/plugins"),
            xflags={f"{cni_mod}/pkg/utils/buildversion.BuildVersion": cni_ver},
        ),
        Component(
            "flannel",
            fl_mod,
            fl_ver,
            {"flanneld": "."},
            fl_k3s,
            nearest_note(
                fl_k3s,
                fl_ver,
                "K3s v1.36.0+k3s1 and K3s main carry v0.28.4, v1.36.4's was not found; flannel's main.go without "
                "the udp backend (cgo only on amd64) and the tencentvpc backend (its SDK is refused by the proxy), "
                "neither of which K3s registers",
            ),
            xflags={f"{fl_mod}/pkg/version.Version": fl_ver},
            main_file="main.go",
            drop_imports=FLANNEL_DROPPED,
        ),
        Component(
            "coredns",
            dns_mod,
            dns_ver,
            {"coredns": dns_mod},
            dns_k3s,
            nearest_note(dns_k3s, dns_ver, "the CoreDNS release K3s deploys"),
        ),
        Component(
            "traefik",
            tr_mod,
            tr_ver,
            {"traefik": "./cmd/traefik"},
            tr_ver,
            "built without the ACME DNS-challenge providers (their cloud SDKs are refused by the module proxy) and "
            "without the dashboard's web UI (Traefik's release builds it with npm into webui/static, empty in the "
            "module), with the lab's copy of its nested dynamic/ext module (not served)",
            xflags={f"{tr_mod}/pkg/version.Version": tr_ver},
            in_module=True,
            edits=TRAEFIK_EDITS,
            nested=TRAEFIK_EXT,
        ),
        Component(
            "helm-controller",
            hc_mod,
            hc_ver,
            {"helm-controller": "."},
            hc_ver,
            "K3s runs it in-process; here a separate process (the module's own main, unchanged)",
            xflags={f"{hc_mod}/pkg/version.Version": hc_ver},
            in_module=True,
        ),
        Component(
            "cert-manager",
            CERT_MANAGER_MODULE,
            cm_ver,
            {name: f"./{CERT_MANAGER_MAINS[0]}/{where}" for name, where in CERT_MANAGER_BINARIES.items()},
            None,
            "the collection's cert_manager_chart_version (K3s bundles no cert-manager); cert-manager's own code "
            # lab/certmanager is lab/nodes/certmanager now; the note is part of the parts' cache key, so its text
            # keeps the old path until the next change that rebuilds cert-manager anyway.
            "started by the LAB'S OWN main packages (lab/certmanager/{controller,webhook,cainjector}), as upstream's "
            "cmd/* nested modules are not served by the proxy: the controller main starts the Certificate, "
            "CertificateRequest (approver, CA, SelfSigned), Issuer and ClusterIssuer controllers, not ACME, Vault, "
            "Venafi, the CSR signers or the shims (the chart's ACME flags are accepted and unused); the webhook "
            "(admission, conversion, dynamic serving CA) and the cainjector's injectors are upstream's packages "
            "behind the lab's flag parsing; no --config file, no cainjector pprof or metrics TLS",
            xflags={"main.Version": cm_ver},
            in_module=True,
            nested=CERT_MANAGER_MAINS,
        ),
        *observability(
            keda_version(read_pin("autoscaling_chart_version")),
            prometheus_operator_wanted(read_pin("monitoring_chart_version")),
        ),
        Component(
            "containerd",
            cd_mod,
            cd_ver,
            {name: f"{cd_mod}/cmd/{name}" for name in ("containerd", "containerd-shim-runc-v2", "ctr")},
            cd_k3s,
            nearest_note(
                cd_k3s, cd_ver, "upstream release of K3s's fork github.com/k3s-io/containerd/v2 (refused by the proxy)"
            ),
            tags=("no_btrfs",),
            xflags={
                f"{cd_mod}/version.Version": cd_ver,
                f"{cd_mod}/version.Package": cd_mod,
            },
        ),
    ]


def binaries(comps: list[Component]) -> list[str]:
    """Every executable the bin directory must hold."""
    return [name for comp in comps for name in comp.binaries]


def versions_json(comps: list[Component]) -> dict[str, dict[str, str | None]]:
    """versions.json: for each binary, the module and version it was built from and what K3s carries."""
    return {
        name: {"module": comp.module, "version": comp.version, "k3s_carries": comp.k3s_carries, "note": comp.note}
        for comp in comps
        for name in comp.binaries
    }


def recipe(comps: list[Component], go_version: str, kube_key: str) -> dict:
    """What decides the binaries: change any of it and the directory changes."""
    return {
        "recipe": RECIPE_VERSION,
        "cgo": "0",
        "goos": "linux",
        "goarch": "amd64",
        "flags": list(BUILD_FLAGS),
        "go": go_version,
        "kubebuild": kube_key,
        "versions": versions_json(comps),  # versions.json is part of the output
        "components": {
            c.name: [
                c.module,
                c.version,
                sorted(c.binaries.items()),
                list(c.tags),
                c.ldflags(),
                c.main_file,
                list(c.drop_imports),
                [list(e) for e in c.edits],
                c.nested and [c.nested[0], sources_digest(read_tree(c.nested[1]))],
            ]
            + ([c.steps()] if c.steps() else [])
            for c in comps
        },
    }


def recipe_key(kube_version: str, recipe_dict: dict) -> str:
    digest = hashlib.sha256(json.dumps(recipe_dict, sort_keys=True).encode()).hexdigest()
    return f"{kube_version}-{digest[:12]}"


def sources_digest(files: dict[str, bytes]) -> str:
    """A digest of the lab's own Go programs ({relative path: content}), so editing them rebuilds."""
    h = hashlib.sha256()
    for rel in sorted(files):
        h.update(rel.encode() + b"\0" + files[rel] + b"\0")
    return h.hexdigest()


def without_imports(source: str, module: str, packages: tuple[str, ...]) -> str:
    """A Go file without the blank imports `_ "MODULE/PACKAGE"` of packages; each must be there exactly once."""
    lines = source.splitlines(keepends=True)
    for package in packages:
        wanted = f'_ "{module}/{package}"'
        hits = [i for i, line in enumerate(lines) if line.strip() == wanted]
        if len(hits) != 1:
            raise BuildError(f"expected one import {wanted} in the upstream main package, found {len(hits)}")
        del lines[hits[0]]
    return "".join(lines)


def edited(source: str, path: str, edits: tuple[tuple[str, str, str], ...]) -> str:
    """source with each edit (file, old, new) of path applied; each old text must be there exactly once."""
    for file, old, new in edits:
        if file != path:
            continue
        if source.count(old) != 1:
            raise BuildError(f"expected {old.strip()!r} once in the upstream {path}, found {source.count(old)}")
        source = source.replace(old, new)
    return source


SWITCH_START, SWITCH_END = "// TRIGGERS-START", "// TRIGGERS-END"


def with_cases_only(source: str, cases: tuple[str, ...]) -> str:
    """source with only the `case "NAME":` clauses of `cases` (and the default) left in the switch between the
    TRIGGERS-START and TRIGGERS-END comments; the default's error names the triggers this build has. Each case of
    `cases` must be there, as must both comments, exactly once."""
    for marker in (SWITCH_START, SWITCH_END):
        if source.count(marker) != 1:
            raise BuildError(f"expected {marker!r} once in the upstream scaler registry, found {source.count(marker)}")
    head, rest = source.split(SWITCH_START, 1)
    body, tail = rest.split(SWITCH_END, 1)
    clauses, current = [], None
    for line in body.splitlines(keepends=True):
        stripped = line.strip()
        if stripped.startswith(("case ", "default:")):
            current = [stripped, [line]]
            clauses.append(current)
        elif current is not None and not stripped.startswith("//"):
            current[1].append(line)
        elif current is None:
            clauses.append([None, [line]])  # the switch statement itself
    wanted = {f'case "{case}":' for case in cases}
    found = {c[0] for c in clauses} & wanted
    if found != wanted:
        raise BuildError(f"the upstream scaler registry has no {', '.join(sorted(wanted - found))}")
    kept = []
    for label, lines in clauses:
        if label is None or label in wanted:
            kept += lines
        elif label == "default:":
            kept.append(lines[0])
            kept.append(
                '\t\treturn nil, fmt.Errorf("no scaler found for type: %s (this KEDA build (aiinfra.k3s lab) has only '
                + ", ".join(sorted(cases))
                + ')", triggerType)\n'
            )
            kept.append("\t}\n\t")
    return head + SWITCH_START + "".join(kept) + SWITCH_END + tail


def pruned_files(names: list[str], kept: tuple[str, ...]) -> list[str]:
    """The Go files of one package directory to remove: every non-test .go file but the kept ones (all of which
    must be there)."""
    missing = sorted(set(kept) - set(names))
    if missing:
        raise BuildError(f"the upstream package has no {', '.join(missing)}")
    return sorted(n for n in names if n.endswith(".go") and not n.endswith("_test.go") and n not in kept)


def client_gen_commands(module: str, tools: Path, out_dir: str, groups: tuple[str, ...]) -> list[list[str]]:
    """The four k8s.io/code-generator runs of upstream's `make k8s-client-gen` for API groups under pkg/apis:
    apply configurations, clientset, listers, informers, written into out_dir (the nested module's directory)."""
    base = f"{module}/{out_dir}"
    common = ["--go-header-file", ".header", "--v=1", "--logtostderr"]
    packages = [f"{module}/pkg/apis/{g}" for g in groups]
    return [
        [str(tools / "applyconfiguration-gen"), *common, "--output-pkg", f"{base}/applyconfiguration",
         "--output-dir", f"{out_dir}/applyconfiguration", *packages],
        [str(tools / "client-gen"), *common, "--apply-configuration-package", f"{base}/applyconfiguration",
         "--input-base", f"{module}/pkg/apis", "--clientset-name", "versioned", "--output-pkg", base,
         "--output-dir", out_dir, *(arg for g in groups for arg in ("--input", g))],
        [str(tools / "lister-gen"), *common, "--output-pkg", f"{base}/listers", "--output-dir", f"{out_dir}/listers",
         *packages],
        [str(tools / "informer-gen"), *common, "--versioned-clientset-package", f"{base}/versioned",
         "--listers-package", f"{base}/listers", "--output-pkg", f"{base}/informers",
         "--output-dir", f"{out_dir}/informers", *packages],
    ]  # fmt: skip


CODE_GENERATORS = ("applyconfiguration-gen", "client-gen", "lister-gen", "informer-gen")


def build_args(comp: Component, out: Path, name: str, package: str) -> list[str]:
    """The `go build` arguments for one binary of a component."""
    args = ["build", *BUILD_FLAGS]
    if comp.tags:
        args += ["-tags", ",".join(comp.tags)]
    return [*args, "-ldflags", comp.ldflags(), "-o", str(out / name), package]


# ---------------------------------------------------------------- process boundary


def read_sources() -> dict[str, bytes]:
    """The Go files of the lab's own programs (lab/nodes/programs holds other helpers' files too: they do not count)."""
    return {
        str(path.relative_to(NODE_SOURCES)): path.read_bytes()
        for program in LOCAL_PROGRAMS
        for path in sorted((NODE_SOURCES / program).rglob("*"))
        if path.is_file() and path.name.endswith((".go", "go.mod", "go.sum"))
    }


def read_tree(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


def plan(k3s_version: str) -> tuple[list[Component], Path]:
    """The components and the bin directory the current recipe uses (asks the proxy/module cache for etcd)."""
    kube = kubebuild.kubernetes_version(k3s_version)
    kube_bin = kubebuild.bin_dir(k3s_version)
    comps = components(k3s_version, kubebuild.etcd_version_for(kube), sources_digest(read_sources()))
    key = recipe_key(kube, recipe(comps, kubebuild.go_version(), kube_bin.parent.name))
    return comps, CACHE / key / "bin"


def part_key(comp: Component, go_version: str) -> str:
    """A component's own cache key: what decides its binaries alone (not the other components, not kubebuild's)."""
    digest = hashlib.sha256(json.dumps(recipe([comp], go_version, ""), sort_keys=True).encode()).hexdigest()
    return f"{comp.name}-{comp.version}-{digest[:12]}"


def part_dir(k3s_version: str, name: str) -> Path:
    """Where the component `name` of the current recipe is (or would be) built on its own: .cache/node/parts/KEY."""
    comps, _out = plan(k3s_version)
    (comp,) = [c for c in comps if c.name == name]
    return CACHE / "parts" / part_key(comp, kubebuild.go_version())


def module_workdir(comp: Component, work: Path, replaces: dict[str, str], go_min: str) -> Path:
    work.mkdir(parents=True, exist_ok=True)
    (work / "go.mod").write_text(
        kubebuild.render_gomod(f"aiinfra.k3s/nodebuild/{comp.name}", go_min, {comp.module: comp.version}, replaces)
    )
    kubebuild.go("mod", "download", comp.module, cwd=work)
    return work


def build_module(comp: Component, work: Path, out: Path) -> None:
    """A component from an upstream module: a scratch module requiring it, with its replaces made published."""
    info = kubebuild.module_info(comp.module, comp.version)
    gomod = Path(info["GoMod"]).read_text()
    go_min, _requires, _replaces = kubebuild.parse_gomod(gomod)
    fallback = kubebuild.staging_version(comp.version) if comp.module == kubebuild.KUBERNETES_MODULE else None
    replaces = kubebuild.published_replaces(gomod, fallback)
    module_workdir(comp, work, replaces, go_min)
    if comp.main_file:
        source = (Path(info["Dir"]) / comp.main_file).read_text()
        (work / comp.main_file).write_text(without_imports(source, comp.module, comp.drop_imports))
    for name, package in comp.binaries.items():
        kubebuild.go(*build_args(comp, out, name, package), cwd=work)


def copy_module(source: str, target: Path) -> None:
    """A writable copy of a module directory (the module cache is read-only)."""
    shutil.copytree(source, target)
    for path in [target, *target.rglob("*")]:
        path.chmod(path.stat().st_mode | 0o200)


def build_in_module(comp: Component, work: Path, out: Path) -> None:
    """A component built inside a writable copy of its module directory, with its edits and nested module."""
    info = kubebuild.module_info(comp.module, comp.version)
    shutil.rmtree(work, ignore_errors=True)
    copy_module(info["Dir"], work)
    for file in sorted({e[0] for e in comp.edits}):
        target = work / file
        target.write_text(edited(target.read_text(), file, comp.edits))
    if comp.nested:
        where, source = comp.nested
        shutil.rmtree(work / where, ignore_errors=True)
        shutil.copytree(source, work / where)
    for where, module in comp.served_nested:
        shutil.rmtree(work / where, ignore_errors=True)
        copy_module(kubebuild.module_info(module, comp.version)["Dir"], work / where)
    if comp.toolchain:
        wanted = "go" + kubebuild.parse_gomod((work / "go.mod").read_text())[0]
        if wanted != comp.toolchain:
            raise BuildError(
                f"its go.mod asks for {wanted}, the lab builds it with {comp.toolchain}: set the toolchain in "
                "lab/nodes/nodebuild.py to the go.mod's"
            )
    if comp.pruned:
        where, kept = comp.pruned
        for name in pruned_files(sorted(p.name for p in (work / where).iterdir()), kept):
            (work / where / name).unlink()
    if comp.kept_cases:
        file, cases = comp.kept_cases
        (work / file).write_text(with_cases_only((work / file).read_text(), cases))
    if comp.client_gen:
        generate_clients(comp, work)
    for name, package in comp.binaries.items():
        kubebuild.go(*build_args(comp, out, name, package), cwd=work)
    shutil.rmtree(work)  # the copy of the module is only needed for the build


def generate_clients(comp: Component, work: Path) -> None:
    """The nested client module the go.mod replaces with a directory the zip leaves out, generated as upstream
    does, by k8s.io/code-generator at the go.mod's k8s.io/client-go version (installed beside the copy)."""
    out_dir, groups = comp.client_gen
    go_min, requires, _replaces = kubebuild.parse_gomod((work / "go.mod").read_text())
    generator = requires.get("k8s.io/client-go")
    if not generator:
        raise BuildError("the go.mod requires no k8s.io/client-go: no code-generator version to use")
    tools = work.parent / f"{comp.name}-tools-{generator}"
    if not all((tools / name).is_file() for name in CODE_GENERATORS):
        before = os.environ.get("GOBIN")
        os.environ["GOBIN"] = str(tools)
        try:
            with tempfile.TemporaryDirectory() as tmp:
                tools_at = (f"k8s.io/code-generator/cmd/{n}@{generator}" for n in CODE_GENERATORS)
                kubebuild.go("install", *tools_at, cwd=Path(tmp))
        finally:
            os.environ.pop("GOBIN", None)
            if before is not None:
                os.environ["GOBIN"] = before
    shutil.rmtree(work / out_dir, ignore_errors=True)
    (work / out_dir).mkdir(parents=True)
    (work / out_dir / "go.mod").write_text(f"module {comp.module}/{out_dir}\n\ngo {go_min}\n")
    for cmd in client_gen_commands(comp.module, tools, out_dir, groups):
        proc = subprocess.run(cmd, cwd=work, env=kubebuild.go_env(), capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise BuildError(f"{Path(cmd[0]).name} failed: {kubebuild.proc_tail(proc.stderr)}")


def build_local(comp: Component, work: Path, out: Path) -> None:
    """One of the lab's own programs, built from a copy so the go command never writes into the repository."""
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(NODE_SOURCES / comp.local, work)
    for name, package in comp.binaries.items():
        kubebuild.go(*build_args(comp, out, name, package), cwd=work)


def copy_control_plane(k3s_version: str, names: list[str], out: Path) -> None:
    source = kubebuild.build(k3s_version)
    for name in names:
        shutil.copy2(source / name, out / name)


def build(k3s_version: str, part: str | None = None) -> Path:
    """Every binary of the recipe in one directory (or, with part, only that component's, in its own)."""
    os.environ.update(GOOS="linux", GOARCH="amd64")  # kubebuild.go_env() copies os.environ
    CACHE.mkdir(parents=True, exist_ok=True)
    wanted = []
    if part is not None:
        comps, _out = plan(k3s_version)
        wanted = [c for c in comps if c.name == part and all(c.binaries.values())]
        if not wanted:
            raise BuildError(f"no component {part!r} built here; one of {', '.join(c.name for c in comps[3:])}")
        # A part built already is read without the lock: _build_part renames it into place whole, and the whole
        # recipe's build (make builds, alongside make test's parts) may hold the lock long after it built this part.
        done = built_part(wanted[0], kubebuild.go_version())
        if done is not None:
            return done
    with lab.build_lock(CACHE, Log.line, "node components"):  # one build at a time: there are only two cores
        if part is None:
            return _build_locked(k3s_version)
        return _build_part(wanted[0], kubebuild.go_version())


def built_part(comp: Component, go_version: str) -> Path | None:
    """The directory of the component's binaries when all of them are built, else None."""
    out = CACHE / "parts" / part_key(comp, go_version)
    return out if all((out / name).is_file() for name in comp.binaries) else None


def _build_part(comp: Component, go_version: str) -> Path:
    """One component's binaries in .cache/node/parts/KEY (built once; the bundle's build reuses them)."""
    done = built_part(comp, go_version)
    if done is not None:
        return done
    out = CACHE / "parts" / part_key(comp, go_version)
    tmp_out = out.with_name(out.name + ".partial")
    shutil.rmtree(tmp_out, ignore_errors=True)
    tmp_out.mkdir(parents=True)
    started = time.monotonic()
    before = os.environ.get("GOTOOLCHAIN")
    if comp.toolchain:
        os.environ["GOTOOLCHAIN"] = comp.toolchain  # kubebuild.go_env() keeps a GOTOOLCHAIN that is set
    try:
        builder = build_local if comp.local else build_in_module if comp.in_module else build_module
        builder(comp, CACHE / "parts" / "work" / comp.name, tmp_out)
    except BuildError as exc:
        raise BuildError(f"{comp.name} ({comp.module}@{comp.version}): {exc}") from None
    finally:
        os.environ.pop("GOTOOLCHAIN", None)
        if before is not None:
            os.environ["GOTOOLCHAIN"] = before
    shutil.rmtree(out, ignore_errors=True)
    tmp_out.rename(out)
    Log.line(f"built {comp.name} in {time.monotonic() - started:.0f}s -> {out}")
    return out


def _build_locked(k3s_version: str) -> Path:
    comps, out = plan(k3s_version)
    names = binaries(comps)
    if all((out / name).is_file() for name in names) and (out / "versions.json").is_file():
        Log.line(f"cached: {out} ({len(names)} binaries); nothing built")
        return out
    tmp_out = out.with_name("bin.partial")
    shutil.rmtree(tmp_out, ignore_errors=True)
    tmp_out.mkdir(parents=True)
    total = time.monotonic()
    copied = [name for comp in comps for name, package in comp.binaries.items() if not package]
    copy_control_plane(k3s_version, copied, tmp_out)
    Log.line(f"copied {', '.join(copied)} from kubebuild in {time.monotonic() - total:.0f}s")
    go_version = kubebuild.go_version()
    for comp in comps:
        if not all(comp.binaries.values()):
            continue  # copied above
        part = _build_part(comp, go_version)
        for name in comp.binaries:
            os.link(part / name, tmp_out / name)  # the same file: no second copy on disk
    (tmp_out / "versions.json").write_text(json.dumps(versions_json(comps), indent=2, sort_keys=True) + "\n")
    shutil.rmtree(out, ignore_errors=True)
    tmp_out.rename(out)
    Log.line(f"build time {time.monotonic() - total:.0f}s -> {out}")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("cmd", choices=("build", "path"))
    parser.add_argument("--k3s-version", default=None, help="default: k3s_version of roles/k3s/defaults/main.yml")
    parser.add_argument("--part", default=None, help="only this component (e.g. traefik), in its own directory")
    args = parser.parse_args(argv)
    try:
        k3s_version = args.k3s_version or read_pin("k3s_version")
        if args.cmd == "build":
            print(build(k3s_version, args.part))
        else:
            print(part_dir(k3s_version, args.part) if args.part else plan(k3s_version)[1])
    except (BuildError, PinError) as exc:
        print(f"[nodebuild] ERROR: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
