"""The lab's STAND-IN for the K3s binary: NOT K3s. It assembles, from the same upstream parts K3s embeds, the
processes a K3s server or agent runs, and reads the same /etc/rancher/k3s/config.yaml the collection writes.

K3s itself cannot be had on the machines this project is built on (its Go module and its forks are refused by
the module proxy, see lab/live/kubebuild.py), so lab/nodes/k3sbundle.py packs this program with kubelet, kube-proxy,
containerd, the CNI plugins, flannel and the control plane (built by lab/nodes/nodebuild.py from their modules) into
a self-extracting `k3s` file with a K3s-shaped airgap bundle around it. The collection's k3s role installs it
the way it installs K3s (verified airgap path), and starts it with the unit it writes for K3s.

    k3s server --config /etc/rancher/k3s/config.yaml   etcd, kube-apiserver (on 127.0.0.1:6444, behind a
                                                        STAND-IN for K3s's supervisor on 6443 that also serves
                                                        /static/ anonymously), kube-controller-manager,
                                                        kube-scheduler and K3s's helm-controller on this node,
                                                        then everything an agent runs
    k3s agent --config /etc/rancher/k3s/config.yaml    containerd (airgap images imported), kubelet (TLS
                                                        bootstrap), flannel (vxlan), kube-proxy (iptables)
    k3s etcd-snapshot save [--name N]                   the server's etcd saved through etcd's own snapshot API,
                                                        named and logged as K3s does (<N>-<node>-<unix time>)

How an agent joins without K3s's supervisor: the cluster token derives a Kubernetes bootstrap token (the same
on every node); the agent reads kube-public/cluster-info anonymously and trusts the CA in it only when the
JWS signature that kube-controller-manager's bootstrapsigner put on it verifies with that token (kubeadm's
discovery). The kubelet then gets its own client certificate (CN system:node:NAME) through a CSR the
controller manager approves and signs: per-node credentials, Node authorizer and NodeRestriction on.

What differs from K3s, on purpose and said in README: one server only (no embedded-etcd join), no
ServiceLB/Traefik/local-path/metrics-server, no crictl, helm-controller as a process of its own (K3s runs it
in-process) whose Jobs run the lab's klipper-helm STAND-IN image, the supervisor only serving /static/ and
passing the rest on (request-header authentication; no /cacerts or /v1-k3s), the `kubernetes` endpoints written
by the stand-in (upstream's kube-apiserver lacks K3s's --advertise-port), CRDs the site's other charts would bring
applied from the bundle's manifests directory, and the kubelet's cgroup v1 settings of this VM.
Only Debian's python3 and python3-yaml are needed in the node.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import ipaddress
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import yaml

NAME = "aiinfra-lab-k3s-standin"
DATA = Path(os.environ.get("AIINFRA_STANDIN_DATA", Path(__file__).resolve().parent))
BIN = DATA / "bin"
MANIFESTS = DATA / "manifests"
K3S = Path("/var/lib/rancher/k3s")
AGENT = K3S / "agent"
SERVER = K3S / "server"
TLS = SERVER / "tls"
AUTO_DEPLOY = SERVER / "manifests"
RUN = Path("/run/k3s")
SOCK = RUN / "containerd" / "containerd.sock"
KUBELET_PKI = Path("/var/lib/kubelet/pki")
STATIC = SERVER / "static"
API_PORT = 6443  # the supervisor's, as K3s's: what every client and the `kubernetes` Service reach
APISERVER_PORT = 6444  # kube-apiserver's own, on loopback behind the supervisor (K3s's too)
WAIT_S = 180
# The image of helm-controller's install Jobs: the lab's STAND-IN for rancher/klipper-helm (lab/nodes/nodeimages.py; a
# unit test keeps the two equal).
KLIPPER_HELM_IMAGE = "localhost/aiinfra-lab/klipper-helm-standin:lab"
# The environment helm-controller would copy into every Job it makes (its own *_proxy variables): not passed on.
PROXY_VARIABLES = (
    "all_proxy",
    "ALL_PROXY",
    "http_proxy",
    "HTTP_PROXY",
    "https_proxy",
    "HTTPS_PROXY",
    "no_proxy",
    "NO_PROXY",
)


def log(msg: str) -> None:
    print(f"{NAME}: {msg}", flush=True)


# ------------------------------------------------------------------ pure functions (unit-tested on the host)


def bootstrap_token(cluster_token: str) -> tuple[str, str]:
    """(token id, token secret) of the Kubernetes bootstrap token every node derives from the cluster token.

    A K3s full token (K10<ca sha256>::server:<secret>) derives from its secret part, so short and full forms of
    one token agree."""
    secret = cluster_token.strip().rsplit(":", 1)[-1]
    tid = hashlib.sha256(b"aiinfra-bootstrap-token-id\0" + secret.encode()).hexdigest()[:6]
    tsec = hashlib.sha256(b"aiinfra-bootstrap-token-secret\0" + secret.encode()).hexdigest()[:16]
    return tid, tsec


def ca_hash_of(token: str) -> str | None:
    """The CA hash a K3s full token carries (K10<sha256>::user:secret), or None for a short token."""
    token = token.strip()
    if token.startswith("K10") and "::" in token:
        return token[3:].split("::", 1)[0]
    return None


def full_token(ca_pem: bytes, cluster_token: str, user: str = "server") -> str:
    """K3s's secure form of a token: K10<sha256 of the CA PEM>::<user>:<secret> (user server, or node for the agent
    token)."""
    return f"K10{hashlib.sha256(ca_pem).hexdigest()}::{user}:{cluster_token.strip().rsplit(':', 1)[-1]}"


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def jws_verify(detached: str, payload: str, token_id: str, token_secret: str) -> bool:
    """Verify a detached JWS (header..signature, HS256, kid = token id) over payload, as bootstrapsigner signs."""
    parts = detached.split(".")
    if len(parts) != 3 or parts[1] != "":
        return False
    try:
        header = json.loads(base64.urlsafe_b64decode(parts[0] + "=" * (-len(parts[0]) % 4)))
    except (ValueError, json.JSONDecodeError):
        return False
    if header.get("alg") != "HS256" or header.get("kid") != token_id:
        return False
    signing_input = f"{parts[0]}.{_b64url(payload.encode())}".encode()
    expected = _b64url(hmac.new(token_secret.encode(), signing_input, hashlib.sha256).digest())
    return hmac.compare_digest(expected, parts[2])


def as_list(value) -> list[str]:
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value]
    return [str(value)]


def cluster_dns(service_cidr: str) -> str:
    """K3s's cluster DNS address: the tenth address of the service network (10.43.0.10)."""
    return str(ipaddress.ip_network(service_cidr, strict=False).network_address + 10)


