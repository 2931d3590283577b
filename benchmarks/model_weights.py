"""Model weights to the lab's GPU nodes (issue 25): wall time of each way in, at the same N, against the physical
limit measured in the same run, the no-op re-run, and an interrupted transfer's resume.

    python benchmarks/model_weights.py [--size-gb 4] [--keep]

Needs `make lab` up (its GPU nodes are the targets; N is their number). Makes a test model on this machine (one big
file of 3/4 of --size-gb and many 8 MiB files for the rest, random bytes, SHA256SUMS) and measures, one run each:

- physical limit: on one GPU node, a plain sequential read and write of the same bytes (dd, fsync);
- today's path (roles/model_registry/tasks/seed.yml up to 0.1.0): sha256sum --check on the controller, copy to every
  node (ansible.builtin.copy through the controller's SSH link), sha256sum --check on every node;
- the controller's mirror (model_registry_seed_models through model_mirror and model_weights);
- a URL mirror (model_registry_sources source url, nginx from Debian on this machine's lab address);
- the no-op re-run of the role with the model on every node, against the same run without models;
- resume: the URL fetch of the big file cut halfway (the playbook killed while nginx sends at a limited rate), then
  run again; nginx's log gives the bytes sent twice.

All traffic goes to the lab nodes and this machine's lab address. The lab's disk is this machine's: every node writes
to the same disk, so ratios between N say nothing of a real site's network (the note says so). Stores are removed at
the end unless --keep.
"""

import argparse
import hashlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from lab.live import cluster  # noqa: E402

ENV = dict(
    os.environ,
    CONTAINERS_CONF=str(ROOT / "lab" / "nodes" / "containers.conf"),
    ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"),
)
PLAYBOOK = str(ROOT / ".venv" / "bin" / "ansible-playbook")
INVENTORY = str(ROOT / "inventories" / "lab")
MODEL = "bench/model"
STORES = {
    "copy": "/data/bench-copy",
    "mirror": "/data/bench-mirror",
    "url": "/data/bench-url",
    "resume": "/data/bench-resume",
}
SMALL = 8 << 20


def gpu_nodes():
    return [
        n["name"] for n in cluster.inventory_nodes(cluster.read_inventory(ROOT / "inventories" / "lab")) if n["gpu"]
    ]


def podman(*args, check=True, timeout=1800):
    return subprocess.run(["podman", *args], env=ENV, capture_output=True, text=True, timeout=timeout, check=check)


def make_model(directory, size):
    directory.mkdir(parents=True)
    big = size * 3 // 4
    chunk = os.urandom(1 << 20)
    with open(directory / "model-00001.safetensors", "wb") as out:
        for i in range(big >> 20):
            out.write(hashlib.sha256(chunk + i.to_bytes(8, "little")).digest() * 32768)
    rest, i = size - big, 0
    while rest > 0:
        (directory / ("shard-%04d.bin" % i)).write_bytes(os.urandom(min(SMALL, rest)))
        rest -= SMALL
        i += 1
    (directory / "config.json").write_text('{"benchmark": true}\n')
    sums = subprocess.run(
        ["sha256sum", *sorted(p.name for p in directory.iterdir())],
        cwd=directory,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    (directory / "SHA256SUMS").write_text(sums)
    return sum(p.stat().st_size for p in directory.iterdir() if p.name != "SHA256SUMS")


def run_playbook(plays, variables, work, name):
    (work / (name + ".yml")).write_text(yaml.safe_dump(plays))
    (work / (name + "-vars.yml")).write_text(yaml.safe_dump(variables))
    t0 = time.monotonic()
    proc = subprocess.run(
        [PLAYBOOK, str(work / (name + ".yml")), "-i", INVENTORY, "-e", "@" + str(work / (name + "-vars.yml"))],
        capture_output=True, text=True, env=ENV, timeout=3600, check=False,
    )  # fmt: skip
    elapsed = time.monotonic() - t0
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-5000:] + proc.stderr[-2000:])
        raise SystemExit("%s failed" % name)
    recap = dict(re.findall(r"^(\S+)\s+: ok=\d+\s+changed=(\d+)", proc.stdout.rsplit("PLAY RECAP", 1)[-1], re.M))
    return elapsed, {h: int(c) for h, c in recap.items()}


def role_plays():
    return [
        {"import_playbook": str(ROOT / "playbooks" / "groups.yml")},
        {
            "hosts": "__aiinfra_gpu",
            "become": True,
            "gather_facts": False,
            "roles": [{"role": "aiinfra.k3s.model_registry"}],
        },
    ]


def role_vars(store, work, seeds=(), sources=(), seed_dir=""):
    return {
        "model_registry_path": store,
        "model_registry_seed_dir": seed_dir,
        "model_registry_seed_models": list(seeds),
        "model_registry_sources": list(sources),
        "model_registry_expected_models": [],
        "model_registry_cache_dir": str(work / "controller-cache"),
        "model_registry_transfer_timeout": 3000,
    }


