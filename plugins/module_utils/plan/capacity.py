# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Checks of a serving plan against the GPUs the inventory describes: capacity per node and class, time-slicing,
GPU memory for the weights, tensor parallel against the nodes and the model's attention heads, host memory for
loading the weights, images pinned, names unique. Plain functions; problems are returned, not raised, one finding
per cause, with the numbers it was decided on."""

import math

from ansible_collections.aiinfra.k3s.plugins.module_utils.k8s.objects import (
    image_pinned,
)
from ansible_collections.aiinfra.k3s.plugins.module_utils.plan.models import (
    KV_CACHE_ROOM,
    PRESTOP_SECONDS,
    SERVER_BASE_GIB,
    SHUTDOWN_MARGIN,
    STORE_PATH_FIX,
    WORKER_GIB,
    as_int,
    filled,
    gpu_share,
    load_memory_gib,
    memory_utilization,
    model_sizing,
    quantity_bytes,
    store_path_error,
    weights_of,
)


def capacity_findings(nodes, classes=None, default_class=""):
    """GPU capacity per node, with time-slicing replicas from the node's class.

    nodes: {node: {"gpus": int, "class": class name or empty, "memory_mib": MiB per GPU or 0}};
    classes: {class: replicas per GPU}. Returns ({node: {"gpus": physical GPUs, "replicas": replicas per GPU,
    optional "memory_mib"}}, [(node, variable, message)]).
    """
    classes = classes or {}
    problems = []
    capacity = {}
    for node, info in sorted(nodes.items()):
        wanted = info.get("class") or default_class
        if wanted and wanted not in classes:
            problems.append(
                (
                    node,
                    "aiinfra_gpu_class",
                    "%s: GPU class %r is not in gpu_operator_time_slicing_classes (%s): add it or set "
                    "aiinfra_gpu_class to one of them" % (node, wanted, ", ".join(sorted(classes)) or "none defined"),
                )
            )
        capacity[node] = {"gpus": int(info.get("gpus", 1)), "replicas": int(classes.get(wanted, 1) if wanted else 1)}
        memory = info.get("memory_mib")
        if memory:
            if isinstance(memory, bool) or not str(memory).isdigit():
                problems.append(
                    (
                        node,
                        "aiinfra_gpu_memory_mib",
                        "%s: aiinfra_gpu_memory_mib is %r: give the memory of one GPU in MiB as nvidia-smi shows it "
                        "(e.g. 23034 for an L4, 81920 for an A100 80GB)" % (node, memory),
                    )
                )
            else:
                capacity[node]["memory_mib"] = int(memory)
    return capacity, problems


def gpu_capacity(nodes, classes=None, default_class=""):
    """(capacity, messages) of capacity_findings."""
    capacity, problems = capacity_findings(nodes, classes, default_class)
    return capacity, [message for _node, _variable, message in problems]


ERROR = "error"
WARNING = "warning"
# Codes of plan_findings(severity=True): SERVING_PLAN, but MODEL_SIZE for a model whose size is unknown (its fit in
# GPU memory is not checked, its sizes are not derived) and GPU_MEMORY for nodes whose GPU memory is unknown.
CODE = "SERVING_PLAN"
UNSIZED = "MODEL_SIZE"
UNKNOWN_GPU_MEMORY = "GPU_MEMORY"


def names_text(names):
    """'a', 'a and b', 'a, b and c'."""
    names = [str(n) for n in names]
    if len(names) < 2:
        return "".join(names)
    return "%s and %s" % (", ".join(names[:-1]), names[-1])


def plural(count, word):
    """'1 GPU', '2 GPUs'."""
    return "%d %s%s" % (count, word, "" if count == 1 else "s")


def node_text(node, cap):
    """'l40s-1 (class shared)' where the capacity names the node's class, else the node."""
    return "%s (class %s)" % (node, cap["class"]) if cap.get("class") else str(node)


def site_gpus_text(capacity):
    """The site's GPU units an operator can count: '16 whole GPUs (h100-1: 8, h100-2: 8) and 2 GPUs shared by
    time-slicing, 4 slices (l40s-1: 2 GPUs x 2 slices)'."""
    whole = {n: c for n, c in sorted(capacity.items()) if c["replicas"] == 1}
    sliced = {n: c for n, c in sorted(capacity.items()) if c["replicas"] > 1}
    parts = []
    if whole:
        parts.append(
            "%s (%s)"
            % (
                plural(sum(c["gpus"] for c in whole.values()), "whole GPU"),
                ", ".join("%s: %d" % (n, c["gpus"]) for n, c in whole.items()),
            )
        )
    if sliced:
        parts.append(
            "%s shared by time-slicing, %s (%s)"
            % (
                plural(sum(c["gpus"] for c in sliced.values()), "GPU"),
                plural(sum(c["gpus"] * c["replicas"] for c in sliced.values()), "slice"),
                ", ".join(
                    "%s: %s x %d slices" % (n, plural(c["gpus"], "GPU"), c["replicas"]) for n, c in sliced.items()
                ),
            )
        )
    return " and ".join(parts) or "no GPUs"


