"""Run a server the way a rendered container runs it: its arguments and environment, as the pod's uid with no
passwd entry, on a read-only root where only /tmp (and /dev/shm, the pods' memory-backed emptyDir) is writable.

No container image can be pulled here, so the "container" is built from read-only bind mounts of this machine's
own files in private mount, PID and IPC namespaces (unshare, as root; a network namespace too unless the server
must reach loopback servers): /usr, /etc (with the uid's passwd and group entries left out), the server's virtual
environment and its Python at their own paths, a fresh /tmp, the volumes the pod mounts (a directory per mount
path, read-only where the pod mounts it read-only); then chroot and setpriv drop to the uid with no
supplementary group and no_new_privs, and the server runs as PID 1 as in a container. Nothing on the host is
changed: every mount lives and dies with the namespace.

    python -m lab.live.runtime install-vllm   install the vLLM server (tests/runtime/requirements-vllm.txt) into .cache/vllm-venv
    python -m lab.live.runtime vllm-path      print the vllm executable's path

The tests (tests/runtime) call ``sandboxed(...)`` directly.
"""

import argparse
import contextlib
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from lab import ROOT

VLLM_VENV = ROOT / ".cache" / "vllm-venv"
# The lock (lab/pins/locks.py, `make locks`): every pin with the sha256 of its linux x86_64 / CPython 3.12 file.
VLLM_REQUIREMENTS = ROOT / "tests" / "runtime" / "requirements-vllm.txt"
PYTHONS = ("python3.12",)  # the vllm/vllm-openai image's Python
# Host directories the sandbox sees (read-only) when they exist; /etc is rebuilt (see passwd_without).
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32")


class RuntimeError_(Exception):
    """A step failed; the message says which and what to do."""


def log(msg):
    print("[runtime] %s" % msg, flush=True)


def python312():
    """A Python 3.12 interpreter that runs (pyenv's versions first: its shims exist on PATH but fail unless the
    version is selected), as `make venv` finds one."""
    candidates = sorted(str(p) for p in Path.home().glob(".pyenv/versions/3.12*/bin/python3.12"))
    candidates += [shutil.which(p) for p in PYTHONS]
    for cand in candidates:
        if not cand:
            continue
        probe = subprocess.run(
            [cand, "-c", "import sys; sys.exit(sys.version_info[:2] != (3, 12))"], capture_output=True, check=False
        )
        if probe.returncode == 0:
            return cand
    raise RuntimeError_(
        "Python 3.12 not found (the vLLM image's Python): apt-get install python3.12 or pyenv install 3.12"
    )


def install_vllm():
    marker = VLLM_VENV / ".installed"
    stamp = VLLM_REQUIREMENTS.read_bytes()
    if marker.exists() and marker.read_bytes() == stamp:
        log("vLLM already installed in %s" % VLLM_VENV)
        return VLLM_VENV
    python = python312()
    log("installing vLLM (%s) into %s with %s" % (VLLM_REQUIREMENTS.relative_to(ROOT), VLLM_VENV, python))
    if VLLM_VENV.exists():
        shutil.rmtree(VLLM_VENV)
    subprocess.run([python, "-m", "venv", str(VLLM_VENV)], check=True)
    subprocess.run(
        [
            str(VLLM_VENV / "bin" / "pip"),
            "install",
            "-q",
            "--disable-pip-version-check",
            "--no-deps",  # the file is the whole frozen set, with the one replaced pin it names
            "--require-hashes",  # a release replaced on PyPI under the same version is refused
            "-r",
            str(VLLM_REQUIREMENTS),
        ],
        check=True,
    )
    marker.write_bytes(stamp)
    return VLLM_VENV


def passwd_without(uid, etc_dir):
    """Copies of /etc/passwd and /etc/group in etc_dir with every entry of uid (user) and gid (group) left out."""
    for name in ("passwd", "group"):
        lines = Path("/etc", name).read_text().splitlines(keepends=True)
        kept = [line for line in lines if len(line.split(":")) < 3 or line.split(":")[2] != str(uid)]
        (etc_dir / name).write_text("".join(kept))


def interpreter_home(venv):
    """The directory of the Python a virtual environment was made from (pyvenv.cfg's home), its install prefix."""
    for line in (Path(venv) / "pyvenv.cfg").read_text().splitlines():
        key, _sep, value = line.partition("=")
        if key.strip() == "home":
            return str(Path(value.strip()).resolve().parent)
    raise RuntimeError_("%s/pyvenv.cfg names no home" % venv)