def api_service_ip(service_cidr: str) -> str:
    return str(ipaddress.ip_network(service_cidr, strict=False).network_address + 1)


# Label prefixes a kubelet may set on its own Node under NodeRestriction (the rest are K3s's server-side job).
KUBELET_LABEL_PREFIXES_ALLOWED = ("kubelet.kubernetes.io/", "node.kubernetes.io/")
KUBELET_LABELS_ALLOWED = {
    "kubernetes.io/hostname",
    "kubernetes.io/arch",
    "kubernetes.io/os",
    "beta.kubernetes.io/arch",
    "beta.kubernetes.io/os",
    "beta.kubernetes.io/instance-type",
    "node.kubernetes.io/instance-type",
    "failure-domain.beta.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "topology.kubernetes.io/zone",
}


def split_labels(labels: list[str]) -> tuple[list[str], list[str]]:
    """(labels the kubelet may set itself, labels the server must set through the API) under NodeRestriction."""
    own, server = [], []
    for item in labels:
        key = item.split("=", 1)[0]
        prefix = key.split("/", 1)[0] if "/" in key else ""
        restricted = prefix.endswith(("kubernetes.io", "k8s.io"))
        allowed = key in KUBELET_LABELS_ALLOWED or key.startswith(KUBELET_LABEL_PREFIXES_ALLOWED)
        (server if restricted and not allowed else own).append(item)
    return own, server


KNOWN_KEYS = {
    "token",
    "token-file",
    "agent-token",
    "agent-token-file",
    "server",
    "cluster-init",
    "node-ip",
    "node-name",
    "node-label",
    "node-taint",
    "tls-san",
    "cluster-cidr",
    "service-cidr",
    "cluster-dns",
    "cluster-domain",
    "disable",
    "flannel-backend",
    "write-kubeconfig-mode",
    "secrets-encryption",
    "protect-kernel-defaults",
    "kubelet-arg",
    "kube-apiserver-arg",
    "kube-controller-manager-arg",
    "kube-scheduler-arg",
    "kube-proxy-arg",
}


def settings(config: dict, hostname: str) -> dict:
    """The stand-in's view of config.yaml with K3s's defaults; unknown keys are listed, not silently taken."""
    cfg = dict(config or {})
    service_cidr = str(cfg.get("service-cidr") or "10.43.0.0/16")
    return {
        "server": str(cfg.get("server") or ""),
        "token": str(cfg.get("token") or ""),
        "token_file": str(cfg.get("token-file") or ""),
        "agent_token": str(cfg.get("agent-token") or ""),
        "agent_token_file": str(cfg.get("agent-token-file") or ""),
        "node_ip": str(cfg.get("node-ip") or ""),
        "node_name": str(cfg.get("node-name") or hostname),
        "labels": as_list(cfg.get("node-label")),
        "taints": as_list(cfg.get("node-taint")),
        "tls_san": as_list(cfg.get("tls-san")),
        "cluster_cidr": str(cfg.get("cluster-cidr") or "10.42.0.0/16"),
        "service_cidr": service_cidr,
        "cluster_dns": str(cfg.get("cluster-dns") or cluster_dns(service_cidr)),
        "cluster_domain": str(cfg.get("cluster-domain") or "cluster.local"),
        "flannel_backend": str(cfg.get("flannel-backend") or "vxlan"),
        "kubeconfig_mode": str(cfg.get("write-kubeconfig-mode") or "0600"),
        "secrets_encryption": bool(cfg.get("secrets-encryption")),
        "protect_kernel_defaults": bool(cfg.get("protect-kernel-defaults")),
        "kubelet_args": as_list(cfg.get("kubelet-arg")),
        "apiserver_args": as_list(cfg.get("kube-apiserver-arg")),
        "kcm_args": as_list(cfg.get("kube-controller-manager-arg")),
        "scheduler_args": as_list(cfg.get("kube-scheduler-arg")),
        "proxy_args": as_list(cfg.get("kube-proxy-arg")),
        "disable": [name.strip() for item in as_list(cfg.get("disable")) for name in item.split(",") if name.strip()],
        "unknown": sorted(set(cfg) - KNOWN_KEYS),
    }


def extra_args(args: list[str]) -> list[str]:
    """K3s's `*-arg` entries (key=value, without dashes) as command-line flags."""
    return [a if a.startswith("--") else f"--{a}" for a in args]


def kubelet_config(s: dict) -> dict:
    """The KubeletConfiguration of a lab node (cgroup v1 VM: failCgroupV1 false, cgroupfs)."""
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "cgroupDriver": "cgroupfs",
        # This VM's kernel runs cgroup v1 (hybrid); Kubernetes >= 1.35 refuses it unless told (deprecated path).
        "failCgroupV1": False,
        "failSwapOn": False,
        "containerRuntimeEndpoint": f"unix://{SOCK}",
        "clusterDNS": [s["cluster_dns"]],
        "clusterDomain": s["cluster_domain"],
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": True},
            "x509": {"clientCAFile": str(AGENT / "client-ca.crt")},
        },
        "authorization": {"mode": "Webhook"},
        "readOnlyPort": 0,
        "rotateCertificates": True,
        "protectKernelDefaults": s["protect_kernel_defaults"],
        # Images come from the airgap directory only: never let image GC delete them.
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        # Lab nodes share one disk with the host: evict on real exhaustion only.
        "evictionHard": {"memory.available": "50Mi", "nodefs.available": "1%", "imagefs.available": "1%"},
        "serializeImagePulls": False,
        "resolvConf": "/etc/resolv.conf",
    }


def containerd_config(sandbox_image: str) -> str:
    """containerd 2.x configuration (version 3) as K3s writes it for its embedded containerd, for this VM."""
    return f"""version = 3
root = "{AGENT}/containerd"
state = "{RUN}/containerd"

[grpc]
  address = "{SOCK}"

[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"

[plugins.'io.containerd.cri.v1.images'.pinned_images]
  sandbox = "{sandbox_image}"

[plugins.'io.containerd.cri.v1.runtime']
  # The VM's capability bounding set lacks CAP_SYS_RESOURCE: nothing may lower oom_score_adj.
  restrict_oom_score_adj = true
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ["{BIN}"]
    conf_dir = "{AGENT}/etc/cni/net.d"
  [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
      SystemdCgroup = false
"""


