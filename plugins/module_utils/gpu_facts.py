# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Parse nvidia-smi output into GPU facts: physical GPUs, MIG devices, driver and CUDA versions."""

import re

QUERY_FIELDS = ("index", "uuid", "name", "memory.total", "mig.mode.current", "driver_version", "pci.bus_id")
QUERY_ARGS = ["--query-gpu=" + ",".join(QUERY_FIELDS), "--format=csv,noheader,nounits"]
CUDA_RE = re.compile(r"CUDA Version\s*:\s*([0-9][0-9.]*)")
MIG_LINE_RE = re.compile(r"^\s+MIG\s+(?P<profile>\S+)\s+Device\s+(?P<index>\d+):\s+\(UUID:\s+(?P<uuid>[^)]+)\)")
GPU_LINE_RE = re.compile(r"^GPU\s+(?P<index>\d+):\s+(?P<name>.+?)\s+\(UUID:\s+(?P<uuid>[^)]+)\)")
NOT_AVAILABLE = ("[N/A]", "N/A", "[Not Supported]", "")


class GpuFactsError(Exception):
    """nvidia-smi answered with an error; `status` classifies it."""

    def __init__(self, status, message):
        super(GpuFactsError, self).__init__(message)
        self.status = status


def classify_error(output):
    """Status and explanation for nvidia-smi's failure output."""
    text = " ".join(output.split())
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
