"""A live Kubernetes control plane on loopback, with kwok nodes named like an inventory's hosts.

    python -m lab.live.cluster up [--inventory inventories/lab]
                                    start etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok;
                                    register the inventory's nodes; the last line printed is KUBECONFIG=<path>
    python -m lab.live.cluster nodes --inventory DIR
                                    register the nodes of another inventory (and drop others)
    python -m lab.live.cluster down    stop everything and remove the state directory
    python -m lab.live.cluster status  say what runs

What is real: the API server (its admission chain, Pod Security included, RBAC, CRDs, the Eviction API),
etcd, the scheduler (taints, tolerations, resources, volume node affinity, spreading) and the controllers
(Deployments, ReplicaSets, the PersistentVolume binder, disruption budgets, node lifecycle), built by
lab/live/kubebuild.py from the Kubernetes release of `k3s_version`. What is simulated: the kubelets. kwok plays
every node: it marks Nodes Ready and Pods Running and Ready, but no container runs, no image is pulled and
no GPU exists; GPU capacity and the GPU Operator's feature-discovery labels come from the inventory.
K3s itself is not running (its module is not served by the proxy: see lab/live/kubebuild.py), so its
HelmChart controller and auto-deploy directory are absent.

Only the standard library is used; `ansible-inventory` (from the project venv) reads the inventory.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from lab import ROOT
from lab.live import crds, kubebuild
from lab.nodes import labctl  # the lab inventory's default nodes and secrets
from lab.pins import PinError, read_pin

STATE = ROOT / ".cache" / "cluster"
KWOK_ANNOTATION = "kwok.x-k8s.io/node"
MANAGED_LABEL = "aiinfra.k3s/live-cluster"
SERVICE_CIDR = "10.43.0.0/16"
CLUSTER_CIDR = "10.42.0.0/16"
# The GPU Operator's feature discovery labels a node with its GPU's product and memory (MiB). The inventory
# may say them per host (aiinfra_gpu_product, aiinfra_gpu_memory_mib); otherwise the live nodes claim an L4.
GPU_PRODUCT_DEFAULT = "NVIDIA-L4"
GPU_MEMORY_MIB_DEFAULT = 23034
NODE_CPU = "32"
NODE_MEMORY = "128Gi"
NODE_PODS = "110"
# kwok stages from the kwok module: nodes become Ready and keep a lease; pods become Running and Ready.
KWOK_STAGES = (
    "kustomize/stage/node/fast/node-initialize.yaml",
    "kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
    "kustomize/stage/pod/fast/pod-ready.yaml",
    "kustomize/stage/pod/fast/pod-complete.yaml",
    "kustomize/stage/pod/fast/pod-delete.yaml",
)
# Identity -> (groups) of the static tokens; the admin is what tests and playbooks use.
IDENTITIES = {
    "admin": "system:masters",
    "system:kube-controller-manager": "",
    "system:kube-scheduler": "",
    "kwok-controller": "system:masters",
}
START_TIMEOUT_S = 90


class ClusterError(Exception):
    """A cluster step failed; the message says which and what to do."""


def log(msg: str) -> None:
    print(f"[cluster] {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------- pure functions (unit-tested)


def inventory_nodes(inventory: dict) -> list[dict]:
    """The nodes an inventory describes, from `ansible-inventory --list`: name, roles, GPU count and replicas.

    Group names come from the inventory's own aiinfra_*_group variables (defaults as in the roles).
    """
    hostvars = inventory.get("_meta", {}).get("hostvars", {})

    def members(group: str) -> list[str]:
        seen, todo, hosts = set(), [group], []
        while todo:
            name = todo.pop(0)
            if name in seen or name not in inventory:
                continue
            seen.add(name)
            hosts += [h for h in inventory[name].get("hosts", []) if h not in hosts]
            todo += inventory[name].get("children", [])
        return hosts

    any_vars = next(iter(hostvars.values()), {})
    servers = members(any_vars.get("aiinfra_server_group", "k3s_servers"))
    agents = members(any_vars.get("aiinfra_agent_group", "k3s_agents"))
    gpus = set(members(any_vars.get("aiinfra_gpu_group", "gpu_nodes")))
    nodes = []
    for name in [*servers, *[a for a in agents if a not in servers]]:
        hv = hostvars.get(name, {})
        node = {"name": name, "server": name in servers, "gpu": name in gpus}
        if node["gpu"]:
            classes = hv.get("gpu_operator_time_slicing_classes") or {}
            klass = hv.get("aiinfra_gpu_class") or hv.get("gpu_operator_time_slicing_default") or ""
            node.update(
                count=int(hv.get("aiinfra_gpu_count", 1)),
                replicas=int(classes.get(klass, 1)) if klass else 1,
                product=str(hv.get("aiinfra_gpu_product", GPU_PRODUCT_DEFAULT)),
                memory_mib=int(hv.get("aiinfra_gpu_memory_mib", GPU_MEMORY_MIB_DEFAULT)),
            )
        nodes.append(node)
    return nodes


def node_object(node: dict) -> dict:
    """A kwok-managed Node as a kubelet would register it; GPU nodes as the GPU Operator leaves them.

    Labels and taints that the collection sets (node classes, the GPU taint) are NOT here: the roles
    reconcile them, and the tests check that they do.
    """
    labels = {
        "kubernetes.io/hostname": node["name"],
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "type": "kwok",
        MANAGED_LABEL: "true",
    }
    capacity = {"cpu": NODE_CPU, "memory": NODE_MEMORY, "pods": NODE_PODS}
    if node["server"]:
        labels["node-role.kubernetes.io/control-plane"] = "true"
    if node.get("gpu"):
        labels.update(
            {
                "nvidia.com/gpu.present": "true",
                "nvidia.com/gpu.product": node["product"],
                "nvidia.com/gpu.memory": str(node["memory_mib"]),
                "nvidia.com/gpu.count": str(node["count"]),
            }
        )
        if node["replicas"] > 1:
            labels["nvidia.com/gpu.replicas"] = str(node["replicas"])
            labels["nvidia.com/gpu.sharing-strategy"] = "time-slicing"
            labels["nvidia.com/gpu.product"] = node["product"] + "-SHARED"
        capacity["nvidia.com/gpu"] = str(node["count"] * node["replicas"])
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": node["name"], "labels": labels, "annotations": {KWOK_ANNOTATION: "fake"}},
        "status": {"capacity": capacity, "allocatable": dict(capacity)},
    }


def token_file(tokens: dict[str, str]) -> str:
    """kube-apiserver --token-auth-file lines: token,user,uid,"groups"."""
    lines = []
    for user, token in tokens.items():
        groups = IDENTITIES[user]
        lines.append(f"{token},{user},{user}" + (f',"{groups}"' if groups else ""))
    return "\n".join(lines) + "\n"


def kubeconfig(server: str, ca_pem: bytes, user: str, token: str) -> str:
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "live",
                    "cluster": {"server": server, "certificate-authority-data": base64.b64encode(ca_pem).decode()},
                }
            ],
            "users": [{"name": user, "user": {"token": token}}],
            "contexts": [{"name": "live", "context": {"cluster": "live", "user": user}}],
            "current-context": "live",
        },
        indent=2,
    )


# ---------------------------------------------------------------- process boundary


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=kw.pop("timeout", 120), **kw)
    if proc.returncode != 0:
        raise ClusterError(f"command failed (rc={proc.returncode}): {' '.join(cmd[:4])}: {proc.stderr.strip()[-800:]}")
    return proc


def make_pki(pki: Path) -> None:
    """A CA, the API server's serving certificate (loopback, in-cluster names) and the service-account key."""
    pki.mkdir(parents=True, exist_ok=True)
    os.chmod(pki, 0o700)
    ssl_ = ["openssl"]
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    run(
        [
            *ssl_,
            "req",
            "-x509",
            *ec,
            "-keyout",
            str(pki / "ca.key"),
            "-out",
            str(pki / "ca.crt"),
            "-days",
            "30",
            "-subj",
            "/CN=aiinfra-live-ca",
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
        ]
    )
    run(
        [
            *ssl_,
            "req",
            *ec,
            "-keyout",
            str(pki / "apiserver.key"),
            "-out",
            str(pki / "apiserver.csr"),
            "-subj",
            "/CN=kube-apiserver",
        ]
    )
    sans = (
        "subjectAltName=IP:127.0.0.1,IP:10.43.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,"
        "DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
    )
    ext = pki / "san.ext"
    # Python >= 3.13 verifies strictly (VERIFY_X509_STRICT): key usages and the authority key id must be there.
    ext.write_text(
        f"{sans}\nauthorityKeyIdentifier=keyid\nbasicConstraints=critical,CA:FALSE\n"
        "keyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n"
    )
    run(
        [
            *ssl_,
            "x509",
            "-req",
            "-in",
            str(pki / "apiserver.csr"),
            "-CA",
            str(pki / "ca.crt"),
            "-CAkey",
            str(pki / "ca.key"),
            "-CAcreateserial",
            "-days",
            "30",
            "-extfile",
            str(ext),
            "-out",
            str(pki / "apiserver.crt"),
        ]
    )
    run([*ssl_, "ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", str(pki / "sa.key")])
    run([*ssl_, "ec", "-in", str(pki / "sa.key"), "-pubout", "-out", str(pki / "sa.pub")])