# Today's path, as roles/model_registry/tasks/seed.yml did it up to 0.1.0.
CHECK = "sha256sum --check --quiet --strict SHA256SUMS"
COPY_TASKS = [
    {
        "name": "Verify on the controller",
        "ansible.builtin.command": {"cmd": CHECK, "chdir": "{{ seed }}"},
        "delegate_to": "localhost",
        "run_once": True,
        "become": False,
        "changed_when": False,
    },
    {
        "name": "Copy",
        "ansible.builtin.copy": {
            "src": "{{ seed }}/",
            "dest": "{{ store }}/bench/model/",
            "mode": "0644",
            "directory_mode": "0755",
        },
    },
    {
        "name": "Verify on the node",
        "ansible.builtin.command": {"cmd": CHECK, "chdir": "{{ store }}/bench/model"},
        "changed_when": False,
    },
]
COPY_PLAYS = [
    {"import_playbook": str(ROOT / "playbooks" / "groups.yml")},
    {"hosts": "__aiinfra_gpu", "become": True, "gather_facts": False, "tasks": COPY_TASKS},
]


def nginx(root, address, port, rate=None):
    conf = root / "nginx.conf"
    limit = "limit_rate %s;" % rate if rate else ""
    conf.write_text(
        f"""daemon off; user root; worker_processes 2; pid {root}/nginx.pid; error_log {root}/error.log;
events {{ worker_connections 64; }}
http {{ log_format b '$request $status $bytes_sent'; access_log {root}/access.log b; sendfile on;
  client_body_temp_path {root}; proxy_temp_path {root}; fastcgi_temp_path {root}; uwsgi_temp_path {root}; scgi_temp_path {root};
  server {{ listen {address}:{port}; root {root}/www; {limit} }} }}
"""
    )  # fmt: skip
    proc = subprocess.Popen(
        [shutil.which("nginx") or "/usr/sbin/nginx", "-c", str(conf), "-p", str(root)], start_new_session=True
    )
    time.sleep(1)
    if proc.poll() is not None:
        raise SystemExit((root / "error.log").read_text())
    return proc


KILL_WRITER = """import os, signal, sys
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        if any(os.readlink("/proc/%s/fd/%s" % (pid, fd)) == sys.argv[1] for fd in os.listdir("/proc/%s/fd" % pid)):
            os.kill(int(pid), signal.SIGKILL)
    except OSError:
        pass
"""


