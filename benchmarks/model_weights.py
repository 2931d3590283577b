"""Model weights to the lab's GPU nodes (issue 25): wall time of each way in, at the same N, against the physical
limit measured in the same run, the no-op re-run, and an interrupted transfer's resume.

    python benchmarks/model_weights.py [--size-gb 4] [--keep] [--ways limit,copy,...] [--repeat 5]

Needs `make lab` up (its GPU nodes are the targets; N is their number). Makes a test model on this machine (one big
file of 3/4 of --size-gb and many 8 MiB files for the rest, random bytes, SHA256SUMS) and measures, one run each:

- physical limit: on one GPU node, a plain sequential read and write of the same bytes (dd, fsync);
- today's path (roles/model_registry/tasks/seed.yml up to 0.1.0): sha256sum --check on the controller, copy to every
  node (ansible.builtin.copy through the controller's SSH link), sha256sum --check on every node;
- the shared disk's limit: every GPU node writes the same bytes at once (dd; the lab's nodes share one disk);
- the controller's models handed on node to node (model_registry_seed_models: the controller's model_mirror hands
  the model to one node, the nodes' own model_mirror hand it on in rounds; model_weights fetches), to all N nodes and
  to one node;
- the same without peers (model_registry_peers: false, every node from the controller's mirror, as in 0.2.0);
- a URL mirror (model_registry_sources source url, nginx from Debian on this machine's lab address);
- the no-op re-run of the role with the model on every node, against the same run without models (with `noop`:
  --repeat runs of each, interleaved, and their medians);
- floor (with `floor`): the least work a verified fetch of the same bytes needs on these nodes, without Ansible or
  any of the collection's code: nginx (sendfile) on this machine, and on the node a few lines of Python that read
  1 MiB at a time, hash (hashlib's sha256) and write, fsync at the end; one fetch alone, one on each of 2 and of
  all N nodes at once, and two per node at once (the work of 2N nodes on this machine's CPUs and disk). No way in
  that checks every byte as it lands can beat these on this lab;
- scale (with `scale`): node to node and from the URL mirror to the first 2 GPU nodes and to all N (the others left
  out with --limit), alternating, --repeat times, on the same lab in the same run: time(N)/time(2);
- resume: the URL fetch of the big file cut halfway (the playbook killed while nginx sends at a limited rate), then
  run again; nginx's log gives the bytes sent twice.

All traffic goes to the lab nodes and this machine's lab address. The lab's disk is this machine's: every node writes
to the same disk, so ratios between N say nothing of a real site's network (the note says so). Stores are removed at
the end unless --keep.
"""

import argparse
import functools
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
    "floor": "/data/bench-floor",
    "copy": "/data/bench-copy",
    "controller": "/data/bench-controller",
    "mirror": "/data/bench-mirror",
    "url": "/data/bench-url",
    "resume": "/data/bench-resume",
}
SMALL = 8 << 20


WAYS = ("limit", "copy", "mirror", "controller", "url", "resume", "noop", "floor", "scale")


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


def run_playbook(plays, variables, work, name, limit=None, with_output=False):
    (work / (name + ".yml")).write_text(yaml.safe_dump(plays))
    (work / (name + "-vars.yml")).write_text(yaml.safe_dump(variables))
    t0 = time.monotonic()
    proc = subprocess.run(
        [PLAYBOOK, str(work / (name + ".yml")), "-i", INVENTORY, "-e", "@" + str(work / (name + "-vars.yml"))]
        + (["--limit", limit] if limit else []),
        capture_output=True, text=True, env=ENV, timeout=3600, check=False,
    )  # fmt: skip
    elapsed = time.monotonic() - t0
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-5000:] + proc.stderr[-2000:])
        raise SystemExit("%s failed" % name)
    recap = dict(re.findall(r"^(\S+)\s+: ok=\d+\s+changed=(\d+)", proc.stdout.rsplit("PLAY RECAP", 1)[-1], re.M))
    if with_output:
        return elapsed, {h: int(c) for h, c in recap.items()}, proc.stdout
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