def start(name: str, cmd: list[str], state: Path) -> int:
    logf = open(state / "logs" / f"{name}.log", "ab")  # noqa: SIM115 - the child keeps it
    proc = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT, start_new_session=True, cwd=state)
    (state / "pids" / name).write_text(str(proc.pid))
    return proc.pid


def api_ready(server: str, ca: Path, token: str, path: str = "/readyz") -> bool:
    ctx = ssl.create_default_context(cafile=str(ca))
    req = urllib.request.Request(server + path, headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=2) as resp:
            return resp.status == 200
    except OSError:
        return False


def wait_for(what: str, check, timeout: float = START_TIMEOUT_S, state: Path | None = None, log_name: str = "") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.25)
    tail = ""
    if state and log_name:
        text = (state / "logs" / f"{log_name}.log").read_text(errors="replace")
        tail = "\n" + "\n".join(text.splitlines()[-15:])
    raise ClusterError(f"{what} did not come up within {timeout:.0f}s{tail}")


def alive(state: Path) -> dict[str, int]:
    out = {}
    for pid_file in sorted((state / "pids").glob("*")) if (state / "pids").is_dir() else []:
        pid = int(pid_file.read_text())
        try:
            os.kill(pid, 0)
            out[pid_file.name] = pid
        except ProcessLookupError:
            pass
    return out


