"""Lab controller for aiinfra.k3s: podman containers that behave like bare-metal Debian hosts.

Each lab node is a privileged podman container running systemd as PID 1 on its own podman
network, reached by Ansible over SSH as a non-root user with passwordless sudo, like a real host.

    python -m lab.nodes.labctl image                          build the node image unless the cached one matches
    python -m lab.nodes.labctl up --servers 1 --gpu-agents 2  start/reconcile nodes, write inventories/lab/hosts.yml
    python -m lab.nodes.labctl down                           remove nodes, network, inventory and keys
    python -m lab.nodes.labctl status                         list lab nodes

Podman is pointed at lab/nodes/containers.conf through CONTAINERS_CONF (runc, cgroupfs, no ulimits).
Only the standard library is used, so the lab works before the project venv exists.
"""

from __future__ import annotations

import argparse
import hashlib
import ipaddress
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from lab import ROOT, collection_module

LAB_DIR = Path(__file__).resolve().parent  # lab/nodes: containers.conf and the node image recipe (image/)
IMAGE_DIR = LAB_DIR / "image"
STATE_DIR = ROOT / ".cache" / "lab"
INVENTORY_FILE = ROOT / "inventories" / "lab" / "hosts.yml"
IMAGE_REPO = "localhost/aiinfra-k3s-lab-node"
SUITE = "bookworm"
VARIANT = "minbase"
NETWORK = "aiinfra-lab"
LABEL = "io.aiinfra.lab"
PREFIX = "lab"
LAB_USER = "ansible"
APT_PACKAGES = ("podman", "runc", "debootstrap", "uidmap", "slirp4netns", "fuse-overlayfs", "zstd")
BOOT_TIMEOUT_S = 120


class LabError(Exception):
    """A lab step failed; the message says which and what to do."""


def log(msg: str) -> None:
    print(f"[lab] {msg}", flush=True)


# ---------------------------------------------------------------- pure functions (unit-tested)


def read_packages(text: str) -> list[str]:
    """Package names from packages.txt: one per line, '#' comments and blanks ignored."""
    names = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            names.append(line)
    return names


def recipe_hash(packages_text: str, customize_text: str, suite: str = SUITE, variant: str = VARIANT) -> str:
    """Content hash of everything that decides what the image contains."""
    h = hashlib.sha256()
    for part in (suite, variant, ",".join(sorted(read_packages(packages_text))), customize_text):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


def debian_mirror(sources: list[tuple[str, str]]) -> str | None:
    """First Debian archive URI among (filename, content) apt source files, deb822 or one-line form."""
    for name, text in sources:
        if name.endswith(".sources"):
            for stanza in text.split("\n\n"):
                fields = {}
                for line in stanza.splitlines():
                    if ":" in line and not line.lstrip().startswith("#"):
                        key, value = line.split(":", 1)
                        fields[key.strip().lower()] = value.strip()
                suites = fields.get("suites", "").split()
                if fields.get("types", "deb").split()[0] == "deb" and SUITE in suites and "uris" in fields:
                    return fields["uris"].split()[0].rstrip("/")
        else:
            for line in text.splitlines():
                words = line.split("#", 1)[0].split()
                if len(words) >= 3 and words[0] == "deb":
                    words = [w for w in words if not w.startswith("[")]
                    if len(words) >= 3 and words[2] == SUITE:
                        return words[1].rstrip("/")
    return None


def node_names(servers: int, gpu_agents: int, prefix: str = PREFIX) -> dict[str, str]:
    """Lab node name -> kind ('server' or 'gpu'), in creation order."""
    if servers < 1:
        raise LabError("--servers must be at least 1: a cluster needs a control plane")
    if gpu_agents < 0:
        raise LabError("--gpu-agents must be 0 or more")
    names = {f"{prefix}-cp-{i}": "server" for i in range(1, servers + 1)}
    names.update({f"{prefix}-gpu-{i}": "gpu" for i in range(1, gpu_agents + 1)})
    return names


