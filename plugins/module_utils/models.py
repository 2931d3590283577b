# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The per-model defaults of vllm_models and nim_models, in one place.

Every check and builder takes its models through ``filled``: the site plan fills them once and the functions
that tests call directly fill them again, which changes nothing (filling is idempotent)."""

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


def filled(server, models, default_image=None):
    """The models of one server (vllm or nim) with the defaults filled in, ``gpus`` (GPUs per replica) and
    ``server`` set, and for vLLM the image (default_image where a model names none). Entries that are not
    mappings are left out (the argument-spec check names them)."""
    out = []
    for model in models or []:
        if not isinstance(model, dict):
            continue
        entry = dict(MODEL_DEFAULTS[server], **model)
        if server == "vllm":
            if "image" not in entry:
                entry["image"] = default_image
            entry["gpus"] = as_int(entry["tensor_parallel_size"], 1)
        else:
            entry["gpus"] = as_int(entry["gpus"], 1)
        entry.update(drain_timing(entry))
        entry["server"] = server
        out.append(entry)
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
    return None