def kwok_config(state: Path) -> Path:
    kwok_dir = Path(kubebuild.module_info(kubebuild.KWOK_MODULE, kubebuild.KWOK_VERSION)["Dir"])
    path = state / "kwok-stages.yaml"
    path.write_text("\n---\n".join((kwok_dir / stage).read_text() for stage in KWOK_STAGES))
    return path


def up(state: Path = STATE) -> Path:
    """Start the control plane (or find it running); returns the admin kubeconfig path."""
    admin = state / "kubeconfig"
    if admin.exists() and alive(state).keys() >= {
        "etcd",
        "kube-apiserver",
        "kube-controller-manager",
        "kube-scheduler",
        "kwok",
    }:
        info = json.loads((state / "cluster.json").read_text())
        if api_ready(info["server"], state / "pki" / "ca.crt", info["token"]):
            log(f"already running: {info['server']}")
            return admin
    down(state, quiet=True)
    started = time.monotonic()
    bins = kubebuild.build(read_pin("k3s_version"))
    for sub in ("logs", "pids", "etcd"):
        (state / sub).mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(state, 0o700)
    make_pki(state / "pki")
    pki = state / "pki"
    tokens = {user: secrets.token_hex(24) for user in IDENTITIES}
    tok = state / "tokens.csv"
    tok.touch(mode=0o600)
    tok.write_text(token_file(tokens))
    etcd_port, peer_port, api_port = free_port(), free_port(), free_port()
    server = f"https://127.0.0.1:{api_port}"
    ca_pem = (pki / "ca.crt").read_bytes()
    for user, token in tokens.items():
        path = admin if user == "admin" else state / f"{user.split(':')[-1]}.kubeconfig"
        path.touch(mode=0o600)
        path.write_text(kubeconfig(server, ca_pem, user, token))
    (state / "cluster.json").write_text(json.dumps({"server": server, "token": tokens["admin"], "bin": str(bins)}))
    (state / "cluster.json").chmod(0o600)
    etcd_url, peer_url = f"http://127.0.0.1:{etcd_port}", f"http://127.0.0.1:{peer_port}"
    start(
        "etcd",
        [
            str(bins / "etcd"),
            "--name",
            "live",
            "--data-dir",
            str(state / "etcd"),
            "--listen-client-urls",
            etcd_url,
            "--advertise-client-urls",
            etcd_url,
            "--listen-peer-urls",
            peer_url,
            "--initial-advertise-peer-urls",
            peer_url,
            "--initial-cluster",
            f"live={peer_url}",
            "--unsafe-no-fsync",
            "--quota-backend-bytes",
            str(4 << 30),
            "--log-level",
            "warn",
        ],
        state,
    )
    start(
        "kube-apiserver",
        [
            str(bins / "kube-apiserver"),
            "--etcd-servers",
            etcd_url,
            "--bind-address",
            "127.0.0.1",
            "--advertise-address",
            "127.0.0.1",
            "--secure-port",
            str(api_port),
            "--cert-dir",
            str(pki),
            "--tls-cert-file",
            str(pki / "apiserver.crt"),
            "--tls-private-key-file",
            str(pki / "apiserver.key"),
            "--client-ca-file",
            str(pki / "ca.crt"),
            "--token-auth-file",
            str(tok),
            "--service-account-issuer",
            "https://kubernetes.default.svc.cluster.local",
            "--service-account-key-file",
            str(pki / "sa.pub"),
            "--service-account-signing-key-file",
            str(pki / "sa.key"),
            "--service-cluster-ip-range",
            SERVICE_CIDR,
            "--authorization-mode",
            "Node,RBAC",
            "--allow-privileged=true",
            "--enable-admission-plugins",
            "NodeRestriction",
            "--profiling=false",
            "--v=1",
            # The loopback address cannot back the `kubernetes` Service's endpoints; nothing in the cluster calls it.
            "--endpoint-reconciler-type",
            "none",
        ],
        state,
    )
    wait_for(
        "kube-apiserver",
        lambda: api_ready(server, pki / "ca.crt", tokens["admin"]),
        state=state,
        log_name="kube-apiserver",
    )
    start(
        "kube-controller-manager",
        [
            str(bins / "kube-controller-manager"),
            "--kubeconfig",
            str(state / "kube-controller-manager.kubeconfig"),
            "--leader-elect=false",
            "--bind-address",
            "127.0.0.1",
            "--secure-port",
            "0",
            "--service-account-private-key-file",
            str(pki / "sa.key"),
            "--root-ca-file",
            str(pki / "ca.crt"),
            "--use-service-account-credentials=true",
            "--cluster-cidr",
            CLUSTER_CIDR,
            "--allocate-node-cidrs=true",
            "--service-cluster-ip-range",
            SERVICE_CIDR,
            "--controllers",
            "*",
            "--v=1",
        ],
        state,
    )
    start(
        "kube-scheduler",
        [
            str(bins / "kube-scheduler"),
            "--kubeconfig",
            str(state / "kube-scheduler.kubeconfig"),
            "--leader-elect=false",
            "--bind-address",
            "127.0.0.1",
            "--secure-port",
            "0",
            "--v=1",
        ],
        state,
    )
    start(
        "kwok",
        [
            str(bins / "kwok"),
            "--kubeconfig",
            str(state / "kwok-controller.kubeconfig"),
            "--config",
            str(kwok_config(state)),
            "--manage-nodes-with-annotation-selector",
            f"{KWOK_ANNOTATION}=fake",
            "--cidr",
            "10.42.0.1/16",
            "--node-ip",
            "127.0.0.1",
            "--node-lease-duration-seconds",
            "40",
            "--server-address",
            f"127.0.0.1:{free_port()}",
        ],
        state,
    )
    # The service account of `default` appears once the controller manager runs: the cluster is usable then.
    wait_for(
        "kube-controller-manager (default ServiceAccount)",
        lambda: kubectl(admin, "get", "serviceaccount", "default", "-n", "default", check=False).returncode == 0,
        state=state,
        log_name="kube-controller-manager",
    )
    names = crds.install([str(bins / "kubectl"), "--kubeconfig", str(admin)])
    log(f"{len(names)} CRDs from upstream Go modules established")
    log(
        f"control plane up in {time.monotonic() - started:.1f}s at {server} (Kubernetes {bins.parent.name.split('-')[0]})"
    )
    return admin