def physical_limit(node, total):
    """Seconds one node takes to read and write `total` bytes sequentially (dd, 16 MiB blocks, fsync at the end)."""
    podman("exec", node, "mkdir", "-p", "/data/bench-dd")
    podman(
        "exec",
        node,
        "dd",
        "if=/dev/urandom",
        "of=/data/bench-dd/src",
        "bs=16M",
        "count=%d" % (total >> 24),
        "status=none",
    )
    t0 = time.monotonic()
    podman("exec", node, "dd", "if=/data/bench-dd/src", "of=/data/bench-dd/dst", "bs=16M", "conv=fsync", "status=none")
    seconds = time.monotonic() - t0
    podman("exec", node, "rm", "-rf", "/data/bench-dd")
    return seconds


def shared_disk_limit(nodes, total):
    """Seconds the nodes take to write `total` bytes each, all at once (dd from /dev/zero, fsync): the lab's nodes
    share this machine's disk, so N transfers can go no faster than this, whatever the network does."""
    for node in nodes:
        podman("exec", node, "mkdir", "-p", "/data/bench-dd")
    t0 = time.monotonic()
    procs = [
        subprocess.Popen(
            [
                "podman",
                "exec",
                node,
                "dd",
                "if=/dev/zero",
                "of=/data/bench-dd/dst",
                "bs=16M",
                "count=%d" % (total >> 24),
                "conv=fsync",
                "status=none",
            ],
            env=ENV,
        )
        for node in nodes
    ]
    for proc in procs:
        proc.wait(1800)
    seconds = time.monotonic() - t0
    for node in nodes:
        podman("exec", node, "rm", "-rf", "/data/bench-dd")
    return seconds


def clear(nodes, store):
    for node in nodes:
        podman("exec", node, "rm", "-rf", store, check=False)


def copy_path(nodes, seed, work, rows):
    """Today's path (seed.yml up to 0.1.0), then its re-run."""
    variables = {"seed": str(seed), "store": STORES["copy"]}
    rows.append(
        ("today: verify + ansible.builtin.copy + verify", run_playbook(COPY_PLAYS, variables, work, "copy")[0], None)
    )
    rows.append(("today: re-run (every file hashed again)", *run_playbook(COPY_PLAYS, variables, work, "copy-again")))
    clear(nodes, STORES["copy"])


def mirror_path(nodes, seed_dir, work, rows):
    """Seeds handed on node to node (the controller's model_mirror to one node, the nodes' to the others); the re-run;
    the same run without models; then to one node only."""
    variables = role_vars(STORES["mirror"], work, seeds=[MODEL], seed_dir=str(seed_dir))
    seconds, _changed, output = run_playbook(role_plays(), variables, work, "mirror", with_output=True)
    handed = sorted(set(re.findall(r"\(handed\s+on\s+by\s+([\w.-]+)\)", output)))
    rows.append(("new: controller -> 1 node, then node to node (%s)" % (", ".join(handed) or "no peer"), seconds, None))
    rows.append(
        ("new: re-run with the model on every node", *run_playbook(role_plays(), variables, work, "mirror-again"))
    )
    rows.append(
        (
            "new: the same run without models",
            *run_playbook(role_plays(), role_vars(STORES["mirror"], work), work, "none"),
        )
    )
    clear(nodes, STORES["mirror"])
    rows.append(
        (
            "new: controller -> 1 node (N=1)",
            run_playbook(role_plays(), variables, work, "mirror-one", limit=nodes[0])[0],
            None,
        )
    )
    clear(nodes, STORES["mirror"])