def demand_text(works):
    """What workloads ask for, to be added up: 'llama: 2 replicas x 4 GPUs, qwen: 1 replica x 1 GPU'."""
    return ", ".join(
        "%s: %s x %s" % (w["name"], plural(w["replicas"], "replica"), plural(w["gpus"], "GPU")) for w in works
    )


def placement_problems(work, capacity):
    """Why no node can run one replica of a workload, as one message (or None): a replica is one pod, so its GPUs
    (tensor_parallel_size, or a NIM's gpus) must be on one node; a multi-GPU pod needs whole GPUs, as time-sliced
    nodes give a pod one slice at most (failRequestsGreaterThanOne). Pipeline parallel across nodes is not part of
    this collection, so a replica never spans nodes."""
    gpus = work["gpus"]
    biggest = max([c["gpus"] for c in capacity.values()] + [0])
    largest = sorted(n for n, c in capacity.items() if c["gpus"] == biggest)
    if gpus > biggest:
        return (
            "%s: %s %d is larger than the GPUs of any node (at most %d): %s %s %d; a replica is one pod on one node "
            "(a model cannot span nodes: pipeline parallel is not supported): lower %s to at most %d or add a node "
            "with %d GPUs"
            % (
                work["name"],
                work["what"],
                gpus,
                biggest,
                names_text(largest),
                "has" if len(largest) == 1 else "have",
                biggest,
                work["what"],
                biggest,
                gpus,
            )
        )
    if gpus < 2 or all(c["replicas"] == 1 for c in capacity.values()):
        return None
    whole = {n: c["gpus"] for n, c in capacity.items() if c["replicas"] == 1}
    most = max([*whole.values(), 0])
    if gpus <= most:
        return None
    return (
        "%s: %s %d needs %d whole GPUs on one node, but time-sliced nodes give a pod one slice at most "
        "(failRequestsGreaterThanOne) and the nodes without time-slicing have %s: give a node with enough GPUs a "
        "class of 1 replica, or lower %s"
        % (
            work["name"],
            work["what"],
            gpus,
            gpus,
            "at most %d GPU(s) (%s)" % (most, ", ".join("%s: %d" % (n, g) for n, g in sorted(whole.items())))
            if whole
            else "none",
            work["what"],
        )
    )


def sharing_problems(work, capacity):
    """A multi-GPU workload needs whole GPUs on one node: time-sliced nodes refuse requests for more than one
    slice (failRequestsGreaterThanOne), so only nodes without time-slicing can hold it. (Kept for callers of the
    earlier API; placement_problems also names a workload larger than every node.)"""
    found = placement_problems(work, capacity)
    return [found] if found and "needs %d whole GPUs" % work["gpus"] in found else []


def model_nodes(work, capacity):
    """The capacity of the nodes the model may use: its ``nodes`` where the plan gives them (placement), else
    every node."""
    allowed = (work.get("model") or {}).get("nodes")
    if isinstance(allowed, list) and allowed:
        return {n: c for n, c in capacity.items() if n in allowed}
    return capacity


