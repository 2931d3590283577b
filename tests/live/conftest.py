"""Live tests: a real Kubernetes control plane on loopback, started once per test run.

The API server, etcd, scheduler and controllers are the real ones, built from the Go modules of the
Kubernetes release of `k3s_version` (lab/live/kubebuild.py); every node is a kwok node, so no container runs,
no image is pulled and no GPU exists. See lab/live/cluster.py for what is real and what is simulated.
"""

import importlib.util
import json
import os
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from lab import ROOT
from lab.live import cluster

# The unit tests' helpers (running playbooks and modules with the working tree's collection).
_spec = importlib.util.spec_from_file_location("unit_helpers", ROOT / "tests" / "unit" / "conftest.py")
helpers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(helpers)
STATE = ROOT / ".cache" / "cluster-tests"


class Live:
    """The running control plane: its admin kubeconfig and a kubectl bound to it."""

    def __init__(self, kubeconfig: Path):
        self.kubeconfig = kubeconfig
        self.bin = Path(json.loads((kubeconfig.parent / "cluster.json").read_text())["bin"])

    def kubectl(self, *args, stdin=None, check=True):
        return cluster.kubectl(self.kubeconfig, *args, stdin=stdin, check=check)

    def get(self, *args):
        return json.loads(self.kubectl("get", *args, "-o", "json").stdout)

    def items(self, *args):
        return self.get(*args)["items"]

    def use_site(self, inventory):
        """Make the live nodes those of `inventory` (kwok nodes named like its hosts); returns their names."""
        return cluster.register_nodes(self.kubeconfig, cluster.inventory_nodes(cluster.read_inventory(Path(inventory))))

    def apply(self, objects):
        doc = {"apiVersion": "v1", "kind": "List", "items": list(objects)}
        return self.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", stdin=json.dumps(doc))

    def remove_site(self, namespace):
        """What a site left behind that would disturb the next one: its serving namespace (pods, claims) and
        the local volumes of the model store (named after the nodes, which the next site may share)."""
        self.kubectl("delete", "namespace", namespace, "--ignore-not-found", "--wait=true", "--timeout=180s")
        self.kubectl("delete", "pv", "-l", "app.kubernetes.io/name=model-registry", "--wait=true", "--timeout=120s")

    def wait_until(self, what, check, timeout=60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = check()
            if value:
                return value
            time.sleep(0.5)
        raise AssertionError(f"{what}: not within {timeout}s")


@pytest.fixture(scope="session")
def live():
    kubeconfig = cluster.up(STATE)
    yield Live(kubeconfig)
    if not os.environ.get("LIVE_KEEP"):
        cluster.down(STATE, quiet=True)


def run_playbook(name, inventory, live, extra=(), callback="ansible.posix.json"):
    """A playbook of the collection against the live API (k3s_kubeconfig_dest and manifests_kubeconfig)."""
    args = ["-e", f"k3s_kubeconfig_dest={live.kubeconfig}", *extra]
    return helpers.run_playbook(name, inventory, callback=callback, extra=args)


def failures(result):
    """'task | host | message' of every failed host result in a JSON-callback result (what an assertion shows)."""
    out = []
    for play in (result or {}).get("plays", []):
        for task in play["tasks"]:
            for host, res in task["hosts"].items():
                if not (res.get("failed") or res.get("unreachable")):
                    continue
                items = [r for r in res.get("results") or [] if r.get("failed")]
                for r in items or [res]:
                    label = (r.get("_ansible_item_label") or r.get("item") or "") if items else ""
                    detail = {k: r.get(k) for k in ("msg", "resources", "attempts") if r.get(k) is not None}
                    out.append("%s | %s | %s | %s" % (task["task"]["name"], host, str(label)[:200], str(detail)[:3000]))
    return out


def task_results(result, name):
    """Every host result of the tasks called `name` in a JSON-callback result."""
    out = []
    for play in result["plays"]:
        for task in play["tasks"]:
            if task["task"]["name"] == name:
                out += list(task["hosts"].values())
    return out


def stage_entries(result):
    """The stage report a JSON-callback run built: stage name -> {status, detail}."""
    entries = []
    for play in result["plays"]:
        for task in play["tasks"]:
            for host in task["hosts"].values():
                facts = host.get("ansible_facts", {})
                if "aiinfra_stage_report" in facts:
                    entries = facts["aiinfra_stage_report"]
    return {e["stage"]: e for e in entries}


def load_yaml_dir(directory):
    docs = []
    for path in sorted(Path(directory).glob("*.yaml")):
        docs += [d for d in yaml.safe_load_all(path.read_text()) if d]
    return docs


def kubectl_raw(live, *args):
    return subprocess.run(
        [str(live.bin / "kubectl"), "--kubeconfig", str(live.kubeconfig), *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
