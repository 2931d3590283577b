# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The per-model defaults of vllm_models and nim_models, in one place.

Every check and builder takes its models through ``filled``: the site plan fills them once and the functions
that tests call directly fill them again, which changes nothing (filling is idempotent)."""

import json
import math
import os
import re

MODEL_DEFAULTS = {
    "vllm": {"tensor_parallel_size": 1, "replicas": 1, "port": 8000},
    "nim": {"gpus": 1, "replicas": 2, "port": 8000},
}

# How a model server pod stops (rolling update, drain, scale-down): the Service drops it and its preStop hook
# sleeps PRESTOP_SECONDS while the endpoints settle; then SIGTERM, after which the server finishes what is in
# flight for at most its shutdown_timeout (vLLM --shutdown-timeout; vLLM's own default, 0, aborts every running
# request) and exits; the kubelet kills it when terminationGracePeriodSeconds runs out, so the grace period must
# hold the preStop sleep, the shutdown timeout and SHUTDOWN_MARGIN for the process to exit.
PRESTOP_SECONDS = 15
SHUTDOWN_MARGIN = 15
SHUTDOWN_TIMEOUT = 90


def as_int(value, default=0):
    """int(value), or default when it is not a whole number."""
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def filled(server, models, default_image=None, weights=None):
    """The models of one server (vllm or nim) with the defaults filled in, ``gpus`` (GPUs per replica) and
    ``server`` set, and for vLLM the image (default_image where a model names none) and, when the size of its
    weights is known (its weights_gib, else weights: {model path: GiB measured in the seed directory}), the
    ``resources`` and ``shm_size`` derived from it (model_sizing) where the model gives none of its own. Entries
    that are not mappings are left out (the argument-spec check names them)."""
    out = []
    for model in models or []:
        if not isinstance(model, dict):
            continue
        entry = dict(MODEL_DEFAULTS[server], **model)
        if server == "vllm":
            if "image" not in entry:
                entry["image"] = default_image
            entry["gpus"] = as_int(entry["tensor_parallel_size"], 1)
            size = model_sizing(entry["gpus"], weights_of(entry, weights))
            if size:
                entry.setdefault("resources", size["resources"])
                entry.setdefault("shm_size", size["shm_size"])
        else:
            entry["gpus"] = as_int(entry["gpus"], 1)
        entry.update(drain_timing(entry))
        entry["server"] = server
        out.append(entry)
    return out


# Host memory and CPU of a vLLM server, derived from its weights and tensor-parallel size (roles/vllm/README.md
# explains each figure). vLLM runs an API server and an engine core process, and one worker process per GPU.
# vLLM's share of a GPU's memory when the GPU is its own (vLLM's default); divided by the slices of a shared GPU.
MEMORY_UTILIZATION = 0.9
# Fraction of a model server's memory share that must stay free of weights, for activations and the KV cache.
KV_CACHE_ROOM = 0.1
SERVER_BASE_GIB = 4  # API server + engine core: Python, torch, the tokenizer, the scheduler
WORKER_GIB = 4  # each GPU worker: torch and the CUDA context's host memory, NCCL's host buffers, pinned staging
SHM_GIB_PER_GPU = 2  # /dev/shm per GPU: NCCL's shared-memory transport, vLLM's engine-to-worker queue, torch IPC
CPU_BASE = 2  # the API server (HTTP, tokenizing) and the engine core's busy loop
CPU_PER_GPU = 2  # each worker's busy loop launching kernels, and its helper threads
CPU_LIMIT_FACTOR = 2  # bursts (tokenizing long prompts, start-up compilation) may use twice the request


def weights_of(model, weights=None):
    """GiB of the model's weights: its own weights_gib, else the size measured for its path, else None (also when
    weights_gib is not a number: serving_plan names it)."""
    declared = model.get("weights_gib")
    if declared is None:
        declared = (weights or {}).get(model.get("path"))
    if declared is None or isinstance(declared, bool):
        return None
    try:
        value = float(declared)
    except (TypeError, ValueError):
        return None
    return value if value >= 0 and math.isfinite(value) else None


def load_memory_gib(gpus, weights_gib):
    """The least host memory (GiB) a vLLM pod needs to load weights_gib over `gpus` GPUs: its processes (the API
    server and engine core, and a worker per GPU) and one rank's shard of the weights, which passes through host
    memory (page cache of the mmapped safetensors, or the read buffer of .bin/.pt files and of vLLM's eager
    safetensors loading) on its way to the GPU. Below it the load thrashes or the pod is OOM-killed."""
    gpus = max(int(gpus), 1)
    return math.ceil(SERVER_BASE_GIB + WORKER_GIB * gpus + float(weights_gib) / gpus)


def model_sizing(gpus, weights_gib):
    """The resources (Kubernetes requests and limits of cpu and memory; the GPUs are added by the workload builder)
    and /dev/shm size of a vLLM server of weights_gib over `gpus` GPUs (tensor parallel), or None when the size of
    the weights is unknown (the role's vllm_resources and vllm_shm_size apply then).

    memory request: load_memory_gib (what it cannot start without); memory limit: the processes, all the weights
    (each rank reads every safetensors file through the same page cache, charged once to the pod) and the /dev/shm
    (a memory-backed emptyDir counts against the limit); shm: SHM_GIB_PER_GPU per GPU; cpu: CPU_BASE + CPU_PER_GPU
    per GPU requested, CPU_LIMIT_FACTOR times that as the limit."""
    if weights_gib is None:
        return None
    gpus = max(as_int(gpus, 1), 1)
    shm = SHM_GIB_PER_GPU * gpus
    request = load_memory_gib(gpus, weights_gib)
    limit = math.ceil(SERVER_BASE_GIB + WORKER_GIB * gpus + float(weights_gib) + shm)
    cpu = CPU_BASE + CPU_PER_GPU * gpus
    return {
        "resources": {
            "requests": {"cpu": str(cpu), "memory": "%dGi" % request},
            "limits": {"cpu": str(cpu * CPU_LIMIT_FACTOR), "memory": "%dGi" % max(limit, request)},
        },
        "shm_size": "%dGi" % shm,
    }


UNITS = {
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
    "Ei": 2**60,
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "E": 10**18,
    "m": 10**-3,
    "": 1,
}


def quantity_bytes(value):
    """Bytes of a Kubernetes memory quantity ("24Gi", "512Mi", "100G", "1e9", 1073741824), or None when it is not
    one."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value)
    text = str(value).strip()
    for suffix in sorted(UNITS, key=len, reverse=True):
        if suffix and text.endswith(suffix):
            number, factor = text[: -len(suffix)], UNITS[suffix]
            break
    else:
        number, factor = text, 1
    try:
        result = float(number) * factor
    except ValueError:
        return None
    return result if math.isfinite(result) and result >= 0 else None


def model_configs(seed_dir, paths):
    """{model path: its parsed config.json} for the model directories of the seed directory that have one (what
    serving_plan checks tensor_parallel_size against); unreadable or malformed files are left out."""
    out = {}
    for path in paths or []:
        if not seed_dir or store_path_error(path):
            continue
        name = os.path.join(seed_dir, path, "config.json")
        try:
            with open(name, encoding="utf-8") as handle:
                config = json.load(handle)
        except (OSError, ValueError):
            continue
        if isinstance(config, dict):
            out[path] = config
    return out


def drain_timing(model):
    """The model's shutdown_timeout and termination_grace_period: the one it leaves out follows from the other
    (grace = preStop + shutdown timeout + margin); neither given, SHUTDOWN_TIMEOUT. serving_plan checks them."""
    overhead = PRESTOP_SECONDS + SHUTDOWN_MARGIN
    shutdown, grace = model.get("shutdown_timeout"), model.get("termination_grace_period")
    if shutdown is None:
        shutdown = as_int(grace, SHUTDOWN_TIMEOUT + overhead) - overhead if grace is not None else SHUTDOWN_TIMEOUT
    if grace is None:
        grace = as_int(shutdown, SHUTDOWN_TIMEOUT) + overhead
    return {"shutdown_timeout": shutdown, "termination_grace_period": grace}


STORE_PATH_FIX = (
    "write the model's directory relative to the model store and the seed directory, without '.' or '..' "
    "segments, e.g. Qwen/Qwen2.5-7B-Instruct"
)


def store_path_error(path):
    """Why a model path (a vllm_models path, a model_registry_seed_models or model_registry_preseeded entry) may not
    be used, or None. Such a path is joined to the model store on the nodes and to the seed directory on the
    controller, and the seed copy runs as root: an absolute path or a '..' segment would copy, check or serve
    files outside them."""
    if not isinstance(path, str) or not path.strip():
        return "is %r, not a path" % (path,)
    if path.startswith(("/", "~")):
        return "is %r, an absolute path (or one starting with ~) where one relative to the model store is meant" % path
    if any(ord(c) < 32 or ord(c) == 127 for c in path) or "\\" in path:
        return "is %r: it has control characters or a backslash" % path
    if any(part in (".", "..") for part in path.split("/")):
        return "is %r: a '.' or '..' segment would leave the model's directory (or the store)" % path
    if path.split("/")[0] == ".staging":
        return "is %r: the store keeps .staging for fetches in progress" % path
    return None


def gpu_share(gpus, shared_replicas):
    """How many pods may share each GPU of a pod asking for `gpus`: the most slices of any time-sliced node for a
    one-GPU pod (it may land there), 1 for a multi-GPU pod (kept off sliced nodes)."""
    if int(gpus) > 1:
        return 1
    return max([1] + [int(r) for r in shared_replicas or []])


def memory_utilization(model, share):
    """vLLM's --gpu-memory-utilization: the model's own value, else vLLM's default divided by the pods that may
    share the GPU, rounded down to hundredths."""
    if model.get("gpu_memory_utilization") is not None:
        return float(model["gpu_memory_utilization"])
    return math.floor(MEMORY_UTILIZATION * 100 / int(share)) / 100


# ---------------------------------------------------------------- where each model's weights come from

# model_registry_sources: each entry names a model directory of the store and where its files come from. `url`: the
# GPU nodes fetch the directory (and its SHA256SUMS) from an HTTP(S) mirror themselves; `hub`: the controller takes a
# pinned revision of a Hugging Face repo (or a mirror of the Hub's API at `endpoint`) into its cache and hands it to
# the nodes. The keys each source allows; `path` and `source` are required by all.
WEIGHT_SOURCE_KEYS = {
    "url": ("path", "source", "url", "headers", "revision"),
    "hub": ("path", "source", "repo", "revision", "endpoint", "token", "include", "exclude"),
}
HUB_REPO = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")
COMMIT = re.compile(r"^[0-9a-f]{40}$")
# A model path's first segment the store keeps for fetches in progress (model_weights' staging directory).
STAGING_SEGMENT = ".staging"
SOURCES_VARIABLE = "model_registry_sources"


def _http_url_error(value):
    if not isinstance(value, str) or not value.startswith(("http://", "https://")) or len(value) < 10:
        return "is %r, not an http:// or https:// URL" % (value,)
    if any(ord(c) <= 32 or ord(c) == 127 for c in value):
        return "has spaces or control characters"
    return None


def weight_source_findings(sources, seeded=()):
    """(problem text, fix) of each wrong model_registry_sources entry: its keys, path, source and the source's own
    settings; a path named twice, or also seeded from the controller (model_registry_seed_models)."""
    if sources in (None, ""):
        return []
    if not isinstance(sources, list):
        return [("%s is %r, not a list" % (SOURCES_VARIABLE, type(sources).__name__), "make it a list of entries")]
    out, seen = [], {}
    for index, entry in enumerate(sources):
        name = "%s[%d]" % (SOURCES_VARIABLE, index)
        if not isinstance(entry, dict):
            out.append(("%s is %r, not a mapping" % (name, entry), "give path, source and the source's settings"))
            continue
        path, kind = entry.get("path"), entry.get("source")
        why = store_path_error(path)
        if why:
            out.append(("%s.path %s" % (name, why), STORE_PATH_FIX))
        else:
            name = "%s[%d] (%s)" % (SOURCES_VARIABLE, index, path)
            if path in seen:
                out.append(
                    (
                        "%s names the same directory as entry %d" % (name, seen[path]),
                        "keep one source per model directory",
                    )
                )
            elif path in seeded:
                out.append(
                    (
                        "%s is also in model_registry_seed_models" % name,
                        "take the model from one source: drop it from one of the two",
                    )
                )
            seen.setdefault(path, index)
        if kind not in WEIGHT_SOURCE_KEYS:
            out.append(
                (
                    "%s.source is %r, not one of %s" % (name, kind, ", ".join(sorted(WEIGHT_SOURCE_KEYS))),
                    "set source: url or source: hub",
                )
            )
            continue
        unknown = sorted(set(entry) - set(WEIGHT_SOURCE_KEYS[kind]))
        if unknown:
            out.append(
                (
                    "%s has %s, which a %s source does not take (it takes %s)"
                    % (name, ", ".join(unknown), kind, ", ".join(WEIGHT_SOURCE_KEYS[kind])),
                    "remove or correct them",
                )
            )
        if kind == "url":
            why = _http_url_error(entry.get("url"))
            if why:
                out.append(
                    (
                        "%s.url %s" % (name, why),
                        "give the URL of the model's directory on the mirror (it holds SHA256SUMS)",
                    )
                )
            if not isinstance(entry.get("headers", {}), dict):
                out.append(("%s.headers is not a mapping" % name, "give header names and values, e.g. Authorization"))
        else:
            if not isinstance(entry.get("repo"), str) or not HUB_REPO.match(entry["repo"]):
                out.append(
                    (
                        "%s.repo is %r, not a Hub repo id (owner/name)" % (name, entry.get("repo")),
                        "give the repo id, e.g. Qwen/Qwen2.5-7B-Instruct",
                    )
                )
            revision = entry.get("revision")
            if not isinstance(revision, str) or not COMMIT.match(revision):
                out.append(
                    (
                        "%s.revision is %r, not a commit (40 lower-case hex digits): a branch or tag can move"
                        % (name, revision),
                        "pin the commit the model page lists for the revision you tested",
                    )
                )
            if "endpoint" in entry:
                why = _http_url_error(entry["endpoint"])
                if why:
                    out.append(("%s.endpoint %s" % (name, why), "give the base URL of the Hub mirror (as HF_ENDPOINT)"))
            for key in ("include", "exclude"):
                value = entry.get(key, [])
                if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
                    out.append(
                        (
                            "%s.%s is %r, not a list of file patterns" % (name, key, value),
                            "e.g. ['*.safetensors', '*.json']",
                        )
                    )
    return out


def _listed(files):
    """A Hub snapshot's file list for model_weights, or None (the node then reads the snapshot's SHA256SUMS through
    the mirror) when a file lacks its sha256 or size, as in check mode before the files were verified."""
    if not files or any(not f.get("sha256") or f.get("size") is None for f in files):
        return None
    return [{"path": f["path"], "sha256": f["sha256"], "size": f["size"]} for f in files]


def weight_fetches(sources, seeds, seed_dir, snapshots, elsewhere=(), seed_lists=None):
    """What one GPU node fetches into its store, in the order given: one entry per model directory the plan may place
    there (paths in `elsewhere` only models placed on other nodes serve, and are left out).

    sources: its model_registry_sources; seeds: model_registry_seed_models (directories below seed_dir on the
    controller); snapshots: hub_snapshot's results for the hub sources ({path: {dest, files}}); seed_lists: the file
    list of each seed directory as read on the controller ({path: [{path, sha256, size}] or None}). Each entry:
    {path, mirror (fetched from the controller's model_mirror, else from url), url, dir (served by the mirror),
    files (the Hub's list with sha256 and size; None: the source's SHA256SUMS), source (recorded), revision}. A
    source's headers (credentials) are left out: the entries are shown as loop items.
    """
    out = []
    for entry in sources or []:
        if entry["path"] in elsewhere:
            continue
        if entry["source"] == "url":
            out.append(
                {
                    "path": entry["path"],
                    "mirror": False,
                    "url": entry["url"].rstrip("/"),
                    "dir": None,
                    "files": None,
                    "source": "url %s" % entry["url"].rstrip("/"),
                    "revision": entry.get("revision"),
                }
            )
        else:
            snap = (snapshots or {}).get(entry["path"]) or {}
            out.append(
                {
                    "path": entry["path"],
                    "mirror": True,
                    "url": None,
                    "dir": snap.get("dest"),
                    "files": _listed(snap.get("files")),
                    "source": "hub %s@%s%s"
                    % (entry["repo"], entry["revision"], " (%s)" % entry["endpoint"] if entry.get("endpoint") else ""),
                    "revision": entry["revision"],
                }
            )
    for path in seeds or []:
        if path in elsewhere:
            continue
        directory = "%s/%s" % (str(seed_dir).rstrip("/"), path)
        out.append(
            {
                "path": path,
                "mirror": True,
                "url": None,
                "dir": directory,
                "files": (seed_lists or {}).get(path),
                "source": "controller %s" % directory,
                "revision": None,
            }
        )
    return out


# ---------------------------------------------------------------- distribution of the controller's models

# How the models the controller holds (Hub snapshots, seed directories) spread over the GPU nodes: the controller
# hands each one to a single node, and the nodes that hold it (verified) hand it on, each to one other node per
# round, so the controller's link carries each model once and the node count adds rounds, not load on one link.
PEER_VARIABLES = ("model_registry_peers", "model_registry_peer_port")
# Where a GPU node is reached by the others (the firewall's node address: k3s_node_ip, an IP ansible_host).
ADDRESS_VARIABLES = ("k3s_node_ip", "ansible_host")
PEER_PORT_DEFAULT = 8491


def weights_distribution(values, gpu_nodes):
    """({peers, port, addresses}, [(variable, problem text, fix)]): whether GPU nodes hand the controller's models to
    one another, on which TCP port, and each GPU node's address as the other nodes reach it (None: the node only
    fetches, it cannot serve; the firewall's node_address decides it)."""
    from ansible_collections.aiinfra.k3s.plugins.module_utils.node.firewall import node_address

    findings = []
    peers = values.get("model_registry_peers", True)
    if not isinstance(peers, bool):
        findings.append(("model_registry_peers", "is %r, not true or false" % (peers,), "set true or false"))
        peers = False
    port = values.get("model_registry_peer_port", PEER_PORT_DEFAULT)
    number = as_int(port, None)
    if isinstance(port, bool) or number is None or not 1 <= number <= 65535:
        findings.append(
            (
                "model_registry_peer_port",
                "is %r, not a TCP port" % (port,),
                "give a port from 1 to 65535 that nothing else on the GPU nodes uses (default %d)" % PEER_PORT_DEFAULT,
            )
        )
        number = PEER_PORT_DEFAULT
    addresses = {host: node_address(hv or {}) for host, hv in sorted((gpu_nodes or {}).items())}
    return {"peers": peers, "port": number, "addresses": addresses}, findings


def peer_url(address, port):
    """http://address:port, an IPv6 address in brackets."""
    return "http://%s:%d" % ("[%s]" % address if ":" in address else address, int(port))


def weight_round(hosts, pending, held, distribution):
    """The next round of handing the controller's models to the GPU nodes still in the play.

    hosts: the hosts in play order; pending: {host: [fetch entries (weight_fetches' mirror entries) still to take]};
    held: {host: [model paths it holds verified]}; distribution: the plan's {peers, port, addresses}.
    Returns {fetches: {host: [entry + {peer, url}]}, servers: {host: [paths it serves this round]}}; empty when
    nothing is pending. A node holding a model serves it to at most one node per round; the controller hands a model
    only to a node that can hand it on, and to one per round, while no node holds it; without peers (or where no
    node needing it can serve) every node takes it from the controller at once. `peer` is the serving host (None:
    the controller, whose URL the role knows), `url` the peer's model URL."""
    peers = bool(distribution.get("peers"))
    addresses = distribution.get("addresses") or {}
    port = distribution.get("port") or PEER_PORT_DEFAULT
    hosts = [h for h in hosts if h in pending or h in held]
    busy = set()
    fetches, servers = {}, {}
    order = []
    for host in hosts:
        for entry in pending.get(host) or []:
            if entry["path"] not in order:
                order.append(entry["path"])

    def assign(host, entry, peer):
        url = "%s/%s" % (peer_url(addresses[peer], port), entry["path"]) if peer else None
        fetches.setdefault(host, []).append(dict(entry, peer=peer, url=url))
        if peer:
            busy.add(peer)
            servers.setdefault(peer, []).append(entry["path"])

    for path in order:
        needing = [(h, e) for h in hosts for e in pending.get(h) or [] if e["path"] == path]
        holders = [h for h in hosts if path in (held.get(h) or []) and addresses.get(h)] if peers else []
        waiting = []
        for host, entry in needing:
            free = [h for h in holders if h not in busy and h != host]
            if free:
                assign(host, entry, free[0])
            else:
                waiting.append((host, entry))
        if not waiting or holders:
            continue  # the rest wait for a node that holds the model to be free
        # A node that takes nothing else from the controller this round first: two models go to two relays at once.
        relays = sorted(
            [(h, e) for h, e in waiting if addresses.get(h)] if peers else [], key=lambda pair: pair[0] in fetches
        )
        for host, entry in relays[:1] or waiting:
            assign(host, entry, None)
    return {"fetches": fetches, "servers": servers}