def noop_path(nodes, seed_dir, work, rows, repeat):
    """The model on every node, then `repeat` no-op re-runs with it and `repeat` of the same run without models,
    interleaved (with, without, with, ...) so that the machine's load falls on both; the medians and their difference."""
    variables = role_vars(STORES["mirror"], work, seeds=[MODEL], seed_dir=str(seed_dir))
    rows.append(
        ("noop: first run (the model to every node)", *run_playbook(role_plays(), variables, work, "noop-seed"))
    )
    runs = {"with": [], "without": []}
    for attempt in range(repeat):
        seconds, changed = run_playbook(role_plays(), variables, work, "noop-with")
        if any(changed.values()):
            raise SystemExit("no-op run %d with the model changed something: %s" % (attempt + 1, changed))
        runs["with"].append(seconds)
        runs["without"].append(run_playbook(role_plays(), role_vars(STORES["mirror"], work), work, "noop-without")[0])
    for name in ("with", "without"):
        print("[bench] no-op %s the model: %s s" % (name, ", ".join("%.2f" % t for t in runs[name])))
        rows.append(("noop: re-run %s the model (median of %d)" % (name, repeat), median(runs[name]), None))
    delta = median(runs["with"]) - median(runs["without"])
    print("[bench] no-op: the model adds %+.2f s (medians, N=%d)" % (delta, len(nodes)))
    clear(nodes, STORES["mirror"])


def scale_path(nodes, address, seed_dir, work, rows, repeat):
    """Node to node and from the URL mirror, to the first 2 GPU nodes and to all of them, alternating (2, N, 2, N...)
    `repeat` times each, on the same lab; the medians and time(N)/time(2)."""
    server = nginx(work, address, 18098)
    try:
        source = {"path": MODEL, "source": "url", "url": "http://%s:18098/%s" % (address, MODEL)}
        ways = (
            ("node to node", role_vars(STORES["mirror"], work, seeds=[MODEL], seed_dir=str(seed_dir))),
            ("URL mirror", role_vars(STORES["url"], work, sources=[source])),
        )
        counts = sorted({2, len(nodes)})
        for label, variables in ways:
            runs = {n: [] for n in counts}
            for attempt in range(repeat):
                for n in counts:
                    name = "scale-%d-%d" % (n, attempt)
                    runs[n].append(run_playbook(role_plays(), variables, work, name, limit=",".join(nodes[:n]))[0])
                    clear(nodes, variables["model_registry_path"])
            for n in counts:
                print("[bench] scale, %s, N=%d: %s s" % (label, n, ", ".join("%.1f" % t for t in runs[n])))
                rows.append(("scale: %s, N=%d (median of %d)" % (label, n, repeat), median(runs[n]), None))
            if len(counts) > 1:
                print(
                    "[bench] scale, %s: time(N=%d)/time(N=2) = %.2f"
                    % (label, counts[-1], median(runs[counts[-1]]) / median(runs[2]))
                )
    finally:
        stop(server)


def median(values):
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def controller_path(nodes, seed_dir, work, rows):
    """Every node from the controller's model_mirror at once (model_registry_peers: false, 0.2.0's way)."""
    variables = dict(
        role_vars(STORES["controller"], work, seeds=[MODEL], seed_dir=str(seed_dir)), model_registry_peers=False
    )
    rows.append(
        ("new, peers off: every node from the controller", run_playbook(role_plays(), variables, work, "ctl")[0], None)
    )
    clear(nodes, STORES["controller"])


def url_path(nodes, address, work, rows):
    server = nginx(work, address, 18098)
    try:
        source = {"path": MODEL, "source": "url", "url": "http://%s:18098/%s" % (address, MODEL)}
        variables = role_vars(STORES["url"], work, sources=[source])
        rows.append(
            (
                "new: URL mirror (nginx), each node fetches itself",
                run_playbook(role_plays(), variables, work, "url")[0],
                None,
            )
        )
    finally:
        stop(server)
    clear(nodes, STORES["url"])


# The least a verified fetch does: read 1 MiB at a time, hash, write; fsync at the end (floor_path).
VERIFIED_FETCH = """import hashlib, os, sys, urllib.request
digest = hashlib.sha256()
with urllib.request.urlopen(sys.argv[1], timeout=60) as response, open(sys.argv[2], "wb") as out:
    for block in iter(lambda: response.read(1 << 20), b""):
        digest.update(block)
        out.write(block)
    out.flush()
    os.fsync(out.fileno())
print(digest.hexdigest())
"""


