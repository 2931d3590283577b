"""Live control plane figures (printed, never asserted): builds, `make cluster`, apply + rollout of the
largest test site, and the GPU verifier through the API on 1,000 kwok GPU nodes and 20,000 pods.

    python benchmarks/live_cluster.py [--nodes 1000] [--pods 20000] [--skip-site]

Runs its own control plane under .cache/cluster-bench (removed at the end). Simulated: kwok plays every
kubelet; no container runs and no GPU exists. The verifier's time is the whole module run through Ansible
(process start included); its memory is the peak RSS of the largest process that run waited for.
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the lab package (run as a script, the repository root is not on sys.path)
sys.path.insert(0, str(ROOT / "tests" / "unit"))

import yaml  # noqa: E402
from conftest import ansible_env, run_playbook, tool, write_site  # noqa: E402

from lab.live import cluster, helmbuild, kubebuild  # noqa: E402
from lab.pins import read_pin  # noqa: E402

STATE = ROOT / ".cache" / "cluster-bench"
SECRETS = {
    "litellm_master_key": "sk-3e8b1d6f9a2c4e7b0d5f8a1c3e6b9d2f4a7c",
    "nim_ngc_api_key": "nvapi-7Hq2Lm9Xw4Rt8Yp3Kd6Fz1Vb5Nc0Gs",
    "monitoring_grafana_admin_password": "Gq8wE3rT6yU1iO4pA7sD",
    "aiinfra_namespace": "bench-full",
}


def timed(label, fn):
    t0 = time.monotonic()
    out = fn()
    print(f"{label:<58} {time.monotonic() - t0:8.1f} s", flush=True)
    return out


def apply_in_batches(kubeconfig, items, batch):
    for i in range(0, len(items), batch):
        doc = {"apiVersion": "v1", "kind": "List", "items": items[i : i + batch]}
        cluster.kubectl(kubeconfig, "create", "-f", "-", stdin=json.dumps(doc))


def big_nodes(count):
    return [
        cluster.node_object(
            {
                "name": f"gpu-{i:04d}",
                "server": False,
                "gpu": True,
                "count": 8,
                "replicas": 1,
                "product": "NVIDIA-H200",
                "memory_mib": 143771,
            }
        )
        for i in range(count)
    ]


def big_pods(count, nodes):
    pods = []
    for i in range(count):
        node = nodes[i % len(nodes)]["metadata"]["name"]
        gpu = i % 10 == 0  # one pod in ten asks for a GPU, as on a busy inference site
        container = {"name": "c", "image": "registry.invalid/bench:1"}
        spec = {"nodeName": node, "containers": [container]}
        if gpu:
            container["resources"] = {"limits": {"nvidia.com/gpu": "1"}}
        spec["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
        pods.append(
            {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p-{i:05d}", "namespace": "bench"}, "spec": spec}
        )
    return pods


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=20000)
    parser.add_argument("--skip-site", action="store_true")
    args = parser.parse_args()
    k3s = read_pin("k3s_version")
    timed("build Kubernetes, etcd, kwok (cached after the first run)", lambda: kubebuild.build(k3s))
    timed("build helm (cached after the first run)", helmbuild.build)
    cluster.down(STATE, quiet=True)
    kubeconfig = timed("control plane up (etcd, API, controllers, kwok, CRDs)", lambda: cluster.up(STATE))
    try:
        if not args.skip_site:
            site = next(s for s in yaml.safe_load((ROOT / "tests/live/sites.yml").read_text()) if s["id"] == "full")
            with tempfile.TemporaryDirectory() as tmp:
                inv = write_site(
                    Path(tmp), site["servers"], site["gpu_nodes"], site["group_vars"], classes=site["classes"]
                )
                timed(
                    "kwok nodes of the largest test site",
                    lambda: cluster.register_nodes(kubeconfig, cluster.inventory_nodes(cluster.read_inventory(inv))),
                )
                extra = [
                    "-e",
                    json.dumps(SECRETS),
                    "-e",
                    f"k3s_kubeconfig_dest={kubeconfig}",
                    "-e",
                    f"manifests_kubeconfig={kubeconfig}",
                ]
                for playbook in ("node_labels.yml", "apply.yml"):
                    proc, _result = timed(
                        f"{playbook} on the largest test site (apply + rollouts)",
                        lambda p=playbook: run_playbook(p, inv, callback="default", extra=extra),
                    )
                    if proc.returncode:
                        print(proc.stdout[-2000:])
                        return 1
        nodes = big_nodes(args.nodes)
        t0 = time.monotonic()
        cluster.kubectl(kubeconfig, "create", "namespace", "bench")
        apply_in_batches(kubeconfig, nodes, 200)
        deadline = time.monotonic() + 900  # kwok readies the nodes in batches; bounded wait
        while time.monotonic() < deadline:
            out = cluster.kubectl(kubeconfig, "get", "nodes", "--no-headers").stdout.split()
            if out.count("Ready") >= args.nodes:
                break
            time.sleep(5)
        apply_in_batches(kubeconfig, big_pods(args.pods, nodes), 1000)
        print(
            f"{'set-up: %d GPU nodes Ready and %d pods created' % (args.nodes, args.pods):<58} "
            f"{time.monotonic() - t0:8.1f} s",
            flush=True,
        )
        module_args = {"kubeconfig": str(kubeconfig), "fail_on": []}
        before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        t0 = time.monotonic()
        proc = subprocess.run(
            [tool("ansible"), "localhost", "-m", "aiinfra.k3s.gpu_allocation_info", "-a", json.dumps(module_args)],
            capture_output=True,
            text=True,
            env=ansible_env(),
            cwd=ROOT,
            timeout=600,
            check=False,
        )
        wall = time.monotonic() - t0
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        result = json.loads(proc.stdout)["plays"][0]["tasks"][0]["hosts"]["localhost"]
        summary = result.get("summary", {})
        print(f"{'verifier through the API (read + analysis, whole module)':<58} {wall:8.1f} s")
        print(
            f"{'peak RSS of the largest process of that run':<58} {max(peak, before) / 1024:8.0f} MiB"
            + ("" if peak > before else " (an earlier child was larger: upper bound)")
        )
        print(
            f"  nodes={summary.get('nodes')} allocatable={summary.get('allocatable')} "
            f"requested={summary.get('requested')} findings={len(result.get('findings', []))} rc={proc.returncode}"
        )
    finally:
        if not os.environ.get("BENCH_KEEP"):
            cluster.down(STATE, quiet=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
