"""Time gpu_allocation_info's analysis from files on a large snapshot.

    python benchmarks/gpu_allocation.py [--nodes 5000] [--pods 100000] [--repeat 3]

Writes `kubectl get -o json`-shaped nodes.json and pods.json (4/5 of the nodes have 8 GPUs, one in ten
pods requests GPUs, the rest are CPU pods and DaemonSet pods), then, in a fresh Python process each time,
loads both files and runs the analysis the module runs. Prints wall time and peak RSS of that process.
Target on the 2-core CI machine: <= 2 s and <= 500 MiB.
"""

import argparse
import json
import random
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHILD = """
import json, sys, time
sys.path.insert(0, {collections!r})
from ansible_collections.aiinfra.k3s.plugins.module_utils.gpu.allocation import analyze
from ansible_collections.aiinfra.k3s.plugins.module_utils.k8s.api_list import iter_list_file
t0 = time.perf_counter()
nodes = list(iter_list_file({nodes!r}))
t1 = time.perf_counter()
# the module's path: pods decoded one at a time while analysed
result = analyze(nodes, iter_list_file({pods!r}))
t2 = time.perf_counter()
# VmHWM is this process's own peak (ru_maxrss would include the parent's memory from before exec).
rss = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM:")) / 1024
print(json.dumps({{"load_s": t1 - t0, "analyze_s": t2 - t1, "total_s": t2 - t0, "peak_rss_mib": rss,
                  "findings": len(result["findings"]), "gpu_nodes": result["summary"]["nodes"],
                  "gpu_pods": result["summary"]["gpu_pods"]}}))
"""


def node(i, gpus):
    labels = {"kubernetes.io/hostname": f"node-{i:05d}", "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}
    status = {
        "capacity": {"cpu": "64", "memory": "527927864Ki", "pods": "110", "ephemeral-storage": "1Ti"},
        "conditions": [
            {"type": t, "status": "False", "reason": "Kubelet" + t}
            for t in ("MemoryPressure", "DiskPressure", "PIDPressure")
        ]
        + [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
        "nodeInfo": {"kubeletVersion": "v1.33.5+k3s1", "containerRuntimeVersion": "containerd://2.0.5-k3s2"},
    }
    spec = {"podCIDR": f"10.42.{i % 256}.0/24"}
    if gpus:
        labels.update(
            {
                "ai-workload": "true",
                "nvidia.com/gpu.present": "true",
                "nvidia.com/gpu.count": str(gpus),
                "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
            }
        )
        status["capacity"]["nvidia.com/gpu"] = str(gpus)
        spec["taints"] = [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
    status["allocatable"] = dict(status["capacity"])
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "spec": spec,
        "status": status,
        "metadata": {
            "name": f"node-{i:05d}",
            "uid": f"uid-node-{i}",
            "labels": labels,
            "annotations": {"k3s.io/node-args": '["agent"]'},
        },
    }


def pod(i, node_name, gpus, daemonset):
    containers = [
        {
            "name": "main",
            "image": "registry.example/app:1.0",
            "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"memory": "2Gi"}},
            "ports": [{"containerPort": 8000, "protocol": "TCP"}],
            "env": [{"name": "LOG_FORMAT", "value": "json"}],
        }
    ]
    tolerations = [
        {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
    ]
    if gpus:
        containers[0]["resources"]["limits"]["nvidia.com/gpu"] = str(gpus)
        tolerations.append({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"})
    owner = (
        {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "node-exporter"}
        if daemonset
        else {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": f"app-{i % 500}"}
    )
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"pod-{i:06d}",
            "namespace": "kube-system" if daemonset else f"team-{i % 40}",
            "uid": f"uid-pod-{i}",
            "labels": {"app": f"app-{i % 500}"},
            "ownerReferences": [owner],
        },
        "spec": {
            "nodeName": node_name,
            "containers": containers,
            "tolerations": tolerations,
            "restartPolicy": "Always",
            "serviceAccountName": "default",
        },
        "status": {
            "phase": "Running",
            "podIP": f"10.42.{i % 256}.{i % 250}",
            "qosClass": "Burstable",
            "conditions": [{"type": "Ready", "status": "True"}, {"type": "PodScheduled", "status": "True"}],
        },
    }


def write_snapshot(directory, n_nodes, n_pods, seed=7):
    rng = random.Random(seed)
    gpu_nodes = [i for i in range(n_nodes) if i % 5]
    cpu_nodes = [i for i in range(n_nodes) if not i % 5]
    nodes = [node(i, 8 if i % 5 else 0) for i in range(n_nodes)]
    pods = []
    for i in range(n_pods):
        kind = i % 10
        if kind == 0:
            pods.append(pod(i, f"node-{rng.choice(gpu_nodes):05d}", 1, False))
        elif kind == 1:
            pods.append(pod(i, f"node-{rng.randrange(n_nodes):05d}", 0, True))
        else:
            pods.append(pod(i, f"node-{rng.choice(cpu_nodes):05d}", 0, False))
    (directory / "nodes.json").write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": nodes}))
    (directory / "pods.json").write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": pods}))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=100000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        write_snapshot(tmp, args.nodes, args.pods)
        sizes = {name: (tmp / name).stat().st_size / 2**20 for name in ("nodes.json", "pods.json")}
        print(
            f"snapshot: {args.nodes} nodes ({sizes['nodes.json']:.1f} MiB), {args.pods} pods "
            f"({sizes['pods.json']:.1f} MiB)"
        )
        code = CHILD.format(
            collections=str(ROOT / ".cache" / "collections"), nodes=str(tmp / "nodes.json"), pods=str(tmp / "pods.json")
        )
        runs = []
        for _run in range(args.repeat):
            out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
            runs.append(json.loads(out))
        for n, r in enumerate(runs, 1):
            print(
                f"run {n}: nodes {r['load_s']:.2f}s + pods decoded and analysed {r['analyze_s']:.2f}s = {r['total_s']:.2f}s, "
                f"peak RSS {r['peak_rss_mib']:.0f} MiB ({r['gpu_nodes']} GPU nodes, {r['gpu_pods']} GPU pods, "
                f"{r['findings']} findings)"
            )
        best = min(r["total_s"] for r in runs)
        peak = max(r["peak_rss_mib"] for r in runs)
        print(f"best total {best:.2f}s (target <= 2 s), peak RSS {peak:.0f} MiB (target <= 500 MiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