def slot_problem(work, capacity):
    """A multi-GPU workload whose replicas cannot all have their GPUs on one node each: each node without
    time-slicing holds floor(GPUs / GPUs per replica) of them, whatever else runs."""
    gpus = work["gpus"]
    if gpus < 2:
        return None
    whole = {n: c["gpus"] for n, c in sorted(model_nodes(work, capacity).items()) if c["replicas"] == 1}
    slots = sum(g // gpus for g in whole.values())
    if work["replicas"] <= slots or sum(whole.values()) < work["replicas"] * gpus:
        return None  # the count of whole GPUs (capacity_problems) is the cause, not their split over nodes
    return (
        "%s: %s x %s need %s of %d GPUs each on one node, but the nodes without time-slicing hold %d such "
        "replica(s) (%s), although they have %s in all: lower replicas or %s, or add a node"
        % (
            work["name"],
            plural(work["replicas"], "replica"),
            plural(gpus, "GPU"),
            plural(work["replicas"], "place"),
            gpus,
            slots,
            ", ".join("%s: %d GPUs hold %d" % (n, g, g // gpus) for n, g in whole.items()),
            plural(sum(whole.values()), "whole GPU"),
            work["what"],
        )
    )


def attention_heads(config):
    """(attention heads, key/value heads) of a Hugging Face config.json, as vLLM reads them (the text model's for a
    multimodal config; key/value heads default to the attention heads), or None without num_attention_heads."""
    if not isinstance(config, dict):
        return None
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else {}
    source = config if "num_attention_heads" in config else text
    heads = as_int(source.get("num_attention_heads"), 0)
    if heads < 1:
        return None
    kv = as_int(source.get("num_key_value_heads"), 0) or heads
    return heads, kv


def tp_fits_heads(tp, heads, kv):
    """vLLM's rule: the attention heads divide evenly over the tensor-parallel ranks (ModelConfig's
    verify_with_parallel_config), and the key/value heads either split evenly over the ranks or, with more ranks
    than key/value heads, are replicated evenly (QKVParallelLinear)."""
    if heads % tp:
        return False
    return tp % kv == 0 if tp >= kv else kv % tp == 0


def heads_problem(work, config, capacity):
    """tensor_parallel_size against the model's attention heads (config.json), or None."""
    found = attention_heads(config)
    if not found:
        return None
    heads, kv = found
    tp = work["gpus"]
    if tp_fits_heads(tp, heads, kv):
        return None
    biggest = max([c["gpus"] for c in capacity.values()] + [1])
    valid = [t for t in range(1, biggest + 1) if tp_fits_heads(t, heads, kv)]
    return (
        "%s: tensor_parallel_size %d does not fit the model's %d attention heads and %d key/value heads (%s/config.json): "
        "vLLM needs the attention heads divisible by it, and the key/value heads divisible by it or it by them, "
        "and refuses to start; use %s (the sizes up to the %d GPUs of the largest node that do)"
        % (work["name"], tp, heads, kv, work["path"], names_text(valid).replace(" and ", " or "), biggest)
    )


def pipeline_problem(work):
    """--pipeline-parallel-size in a model's extra_args: each replica is one pod requesting tensor_parallel_size
    GPUs, so more pipeline stages would ask vLLM for GPUs the pod does not have (and multi-node serving is not part
    of this collection)."""
    args = [str(a) for a in work["model"].get("extra_args") or []]
    for i, arg in enumerate(args):
        name, _sep, value = arg.partition("=")
        if name in ("--pipeline-parallel-size", "-pp"):
            value = value or (args[i + 1] if i + 1 < len(args) else "")
            if as_int(value, 2) > 1:
                return (
                    "%s: extra_args set %s %s, but each replica is one pod with tensor_parallel_size GPUs on one node; "
                    "pipeline parallel (across GPUs or nodes) is not supported: remove it and raise "
                    "tensor_parallel_size instead" % (work["name"], name, value)
                )
    return None


def stranded_warning(work, capacity, others, reserve_whole):
    """A tensor-parallel size that does not divide the GPUs of the nodes that may run the model leaves GPUs that
    its replicas cannot use; a warning unless another workload of the plan can use them."""
    tp = work["gpus"]
    if tp < 2:
        return None
    nodes = {
        n: c["gpus"] for n, c in sorted(model_nodes(work, capacity).items()) if c["replicas"] == 1 and c["gpus"] >= tp
    }
    left = {n: g % tp for n, g in nodes.items() if g % tp}
    if not left:
        return None
    sliced = any(c["replicas"] > 1 for c in capacity.values())
    for other in others:
        if other is work:
            continue
        # One-GPU pods keep to the time-sliced nodes when the plan has multi-GPU models (reserve_whole).
        if other["gpus"] <= max(left.values()) and (other["gpus"] > 1 or not (reserve_whole and sliced)):
            return None
    idle = {}
    for node, count in left.items():
        idle.setdefault(count, []).append(node)
    return (
        "%s: tensor_parallel_size %d does not divide the GPUs of %s: every replica takes %d GPUs of one node, so %s, "
        "and no other model of the plan can use them; use a tensor_parallel_size that divides the nodes' GPUs"
        % (
            work["name"],
            tp,
            ", ".join("%s (%d)" % (n, nodes[n]) for n in left),
            tp,
            "; ".join(
                "%s stay%s idle on %s" % (plural(count, "GPU"), "s" if count == 1 else "", names_text(where))
                + (" each" if len(where) > 1 else "")
                for count, where in sorted(idle.items())
            ),
        )
    )


def eligible_nodes(work, capacity, reserve_whole=False):
    """The nodes one pod of the workload may land on: with enough GPUs, without time-slicing for a multi-GPU pod,
    only time-sliced ones for a one-GPU pod when reserve_whole (multi-GPU models in the plan keep the whole GPUs,
    model_servers.whole_gpus_affinity), and among the model's own ``nodes`` where the plan gives them."""
    allowed = (work.get("model") or {}).get("nodes")
    if isinstance(allowed, list):
        # The site plan decided them (placement and the slicing rules): only the GPU count is left to check.
        return {n: c for n, c in capacity.items() if n in allowed and c["gpus"] >= work["gpus"]}
    sliced = {n for n, c in capacity.items() if c["replicas"] > 1}
    out = {}
    for node, cap in model_nodes(work, capacity).items():
        if cap["gpus"] < work["gpus"] or (work["gpus"] > 1 and node in sliced):
            continue
        if work["gpus"] == 1 and reserve_whole and sliced and node not in sliced:
            continue
        out[node] = cap
    return out


def memory_findings(work, capacity, weights_gib, measured=False, reserve_whole=False):
    """[(message, severity[, code])]: vLLM's memory share of a GPU, and whether the weights fit in it with room for the KV
    cache, checked against the smallest GPU of the nodes the pods may land on. weights_gib None: the fit is not
    checked (a warning; measured: the size came from the seed directory)."""
    shared = [c["replicas"] for c in capacity.values()]
    # The site plan's share of the model (the nodes it may use) where it gave one, else the site's most sliced GPU.
    share = work["model"].get("gpu_share") or gpu_share(work["gpus"], shared)
    explicit = work["model"].get("gpu_memory_utilization")
    out = []
    try:
        # The site plan's decision (placement_plan) where the model comes from it, else the same rule here.
        utilization = (
            work["model"]["memory_utilization"]
            if "memory_utilization" in work["model"]
            else memory_utilization(work["model"], share)
        )
    except (TypeError, ValueError):
        utilization = None
    if utilization is None or not 0 < utilization <= 1:
        return [("%s: gpu_memory_utilization %r is not a number between 0 and 1" % (work["name"], explicit), ERROR)]
    if explicit is not None and share > 1 and utilization * share > 1:
        out.append(
            (
                "%s: gpu_memory_utilization %s on a GPU time-sliced %d ways asks for %d%% of its memory: the second "
                "pod on the GPU fails at start; set it to at most %s or leave it out (it is then %s)"
                % (
                    work["name"],
                    explicit,
                    share,
                    round(utilization * share * 100),
                    math.floor(100 / share) / 100,
                    memory_utilization({}, share),
                ),
                ERROR,
            )
        )
    candidates = eligible_nodes(work, capacity, reserve_whole)
    if not candidates:
        return out  # placement_problems names why no node can run it
    if weights_gib is None:
        out.append(
            (
                "%s: the fit of its weights in GPU memory was not checked, and its pods get vllm_resources and "
                "vllm_shm_size rather than sizes derived from the model: weights_gib is not set and the model is not "
                "measured in model_registry_seed_dir (it is not among model_registry_seed_models there); set the "
                "model's weights_gib to the GiB of its weight files" % work["name"],
                WARNING,
                UNSIZED,
            )
        )
        return out
    try:
        weights_gib = float(weights_gib)
    except (TypeError, ValueError):
        return [*out, ("%s: weights_gib %r is not a number of GiB" % (work["name"], weights_gib), ERROR)]
    memories = {n: c["memory_mib"] for n, c in candidates.items() if c.get("memory_mib")}
    if not memories:
        return out  # plan_findings warns once about the nodes without aiinfra_gpu_memory_mib
    node = min(memories, key=lambda n: (memories[n], n))
    room = memories[node] / 1024.0 * utilization
    limit = room * (1 - KV_CACHE_ROOM)
    per_gpu = weights_gib / work["gpus"]
    if per_gpu > limit:
        why = (
            "the only node it may run on"
            if len(candidates) == 1
            else "the smallest GPU of the nodes its pods may land on (%s%s)"
            % (
                ", ".join("%s: %d MiB" % (n, memories[n]) for n in sorted(memories)),
                "; %s without aiinfra_gpu_memory_mib" % names_text(sorted(set(candidates) - set(memories)))
                if set(candidates) - set(memories)
                else "",
            )
        )
        out.append(
            (
                "%s: %.1f GiB of weights%s over %d GPU(s) is %.1f GiB per GPU, more than its share of %s can hold: "
                "the limit applied is %.1f GiB of weights per GPU (%d MiB x gpu_memory_utilization %s = %.1f GiB, "
                "less %d%% left for the KV cache and activations); %s is %s: raise tensor_parallel_size, serve a "
                "smaller or quantised model, or use GPUs with more memory"
                % (
                    work["name"],
                    weights_gib,
                    " (measured in model_registry_seed_dir)" if measured else "",
                    work["gpus"],
                    per_gpu,
                    node_text(node, capacity[node]),
                    limit,
                    memories[node],
                    utilization,
                    room,
                    KV_CACHE_ROOM * 100,
                    node,
                    why,
                ),
                ERROR,
            )
        )
    return out


def memory_problems(work, capacity, weights_gib):
    """The errors of memory_findings (vLLM's memory share of a GPU and the weights' fit in it)."""
    return [entry[0] for entry in memory_findings(work, capacity, weights_gib) if entry[1] == ERROR]


def load_memory_problem(work, weights_gib):
    """A model whose own memory limit (resources.limits.memory) is below what loading its weights needs
    (models.load_memory_gib), or None."""
    resources = work["model"].get("resources")
    if weights_gib is None or not isinstance(resources, dict):
        return None
    limit = (resources.get("limits") or {}).get("memory") if isinstance(resources.get("limits"), dict) else None
    if limit is None:
        return None
    least = load_memory_gib(work["gpus"], weights_gib)
    got = quantity_bytes(limit)
    if got is None:
        return "%s: resources.limits.memory %r is not a Kubernetes memory quantity (e.g. %dGi)" % (
            work["name"],
            limit,
            least,
        )
    if got >= least * 2**30:
        return None
    return (
        "%s: resources.limits.memory %s is below the %dGi that loading its weights needs: %d GiB for the API server "
        "and engine + %d GiB x %s for the GPU workers + one rank's shard of the weights (%.1f GiB / "
        "tensor_parallel_size %d = %.1f GiB) passing through host memory; the pod would be OOM-killed or thrash "
        "while loading: raise it to at least %dGi, or leave resources out to get the sizes derived from the model "
        "(%s)"
        % (
            work["name"],
            limit,
            least,
            SERVER_BASE_GIB,
            WORKER_GIB,
            plural(work["gpus"], "GPU"),
            float(weights_gib),
            work["gpus"],
            float(weights_gib) / work["gpus"],
            least,
            sizing_text(model_sizing(work["gpus"], weights_gib)),
        )
    )


def sizing_text(size):
    """'requests 4 CPU / 23Gi, limits 8 CPU / 25Gi, /dev/shm 2Gi'."""
    res = size["resources"]
    return "requests %s CPU / %s, limits %s CPU / %s, /dev/shm %s" % (
        res["requests"]["cpu"],
        res["requests"]["memory"],
        res["limits"]["cpu"],
        res["limits"]["memory"],
        size["shm_size"],
    )


def drain_problems(name, model):
    """A model whose pods cannot finish the requests in flight when they stop (models.drain_timing): a shutdown
    timeout of 0 (vLLM then aborts them) or a grace period that ends before the drain does."""
    shutdown = as_int(model.get("shutdown_timeout"), -1)
    grace = as_int(model.get("termination_grace_period"), -1)
    passthrough = str((model.get("env") or {}).get("NIM_PASSTHROUGH_ARGS", "")).split()
    if any(
        str(a).split("=", maxsplit=1)[0] == "--shutdown-timeout"
        for a in list(model.get("extra_args") or []) + passthrough
    ):
        return [
            "%s: --shutdown-timeout is set in extra_args or NIM_PASSTHROUGH_ARGS, where the grace-period check does "
            "not see it: set the model's shutdown_timeout instead" % name
        ]
    if shutdown < 1:
        return [
            "%s: shutdown_timeout is %r: a stopping server would abort every request in flight (vLLM's 0 means "
            "abort); give it the seconds it may take to finish them (e.g. 90), or set only termination_grace_period"
            % (name, model.get("shutdown_timeout"))
        ]
    least = PRESTOP_SECONDS + shutdown + SHUTDOWN_MARGIN
    if grace < least:
        return [
            "%s: termination_grace_period %r is shorter than the preStop sleep (%d s) + shutdown_timeout (%d s) + %d s "
            "to exit: the kubelet would kill the server in the middle of its drain; raise it to %d or lower "
            "shutdown_timeout"
            % (name, model.get("termination_grace_period"), PRESTOP_SECONDS, shutdown, SHUTDOWN_MARGIN, least)
        ]
    return []


def plan_findings(
    models,
    capacity,
    default_image,
    nim_models=(),
    store_paths=None,
    weights=None,
    model_configs=None,
    severity=False,
):
    """Reasons a serving plan (vLLM and NIM models) cannot work, before anything is touched: a list of
    (variable, message), the variable being the model list the problem is in; one finding per cause.

    capacity: {node: {"gpus", "replicas", optional "memory_mib" (per GPU), optional "class"}} from gpu_capacity (a
    bare GPU count per node also works); store_paths: model paths present in the store (None when unknown);
    weights: {model path: GiB of weights} measured in the seed directory (a model's own weights_gib wins);
    model_configs: {model path: parsed config.json} (models.model_configs) to check tensor_parallel_size against
    the attention heads. severity: return every finding, warnings included, as {"code" (SERVING_PLAN, MODEL_SIZE or
    GPU_MEMORY), "severity" ("error" or "warning"), "variable", "problem"} (without it, the errors alone, as
    (variable, message), as before).
    """
    weights = weights or {}
    model_configs = model_configs or {}
    models = filled("vllm", models, default_image, weights)
    nim_models = filled("nim", nim_models)
    capacity = {n: c if isinstance(c, dict) else {"gpus": int(c), "replicas": 1} for n, c in capacity.items()}
    workloads = []
    for model in models:
        workloads.append(
            {
                "name": model.get("served_name", "?"),
                "gpus": model["gpus"],
                "what": "tensor_parallel_size",
                "variable": "vllm_models",
                "replicas": as_int(model["replicas"], 1),
                "max": as_int(model["replicas"], 1),
                "image": model["image"],
                "path": model.get("path"),
                "model": model,
                "drain": model,
            }
        )
    for model in nim_models:
        replicas = as_int(model["replicas"], 1)
        workloads.append(
            {
                "name": model.get("served_name", "?"),
                "gpus": model["gpus"],
                "what": "gpus",
                "variable": "nim_models",
                "replicas": replicas,
                "max": max(as_int(model.get("max_replicas", replicas), replicas), replicas),
                "image": model.get("image"),
                "path": None,
                "nim": True,
                "drain": model,
            }
        )
    if not capacity:
        found = [("vllm_models", "no GPU node in the inventory: the model servers need the GPU group", ERROR, CODE)]
        return _returned(found if workloads else [], severity)
    problems = []
    total = sum(c["gpus"] * c["replicas"] for c in capacity.values())
    reserve_whole = any(w["gpus"] > 1 for w in workloads)
    names = set()
    counted = []
    unmeasured = []  # sized models that no node's GPU memory was compared with
    for work in workloads:
        name = work["name"]
        found = []
        tp = as_int(work["model"].get("tensor_parallel_size"), 0) if "model" in work else work["gpus"]
        if "model" in work and (tp < 1 or isinstance(work["model"].get("tensor_parallel_size"), bool)):
            found.append(
                (
                    "%s: tensor_parallel_size %r is not a whole number of GPUs (1 or more)"
                    % (name, work["model"].get("tensor_parallel_size")),
                    ERROR,
                )
            )
        elif work["gpus"] < 1:
            found.append(("%s: gpus %r is not a whole number of GPUs (1 or more)" % (name, work["gpus"]), ERROR))
        # placement: why no node can run one replica (or that its GPU count is no count at all), which every check
        # of where it runs would only repeat.
        placement = bool(found)
        if not placement:
            cause = placement_problems(work, capacity) or slot_problem(work, capacity)
            placement = bool(placement_problems(work, capacity))
            if cause:
                found.append((cause, ERROR))
        # The site-wide counts add up the workloads whose replicas fit a node (a bad head count is another cause).
        if not found:
            counted.append(work)
        tp_cause = bool(found)
        if "model" in work and not tp_cause:
            for problem_found in (
                heads_problem(work, model_configs.get(work["path"]), capacity),
                pipeline_problem(work),
            ):
                if problem_found:
                    found.append((problem_found, ERROR))
                    tp_cause = True
            if not tp_cause:
                stranded = stranded_warning(work, capacity, workloads, reserve_whole)
                if stranded:
                    found.append((stranded, WARNING))
        found.extend((m, ERROR) for m in drain_problems(name, work["drain"]))
        if "model" in work:
            declared = work["model"].get("weights_gib")
            size = declared if declared is not None else weights.get(work["path"])
            if not placement:
                found.extend(
                    memory_findings(work, capacity, size, declared is None and size is not None, reserve_whole)
                )
            sized = weights_of(work["model"], weights)
            load = load_memory_problem(work, sized) if work["gpus"] >= 1 and not placement else None
            if load:
                found.append((load, ERROR))
            candidates = eligible_nodes(work, capacity, reserve_whole)
            if sized is not None and candidates and not placement:
                unknown = sorted(n for n, c in candidates.items() if not c.get("memory_mib"))
                if unknown:
                    unmeasured.append((name, unknown))
        if name in names:
            found.append(("%s: served_name is used twice; each model needs its own" % name, ERROR))
        names.add(name)
        if work.get("nim") and work["replicas"] < 2:
            found.append(("%s: a NIM backend needs at least 2 replicas to survive a pod or node loss" % name, ERROR))
        if work.get("nim") and work["gpus"] * work["max"] > total:
            found.append(
                (
                    "%s: max_replicas %d x %d GPU(s) is more than the cluster's %d (%s): the autoscaler would create "
                    "pods that never schedule; lower max_replicas"
                    % (name, work["max"], work["gpus"], total, site_gpus_text(capacity)),
                    ERROR,
                )
            )
        if not image_pinned(work["image"]):
            found.append(
                ("%s: image %r is not pinned: use an explicit version tag or a digest" % (name, work["image"]), ERROR)
            )
        path_error = store_path_error(work["path"]) if work["path"] is not None else None
        if path_error:
            found.append(("%s: model path %s: %s" % (name, path_error, STORE_PATH_FIX), ERROR))
        elif store_paths is not None and work["path"] is not None and work["path"] not in store_paths:
            found.append(
                (
                    "%s: model path %r is not in the model store (%s): seed it first"
                    % (name, work["path"], ", ".join(sorted(store_paths)) or "empty"),
                    ERROR,
                )
            )
        problems.extend(
            (work["variable"], *entry) if len(entry) > 2 else (work["variable"], *entry, CODE) for entry in found
        )
    problems.extend(("vllm_models", message, ERROR, CODE) for message in capacity_problems(counted, capacity))
    if unmeasured:
        nodes = sorted({n for _name, unknown in unmeasured for n in unknown})
        problems.append(
            (
                "vllm_models",
                "the weights of %s were not checked against the GPU memory of %s: aiinfra_gpu_memory_mib is not set "
                "there; set it on those hosts to the MiB of one GPU as nvidia-smi shows it (e.g. 81559 for an H100 "
                "80GB, 46068 for an L40S)" % (names_text([name for name, _u in unmeasured]), names_text(nodes)),
                WARNING,
                UNKNOWN_GPU_MEMORY,
            )
        )
    return _returned(problems, severity)


def _returned(problems, severity):
    """plan_findings' answer: with severity, {"code", "severity", "variable", "problem"} per finding; else the
    errors as (variable, message)."""
    if severity:
        return [
            {"code": code, "severity": level, "variable": variable, "problem": message}
            for variable, message, level, code in problems
        ]
    return [(variable, message) for variable, message, level, _code in problems if level == ERROR]


def capacity_problems(works, capacity):
    """The site-wide GPU counts, one finding per cause, with the sums an operator can check: a plan with multi-GPU
    models on a site with time-sliced nodes needs whole GPUs for them (nodes without time-slicing) and slices for
    the one-GPU models (they keep to the time-sliced nodes, workloads.whole_gpus_affinity); otherwise every model
    draws on every GPU unit (a whole GPU or a slice)."""
    sliced = any(c["replicas"] > 1 for c in capacity.values())
    multi = [w for w in works if w["gpus"] > 1]
    single = [w for w in works if w["gpus"] == 1]
    whole = {n: c for n, c in capacity.items() if c["replicas"] == 1}
    shared = {n: c for n, c in capacity.items() if c["replicas"] > 1}
    out = []
    if sliced and multi:
        need = sum(w["replicas"] * w["gpus"] for w in multi)
        have = sum(c["gpus"] for c in whole.values())
        if need > have:
            out.append(
                "the multi-GPU models need %d whole GPUs in all but the nodes without time-slicing have %d: they need "
                "%s; the site has %s: move GPUs to a class of 1 replica, or lower tensor_parallel_size or replicas"
                % (need, have, demand_text(multi), site_gpus_text(capacity))
            )
        need = sum(w["replicas"] for w in single)
        have = sum(c["gpus"] * c["replicas"] for c in shared.values())
        if need > have:
            out.append(
                "the one-GPU models need %d GPU slices but the time-sliced nodes have %d: they need %s; with multi-GPU "
                "models in the plan, one-GPU pods keep to the time-sliced nodes (the whole GPUs are for the "
                "multi-GPU pods); the site has %s: add slices or nodes to a shared class, or lower replicas"
                % (need, have, demand_text(single), site_gpus_text(capacity))
            )
        return out
    need = sum(w["replicas"] * w["gpus"] for w in works)
    have = sum(c["gpus"] * c["replicas"] for c in capacity.values())
    if need > have:
        out.append(
            "the models request %d GPUs in all but the cluster has %d%s: they need %s; the site has %s: remove "
            "models or replicas, or add GPUs"
            % (need, have, " GPU units" if sliced else "", demand_text(works), site_gpus_text(capacity))
        )
    return out


def plan_problems(models, capacity, default_image, nim_models=(), store_paths=None, weights=None, model_configs=None):
    """The messages of plan_findings (errors)."""
    return [
        message
        for _variable, message in plan_findings(
            models, capacity, default_image, nim_models, store_paths, weights, model_configs
        )
    ]


def place(workloads, capacity, free, sliced, reserve_whole=False):
    """{name: [node per replica placed]} when the replicas of `workloads` are put on the `free` GPU units of the
    nodes of capacity, one replica of each workload in turn (multi-GPU ones first), each on the node with the most
    room for it, as the scheduler spreads them. `free` ({node: GPU units}) is updated.

    workloads: [{"name", "gpus", "replicas"}]; capacity: {node: {"gpus", "replicas"}}; sliced: the site's
    time-sliced nodes. A multi-GPU pod needs whole GPUs on a node without time-slicing; a one-GPU pod takes one
    GPU unit (a slice on a time-sliced node) and, when reserve_whole and the site has sliced nodes, only a sliced
    one (workloads.whole_gpus_affinity: a required node affinity, so no other node will do).
    """
    order = sorted(workloads, key=lambda w: (-int(w["gpus"]), w["name"]))
    placed = {w["name"]: [] for w in workloads}
    left = {w["name"]: int(w["replicas"]) for w in workloads}
    progress = True
    while progress:
        progress = False
        for work in order:
            if not left[work["name"]]:
                continue
            gpus = int(work["gpus"])
            if work.get("nodes") is not None:
                # The site plan's nodes of the model: its placement and the slicing rules, decided there.
                nodes = [n for n in work["nodes"] if n in capacity and free[n] >= gpus]
            elif gpus > 1:
                nodes = [n for n in capacity if n not in sliced and free[n] >= gpus]
            else:
                nodes = [n for n in capacity if free[n] >= 1 and (not reserve_whole or not sliced or n in sliced)]
            if not nodes:
                left[work["name"]] = 0
                continue
            node = min(nodes, key=lambda n: (-free[n], n))
            free[node] -= gpus
            placed[work["name"]].append(node)
            left[work["name"]] -= 1
            progress = True
    return placed


def node_loss_capacity(workloads, capacity, reserve_whole=False):
    """N-1 capacity: for each workload, the replicas that run after the loss of the GPU node whose loss hurts it
    most. The replicas on the other nodes stay where they are (nothing preempts them); only the lost node's replicas
    are placed again, on the GPU units left free.

    Returns {name: {"replicas", "after_node_loss", "worst_node"}}; with no GPU node, every count is 0.
    """
    sliced = {n for n, c in capacity.items() if c["replicas"] > 1}
    units = {n: c["gpus"] * c["replicas"] for n, c in capacity.items()}
    before = place(workloads, capacity, dict(units), sliced, reserve_whole)
    gpus = {w["name"]: int(w["gpus"]) for w in workloads}
    out = {w["name"]: {"replicas": int(w["replicas"]), "after_node_loss": 0, "worst_node": ""} for w in workloads}
    first = True
    for lost in sorted(capacity):
        rest = {n: c for n, c in capacity.items() if n != lost}
        free = {n: units[n] for n in rest}
        for name, nodes in before.items():
            for node in nodes:
                if node != lost:
                    free[node] -= gpus[name]
        again = [dict(w, replicas=before[w["name"]].count(lost)) for w in workloads]
        moved = place(again, rest, free, sliced, reserve_whole)
        for work in workloads:
            name = work["name"]
            count = len([n for n in before[name] if n != lost]) + len(moved[name])
            entry = out[name]
            if first or count < entry["after_node_loss"]:
                entry.update(after_node_loss=count, worst_node=lost)
        first = False
    return out
