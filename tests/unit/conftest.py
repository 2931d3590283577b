"""Make `ansible_collections.aiinfra.k3s` importable from the working tree and load YAML cases.

The lab package (`lab.nodes`, `lab.live`, `lab.pins`) is importable because pytest.ini puts the repository root on
sys.path (`pythonpath = .`); this directory is on it too (pytest's rootdir conftest), which is how tests import
make_test_airgap.
"""

import json
import os
import subprocess
import sys
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
COLLECTIONS = ROOT / ".cache" / "collections"
LINK = COLLECTIONS / "ansible_collections" / "aiinfra" / "k3s"
DATA = Path(__file__).parent / "data"

if not LINK.exists():
    LINK.parent.mkdir(parents=True, exist_ok=True)
    LINK.symlink_to(Path("../../../.."))
if str(COLLECTIONS) not in sys.path:
    sys.path.insert(0, str(COLLECTIONS))


class JsonHandler(BaseHTTPRequestHandler):
    """A loopback fake API's handler: answer(status, body) sends body as JSON; nothing is logged."""

    def answer(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


def load_cases(name):
    """Cases from tests/unit/data/<name>.yml as pytest params, each with its id."""
    cases = yaml.safe_load((DATA / f"{name}.yml").read_text())
    return [pytest.param(case, id=case["id"]) for case in cases]


@pytest.fixture
def root():
    return ROOT


def tool(name):
    """A console script of the venv running the tests (ansible-playbook, ansible), whatever PATH says."""
    return str(Path(sys.executable).parent / name)


def ansible_env(callback="ansible.posix.json"):
    """Environment for running the working tree's collection with the venv's Ansible, JSON output."""
    return dict(
        os.environ,
        ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"),
        ANSIBLE_STDOUT_CALLBACK=callback,
        ANSIBLE_LOAD_CALLBACK_PLUGINS="1",
        ANSIBLE_NOCOLOR="1",
        NO_PROXY="127.0.0.1",
        no_proxy="127.0.0.1",
        ANSIBLE_COLLECTIONS_PATH=str(COLLECTIONS),
    )


def run_playbook(name, inventory, callback="ansible.posix.json", extra=(), env=None):
    """Run playbooks/<name> on the controller (env: more environment variables); returns the process and, with the
    JSON callback, its result."""
    proc = subprocess.run(
        [tool("ansible-playbook"), str(ROOT / "playbooks" / name), "-i", str(inventory), *extra],
        capture_output=True,
        text=True,
        env={**ansible_env(callback), **(env or {})},
        cwd=ROOT,
        timeout=180,
        check=False,
    )
    return proc, (json.loads(proc.stdout) if callback.endswith("json") else None)


def run_module(module, args, check=False, diff=False, extra=()):
    """Run a collection module on localhost as Ansible does; returns (rc, the module's result). extra: more
    arguments of `ansible` (e.g. become)."""
    argv = [tool("ansible"), "localhost", "-m", module, "-a", json.dumps(args)] + (["--check"] if check else [])
    argv += (["--diff"] if diff else []) + list(extra)
    proc = subprocess.run(argv, capture_output=True, text=True, env=ansible_env(), cwd=ROOT, timeout=120, check=False)
    return proc.returncode, json.loads(proc.stdout)["plays"][0]["tasks"][0]["hosts"]["localhost"]


def exec_credential_user(directory, token):
    """A kubeconfig user whose credential comes from an exec plugin (a script in directory printing token as a
    client.authentication.k8s.io ExecCredential): a kubeconfig api_client hands to the kubernetes client."""
    plugin = Path(directory) / "credential"
    plugin.write_text(
        '#!/bin/sh\necho \'{"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",'
        ' "status": {"token": "%s"}}\'\n' % token
    )
    plugin.chmod(0o755)
    return {
        "exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": str(plugin), "interactiveMode": "Never"}
    }


def write_inventory(directory, inventory, group_vars=None):
    """hosts.yml (and group_vars/all.yml) in `directory`; returns the directory."""
    (directory / "group_vars").mkdir(parents=True, exist_ok=True)
    (directory / "hosts.yml").write_text(yaml.safe_dump(inventory, sort_keys=False))  # keep inventory order
    (directory / "group_vars" / "all.yml").write_text(yaml.safe_dump(group_vars or {}))
    return directory


def local_gpu_hosts(hosts, stores):
    """Inventory hosts for GPU nodes run on this machine: {name: loopback address} with a local connection, the
    playbook's Python, the address as k3s_node_ip and each its own model store under `stores`."""
    return {
        host: {
            "ansible_connection": "local",
            "ansible_python_interpreter": "{{ ansible_playbook_python }}",
            "k3s_node_ip": address,
            "model_registry_path": str(stores / host),
        }
        for host, address in hosts.items()
    }


def write_site(directory, servers, gpu_nodes, group_vars=None, link_lab=False, classes=None):
    """A site inventory: servers, GPU agents {name: GPU count} with their time-slicing classes, group_vars
    (or the lab's group_vars linked in)."""
    hosts = {n: {"aiinfra_gpu_count": c} for n, c in gpu_nodes.items()}
    for node, gpu_class in (classes or {}).items():
        hosts[node]["aiinfra_gpu_class"] = gpu_class
    inventory = {
        "all": {
            "children": {
                "k3s_servers": {"hosts": {s: {} for s in servers}},
                "k3s_agents": {"hosts": {n: {} for n in gpu_nodes}},
                "gpu_nodes": {"hosts": hosts},
            }
        }
    }
    (directory / "hosts.yml").write_text(yaml.safe_dump(inventory))
    if link_lab:
        (directory / "group_vars").symlink_to(ROOT / "inventories" / "lab" / "group_vars")
    else:
        (directory / "group_vars").mkdir()
        (directory / "group_vars" / "all.yml").write_text(yaml.safe_dump(group_vars or {}))
    return directory


def render_site(site, tmp, extra=()):
    """Every object render.yml writes for a site: an inventory directory, or a site of tests/live/sites.yml (its
    inventory written under tmp); extra: more ansible-playbook arguments (e.g. -e render_secrets=true)."""
    if isinstance(site, dict) and "inventory" not in site:
        (tmp / "inventory").mkdir()
        inventory = write_site(
            tmp / "inventory", site["servers"], site["gpu_nodes"], site["group_vars"], classes=site.get("classes")
        )
    else:
        inventory = site["inventory"] if isinstance(site, dict) else site
    out = tmp / "rendered"
    proc = run_playbook("render.yml", inventory, callback="default", extra=["-e", "render_dir=%s" % out, *extra])[0]
    assert proc.returncode == 0, proc.stdout[-3000:]
    docs = []
    for path in sorted(out.glob("*.yaml")):
        docs += [d for d in yaml.safe_load_all(path.read_text()) if d]
    return docs
