# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Find and run nvidia-smi (on the host, or in the GPU Operator's driver container) and parse its output into GPU
facts: physical GPUs, MIG devices, driver and CUDA versions."""

import os
import re

QUERY_FIELDS = ("index", "uuid", "name", "memory.total", "mig.mode.current", "driver_version", "pci.bus_id")
QUERY_ARGS = ["--query-gpu=" + ",".join(QUERY_FIELDS), "--format=csv,noheader,nounits"]
CUDA_RE = re.compile(r"CUDA Version\s*:\s*([0-9][0-9.]*)")
MIG_LINE_RE = re.compile(r"^\s+MIG\s+(?P<profile>\S+)\s+Device\s+(?P<index>\d+):\s+\(UUID:\s+(?P<uuid>[^)]+)\)")
GPU_LINE_RE = re.compile(r"^GPU\s+(?P<index>\d+):\s+(?P<name>.+?)\s+\(UUID:\s+(?P<uuid>[^)]+)\)")
NOT_AVAILABLE = ("[N/A]", "N/A", "[Not Supported]", "")
# Where nvidia-smi is looked for inside a driver container's root (the GPU Operator's driver image: /usr/bin).
DRIVER_ROOT_PATH = ("/usr/bin", "/usr/sbin", "/bin", "/sbin", "/usr/local/bin", "/usr/local/nvidia/bin")


class GpuFactsError(Exception):
    """nvidia-smi answered with an error; `status` classifies it."""

    def __init__(self, status, message):
        super(GpuFactsError, self).__init__(message)
        self.status = status


def is_executable(path):
    return os.path.isfile(path) and os.access(path, os.X_OK)


def nvidia_smi_argv(nvidia_smi, driver_root, which, executable=is_executable):
    """The argv that runs nvidia-smi on this host; raises GpuFactsError (no_nvidia_smi) when there is none.

    Without driver_root: nvidia_smi itself when it is an absolute path, else `which(nvidia_smi)` (a PATH lookup).
    With driver_root, the root of the GPU Operator's driver container as mounted on the host (/run/nvidia/driver):
    the nvidia-smi inside it (nvidia_smi when absolute, taken inside the root, else looked for in DRIVER_ROOT_PATH),
    run through chroot so that it loads the container's driver libraries, as NVIDIA documents; chroot needs root.
    `which` and `executable` are the host lookups (AnsibleModule.get_bin_path, is_executable)."""
    if driver_root:
        root = driver_root.rstrip("/") or "/"
        inside = [nvidia_smi] if nvidia_smi.startswith("/") else ["%s/%s" % (d, nvidia_smi) for d in DRIVER_ROOT_PATH]
        # A link there points inside the container's tree, which only chroot resolves.
        found = next((path for path in inside if os.path.islink(root + path) or executable(root + path)), None)
        if found is None:
            raise GpuFactsError(
                "no_nvidia_smi",
                "no %s in the GPU Operator's driver container (root %s, looked in %s): the driver is not installed "
                "on this node yet; check the nvidia-driver-daemonset pod of this node"
                % (nvidia_smi, root, ", ".join(os.path.dirname(path) for path in inside)),
            )
        chroot = which("chroot")
        if not chroot:
            raise GpuFactsError("error", "chroot is not installed: nvidia-smi of %s cannot be run" % root)
        return [chroot, root, found]
    if nvidia_smi.startswith("/"):
        if not executable(nvidia_smi):
            raise GpuFactsError(
                "no_nvidia_smi", "nvidia-smi is not installed at %s: no NVIDIA driver is present there" % nvidia_smi
            )
        return [nvidia_smi]
    found = which(nvidia_smi)
    if not found:
        raise GpuFactsError(
            "no_nvidia_smi",
            "nvidia-smi is not installed on this host: no NVIDIA driver is present (where the GPU Operator installs "
            "the driver, nvidia-smi is in its driver container: set driver_root)",
        )
    return [found]


def classify_error(output):
    """Status and explanation for nvidia-smi's failure output (or chroot's, when it runs nvidia-smi)."""
    text = " ".join(output.split())
    if "cannot change root directory" in text:
        return "error", (
            "nvidia-smi of the driver container is run through chroot, which needs root (%s): run the task with "
            "become" % text
        )
    if "failed to run command" in text and "No such file or directory" in text:
        return "no_nvidia_smi", "nvidia-smi is not installed in the driver root (%s)" % text
    if "Driver/library version mismatch" in text:
        return "driver_mismatch", (
            "the loaded NVIDIA kernel module and the user-space driver library have different versions (%s): "
            "reboot the node, or reload the nvidia modules, after a driver upgrade" % text
        )
    if (
        "couldn't communicate with the NVIDIA driver" in text
        or "No devices were found" in text
        or "NVIDIA driver is not loaded" in text
    ):
        return "no_driver", "nvidia-smi cannot reach an NVIDIA driver (%s): install or load the driver" % text
    return "error", "nvidia-smi failed: %s" % (text or "no output")


def _value(text):
    text = text.strip()
    return None if text in NOT_AVAILABLE else text


def parse_query(output):
    """GPUs from `nvidia-smi --query-gpu=<QUERY_FIELDS> --format=csv,noheader,nounits`."""
    gpus = []
    for line in output.splitlines():
        if not line.strip():
            continue
        fields = [f.strip() for f in line.split(",")]
        if len(fields) != len(QUERY_FIELDS):
            raise GpuFactsError(
                "error",
                "unexpected nvidia-smi query line (%d fields, want %d): %r" % (len(fields), len(QUERY_FIELDS), line),
            )
        raw = dict(zip(QUERY_FIELDS, fields))
        memory = _value(raw["memory.total"])
        mig = (_value(raw["mig.mode.current"]) or "").lower()
        gpus.append(
            {
                "index": int(raw["index"]),
                "uuid": raw["uuid"],
                "name": raw["name"],
                "memory_total_mib": int(float(memory)) if memory else None,
                "mig_mode": "enabled" if mig == "enabled" else ("disabled" if mig == "disabled" else None),
                "driver_version": _value(raw["driver_version"]),
                "pci_bus_id": _value(raw["pci.bus_id"]),
            }
        )
    return gpus


def parse_mig_list(output):
    """MIG devices from `nvidia-smi -L`: [{gpu_index, gpu_uuid, profile, index, uuid}]."""
    devices, current = [], None
    for line in output.splitlines():
        gpu = GPU_LINE_RE.match(line)
        if gpu:
            current = gpu
            continue
        mig = MIG_LINE_RE.match(line)
        if mig and current is not None:
            devices.append(
                {
                    "gpu_index": int(current.group("index")),
                    "gpu_uuid": current.group("uuid"),
                    "profile": mig.group("profile"),
                    "index": int(mig.group("index")),
                    "uuid": mig.group("uuid"),
                }
            )
    return devices


def parse_cuda_version(output):
    match = CUDA_RE.search(output or "")
    return match.group(1) if match else None


def build_facts(query_output, list_output="", header_output=""):
    """The facts a GPU host reports: counts, GPUs, MIG devices and versions."""
    gpus = parse_query(query_output)
    mig_devices = parse_mig_list(list_output) if any(g["mig_mode"] == "enabled" for g in gpus) else []
    drivers = sorted({g["driver_version"] for g in gpus if g["driver_version"]})
    profiles = {}
    for dev in mig_devices:
        profiles[dev["profile"]] = profiles.get(dev["profile"], 0) + 1
    return {
        "status": "ok",
        "message": "%d GPU(s)" % len(gpus),
        "count": len(gpus),
        "gpus": gpus,
        "mig_enabled": any(g["mig_mode"] == "enabled" for g in gpus),
        "mig_devices": mig_devices,
        "mig_profiles": profiles,
        "driver_version": drivers[0] if len(drivers) == 1 else (drivers or None),
        "cuda_version": parse_cuda_version(header_output),
    }


def read_gpus(smi, run):
    """The facts of the GPUs nvidia-smi, run as `smi` (an argv prefix from nvidia_smi_argv), reports; `run(argv)`
    returns (rc, stdout, stderr), as AnsibleModule.run_command does. Only reads: the same in check mode."""
    rc, out, err = run([*smi, *QUERY_ARGS])
    if rc != 0:
        status, message = classify_error(out + "\n" + err)
        return empty_facts(status, message)
    list_out = ""
    if any(gpu["mig_mode"] == "enabled" for gpu in parse_query(out)):
        rc, list_out, err = run([*smi, "-L"])
        if rc != 0:
            raise GpuFactsError("error", "nvidia-smi -L failed: %s" % (err or list_out))
    rc, header, err = run([*smi, "-q"])
    facts = build_facts(out, list_out, header if rc == 0 else "")
    if facts["count"] == 0:
        facts.update(empty_facts("no_gpus", "nvidia-smi lists no GPU"))
    return facts


def empty_facts(status, message):
    return {
        "status": status,
        "message": message,
        "count": 0,
        "gpus": [],
        "mig_enabled": False,
        "mig_devices": [],
        "mig_profiles": {},
        "driver_version": None,
        "cuda_version": None,
    }


def expected_from_facts(host_facts):
    """{node name: {physical, mig_slices, mig_gpus}} from {host: ansible_facts} of hosts whose GPUs could be read
    (mig_gpus: the GPUs in MIG mode; under the mixed strategy the others are advertised whole).
    The node name is the kernel host name (K3s's default node name), else the inventory name."""
    expected = {}
    for host, facts in host_facts.items():
        gpus = (facts or {}).get("aiinfra_gpus") or {}
        if gpus.get("status") != "ok":
            continue
        name = facts.get("nodename") or host
        expected[name] = {
            "physical": gpus.get("count", 0),
            "mig_slices": len(gpus.get("mig_devices") or []),
            "mig_gpus": sum(1 for g in gpus.get("gpus") or [] if g.get("mig_mode") == "enabled"),
        }
    return expected