def render_inventory(
    nodes: dict[str, dict],
    key_file: str,
    known_hosts: str,
    secret_vars: dict[str, str] | None = None,
    admin_networks: list[str] | None = None,
) -> str:
    """YAML inventory of the lab nodes. Group names match inventories/lab/group_vars/all.yml.

    secret_vars: the lab's random secrets (k3s_token, k3s_agent_token, litellm_master_key, ...), written as
    variables of all. admin_networks: where this machine reaches the nodes from (the network's gateway): the nodes'
    firewall lets it use SSH and the API server, as an operator's network in a real inventory.
    """
    lines = [
        "---",
        "# Written by lab/nodes/labctl.py up; do not edit (make lab-down removes it).",
        "all:",
        "  vars:",
        f"    ansible_user: {LAB_USER}",
        f"    ansible_ssh_private_key_file: {key_file}",
        "    ansible_ssh_common_args: >-",
        f"      -o UserKnownHostsFile={known_hosts} -o StrictHostKeyChecking=yes",
    ]
    if admin_networks:
        lines.append(f"    prereq_firewall_admin_networks: {json.dumps(list(admin_networks))}")
    lines += [f"    {name}: {value!r}" for name, value in sorted((secret_vars or {}).items())]
    lines += ["  children:"]
    groups = {"k3s_servers": "server", "k3s_agents": "gpu", "gpu_nodes": "gpu"}
    for group, kind in groups.items():
        members = [n for n, v in nodes.items() if v["kind"] == kind]
        lines.append(f"    {group}:")
        if not members:
            lines.append("      hosts: {}")
            continue
        lines.append("      hosts:")
        for name in members:
            lines.append(f"        {name}:")
            if group != "gpu_nodes":
                lines.append(f"          ansible_host: {nodes[name]['ip']}")
                # The image's interpreter, named so that no run spends a round trip per node discovering it.
                lines.append("          ansible_python_interpreter: /usr/bin/python3")
    return "\n".join(lines) + "\n"


def known_hosts_lines(nodes: dict[str, dict]) -> str:
    """known_hosts entries (name and IP) from each node's host public key."""
    out = []
    for name, node in nodes.items():
        out.append(f"{name},{node['ip']} {node['hostkey']}")
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------- process boundary