def cni_config(subnet_env: str) -> dict:
    """The pod network of this node from flannel's subnet.env: a bridge with host-local addresses (what K3s's
    flannel CNI plugin delegates to; that plugin's module is not served) plus portmap."""
    env = dict(line.split("=", 1) for line in subnet_env.splitlines() if "=" in line)
    subnet = ipaddress.ip_interface(env["FLANNEL_SUBNET"])  # 10.42.1.1/24: the bridge's address in its network
    return {
        "cniVersion": "1.0.0",
        "name": "cbr0",
        "plugins": [
            {
                "type": "bridge",
                "bridge": "cni0",
                "isGateway": True,
                "isDefaultGateway": True,
                "ipMasq": False,
                "hairpinMode": True,
                "mtu": int(env.get("FLANNEL_MTU", "1450")),
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": str(subnet.network), "gateway": str(subnet.ip)}]],
                },
            },
            {"type": "portmap", "capabilities": {"portMappings": True}, "snat": True},
        ],
    }


def cluster_info(server_url: str, ca_pem: bytes) -> str:
    kubeconfig = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "",
                "cluster": {
                    "server": server_url,
                    "certificate-authority-data": base64.b64encode(ca_pem).decode(),
                },
            }
        ],
        "contexts": [],
        "users": [],
        "current-context": "",
        "preferences": {},
    }
    return yaml.safe_dump(kubeconfig, sort_keys=True)


def kubeconfig(server: str, ca_file: str, user: dict) -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "local", "cluster": {"server": server, "certificate-authority": ca_file}}],
            "users": [{"name": "user", "user": user}],
            "contexts": [{"name": "default", "context": {"cluster": "local", "user": "user"}}],
            "current-context": "default",
        },
        sort_keys=False,
    )


# ------------------------------------------------------------------ process boundary


class Supervisor:
    """Starts the components as children; if one exits, stops them all and exits 1 (systemd restarts K3s)."""

    def __init__(self) -> None:
        self.children: list[tuple[str, subprocess.Popen]] = []
        self.deployer: AutoDeploy | None = None
        signal.signal(signal.SIGTERM, self.stop)
        signal.signal(signal.SIGINT, self.stop)

    def start(self, name: str, cmd: list[str], env: dict | None = None, drop: tuple = ()) -> subprocess.Popen:
        logdir = K3S / "logs"
        logdir.mkdir(parents=True, exist_ok=True)
        out = open(logdir / f"{name}.log", "ab")  # noqa: SIM115 - the child keeps it
        full_env = dict(os.environ, PATH=f"{BIN}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
        full_env.update(env or {})
        for key in drop:
            full_env.pop(key, None)
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=full_env, start_new_session=True)
        self.children.append((name, proc))
        log(f"started {name} (pid {proc.pid}); log {logdir / (name + '.log')}")
        return proc

    def check(self) -> None:
        for name, proc in self.children:
            if proc.poll() is not None:
                log(f"{name} exited with {proc.returncode}: stopping (see {K3S / 'logs' / (name + '.log')})")
                self.stop(exit_code=1)

    def stop(self, *_args, exit_code: int = 0) -> None:
        for _name, proc in reversed(self.children):
            if proc.poll() is None:
                proc.terminate()
        deadline = time.monotonic() + 15
        for _name, proc in reversed(self.children):
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
        sys.exit(exit_code)

    def wait_for(self, what: str, check, timeout: float = WAIT_S) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.check()
            try:
                if check():
                    return
            except (OSError, ValueError, subprocess.SubprocessError):
                pass
            time.sleep(1)
        log(f"{what} not ready after {timeout:.0f}s")
        self.stop(exit_code=1)

    def run_forever(self) -> None:
        while True:
            self.check()
            if self.deployer:
                self.deployer.sync()
            time.sleep(2)