def stop(proc):
    os.killpg(proc.pid, signal.SIGTERM)
    proc.wait(10)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-gb", type=float, default=4.0)
    parser.add_argument("--keep", action="store_true", help="leave the stores on the nodes")
    args = parser.parse_args()
    nodes = gpu_nodes()
    if not nodes:
        raise SystemExit("no lab GPU nodes: make lab first")
    route = podman("exec", nodes[0], "ip", "-4", "route", "show", "default").stdout.split()
    address = route[route.index("via") + 1]
    work = Path(tempfile.mkdtemp(prefix="aiinfra-bench-weights-"))
    rows = []
    try:
        seed_dir = work / "seed"
        total = make_model(seed_dir / MODEL, int(args.size_gb * (1 << 30)))
        www = work / "www"
        (www / "bench").mkdir(parents=True)
        os.symlink(seed_dir / MODEL, www / MODEL)
        gb = total / 1e9
        print(
            "[bench] model: %.2f GB (%d files), N=%d GPU nodes %s"
            % (gb, len(os.listdir(seed_dir / MODEL)), len(nodes), nodes)
        )

        # Physical limit: one node reads and writes the same bytes sequentially (page cache dropped by fsync only).
        podman("exec", nodes[0], "mkdir", "-p", "/data/bench-dd")
        podman(
            "exec",
            nodes[0],
            "dd",
            "if=/dev/urandom",
            "of=/data/bench-dd/src",
            "bs=16M",
            "count=%d" % (total >> 24),
            "status=none",
        )
        t0 = time.monotonic()
        podman(
            "exec",
            nodes[0],
            "dd",
            "if=/data/bench-dd/src",
            "of=/data/bench-dd/dst",
            "bs=16M",
            "conv=fsync",
            "status=none",
        )
        limit = time.monotonic() - t0
        podman("exec", nodes[0], "rm", "-rf", "/data/bench-dd")
        rows.append(("physical limit (1 node: dd read+write, fsync)", limit, None))

        elapsed = run_playbook(COPY_PLAYS, {"seed": str(seed_dir / MODEL), "store": STORES["copy"]}, work, "copy")[0]
        rows.append(("today: verify + ansible.builtin.copy + verify", elapsed, None))
        elapsed2, changed = run_playbook(
            COPY_PLAYS, {"seed": str(seed_dir / MODEL), "store": STORES["copy"]}, work, "copy-again"
        )
        rows.append(("today: re-run (every file hashed again)", elapsed2, changed))
        for node in nodes:
            podman("exec", node, "rm", "-rf", STORES["copy"], check=False)

        mirror_vars = role_vars(STORES["mirror"], work, seeds=[MODEL], seed_dir=str(seed_dir))
        elapsed = run_playbook(role_plays(), mirror_vars, work, "mirror")[0]
        rows.append(("new: controller's model_mirror -> model_weights", elapsed, None))
        again, changed = run_playbook(role_plays(), mirror_vars, work, "mirror-again")
        rows.append(("new: re-run with the model on every node", again, changed))
        empty, changed0 = run_playbook(role_plays(), role_vars(STORES["mirror"], work), work, "no-models")
        rows.append(("new: the same run without models", empty, changed0))
        for node in nodes:
            podman("exec", node, "rm", "-rf", STORES["mirror"], check=False)

        server = nginx(work, address, 18098)
        try:
            url_vars = role_vars(
                STORES["url"],
                work,
                sources=[{"path": MODEL, "source": "url", "url": "http://%s:18098/%s" % (address, MODEL)}],
            )
            elapsed = run_playbook(role_plays(), url_vars, work, "url")[0]
            rows.append(("new: URL mirror (nginx), each node fetches itself", elapsed, None))
        finally:
            stop(server)
        for node in nodes:
            podman("exec", node, "rm", "-rf", STORES["url"], check=False)

        # Resume: nginx at a limited rate; the run is killed once the big file's part passed half, then run again.
        (work / "access.log").unlink()
        big = (seed_dir / MODEL / "model-00001.safetensors").stat().st_size
        server = nginx(work, address, 18098, rate="%dk" % max(1024, big // 1024 // 20))  # about 20 s for the big file
        try:
            resume_vars = role_vars(
                STORES["resume"],
                work,
                sources=[{"path": MODEL, "source": "url", "url": "http://%s:18098/%s" % (address, MODEL)}],
            )
            resume_vars["model_registry_timeout"] = 30
            (work / "resume.yml").write_text(yaml.safe_dump(role_plays()))
            (work / "resume-vars.yml").write_text(yaml.safe_dump(resume_vars))
            cmd = [
                PLAYBOOK,
                str(work / "resume.yml"),
                "-i",
                INVENTORY,
                "-e",
                "@" + str(work / "resume-vars.yml"),
                "--limit",
                "__aiinfra_gpu:&" + nodes[0],
            ]
            first = subprocess.Popen(
                cmd, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
            )
            part = "%s/.staging/%s/model-00001.safetensors.aiinfra-part" % (STORES["resume"], MODEL)
            deadline, size = time.monotonic() + 300, 0
            while time.monotonic() < deadline and size < big // 2:
                time.sleep(0.5)
                out = podman("exec", nodes[0], "stat", "-c", "%s", part, check=False).stdout.strip()
                size = int(out) if out.isdigit() else 0
            os.killpg(first.pid, signal.SIGKILL)
            first.wait(30)
            # The module on the node outlives the killed SSH client: end the process writing the part, as a crash would.
            podman("exec", nodes[0], "python3", "-c", KILL_WRITER, part, check=False)
            time.sleep(2)
            kept = podman("exec", nodes[0], "stat", "-c", "%s", part, check=False).stdout.strip()
            t0 = time.monotonic()
            proc = subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=1800, check=False)
            resumed_in = time.monotonic() - t0
            if proc.returncode != 0:
                sys.stderr.write(proc.stdout[-4000:])
                raise SystemExit("the resumed run failed")
        finally:
            stop(server)
        sent = [
            int(line.split()[-1]) for line in (work / "access.log").read_text().splitlines() if "model-00001" in line
        ]
        resent = sum(sent) - big
        print(
            "[bench] resume: big file %d bytes; kept after the kill %s; nginx sent %s for it; sent twice %d bytes"
            " (%.2f %%); rerun %.1f s" % (big, kept, sent, resent, 100.0 * resent / big, resumed_in)
        )
    finally:
        if not args.keep:
            for node in nodes:
                podman("exec", node, "rm", "-rf", *STORES.values(), check=False)
        shutil.rmtree(work, ignore_errors=True)

    print(
        "\n%-52s %9s %9s %s" % ("way in (N=%d GPU nodes, %.2f GB)" % (len(nodes), gb), "wall s", "x limit", "changed")
    )
    for name, seconds, changed in rows:
        print("%-52s %9.1f %9.2f %s" % (name, seconds, seconds / limit, "" if changed is None else changed))


if __name__ == "__main__":
    main()