def kubectl(
    kubeconfig_path: Path, *args: str, stdin: str | None = None, check: bool = True
) -> subprocess.CompletedProcess:
    info = json.loads((kubeconfig_path.parent / "cluster.json").read_text())
    proc = subprocess.run(
        [str(Path(info["bin"]) / "kubectl"), "--kubeconfig", str(kubeconfig_path), *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if check and proc.returncode != 0:
        raise ClusterError(f"kubectl {' '.join(args[:3])}: {proc.stderr.strip()[-800:]}")
    return proc


def inventory_sources(inventory: Path) -> list[str]:
    """-i arguments for an inventory; the lab's without hosts.yml (no lab nodes yet) gets the default lab hosts."""
    sources = ["-i", str(inventory)]
    if inventory.resolve() == (ROOT / "inventories" / "lab").resolve() and not labctl.INVENTORY_FILE.exists():
        extra = STATE.parent / "cluster-lab-hosts.yml"
        names = labctl.node_names(int(os.environ.get("LAB_SERVERS", 1)), int(os.environ.get("LAB_GPU_AGENTS", 2)))
        hosts = {kind: {n: {} for n, k in names.items() if k == kind} for kind in ("server", "gpu")}
        extra.touch(mode=0o600)
        extra.chmod(0o600)  # the lab's secrets, as labctl writes them into hosts.yml
        extra.write_text(
            json.dumps(
                {
                    "all": {
                        "vars": labctl.ensure_secrets(),
                        "children": {
                            "k3s_servers": {"hosts": hosts["server"]},
                            "k3s_agents": {"hosts": hosts["gpu"]},
                            "gpu_nodes": {"hosts": hosts["gpu"]},
                        },
                    }
                }
            )
        )
        sources += ["-i", str(extra)]
    return sources


def read_inventory(inventory: Path) -> dict:
    """`ansible-inventory --list` of an inventory (see inventory_sources)."""
    sources = inventory_sources(inventory)
    tool = shutil.which("ansible-inventory") or str(Path(sys.executable).parent / "ansible-inventory")
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"))
    return json.loads(run([tool, *sources, "--list"], env=env, cwd=ROOT).stdout)


def register_nodes(kubeconfig_path: Path, nodes: list[dict]) -> list[str]:
    """Make the live nodes exactly these (kwok-managed, named like the hosts); returns their names."""
    wanted = {n["name"] for n in nodes}
    existing = kubectl(kubeconfig_path, "get", "nodes", "-l", MANAGED_LABEL, "-o", "name").stdout.split()
    stale = [e for e in existing if e.split("/", 1)[1] not in wanted]
    if stale:
        kubectl(kubeconfig_path, "delete", "--wait=false", *stale)
    objects = {"apiVersion": "v1", "kind": "List", "items": [node_object(n) for n in nodes]}
    kubectl(
        kubeconfig_path,
        "apply",
        "--server-side",
        "--force-conflicts",
        "--field-manager",
        "kubelet",
        "-f",
        "-",
        stdin=json.dumps(objects),
    )
    names = sorted(wanted)
    if names:
        kubectl(kubeconfig_path, "wait", "--for=condition=Ready", "--timeout=60s", *[f"node/{n}" for n in names])
    return names


def down(state: Path = STATE, quiet: bool = False) -> None:
    for name, pid in alive(state).items():
        try:
            os.killpg(pid, signal.SIGTERM)
        except ProcessLookupError:
            continue
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)
        else:
            os.killpg(pid, signal.SIGKILL)
        if not quiet:
            log(f"stopped {name}")
    shutil.rmtree(state, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("cmd", choices=("up", "nodes", "down", "status"))
    parser.add_argument("--inventory", type=Path, default=ROOT / "inventories" / "lab")
    args = parser.parse_args(argv)
    try:
        if args.cmd == "down":
            down()
            return 0
        if args.cmd == "status":
            running = alive(STATE)
            print("\n".join(f"{n:<24} pid {p}" for n, p in running.items()) or "not running")
            return 0
        admin = up() if args.cmd == "up" else STATE / "kubeconfig"
        if not admin.exists():
            raise ClusterError("no live cluster: run `make cluster` first")
        names = register_nodes(admin, inventory_nodes(read_inventory(args.inventory)))
        log(f"{len(names)} kwok node(s) Ready from {args.inventory}: {', '.join(names)}")
        print(f"KUBECONFIG={admin}")
    except (ClusterError, PinError, kubebuild.BuildError) as exc:
        print(f"[cluster] ERROR: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