def sh(*cmd: str, check: bool = True, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(list(cmd), check=check, capture_output=True, text=True, **kw)


def sd_notify(message: str) -> None:
    address = os.environ.get("NOTIFY_SOCKET")
    if not address:
        return
    if address.startswith("@"):
        address = "\0" + address[1:]
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.connect(address)
        sock.sendall(message.encode())


def write(path: Path, text: str | bytes, mode: int = 0o644) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.touch(mode=mode)
    tmp.chmod(mode)
    if isinstance(text, bytes):
        tmp.write_bytes(text)
    else:
        tmp.write_text(text)
    tmp.replace(path)


def node_ip(s: dict) -> str:
    if s["node_ip"]:
        return s["node_ip"]
    return sh("hostname", "-I").stdout.split()[0]


def iface_of(ip: str) -> str:
    for line in sh("ip", "-o", "-4", "addr", "show").stdout.splitlines():
        words = line.split()
        if any(w.split("/")[0] == ip for w in words):
            return words[1]
    return ""


def read_token(s: dict) -> str:
    if s["token"]:
        return s["token"]
    if s["token_file"]:
        return Path(s["token_file"]).read_text().strip()
    raise SystemExit(f"{NAME}: no token or token-file in the configuration")


def read_agent_token(s: dict) -> str:
    """The server's agent token (agent-token or agent-token-file); K3s falls back to the server token."""
    if s["agent_token"]:
        return s["agent_token"]
    if s["agent_token_file"]:
        return Path(s["agent_token_file"]).read_text().strip()
    return ""


# ------------------------------------------------------------------ server: the control plane of this node


def openssl(*args: str) -> None:
    sh("openssl", *args)


def make_ca(name: str) -> None:
    """A self-signed EC CA, TLS/<name>.{crt,key}, named as K3s names its CAs (<name>@<unix time>)."""
    openssl(
        "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-keyout", str(TLS / f"{name}.key"), "-out", str(TLS / f"{name}.crt"), "-days", "3650",
        "-subj", f"/CN=k3s-{name}@{int(time.time())}",
        "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
    )  # fmt: skip


def make_cert(name: str, subject: str, ext: str, ca: str = "server-ca") -> None:
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    openssl("req", *ec, "-keyout", str(TLS / f"{name}.key"), "-out", str(TLS / f"{name}.csr"), "-subj", subject)
    (TLS / f"{name}.ext").write_text(f"authorityKeyIdentifier=keyid\nbasicConstraints=critical,CA:FALSE\n{ext}\n")
    openssl(
        "x509", "-req", "-in", str(TLS / f"{name}.csr"), "-CA", str(TLS / f"{ca}.crt"),
        "-CAkey", str(TLS / f"{ca}.key"), "-CAcreateserial", "-days", "3650",
        "-extfile", str(TLS / f"{name}.ext"), "-out", str(TLS / f"{name}.crt"),
    )  # fmt: skip
    (TLS / f"{name}.key").chmod(0o600)


def make_pki(s: dict, ip: str) -> None:
    """The cluster's CA and the control plane's certificates, once (kept across restarts, as K3s keeps them)."""
    if (TLS / "done").exists():
        return
    TLS.mkdir(parents=True, exist_ok=True)
    os.chmod(TLS, 0o700)
    make_ca("server-ca")
    names = {"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"}
    names.add(f"kubernetes.default.svc.{s['cluster_domain']}")
    names.add(socket.gethostname())
    ips = {"127.0.0.1", ip, api_service_ip(s["service_cidr"])}
    for san in s["tls_san"]:
        try:
            ipaddress.ip_address(san)
            ips.add(san)
        except ValueError:
            names.add(san)
    sans = ",".join([f"DNS:{n}" for n in sorted(names)] + [f"IP:{i}" for i in sorted(ips)])
    server_ext = f"subjectAltName={sans}\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth"
    client_ext = "keyUsage=critical,digitalSignature\nextendedKeyUsage=clientAuth"
    make_cert("serving-kube-apiserver", "/CN=kube-apiserver", server_ext)
    make_cert("client-admin", "/O=system:masters/CN=system:admin", client_ext)
    make_cert("client-controller", "/CN=system:kube-controller-manager", client_ext)
    make_cert("client-scheduler", "/CN=system:kube-scheduler", client_ext)
    make_cert("client-kube-apiserver", "/O=system:masters/CN=system:apiserver", client_ext)
    # etcd: serving on loopback and client certificates required (hostNetwork pods share this namespace).
    # clientAuth too: etcd's JSON gateway (the stand-in's etcd-snapshot) dials etcd itself with this certificate.
    etcd_ext = (
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nkeyUsage=critical,digitalSignature\n"
        "extendedKeyUsage=serverAuth,clientAuth"
    )
    make_cert("etcd-server", "/CN=etcd", etcd_ext)
    make_cert("etcd-client", "/CN=kube-apiserver-etcd-client", client_ext)
    openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", str(TLS / "service.key"))
    openssl("ec", "-in", str(TLS / "service.key"), "-pubout", "-out", str(TLS / "service.pub"))
    (TLS / "service.key").chmod(0o600)
    if s["secrets_encryption"]:
        key = base64.b64encode(os.urandom(32)).decode()
        write(TLS / "encryption-config.json", json.dumps(encryption_config(key)), 0o600)
    (TLS / "done").write_text("")


def make_proxy_pki() -> None:
    """K3s's request-header CA and the supervisor's client certificate from it (CN system:auth-proxy), once: the
    API server trusts a request's X-Remote-User/-Group only over a connection that presents that certificate."""
    if (TLS / "client-auth-proxy.crt").exists():
        return
    make_ca("request-header-ca")
    (TLS / "request-header-ca.key").chmod(0o600)
    client_ext = "keyUsage=critical,digitalSignature\nextendedKeyUsage=clientAuth"
    make_cert("client-auth-proxy", "/CN=system:auth-proxy", client_ext, ca="request-header-ca")


def kubernetes_endpoints(ip: str) -> list[dict]:
    """The `kubernetes` Service's endpoints, as K3s's API server writes them (its --advertise-port, which upstream's
    kube-apiserver lacks): this node's supervisor port, where pods reach /static/ and the API alike. The API server
    runs with --endpoint-reconciler-type none, so these are the stand-in's (one server: no others to list)."""
    meta = {"name": "kubernetes", "namespace": "default"}
    return [
        {
            "apiVersion": "v1",
            "kind": "Endpoints",
            "metadata": {**meta, "labels": {"endpointslice.kubernetes.io/skip-mirror": "true"}},
            "subsets": [{"addresses": [{"ip": ip}], "ports": [{"name": "https", "port": API_PORT, "protocol": "TCP"}]}],
        },
        {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {**meta, "labels": {"kubernetes.io/service-name": "kubernetes"}},
            "addressType": "IPv4",
            "endpoints": [{"addresses": [ip], "conditions": {"ready": True}}],
            "ports": [{"name": "https", "port": API_PORT, "protocol": "TCP"}],
        },
    ]


def apiserver_front_args() -> list[str]:
    """kube-apiserver behind the supervisor: loopback only, request-header authentication from the supervisor,
    the same certificate for the aggregator's proxy client, and no endpoint reconciler (kubernetes_endpoints)."""
    return [
        "--bind-address", "127.0.0.1", "--secure-port", str(APISERVER_PORT),
        "--endpoint-reconciler-type", "none",
        "--requestheader-client-ca-file", str(TLS / "request-header-ca.crt"),
        "--requestheader-allowed-names", "system:auth-proxy",
        "--requestheader-username-headers", "X-Remote-User",
        "--requestheader-group-headers", "X-Remote-Group",
        "--requestheader-extra-headers-prefix", "X-Remote-Extra-",
        "--proxy-client-cert-file", str(TLS / "client-auth-proxy.crt"),
        "--proxy-client-key-file", str(TLS / "client-auth-proxy.key"),
        "--enable-aggregator-routing=true",
    ]  # fmt: skip


def supervisor_command(ca: Path) -> list[str]:
    """The STAND-IN for K3s's supervisor on the API port (lab/nodes/programs/supervisor): /static/ anonymously, the rest to
    kube-apiserver on loopback."""
    return [
        str(BIN / "aiinfra-lab-supervisor"), "-listen", f"0.0.0.0:{API_PORT}", "-backend", f"https://127.0.0.1:{APISERVER_PORT}",
        "-tls-cert-file", str(TLS / "serving-kube-apiserver.crt"),
        "-tls-private-key-file", str(TLS / "serving-kube-apiserver.key"),
        "-client-ca-file", str(ca), "-backend-ca-file", str(ca),
        "-proxy-client-cert-file", str(TLS / "client-auth-proxy.crt"),
        "-proxy-client-key-file", str(TLS / "client-auth-proxy.key"),
        "-static-dir", str(STATIC),
    ]  # fmt: skip


def helm_controller_command(admin: Path) -> list[str]:
    """K3s's helm-controller (the release K3s embeds; K3s runs it in-process, here a process of its own) with the
    klipper-helm stand-in as its Jobs' image."""
    return [
        str(BIN / "helm-controller"), "--kubeconfig", str(admin), "--controller-name", "helm-controller",
        "--default-job-image", KLIPPER_HELM_IMAGE, "--job-cluster-role", "cluster-admin",
        "--node-name", socket.gethostname(),
    ]  # fmt: skip


def encryption_config(key_b64: str) -> dict:
    return {
        "kind": "EncryptionConfiguration",
        "apiVersion": "apiserver.config.k8s.io/v1",
        "resources": [
            {
                "resources": ["secrets"],
                "providers": [{"aescbc": {"keys": [{"name": "aescbckey", "secret": key_b64}]}}, {"identity": {}}],
            }
        ],
    }


def client_user(name: str) -> dict:
    return {"client-certificate": str(TLS / f"client-{name}.crt"), "client-key": str(TLS / f"client-{name}.key")}


def api_ready(url: str, ca: Path, cert: tuple[str, str] | None = None, path: str = "/readyz") -> bool:
    ctx = ssl.create_default_context(cafile=str(ca))
    if cert:
        ctx.load_cert_chain(*cert)
    with urllib.request.urlopen(url + path, context=ctx, timeout=3) as resp:
        return resp.status == 200


def kubectl(admin: Path, *args: str, stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(BIN / "kubectl"), "--kubeconfig", str(admin), *args],
        input=stdin,
        capture_output=True,
        text=True,
        check=check,
        timeout=120,
    )