def sandbox_script(newroot, uid, argv, env, binds, workdir="/"):
    """The shell script (run by `unshare --mount --pid --ipc --fork sh -c`) that builds the read-only root in newroot and execs
    argv in it as uid with exactly env.

    binds: [(host path, path in the sandbox, read_only)]: the pod's volumes and the server's own files."""
    q = shlex.quote
    lines = ["set -eu", "mount --make-rprivate /", "mount -t tmpfs -o mode=0755 sandbox-root %s" % q(newroot)]
    read_only_targets = []  # made read-only once every mount point inside them exists

    def bind(src, dst, read_only):
        target = newroot + dst
        if Path(src).is_dir():
            lines.append("mkdir -p %s" % q(target))
        else:
            lines.append("mkdir -p %s && touch %s" % (q(str(Path(target).parent)), q(target)))
        lines.append("mount --bind %s %s" % (q(src), q(target)))
        if read_only:
            read_only_targets.append(target)

    for path in SYSTEM_DIRS:
        if Path(path).is_symlink():
            lines.append("ln -s %s %s" % (q(os.readlink(path)), q(newroot + path)))
        elif Path(path).is_dir():
            # Read-only at once: no later mkdir can reach the host's own directory.
            lines += ["mkdir -p %s" % q(newroot + path), "mount --bind %s %s" % (q(path), q(newroot + path))]
            lines.append("mount -o remount,bind,ro %s" % q(newroot + path))
    lines += [
        "mkdir -p %s/proc %s/dev %s/tmp" % ((q(newroot),) * 3),
        "mount -t proc proc %s/proc" % q(newroot),
        "mount --rbind /dev %s/dev" % q(newroot),
        # The pod's writable places: the emptyDir /tmp and the memory-backed /dev/shm. Before the binds, so that
        # a venv or a volume whose path is under /tmp (a checkout there) lands on top of it, not under it.
        "mount -t tmpfs -o mode=1777 tmp %s/tmp" % q(newroot),
        "mkdir -p %s/dev/shm" % q(newroot),
        "mount -t tmpfs -o mode=1777 shm %s/dev/shm" % q(newroot),
    ]
    for src, dst, read_only in binds:
        bind(src, dst, read_only)
    lines += ["mount -o remount,bind,ro %s" % q(target) for target in read_only_targets]
    lines.append("mount -o remount,ro sandbox-root %s" % q(newroot))
    env_args = " ".join(q("%s=%s" % (k, v)) for k, v in sorted(env.items()))
    lines.append(
        "exec chroot %s /usr/bin/setpriv --reuid=%d --regid=%d --clear-groups --no-new-privs /usr/bin/env -i %s "
        "/bin/sh -c %s"
        % (q(newroot), uid, uid, env_args, q("cd %s && exec %s" % (q(workdir), " ".join(q(a) for a in argv))))
    )
    return "\n".join(lines)


@contextlib.contextmanager
def sandbox(argv, env, uid, venv, volumes=(), workdir="/", network=True, **popen):
    """Start argv (a path inside venv, or in /usr) as described in the module docstring and yield its Popen; the
    process is killed on exit if still running. volumes: [(host path, mount path, read_only)], never under a
    directory the sandbox takes from the host; network: share this machine's network (loopback servers), else a
    network namespace of its own with nothing in it; popen: more subprocess.Popen arguments (stdout, stderr...).
    PID and IPC namespaces of its own: the server is PID 1, as in a container, and sees no host process."""
    if os.geteuid() != 0:
        raise RuntimeError_("the sandbox needs root (unshare --mount, chroot)")
    with tempfile.TemporaryDirectory(prefix="aiinfra-runtime-") as tmp:
        tmp = Path(tmp)
        etc = tmp / "etc"
        shutil.copytree(
            "/etc",
            etc,
            symlinks=True,
            ignore_dangling_symlinks=True,
            ignore=shutil.ignore_patterns("shadow*", "gshadow*", "ssh", "private"),
        )
        passwd_without(uid, etc)
        newroot = tmp / "root"
        newroot.mkdir()
        venv = str(Path(venv).resolve())
        binds = [(str(etc), "/etc", True), (venv, venv, True)]
        home = interpreter_home(venv)
        if not home.startswith("/usr"):
            binds.append((home, home, True))
        host_dirs = (*SYSTEM_DIRS, venv, home)
        for _src, dst, _ro in volumes:
            if any(dst == d or dst.startswith(d.rstrip("/") + "/") for d in host_dirs):
                raise RuntimeError_("volume mount path %s is inside %s, which comes from the host" % (dst, host_dirs))
        binds += [(str(Path(src).resolve()), dst, ro) for src, dst, ro in volumes]
        script = sandbox_script(str(newroot), int(uid), argv, env, binds, workdir)
        # Its own process group: one SIGTERM reaches every process inside (stop_group), and nothing is left behind.
        proc = subprocess.Popen(
            ["unshare", "--mount", "--pid", "--ipc", "--fork", *([] if network else ["--net"]), "sh", "-c", script],
            start_new_session=True,
            **popen,
        )
        try:
            yield proc
        finally:
            stop_group(proc)


def stop_group(proc, grace=20):
    """SIGTERM to the sandbox's process group, then SIGKILL to what is left after `grace` seconds."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            proc.poll()
            try:
                os.killpg(proc.pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.2)
    proc.wait()


def sandboxed(argv, env, uid, venv, volumes=(), timeout=600, workdir="/", network=False):
    """Run argv in the sandbox to its end: (exit status, stdout and stderr together)."""
    with sandbox(
        argv,
        env,
        uid,
        venv,
        volumes,
        workdir,
        network,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    ) as proc:
        out, _err = proc.communicate(timeout=timeout)
        return proc.returncode, out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("command", choices=["install-vllm", "vllm-path"])
    args = parser.parse_args(argv)
    try:
        if args.command == "install-vllm":
            install_vllm()
        print(VLLM_VENV / "bin" / "vllm")
    except (RuntimeError_, subprocess.CalledProcessError) as err:
        print("[runtime] ERROR: %s" % err, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