def run(
    cmd: list[str],
    *,
    check: bool = True,
    capture: bool = True,
    input_bytes: bytes | None = None,
    timeout: float | None = 600,
) -> subprocess.CompletedProcess:
    try:
        proc = subprocess.run(cmd, input=input_bytes, capture_output=capture, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as exc:
        raise LabError(f"command timed out after {timeout}s: {' '.join(cmd[:4])} ...") from exc
    if check and proc.returncode != 0:
        err = (proc.stderr or b"").decode(errors="replace").strip()
        raise LabError(f"command failed (rc={proc.returncode}): {' '.join(cmd)}\n{err}")
    return proc


def podman(*args: str, **kw) -> subprocess.CompletedProcess:
    return run(["podman", *args], **kw)


def out(proc: subprocess.CompletedProcess) -> str:
    return proc.stdout.decode().strip()


def ensure_host_packages() -> None:
    missing = [p for p in APT_PACKAGES if not Path(f"/usr/share/doc/{p}").exists() and shutil.which(p) is None]
    if not missing:
        return
    if os.geteuid() != 0:
        raise LabError(f"missing host packages {missing}: run as root or `sudo apt-get install {' '.join(missing)}`")
    log(f"installing missing host packages with apt-get: {' '.join(missing)}")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    subprocess.run(["apt-get", "update", "-qq"], check=True, env=env)
    subprocess.run(["apt-get", "install", "-y", "-qq", *missing], check=True, env=env)


def image_tag() -> tuple[str, str]:
    digest = recipe_hash((IMAGE_DIR / "packages.txt").read_text(), (IMAGE_DIR / "customize.sh").read_text())
    return f"{IMAGE_REPO}:{digest[:16]}", digest


def host_mirror() -> str:
    if os.environ.get("LAB_MIRROR"):
        return os.environ["LAB_MIRROR"]
    files = [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*"))]
    sources = [(p.name, p.read_text()) for p in files if p.is_file()]
    mirror = debian_mirror(sources)
    if not mirror:
        raise LabError(f"no Debian {SUITE} mirror in the apt sources of this machine: set LAB_MIRROR=<url>")
    return mirror


def build_image(force: bool = False) -> str:
    tag, digest = image_tag()
    if not force and podman("image", "exists", tag, check=False).returncode == 0:
        log(f"image {tag} is cached (recipe hash {digest[:16]})")
        return tag
    packages = read_packages((IMAGE_DIR / "packages.txt").read_text())
    mirror = host_mirror()
    log(f"building image {tag}: debootstrap {VARIANT} {SUITE} from the host's apt mirror")
    started = time.monotonic()
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=STATE_DIR, prefix="rootfs-") as tmp:
        rootfs = Path(tmp) / "rootfs"
        run(
            ["debootstrap", f"--variant={VARIANT}", f"--include={','.join(packages)}", SUITE, str(rootfs), mirror],
            timeout=1800,
        )
        shutil.copy(IMAGE_DIR / "customize.sh", rootfs / "tmp" / "customize.sh")
        run(["chroot", str(rootfs), "/bin/sh", "/tmp/customize.sh"])
        (rootfs / "tmp" / "customize.sh").unlink()
        tar = subprocess.Popen(["tar", "-C", str(rootfs), "--numeric-owner", "-c", "."], stdout=subprocess.PIPE)
        podman(
            "import",
            "--change",
            "CMD=/sbin/init",
            "--message",
            f"recipe {digest}",
            "-",
            tag,
            input_bytes=tar.stdout.read(),
            timeout=900,
        )
        tar.wait()
    log(f"image {tag} built in {time.monotonic() - started:.0f}s")
    return tag


def lab_containers() -> dict[str, dict[str, str]]:
    """Existing lab containers: name -> {image, state} (state as podman says it: running, exited, ...)."""
    proc = podman("ps", "-a", "--filter", f"label={LABEL}", "--format", "json")
    return {
        c["Names"][0]: {"image": str(c.get("Image", "")), "state": str(c.get("State", ""))}
        for c in json.loads(out(proc) or "[]")
    }


# Runs in a node in one `podman exec`: waits (bounded) until systemd has booted, then makes the node reachable.
PROVISION = """deadline=$(( $(date +%s) + {boot_timeout} ))
until state=$(systemctl is-system-running 2>/dev/null); [ "$state" = running ] || [ "$state" = degraded ]; do
  if [ "$(date +%s)" -ge "$deadline" ]; then
    echo "systemd did not reach running within {boot_timeout}s (last state $state)" >&2
    exit 3
  fi
  sleep 1
done
set -e
[ -f /etc/ssh/ssh_host_ed25519_key ] || ssh-keygen -A >/dev/null
id -u {user} >/dev/null 2>&1 || useradd --create-home --shell /bin/bash {user}
echo '{user} ALL=(ALL) NOPASSWD: ALL' > /etc/sudoers.d/90-{user}
chmod 0440 /etc/sudoers.d/90-{user}
install -d -m 0700 -o {user} -g {user} /home/{user}/.ssh
printf '%s\\n' '{pubkey}' > /home/{user}/.ssh/authorized_keys
chown {user}:{user} /home/{user}/.ssh/authorized_keys
chmod 0600 /home/{user}/.ssh/authorized_keys
systemctl enable ssh.service >/dev/null 2>&1
systemctl is-active --quiet ssh.service || systemctl restart ssh.service
cat /etc/ssh/ssh_host_ed25519_key.pub
"""


def ensure_key() -> Path:
    key = STATE_DIR / "id_ed25519"
    if not key.exists():
        STATE_DIR.mkdir(parents=True, exist_ok=True)
        run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "aiinfra-k3s-lab", "-f", str(key)])
        log(f"generated lab SSH key {key}")
    key.chmod(0o600)
    return key


# The lab's random secrets: file name under STATE_DIR -> (inventory variable, how to make one).
LAB_SECRETS = {
    "k3s-token": ("k3s_token", lambda: secrets.token_hex(32)),
    "k3s-agent-token": ("k3s_agent_token", lambda: secrets.token_hex(32)),
    "litellm-master-key": ("litellm_master_key", lambda: "sk-" + secrets.token_hex(24)),
    "grafana-admin-password": ("monitoring_grafana_admin_password", lambda: secrets.token_urlsafe(24)),
}


