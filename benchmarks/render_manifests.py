"""Time playbooks/render.yml (every manifest of a site, no host touched) as sites grow.

    python benchmarks/render_manifests.py [--sizes 1:1 --sizes 16:8 --sizes 64:32] [--repeat 3]

Each size is GPU_NODES:MODELS: a site with that many 8-GPU nodes (half of them in a time-slicing class),
MODELS vLLM models (tensor-parallel 2) and MODELS/4 NIM backends behind the gateway. Prints the best wall
time of a full `ansible-playbook render.yml` run, the number of objects rendered and the bytes written.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def site(directory, gpu_nodes, models):
    hosts = {
        f"gpu-{i:03d}": {"aiinfra_gpu_count": 8, "aiinfra_gpu_class": "shared" if i % 2 else ""}
        for i in range(gpu_nodes)
    }
    inventory = {
        "all": {
            "children": {
                "k3s_servers": {"hosts": {"cp-1": {}}},
                "k3s_agents": {"hosts": {h: {} for h in hosts}},
                "gpu_nodes": {"hosts": hosts},
            }
        }
    }
    group_vars = {
        "gpu_operator_time_slicing_classes": {"shared": 2, "exclusive": 1},
        "gpu_operator_time_slicing_default": "exclusive",
        "vllm_models": [
            {"served_name": f"model-{m:03d}", "path": f"org/model-{m:03d}", "tensor_parallel_size": 2}
            for m in range(models)
        ],
        "nim_models": [
            {
                "served_name": f"nim-{m:03d}",
                "image": "nvcr.io/nim/meta/llama-3.1-8b-instruct:1.3.3",
                "replicas": 2,
                "max_replicas": 2,
            }
            for m in range(max(models // 4, 0))
        ],
    }
    (directory / "group_vars").mkdir(parents=True)
    (directory / "hosts.yml").write_text(yaml.safe_dump(inventory))
    (directory / "group_vars" / "all.yml").write_text(yaml.safe_dump(group_vars))
    return directory


def run(inventory, out, tree=ROOT, collections=None):
    """Wall time of one `ansible-playbook render.yml` of `inventory` into `out`, with the collection at `tree`
    (this working tree by default; collections: the path holding ansible_collections/aiinfra/k3s for it)."""
    env = dict(
        os.environ,
        ANSIBLE_CONFIG=str(tree / "ansible.cfg"),
        ANSIBLE_COLLECTIONS_PATH=str(collections or ROOT / ".cache" / "collections"),
    )
    t0 = time.perf_counter()
    proc = subprocess.run(
        [
            str(Path(sys.executable).parent / "ansible-playbook"),
            str(tree / "playbooks" / "render.yml"),
            "-i",
            str(inventory),
            "-e",
            f"render_dir={out}",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
        cwd=tree,
    )
    elapsed = time.perf_counter() - t0
    if proc.returncode:
        sys.exit(proc.stdout[-3000:])
    return elapsed


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", action="append", default=[])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    sizes = [tuple(int(x) for x in s.split(":")) for s in (args.sizes or ["1:1", "16:8", "64:32"])]
    print(f"{'gpu nodes':>9} {'models':>6} {'objects':>7} {'bytes':>9} {'best s':>7} {'runs':>22}")
    for gpu_nodes, models in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            inventory = site(Path(tmp) / "inv", gpu_nodes, models)
            times = [run(inventory, Path(tmp) / f"out{r}") for r in range(args.repeat)]
            files = list((Path(tmp) / "out0").glob("*.yaml"))
            objects = sum(sum(1 for d in yaml.safe_load_all(f.read_text()) if d) for f in files)
            size = sum(f.stat().st_size for f in files)
            runs = ", ".join(f"{t:.1f}" for t in times)
            print(f"{gpu_nodes:>9} {models:>6} {objects:>7} {size:>9} {min(times):>7.2f} {runs:>22}")


if __name__ == "__main__":
    main()