def apply_document(objects: list[dict]) -> str:
    """What kubectl apply reads: JSON, not YAML. PyYAML writes a token id such as 010587 unquoted (it is not a YAML 1.1
    number), and the API server's YAML reader takes it for a number and refuses the Secret."""
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": objects})


def bootstrap_secret(token: str, what: str) -> dict:
    tid, tsec = bootstrap_token(token)
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "bootstrap.kubernetes.io/token",
        "metadata": {
            "name": f"bootstrap-token-{tid}",
            "namespace": "kube-system",
            "labels": {"aiinfra.k3s/lab-standin": "true"},
        },
        "stringData": {
            "token-id": tid,
            "token-secret": tsec,
            "usage-bootstrap-authentication": "true",
            "usage-bootstrap-signing": "true",
            "auth-extra-groups": "system:bootstrappers:k3s",
            "description": f"{NAME}: derived from the {what} for node joins",
        },
    }


def bootstrap_objects(s: dict, ip: str, ca_pem: bytes, tokens: dict[str, str]) -> list[dict]:
    """What K3s's supervisor does for joining nodes, in Kubernetes' own terms: a bootstrap token per join token
    (tokens: {what: token}, the server token and, when set, the agent token: K3s accepts either from an agent),
    the RBAC that lets it request node client certificates (approved automatically), the signed cluster-info, and
    the rights flannel and kube-proxy need under the node's identity."""
    crb = "rbac.authorization.k8s.io/v1"

    def binding(name: str, role: str, group: str) -> dict:
        return {
            "apiVersion": crb,
            "kind": "ClusterRoleBinding",
            "metadata": {"name": name, "labels": {"aiinfra.k3s/lab-standin": "true"}},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": group}],
        }

    return [
        *(bootstrap_secret(token, what) for what, token in tokens.items()),
        binding("aiinfra-lab:node-bootstrapper", "system:node-bootstrapper", "system:bootstrappers"),
        binding(
            "aiinfra-lab:node-autoapprove-bootstrap",
            "system:certificates.k8s.io:certificatesigningrequests:nodeclient",
            "system:bootstrappers",
        ),
        binding(
            "aiinfra-lab:node-autoapprove-renewal",
            "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient",
            "system:nodes",
        ),
        binding("aiinfra-lab:node-proxier", "system:node-proxier", "system:nodes"),
        {
            "apiVersion": crb,
            "kind": "ClusterRole",
            "metadata": {"name": "aiinfra-lab:flannel"},
            "rules": [
                {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch", "patch"]},
                {"apiGroups": [""], "resources": ["nodes/status"], "verbs": ["patch"]},
            ],
        },
        binding("aiinfra-lab:flannel", "aiinfra-lab:flannel", "system:nodes"),
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "cluster-info", "namespace": "kube-public"},
            "data": {"kubeconfig": cluster_info(f"https://{ip}:{API_PORT}", ca_pem)},
        },
        {
            "apiVersion": crb,
            "kind": "Role",
            "metadata": {"name": "aiinfra-lab:cluster-info-reader", "namespace": "kube-public"},
            "rules": [
                {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["cluster-info"], "verbs": ["get"]}
            ],
        },
        {
            "apiVersion": crb,
            "kind": "RoleBinding",
            "metadata": {"name": "aiinfra-lab:cluster-info-reader", "namespace": "kube-public"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role",
                "name": "aiinfra-lab:cluster-info-reader",
            },
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "system:anonymous"}],
        },
    ]


class AutoDeploy:
    """K3s's deploy controller, in its simplest form: every manifest file (.yaml, .yml, .json) of the auto-deploy
    directory is applied (server-side) when it appears or its content changes; a failed one is tried again on the
    next pass. Not done: removing the objects of a deleted file, and the `.skip` markers."""

    def __init__(self, admin: Path) -> None:
        self.admin = admin
        self.applied: dict[str, str] = {}
        self.errors: dict[str, str] = {}

    def sync(self, prefix: str = "") -> int:
        """Apply what changed (only files named prefix* when given); returns how many files failed. Never raises: a
        file that vanished or a kubectl that hung is tried again on the next pass."""
        failed = 0
        for path in sorted(AUTO_DEPLOY.glob(f"{prefix}*")):
            if path.suffix not in (".yaml", ".yml", ".json"):
                continue
            try:
                digest = hashlib.sha256(path.read_bytes()).hexdigest()
                if self.applied.get(path.name) == digest:
                    continue
                proc = kubectl(self.admin, "apply", "--server-side", "--force-conflicts", "--field-manager",
                               "k3s-deploy", "-f", str(path), check=False)  # fmt: skip
            except (OSError, subprocess.SubprocessError) as exc:
                failed += 1
                log(f"{path.name} not applied yet: {exc}")
                continue
            if proc.returncode == 0:
                self.applied[path.name] = digest
                log(f"applied {path.name}")
            else:
                failed += 1
                error = (proc.stderr.strip().splitlines() or [f"rc {proc.returncode}"])[-1]
                if self.errors.get(path.name) != error:  # say each new error once, not every pass
                    log(f"{path.name} not applied yet: {error}")
                self.errors[path.name] = error
        return failed