def secret_refused(variable: str, value: str) -> bool:
    """Whether the collection's own checks refuse a lab secret: a random draw can hold a word they take for a
    placeholder (a hex master key with "1234" in it failed CI once), so such a draw is made again."""
    if variable == "litellm_master_key":
        return bool(collection_module("gateway").master_key_problems(value))
    return collection_module("inventory_spec").secret_strength_error(value) is not None


def ensure_secrets() -> dict[str, str]:
    """The lab's random secrets (mode 0600 files, made once, never printed) as inventory variables. A stored one the
    collection's checks refuse is drawn again."""
    values = {}
    for file_name, (variable, make) in LAB_SECRETS.items():
        path = STATE_DIR / file_name
        value = path.read_text().strip() if path.exists() else ""
        for _attempt in range(100):
            if value and not secret_refused(variable, value):
                break
            value = make()
        else:
            raise SystemExit(f"[lab] no random {variable} the collection's checks accept in 100 draws")
        if not path.exists() or path.read_text().strip() != value:
            STATE_DIR.mkdir(parents=True, exist_ok=True)
            path.touch(mode=0o600)
            path.chmod(0o600)
            path.write_text(value + "\n")
        path.chmod(0o600)
        values[variable] = value
    return values


def volume_name(node: str, what: str) -> str:
    return f"aiinfra-lab-{node}-{what}"


# Kernel settings that are host-wide on this VM and that a kubelet (or podman) in a lab node changes: saved before
# the first node starts, restored by `down` (and `restore-sysctls`).
HOST_SYSCTLS = ("vm.overcommit_memory", "kernel.panic", "kernel.panic_on_oops", "net.ipv4.ip_forward")
SYSCTL_FILE = STATE_DIR / "host-sysctls.json"


def sysctl_path(key: str) -> Path:
    return Path("/proc/sys") / key.replace(".", "/")


def save_sysctls() -> None:
    if SYSCTL_FILE.exists():
        return
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    values = {k: sysctl_path(k).read_text().strip() for k in HOST_SYSCTLS if sysctl_path(k).exists()}
    SYSCTL_FILE.write_text(json.dumps(values, indent=1) + "\n")
    log(f"saved the host's {', '.join(values)} to {SYSCTL_FILE.relative_to(ROOT)}")


def restore_sysctls() -> dict[str, tuple[str, str]]:
    """Put back what save_sysctls recorded; returns {key: (was, restored)} for what differed."""
    if not SYSCTL_FILE.exists():
        return {}
    changed = {}
    for key, value in json.loads(SYSCTL_FILE.read_text()).items():
        current = sysctl_path(key).read_text().strip()
        if current != value:
            sysctl_path(key).write_text(value + "\n")
            changed[key] = (current, value)
    for key, (was, now) in changed.items():
        log(f"restored {key}: {was} -> {now}")
    return changed


def network_ipv4() -> dict:
    """The lab network's IPv4 subnet and gateway (podman picks a free subnet when it creates the network)."""
    info = json.loads(out(podman("network", "inspect", "--format", "json", NETWORK)))
    info = info[0] if isinstance(info, list) else info
    return next(s for s in info.get("subnets") or [] if ":" not in s["subnet"])


def network_subnet() -> str:
    """The lab network's IPv4 subnet."""
    return network_ipv4()["subnet"]


def node_addresses(names: dict[str, str], subnet: str) -> dict[str, str]:
    """A fixed address per lab node in subnet, in name order from the 11th host address: stable across restarts."""
    net = ipaddress.ip_network(subnet)
    return {name: str(net.network_address + 10 + i) for i, name in enumerate(sorted(names), start=1)}