def floor_path(nodes, address, seed_dir, work, rows):
    """The model's bytes as one file, fetched verified (VERIFIED_FETCH) by one node (twice: the first fetch of a run
    has been the slower), by 2 and by all N nodes at once, and twice by every node at once; each row's time is until
    the last fetch ends."""
    big, digest = work / "www" / "floor.bin", hashlib.sha256()
    with open(big, "wb") as out:
        for name in sorted(os.listdir(seed_dir / MODEL)):
            with open(seed_dir / MODEL / name, "rb") as src:
                for block in iter(functools.partial(src.read, 16 << 20), b""):
                    digest.update(block)
                    out.write(block)
    want = digest.hexdigest()
    server = nginx(work, address, 18099)
    url = "http://%s:18099/floor.bin" % address
    try:
        for node in nodes:
            podman("exec", node, "mkdir", "-p", "/data/bench-floor")
        cases = [("1 node", [(nodes[0], 0)]), ("1 node (again)", [(nodes[0], 0)])]
        cases += [("%d nodes at once" % n, [(node, 0) for node in nodes[:n]]) for n in sorted({2, len(nodes)}) if n > 1]
        cases.append(
            ("2 per node at once (the work of %d nodes)" % (2 * len(nodes)), [(n, i) for n in nodes for i in (0, 1)])
        )
        for label, fetches in cases:
            t0 = time.monotonic()
            procs = [
                subprocess.Popen(
                    ["podman", "exec", node, "python3", "-c", VERIFIED_FETCH, url, "/data/bench-floor/f%d" % i],
                    env=ENV,
                    stdout=subprocess.PIPE,
                    text=True,
                )
                for node, i in fetches
            ]
            digests = [proc.communicate(timeout=1800)[0].strip() for proc in procs]
            seconds = time.monotonic() - t0
            if any(d != want for d in digests):
                raise SystemExit("floor: a fetch did not get the file's bytes: %s" % digests)
            rows.append(("floor: verified fetch (nginx -> python), %s" % label, seconds, None))
            for node in nodes:
                podman("exec", node, "sh", "-c", "rm -f /data/bench-floor/*")
    finally:
        stop(server)
        big.unlink()
        for node in nodes:
            podman("exec", node, "rm", "-rf", "/data/bench-floor", check=False)