def server(s: dict, sup: Supervisor) -> None:
    ip = node_ip(s)
    token = read_token(s)
    if s["server"]:
        raise SystemExit(f"{NAME}: joining a second server (server: {s['server']}) is not supported by the stand-in")
    make_pki(s, ip)
    make_proxy_pki()
    STATIC.mkdir(parents=True, exist_ok=True)  # served anonymously under /static/ (K3s's static charts)
    os.chmod(STATIC, 0o700)
    ca = TLS / "server-ca.crt"
    cred = SERVER / "cred"
    cred.mkdir(parents=True, exist_ok=True)
    os.chmod(cred, 0o700)
    # The control plane's own clients reach kube-apiserver directly; everyone else, this node's agent included,
    # through the supervisor (front), as in K3s.
    local = f"https://127.0.0.1:{APISERVER_PORT}"
    front = f"https://127.0.0.1:{API_PORT}"
    for name in ("controller", "scheduler"):
        write(cred / f"{name}.kubeconfig", kubeconfig(local, str(ca), client_user(name)), 0o600)
    admin = SERVER / "cred" / "admin.kubeconfig"
    write(admin, kubeconfig(local, str(ca), client_user("admin")), 0o600)
    etcd_dir = SERVER / "db" / "etcd"
    etcd_dir.mkdir(parents=True, exist_ok=True)
    os.chmod(etcd_dir, 0o700)
    sup.start(
        "etcd",
        [str(BIN / "etcd"), "--name", socket.gethostname(), "--data-dir", str(etcd_dir),
         "--listen-client-urls", "https://127.0.0.1:2379", "--advertise-client-urls", "https://127.0.0.1:2379",
         "--cert-file", str(TLS / "etcd-server.crt"), "--key-file", str(TLS / "etcd-server.key"),
         "--trusted-ca-file", str(TLS / "server-ca.crt"), "--client-cert-auth",
         "--listen-peer-urls", "http://127.0.0.1:2380", "--initial-advertise-peer-urls", "http://127.0.0.1:2380",
         "--initial-cluster", f"{socket.gethostname()}=http://127.0.0.1:2380", "--log-level", "warn"],
    )  # fmt: skip
    apiserver = [
        str(BIN / "kube-apiserver"), "--etcd-servers", "https://127.0.0.1:2379",
        "--etcd-cafile", str(TLS / "server-ca.crt"), "--etcd-certfile", str(TLS / "etcd-client.crt"),
        "--etcd-keyfile", str(TLS / "etcd-client.key"),
        "--advertise-address", ip, *apiserver_front_args(),
        "--tls-cert-file", str(TLS / "serving-kube-apiserver.crt"),
        "--tls-private-key-file", str(TLS / "serving-kube-apiserver.key"),
        "--client-ca-file", str(ca), "--enable-bootstrap-token-auth=true",
        "--service-account-issuer", "https://kubernetes.default.svc." + s["cluster_domain"],
        "--service-account-key-file", str(TLS / "service.pub"),
        "--service-account-signing-key-file", str(TLS / "service.key"),
        "--service-cluster-ip-range", s["service_cidr"],
        "--authorization-mode", "Node,RBAC", "--allow-privileged=true",
        "--enable-admission-plugins", "NodeRestriction", "--anonymous-auth=true", "--profiling=false",
        "--kubelet-client-certificate", str(TLS / "client-kube-apiserver.crt"),
        "--kubelet-client-key", str(TLS / "client-kube-apiserver.key"),
        "--kubelet-preferred-address-types", "InternalIP,Hostname",
        "--v=1",
    ]  # fmt: skip
    if s["secrets_encryption"] and (TLS / "encryption-config.json").exists():
        apiserver += ["--encryption-provider-config", str(TLS / "encryption-config.json")]
    sup.start("kube-apiserver", apiserver + extra_args(s["apiserver_args"]))
    sup.start("supervisor", supervisor_command(ca))
    admin_cert = (str(TLS / "client-admin.crt"), str(TLS / "client-admin.key"))
    sup.wait_for("kube-apiserver", lambda: api_ready(local, ca, admin_cert))
    sup.start(
        "kube-controller-manager",
        [str(BIN / "kube-controller-manager"), "--kubeconfig", str(cred / "controller.kubeconfig"),
         "--authentication-kubeconfig", str(cred / "controller.kubeconfig"),
         "--authorization-kubeconfig", str(cred / "controller.kubeconfig"),
         "--bind-address", "127.0.0.1", "--leader-elect=false",
         "--service-account-private-key-file", str(TLS / "service.key"), "--root-ca-file", str(ca),
         "--use-service-account-credentials=true",
         "--cluster-signing-cert-file", str(ca), "--cluster-signing-key-file", str(TLS / "server-ca.key"),
         "--controllers", "*,bootstrapsigner,tokencleaner",
         "--allocate-node-cidrs=true", "--cluster-cidr", s["cluster_cidr"],
         "--service-cluster-ip-range", s["service_cidr"], "--v=1", *extra_args(s["kcm_args"])],
    )  # fmt: skip
    sup.start(
        "kube-scheduler",
        [str(BIN / "kube-scheduler"), "--kubeconfig", str(cred / "scheduler.kubeconfig"),
         "--authentication-kubeconfig", str(cred / "scheduler.kubeconfig"),
         "--authorization-kubeconfig", str(cred / "scheduler.kubeconfig"),
         "--bind-address", "127.0.0.1", "--leader-elect=false", "--v=1", *extra_args(s["scheduler_args"])],
    )  # fmt: skip
    ca_pem = ca.read_bytes()
    agent_token = read_agent_token(s)
    tokens = {"cluster token": token, **({"agent token": agent_token} if agent_token else {})}
    objects = bootstrap_objects(s, ip, ca_pem, tokens) + kubernetes_endpoints(ip)
    doc = apply_document(objects)
    sup.wait_for(
        "bootstrap objects", lambda: kubectl(admin, "apply", "-f", "-", stdin=doc, check=False).returncode == 0
    )
    # A changed cluster or agent token must not leave the old one able to join nodes.
    keep = ",".join(f"metadata.name!=bootstrap-token-{bootstrap_token(t)[0]}" for t in tokens.values())
    kubectl(admin, "delete", "secret", "-n", "kube-system", "-l", "aiinfra.k3s/lab-standin=true",
            "--field-selector", keep, "--ignore-not-found", check=False)  # fmt: skip
    # K3s writes its own manifests into the auto-deploy directory at start; its deploy controller applies that
    # directory (the collection's serving stage writes there too).
    AUTO_DEPLOY.mkdir(parents=True, exist_ok=True)
    if MANIFESTS.is_dir():
        for path in sorted(MANIFESTS.iterdir()):
            if path.stem in s["disable"]:  # K3s's --disable: the packaged component is not deployed
                log(f"{path.stem} disabled (disable: {', '.join(s['disable'])})")
                continue
            write(AUTO_DEPLOY / f"aiinfra-lab-{path.name}", path.read_text())
    sup.deployer = AutoDeploy(admin)
    # Ready once the bundle's own manifests are in (the collection's files are applied in the background).
    sup.wait_for("bundled manifests", lambda: sup.deployer.sync(prefix="aiinfra-lab-") == 0)
    sup.start("helm-controller", helm_controller_command(admin), drop=PROXY_VARIABLES)
    # What K3s writes for operators: the admin kubeconfig and the full token (its CA hash lets agents pin the CA).
    Path("/etc/rancher/k3s").mkdir(parents=True, exist_ok=True)
    write(Path("/etc/rancher/k3s/k3s.yaml"), admin_kubeconfig(front, ca_pem), int(s["kubeconfig_mode"], 8))
    write(SERVER / "token", full_token(ca_pem, token) + "\n", 0o600)
    write(SERVER / "node-token", full_token(ca_pem, token) + "\n", 0o600)
    # K3s writes the agent token in its secure form (user node); without one, agent-token is the server token.
    write(
        SERVER / "agent-token",
        full_token(ca_pem, agent_token or token, "node" if agent_token else "server") + "\n",
        0o600,
    )
    log(f"control plane up at https://{ip}:{API_PORT}")
    sd_notify("READY=1")
    sup.wait_for("supervisor", lambda: api_ready(front, ca, admin_cert))
    agent(s, sup, server_url=front, ca_pem=ca_pem, admin=admin)