def up(servers: int, gpu_agents: int) -> None:
    wanted = node_names(servers, gpu_agents)
    ensure_host_packages()
    tag = build_image()
    key = ensure_key()
    secret_vars = ensure_secrets()
    pubkey = (key.with_suffix(".pub")).read_text().strip()
    if podman("network", "exists", NETWORK, check=False).returncode != 0:
        podman("network", "create", "--label", f"{LABEL}=1", NETWORK)
        log(f"created podman network {NETWORK}")
    save_sysctls()
    addresses = node_addresses(wanted, network_subnet())
    existing = lab_containers()
    for name in list(existing):
        if name not in wanted or existing[name]["image"] != tag:
            podman("rm", "-f", "-t", "5", name)
            for what in ("rancher", "kubelet"):
                podman("volume", "rm", "-f", volume_name(name, what), check=False)
            log(f"removed {name} ({'not in the wanted set' if name not in wanted else 'image recipe changed'})")
            del existing[name]
    for name, kind in wanted.items():
        if name not in existing:
            podman(
                "run",
                "-d",
                "--name",
                name,
                "--hostname",
                name,
                "--network",
                NETWORK,
                # A fixed address: a node stopped and started again (the node-loss test) keeps its inventory address.
                "--ip",
                addresses[name],
                "--systemd=always",
                "--cgroupns=private",
                "--privileged",
                # Container and kubelet state on volumes: overlayfs snapshots cannot live on the node's overlay root.
                "--volume",
                f"{volume_name(name, 'rancher')}:/var/lib/rancher",
                "--volume",
                f"{volume_name(name, 'kubelet')}:/var/lib/kubelet",
                "--label",
                f"{LABEL}=1",
                "--label",
                f"{LABEL}.kind={kind}",
                tag,
                "/usr/local/sbin/aiinfra-lab-init",
            )
            log(f"started {name} ({kind})")
        elif existing[name]["state"] != "running":
            podman("start", name)
    script = PROVISION.format(user=LAB_USER, pubkey=pubkey, boot_timeout=BOOT_TIMEOUT_S)

    def provision(name: str) -> str:
        proc = podman("exec", name, "/bin/sh", "-c", script, check=False, timeout=BOOT_TIMEOUT_S + 60)
        if proc.returncode != 0:
            raise LabError(f"{name}: {(proc.stderr or b'').decode(errors='replace').strip()} (rc={proc.returncode})")
        return out(proc)

    with ThreadPoolExecutor(max_workers=8) as pool:  # the nodes boot and are provisioned side by side
        hostkeys = dict(zip(wanted, pool.map(provision, wanted)))
    inspected = json.loads(out(podman("inspect", "--format", "json", *wanted)))
    ips = {
        c["Name"].lstrip("/"): c["NetworkSettings"]["Networks"].get(NETWORK, {}).get("IPAddress", "") for c in inspected
    }
    nodes: dict[str, dict] = {}
    for name, kind in wanted.items():
        if not ips.get(name):
            raise LabError(f"{name} has no address on the podman network {NETWORK}: see `podman inspect {name}`")
        hostkey = " ".join(hostkeys[name].splitlines()[-1].split()[:2])
        nodes[name] = {"kind": kind, "ip": ips[name], "hostkey": hostkey}
    known = STATE_DIR / "known_hosts"
    known.write_text(known_hosts_lines(nodes))
    INVENTORY_FILE.touch(mode=0o600)
    INVENTORY_FILE.chmod(0o600)  # it holds the lab's cluster token
    gateway = network_ipv4().get("gateway")
    INVENTORY_FILE.write_text(
        render_inventory(nodes, str(key), str(known), secret_vars, [f"{gateway}/32"] if gateway else None)
    )
    for name, node in nodes.items():
        log(f"ready {name:<12} {node['kind']:<7} {node['ip']}")
    log(f"inventory written to {INVENTORY_FILE.relative_to(ROOT)}")


def down(kubeconfig: Path | None = None) -> None:
    try:
        remove_lab(kubeconfig)
    finally:  # whatever failed above, the host gets its kernel settings back
        restore_sysctls()
        SYSCTL_FILE.unlink(missing_ok=True)


def remove_lab(kubeconfig: Path | None) -> None:
    if shutil.which("podman"):
        for name in lab_containers():
            podman("rm", "-f", "-t", "5", name)
            log(f"removed {name}")
        volumes = out(podman("volume", "ls", "--format", "{{.Name}}", check=False)).split()
        for volume in [v for v in volumes if v.startswith("aiinfra-lab-")]:
            podman("volume", "rm", "-f", volume)
            log(f"removed volume {volume}")
        remove_node_cgroups()
        if podman("network", "exists", NETWORK, check=False).returncode == 0:
            podman("network", "rm", NETWORK)
            log(f"removed network {NETWORK}")
    for path in (
        INVENTORY_FILE,
        STATE_DIR / "known_hosts",
        STATE_DIR / "id_ed25519",
        STATE_DIR / "id_ed25519.pub",
        *(STATE_DIR / name for name in LAB_SECRETS),
        *([kubeconfig] if kubeconfig else []),  # the admin credentials of the cluster that is gone
    ):
        path.unlink(missing_ok=True)