def resume(node, address, seed_dir, work):
    """The URL fetch of the big file cut halfway (nginx at a limited rate; the run killed, and the module writing the
    part on the node, as a crash would), then run again: the bytes nginx sent for the big file, in both runs."""
    log = work / "access.log"
    if log.exists():
        log.unlink()
    big = (seed_dir / MODEL / "model-00001.safetensors").stat().st_size
    server = nginx(work, address, 18098, rate="%dk" % max(1024, big // 1024 // 20))  # about 20 s for the big file
    try:
        source = {"path": MODEL, "source": "url", "url": "http://%s:18098/%s" % (address, MODEL)}
        variables = dict(role_vars(STORES["resume"], work, sources=[source]), model_registry_timeout=30)
        (work / "resume.yml").write_text(yaml.safe_dump(role_plays()))
        (work / "resume-vars.yml").write_text(yaml.safe_dump(variables))
        cmd = [
            PLAYBOOK,
            str(work / "resume.yml"),
            "-i",
            INVENTORY,
            "-e",
            "@" + str(work / "resume-vars.yml"),
            "--limit",
            node,
        ]
        first = subprocess.Popen(
            cmd, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
        )
        part = "%s/.staging/%s/model-00001.safetensors.aiinfra-part" % (STORES["resume"], MODEL)
        deadline, size = time.monotonic() + 300, 0
        while time.monotonic() < deadline and size < big // 2:
            time.sleep(0.5)
            out = podman("exec", node, "stat", "-c", "%s", part, check=False).stdout.strip()
            size = int(out) if out.isdigit() else 0
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(30)
        podman("exec", node, "python3", "-c", KILL_WRITER, part, check=False)
        time.sleep(2)
        kept = podman("exec", node, "stat", "-c", "%s", part, check=False).stdout.strip()
        t0 = time.monotonic()
        proc = subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=1800, check=False)
        seconds = time.monotonic() - t0
        if proc.returncode != 0:
            sys.stderr.write(proc.stdout[-4000:])
            raise SystemExit("the resumed run failed")
    finally:
        stop(server)
        clear([node], STORES["resume"])
    sent = [int(line.split()[-1]) for line in log.read_text().splitlines() if "model-00001" in line]
    resent = sum(sent) - big
    print(
        "[bench] resume on %s: big file %d bytes; part kept after the kill %s bytes; nginx sent %s for it; sent twice"
        " %d bytes (%.2f %% of the file); the resumed run took %.1f s"
        % (node, big, kept, sent, resent, 100.0 * resent / big, seconds)
    )


def table(rows, limit, n, gb):
    print("\n%-52s %9s %9s %s" % ("way in (N=%d GPU nodes, %.2f GB)" % (n, gb), "wall s", "x limit", "changed"))
    for name, seconds, changed in rows:
        ratio = "%9.2f" % (seconds / limit) if limit else "%9s" % "-"
        print("%-52s %9.1f %s %s" % (name, seconds, ratio, "" if changed is None else changed), flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-gb", type=float, default=4.0)
    parser.add_argument("--keep", action="store_true", help="leave the stores on the nodes")
    parser.add_argument("--ways", default=",".join(WAYS), help="comma-separated subset of %s" % ",".join(WAYS))
    parser.add_argument("--repeat", type=int, default=5, help="runs of each kind (noop, scale)")
    args = parser.parse_args()
    ways = set(args.ways.split(","))
    nodes = gpu_nodes()
    if not nodes:
        raise SystemExit("no lab GPU nodes: make lab first")
    route = podman("exec", nodes[0], "ip", "-4", "route", "show", "default").stdout.split()
    address = route[route.index("via") + 1]
    work = Path(tempfile.mkdtemp(prefix="aiinfra-bench-weights-"))
    rows, limit, total = [], None, 0
    try:
        seed_dir = work / "seed"
        total = make_model(seed_dir / MODEL, int(args.size_gb * (1 << 30)))
        (work / "www" / "bench").mkdir(parents=True)
        os.symlink(seed_dir / MODEL, work / "www" / MODEL)
        gb = total / 1e9
        print(
            "[bench] model: %.2f GB (%d files), N=%d GPU nodes %s"
            % (gb, len(os.listdir(seed_dir / MODEL)), len(nodes), nodes)
        )
        if "limit" in ways:
            limit = physical_limit(nodes[0], total)
            rows.append(("physical limit (1 node: dd read+write, fsync)", limit, None))
            rows.append(("shared disk: N nodes write at once (dd, fsync)", shared_disk_limit(nodes, total), None))
        if "copy" in ways:
            copy_path(nodes, seed_dir / MODEL, work, rows)
        if "mirror" in ways:
            mirror_path(nodes, seed_dir, work, rows)
        if "controller" in ways:
            controller_path(nodes, seed_dir, work, rows)
        if "url" in ways:
            url_path(nodes, address, work, rows)
        if "resume" in ways:
            resume(nodes[0], address, seed_dir, work)
        if "noop" in ways:
            noop_path(nodes, seed_dir, work, rows, args.repeat)
        if "scale" in ways:
            scale_path(nodes, address, seed_dir, work, rows, args.repeat)
        if "floor" in ways:
            floor_path(nodes, address, seed_dir, work, rows)
    finally:
        if not args.keep:
            for node in nodes:
                podman("exec", node, "rm", "-rf", *STORES.values(), check=False)
        shutil.rmtree(work, ignore_errors=True)
        if rows:  # what was measured, also when a later way failed
            table(rows, limit, len(nodes), total / 1e9)


if __name__ == "__main__":
    main()