def admin_kubeconfig(server_url: str, ca_pem: bytes) -> str:
    """K3s's k3s.yaml: everything inline, context `default`."""
    crt = (TLS / "client-admin.crt").read_bytes()
    key = (TLS / "client-admin.key").read_bytes()
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "default",
                    "cluster": {
                        "server": server_url,
                        "certificate-authority-data": base64.b64encode(ca_pem).decode(),
                    },
                }
            ],
            "contexts": [{"name": "default", "context": {"cluster": "default", "user": "default"}}],
            "current-context": "default",
            "users": [
                {
                    "name": "default",
                    "user": {
                        "client-certificate-data": base64.b64encode(crt).decode(),
                        "client-key-data": base64.b64encode(key).decode(),
                    },
                }
            ],
        },
        sort_keys=False,
    )


# ------------------------------------------------------------------ agent: what every node runs


def discover_ca(server_url: str, token: str, timeout: float = WAIT_S) -> bytes:
    """The cluster CA from kube-public/cluster-info, trusted only if its bootstrap JWS verifies with the token
    (and, for a full token, if its sha256 is the one the token names)."""
    tid, tsec = bootstrap_token(token)
    want_hash = ca_hash_of(token)
    insecure = ssl.create_default_context()
    insecure.check_hostname = False
    insecure.verify_mode = ssl.CERT_NONE
    url = f"{server_url}/api/v1/namespaces/kube-public/configmaps/cluster-info"
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, context=insecure, timeout=5) as resp:
                cm = json.load(resp)
            payload = cm["data"]["kubeconfig"]
            sig = cm["data"].get(f"jws-kubeconfig-{tid}", "")
            if not sig:
                last = "cluster-info is not signed for this token yet"
            elif not jws_verify(sig, payload, tid, tsec):
                # Wrong token, or cluster-info changed and is being signed again: retried until the deadline.
                last = "cluster-info's signature does not verify with this token (wrong token?)"
            else:
                ca_pem = base64.b64decode(
                    yaml.safe_load(payload)["clusters"][0]["cluster"]["certificate-authority-data"]
                )
                if not want_hash or hashlib.sha256(ca_pem).hexdigest() == want_hash:
                    return ca_pem
                last = "the server's CA does not match the hash in the token"
        except (OSError, KeyError, ValueError) as exc:
            last = str(exc)
        time.sleep(2)
    raise SystemExit(f"{NAME}: no trusted CA from {url} after {timeout:.0f}s: {last}")


def import_images(sup: Supervisor) -> None:
    """Import every tarball of the airgap image directory once per content (K3s's agent/images behaviour)."""
    done = AGENT / "images-imported"
    done.mkdir(parents=True, exist_ok=True)
    ctr = [str(BIN / "ctr"), "--address", str(SOCK), "-n", "k8s.io"]
    for tarball in sorted((AGENT / "images").glob("*.tar*")):
        stat = tarball.stat()
        marker = done / f"{tarball.name}.{stat.st_size}.{int(stat.st_mtime)}"
        if marker.exists():
            continue
        started = time.monotonic()
        if tarball.name.endswith(".tar"):
            sh(*ctr, "images", "import", "--no-unpack", str(tarball), timeout=900)
        else:
            unpack = "zstd -dc" if tarball.name.endswith(".zst") else "gzip -dc"
            subprocess.run(
                f"{unpack} {tarball} | {' '.join(ctr)} images import --no-unpack -",
                shell=True,
                check=True,
                capture_output=True,
                timeout=900,
            )
        marker.write_text("")
        log(f"imported {tarball.name} in {time.monotonic() - started:.1f}s")


def agent(
    s: dict, sup: Supervisor, server_url: str = "", ca_pem: bytes | None = None, admin: Path | None = None
) -> None:
    ip = node_ip(s)
    token = read_token(s)
    name = s["node_name"]
    if s["unknown"]:
        log(f"config keys this stand-in does not act on: {', '.join(s['unknown'])}")
    server_url = server_url or s["server"]
    if not server_url:
        raise SystemExit(f"{NAME}: an agent needs `server` in its configuration")
    if ca_pem is None:
        ca_pem = discover_ca(server_url, token)
    write(AGENT / "server-ca.crt", ca_pem.decode())
    write(AGENT / "client-ca.crt", ca_pem.decode())
    tid, tsec = bootstrap_token(token)
    ca_file = str(AGENT / "server-ca.crt")
    write(AGENT / "bootstrap.kubeconfig", kubeconfig(server_url, ca_file, {"token": f"{tid}.{tsec}"}), 0o600)
    node_kubeconfig = AGENT / "kubelet.kubeconfig"
    current = str(KUBELET_PKI / "kubelet-client-current.pem")
    write(
        node_kubeconfig, kubeconfig(server_url, ca_file, {"client-certificate": current, "client-key": current}), 0o600
    )

    write(AGENT / "etc" / "containerd" / "config.toml", containerd_config(sandbox_image()))
    sup.start("containerd", [str(BIN / "containerd"), "--config", str(AGENT / "etc" / "containerd" / "config.toml")])
    sup.wait_for("containerd", SOCK.exists, timeout=60)
    import_images(sup)

    own_labels, server_labels = split_labels(s["labels"])
    write(AGENT / "etc" / "kubelet.conf.yaml", yaml.safe_dump(kubelet_config(s), sort_keys=False))
    kubelet = [
        str(BIN / "kubelet"), "--config", str(AGENT / "etc" / "kubelet.conf.yaml"),
        "--bootstrap-kubeconfig", str(AGENT / "bootstrap.kubeconfig"), "--kubeconfig", str(node_kubeconfig),
        "--cert-dir", str(KUBELET_PKI), "--hostname-override", name, "--node-ip", ip,
    ]  # fmt: skip
    if own_labels:
        kubelet += ["--node-labels", ",".join(own_labels)]
    if s["taints"]:
        kubelet += ["--register-with-taints", ",".join(s["taints"])]
    sup.start("kubelet", kubelet + extra_args(s["kubelet_args"]))
    sup.wait_for("the kubelet's client certificate", lambda: Path(current).exists())

    if admin and server_labels:
        labels = [*server_labels, "node-role.kubernetes.io/control-plane=true"]
        sup.wait_for(
            "node labels",
            lambda: kubectl(admin, "label", "node", name, "--overwrite", *labels, check=False).returncode == 0,
        )
    elif admin:
        sup.wait_for(
            "node role label",
            lambda: kubectl(admin, "label", "node", name, "--overwrite", "node-role.kubernetes.io/control-plane=true",
                            check=False).returncode == 0,
        )  # fmt: skip
    elif server_labels:
        log(f"labels a kubelet may not set on itself (the collection's node_labels stage sets them): {server_labels}")

    flannel_env = Path("/run/flannel/subnet.env")
    if s["flannel_backend"] != "none":
        net_conf = {"Network": s["cluster_cidr"], "EnableIPv6": False, "Backend": {"Type": s["flannel_backend"]}}
        write(AGENT / "etc" / "flannel" / "net-conf.json", json.dumps(net_conf))
        iface = iface_of(ip)
        sup.start(
            "flannel",
            [str(BIN / "flanneld"), "--kube-subnet-mgr", "--kubeconfig-file", str(node_kubeconfig), "--ip-masq",
             "--net-config-path", str(AGENT / "etc" / "flannel" / "net-conf.json"),
             "--subnet-file", str(flannel_env), *(["--iface", iface] if iface else [])],
            env={"NODE_NAME": name},
        )  # fmt: skip
        sup.wait_for("flannel's subnet", flannel_env.exists)
        write(
            AGENT / "etc" / "cni" / "net.d" / "10-flannel.conflist",
            json.dumps(cni_config(flannel_env.read_text()), indent=2),
        )
    sup.start(
        "kube-proxy",
        [str(BIN / "kube-proxy"), "--kubeconfig", str(node_kubeconfig), "--hostname-override", name,
         "--cluster-cidr", s["cluster_cidr"], "--proxy-mode", "iptables", "--conntrack-max-per-core", "0",
         "--healthz-bind-address", "127.0.0.1:10256", "--metrics-bind-address", "127.0.0.1:10249", *extra_args(s["proxy_args"])],
    )  # fmt: skip
    log(f"node {name} ({ip}) running: containerd, kubelet, flannel, kube-proxy")
    sd_notify("READY=1")
    sup.run_forever()