DEVICE_PLUGIN = "aiinfra-lab-device-plugin"
DEVICE_PLUGIN_UNIT = """[Unit]
Description=aiinfra lab STAND-IN NVIDIA device plugin (no GPU): advertises {resource} from the inventory
After=network-online.target

[Service]
ExecStart=/usr/local/lib/aiinfra-lab/{name} --resource {resource} --count {count} --replicas {replicas}
Restart=always
RestartSec=2s

[Install]
WantedBy=multi-user.target
"""


def device_plugin_unit(count: int, replicas: int, resource: str = "nvidia.com/gpu") -> str:
    return DEVICE_PLUGIN_UNIT.format(name=DEVICE_PLUGIN, resource=resource, count=count, replicas=replicas)


def install_device_plugins(gpus: dict[str, tuple[int, int]], binary: Path) -> None:
    """Run the stand-in device plugin on each GPU node (what the GPU Operator's device plugin DaemonSet does on a
    real site): GPU count and time-slicing replicas from the inventory. Nothing changes when all is in place."""
    digest = hashlib.sha256(binary.read_bytes()).hexdigest()
    for name, (count, replicas) in sorted(gpus.items()):
        unit = device_plugin_unit(count, replicas)
        target = f"/usr/local/lib/aiinfra-lab/{DEVICE_PLUGIN}"
        probe = podman(
            "exec", name, "/bin/sh", "-c",
            f"sha256sum {target} 2>/dev/null | cut -d' ' -f1; cat /etc/systemd/system/{DEVICE_PLUGIN}.service 2>/dev/null",
            check=False,
        )  # fmt: skip
        have = out(probe)
        if have.splitlines()[:1] == [digest] and have.split("\n", 1)[-1].strip() == unit.strip():
            continue
        podman("exec", name, "mkdir", "-p", "/usr/local/lib/aiinfra-lab")
        podman("cp", str(binary), f"{name}:{target}")
        podman("exec", "-i", name, "/bin/sh", "-c", f"cat > /etc/systemd/system/{DEVICE_PLUGIN}.service",
               input_bytes=unit.encode())  # fmt: skip
        podman("exec", name, "systemctl", "daemon-reload")
        podman("exec", name, "systemctl", "enable", DEVICE_PLUGIN)
        podman("exec", name, "systemctl", "restart", DEVICE_PLUGIN)
        log(f"{name}: stand-in device plugin advertises {count} x {replicas} nvidia.com/gpu")


def serving_ready(kubectl: list[str], namespace: str, timeout: float = 420) -> list[dict]:
    """Wait (bounded) until every pod of the serving namespace is Running and Ready; returns the pods."""
    deadline = time.monotonic() + timeout
    pods: list[dict] = []
    while True:
        proc = run([*kubectl, "get", "pods", "-n", namespace, "-o", "json"], check=False)
        pods = json.loads(out(proc) or "{}").get("items", []) if proc.returncode == 0 else []
        waiting = [p["metadata"]["name"] for p in pods if not pod_ready(p)]
        if pods and not waiting:
            return pods
        if time.monotonic() > deadline:
            raise LabError(
                f"pods of {namespace} not Running and Ready after {timeout:.0f}s: {', '.join(waiting) or 'none exist'}"
                f" (kubectl -n {namespace} describe pod NAME)"
            )
        time.sleep(3)


def pod_ready(pod: dict) -> bool:
    status = pod.get("status", {})
    conditions = {c.get("type"): c.get("status") for c in status.get("conditions", [])}
    return status.get("phase") == "Running" and conditions.get("Ready") == "True"


def serving(kubeconfig: Path, kubectl_bin: str, namespace: str) -> None:
    kubectl = [kubectl_bin, "--kubeconfig", str(kubeconfig)]
    started = time.monotonic()
    pods = serving_ready(kubectl, namespace)
    for pod in pods:
        log(f"ready {pod['metadata']['name']:<44} on {pod['spec'].get('nodeName', '?')}")
    log(f"{len(pods)} pod(s) of {namespace} Running and Ready ({time.monotonic() - started:.0f}s of waiting)")
    svc = json.loads(out(run([*kubectl, "get", "services", "-n", namespace, "-o", "json"])))["items"]
    for item in svc:
        ports = ",".join(str(p["port"]) for p in item["spec"].get("ports", []))
        log(
            f"service {item['metadata']['name']}.{namespace}.svc.cluster.local:{ports} ({item['spec'].get('clusterIP')})"
        )
    log(f"reach the gateway from a lab node or a pod, or: kubectl -n {namespace} port-forward svc/<gateway> 4000")
    print(f"KUBECONFIG={kubeconfig}")


def remove_node_cgroups(root: Path = Path("/sys/fs/cgroup/systemd"), timeout: float = 20) -> None:
    """The per-node name=systemd cgroups lab/nodes/image's init made, once their nodes are gone (deepest first). A cgroup
    whose last process is still exiting is busy: asked again for up to `timeout` s, then left and named."""
    deadline = time.monotonic() + timeout
    while True:
        busy = []
        for top in root.glob("aiinfra-lab-node-*"):
            for path in sorted([*top.rglob("*"), top], key=lambda p: len(p.parts), reverse=True):
                if path.is_dir():
                    try:
                        path.rmdir()
                    except OSError:
                        busy.append(path)
        if not busy or time.monotonic() > deadline:
            break
        time.sleep(1)
    for path in busy[:3]:
        log(f"left the busy cgroup {path} (remove it once its processes have exited)")


def status() -> None:
    for name, container in sorted(lab_containers().items()):
        print(f"{name:<14} {container['state']:<10} {container['image']}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    img = sub.add_parser("image", help="build the node image unless cached")
    img.add_argument("--force", action="store_true")
    upp = sub.add_parser("up", help="start the lab nodes and write the inventory")
    upp.add_argument("--servers", type=int, default=1)
    upp.add_argument("--gpu-agents", type=int, default=2)
    dwn = sub.add_parser("down", help="remove the lab")
    dwn.add_argument("--kubeconfig", default=None, help="the lab's admin kubeconfig, removed with it")
    sub.add_parser("status", help="list lab nodes")
    sub.add_parser("hash", help="print the image tag the recipe gives")
    dev = sub.add_parser("device-plugins", help="run the stand-in device plugin on the inventory's GPU nodes")
    dev.add_argument("--bin", required=True, help="directory with aiinfra-lab-device-plugin (lab/nodes/nodebuild.py)")
    dev.add_argument("--inventory", default=str(ROOT / "inventories" / "lab"))
    srv = sub.add_parser("serving", help="wait until the serving namespace's pods are Ready; print how to reach them")
    srv.add_argument("--kubeconfig", required=True)
    srv.add_argument("--kubectl", required=True)
    srv.add_argument("--namespace", default="ai-serving")
    sub.add_parser("restore-sysctls", help="put back the host's kernel settings saved before the first node started")
    args = parser.parse_args(argv)
    os.environ.setdefault("CONTAINERS_CONF", str(LAB_DIR / "containers.conf"))
    try:
        if args.cmd == "image":
            ensure_host_packages()
            build_image(force=args.force)
        elif args.cmd == "up":
            up(args.servers, args.gpu_agents)
        elif args.cmd == "down":
            down(Path(args.kubeconfig) if args.kubeconfig else None)
        elif args.cmd == "status":
            status()
        elif args.cmd == "hash":
            print(image_tag()[0])
        elif args.cmd == "device-plugins":
            from lab.live import cluster  # the inventory reader (needs the project venv's ansible-inventory)

            nodes = cluster.inventory_nodes(cluster.read_inventory(Path(args.inventory)))
            gpus = {n["name"]: (n["count"], n["replicas"]) for n in nodes if n["gpu"]}
            install_device_plugins(gpus, Path(args.bin) / DEVICE_PLUGIN)
        elif args.cmd == "serving":
            serving(Path(args.kubeconfig), args.kubectl, args.namespace)
        elif args.cmd == "restore-sysctls":
            restore_sysctls()
    except LabError as exc:
        print(f"[lab] ERROR: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