def sandbox_image() -> str:
    ref = DATA / "sandbox-image"
    return ref.read_text().strip() if ref.exists() else "localhost/aiinfra-lab/pause:lab"


def snapshot_chunks(stream) -> bytes:
    """The snapshot's bytes from etcd's JSON gateway stream of {"result": {"blob": base64, ...}} objects."""
    decoder, text, out = json.JSONDecoder(), "", bytearray()
    for piece in stream:
        text += piece.decode() if isinstance(piece, bytes) else piece
        while text.strip():
            try:
                obj, end = decoder.raw_decode(text.lstrip())
            except ValueError:
                break  # an object cut by the read: wait for the rest
            text = text.lstrip()[end:]
            if "error" in obj:
                raise SystemExit(f"{NAME}: etcd refused the snapshot: {obj['error']}")
            out += base64.b64decode((obj.get("result") or {}).get("blob") or "")
    if text.strip():
        raise SystemExit(f"{NAME}: the snapshot stream ended inside an object")
    return bytes(out)


def snapshot_is_whole(data: bytes) -> bool:
    """etcd appends the sha256 of the database to a snapshot (etcdctl snapshot save checks it the same way)."""
    return len(data) > 32 and hashlib.sha256(data[:-32]).digest() == data[-32:]


def etcd_snapshot(argv: list[str], config: dict) -> int:
    """`k3s etcd-snapshot save [--name N]`, as K3s names and reports it: <name>-<node>-<unix time> in
    etcd-snapshot-dir (default <data-dir>/server/db/snapshots), "Snapshot <that> saved." on success. The stand-in
    reads the database through etcd's own Maintenance/Snapshot API (its JSON gateway, over loopback with the
    client certificate) and keeps only a snapshot whose appended sha256 matches."""
    if not argv or argv[0] != "save":
        print("usage: k3s etcd-snapshot save [--name NAME]  (the stand-in has no other etcd-snapshot command)",
              file=sys.stderr)  # fmt: skip
        return 2
    name = argv[argv.index("--name") + 1] if "--name" in argv else "on-demand"
    directory = Path(config.get("etcd-snapshot-dir") or SERVER / "db" / "snapshots")
    if not (SERVER / "db" / "etcd").is_dir():
        print(f"{NAME}: no etcd here ({SERVER / 'db' / 'etcd'}): etcd-snapshot needs a running server", file=sys.stderr)
        return 1
    context = ssl.create_default_context(cafile=str(TLS / "server-ca.crt"))
    context.load_cert_chain(str(TLS / "etcd-client.crt"), str(TLS / "etcd-client.key"))
    request = urllib.request.Request("https://127.0.0.1:2379/v3/maintenance/snapshot", data=b"{}", method="POST")
    with urllib.request.urlopen(request, context=context, timeout=300) as response:
        data = snapshot_chunks(iter(lambda: response.read(65536), b""))
    if not snapshot_is_whole(data):
        print(f"{NAME}: the snapshot's sha256 does not match its data ({len(data)} bytes): not saved", file=sys.stderr)
        return 1
    full = f"{name}-{socket.gethostname()}-{int(time.time())}"
    directory.mkdir(parents=True, exist_ok=True)
    os.chmod(directory, 0o700)
    write(directory / full, data, 0o600)
    print(f'level=info msg="Snapshot {full} saved."', file=sys.stderr)
    return 0


def main(argv: list[str]) -> int:
    if argv and argv[0] == "etcd-snapshot":
        config_path = Path("/etc/rancher/k3s/config.yaml")
        config = (yaml.safe_load(config_path.read_text()) or {}) if config_path.exists() else {}
        return etcd_snapshot(argv[1:], config)
    if not argv or argv[0] not in ("server", "agent"):
        print(f"usage: k3s server|agent --config FILE  ({NAME}: the lab's stand-in for K3s, not K3s)", file=sys.stderr)
        return 2
    config_path = Path("/etc/rancher/k3s/config.yaml")
    if "--config" in argv:
        config_path = Path(argv[argv.index("--config") + 1])
    config = yaml.safe_load(config_path.read_text()) if config_path.exists() else {}
    s = settings(config, socket.gethostname())
    sup = Supervisor()
    log(f"{argv[0]} starting (K3s stand-in, data {DATA})")
    try:
        if argv[0] == "server":
            server(s, sup)
        else:
            agent(s, sup)
    except (Exception, SystemExit) as exc:
        # KillMode=process (the unit K3s uses) leaves children to us: a restart would find their ports taken.
        if isinstance(exc, SystemExit) and exc.code in (0, None):
            raise
        log(f"stopping after an error: {type(exc).__name__}: {exc}")
        sup.stop(exit_code=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
