# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Checks of a serving plan against the GPUs the inventory describes: capacity per node and class, time-slicing,
GPU memory for the weights, images pinned, names unique. Plain functions; problems are returned, not raised."""

import math

from ansible_collections.aiinfra.k3s.plugins.module_utils.models import (
    PRESTOP_SECONDS,
    SHUTDOWN_MARGIN,
    STORE_PATH_FIX,
    as_int,
    filled,
    store_path_error,
)
from ansible_collections.aiinfra.k3s.plugins.module_utils.serving import (
    image_pinned,
)
from ansible_collections.aiinfra.k3s.plugins.module_utils.workloads import (
    KV_CACHE_ROOM,
    gpu_share,
    memory_utilization,
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


def sharing_problems(work, capacity):
    """A multi-GPU workload needs whole GPUs on one node: time-sliced nodes refuse requests for more than one
    slice (failRequestsGreaterThanOne), so only nodes without time-slicing can hold it."""
    if work["gpus"] < 2 or all(c["replicas"] == 1 for c in capacity.values()):
        return []
    whole = max([c["gpus"] for c in capacity.values() if c["replicas"] == 1] + [0])
    if work["gpus"] <= whole:
        return []
    return [
        "%s: %s %d needs %d whole GPUs on one node, but time-sliced nodes give a pod one slice at most "
        "(failRequestsGreaterThanOne) and the nodes without time-slicing have %s: give a node with enough GPUs a "
        "class of 1 replica, or lower %s"
        % (
            work["name"],
            work["what"],
            work["gpus"],
            work["gpus"],
            "at most %d GPU(s)" % whole if whole else "none",
            work["what"],
        )
    ]


def memory_problems(work, capacity, weights_gib):
    """vLLM's memory share of a GPU, and whether the weights fit in it with room for the KV cache."""
    shared = [c["replicas"] for c in capacity.values()]
    share = gpu_share(work["gpus"], shared)
    explicit = work["model"].get("gpu_memory_utilization")
    problems = []
    try:
        utilization = memory_utilization(work["model"], share)
    except (TypeError, ValueError):
        return ["%s: gpu_memory_utilization %r is not a number between 0 and 1" % (work["name"], explicit)]
    if not 0 < utilization <= 1:
        return ["%s: gpu_memory_utilization %r is not a number between 0 and 1" % (work["name"], explicit)]
    if explicit is not None and share > 1 and utilization * share > 1:
        problems.append(
            "%s: gpu_memory_utilization %s on a GPU time-sliced %d ways asks for %d%% of its memory: the second "
            "pod on the GPU fails at start; set it to at most %s or leave it out (it is then %s)"
            % (
                work["name"],
                explicit,
                share,
                round(utilization * share * 100),
                math.floor(100 / share) / 100,
                memory_utilization({}, share),
            )
        )
    candidates = {
        n: c for n, c in capacity.items() if c["gpus"] >= work["gpus"] and (work["gpus"] == 1 or c["replicas"] == 1)
    }
    memories = {n: c["memory_mib"] for n, c in candidates.items() if c.get("memory_mib")}
    if weights_gib is None or not memories:
        return problems
    try:
        weights_gib = float(weights_gib)
    except (TypeError, ValueError):
        return [*problems, "%s: weights_gib %r is not a number of GiB" % (work["name"], weights_gib)]
    node = min(memories, key=lambda n: (memories[n], n))
    room = memories[node] / 1024.0 * utilization
    per_gpu = float(weights_gib) / work["gpus"]
    if per_gpu > room * (1 - KV_CACHE_ROOM):
        problems.append(
            "%s: %.1f GiB of weights over %d GPU(s) is %.1f GiB per GPU, more than its share of %s can hold with "
            "%d%% left for the KV cache (%d MiB x gpu_memory_utilization %s = %.1f GiB): raise "
            "tensor_parallel_size, serve a smaller or quantised model, or use GPUs with more memory"
            % (
                work["name"],
                float(weights_gib),
                work["gpus"],
                per_gpu,
                node,
                KV_CACHE_ROOM * 100,
                memories[node],
                utilization,
                room,
            )
        )
    return problems


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


def plan_findings(models, capacity, default_image, nim_models=(), store_paths=None, weights=None):
    """Reasons a serving plan (vLLM and NIM models) cannot work, before anything is touched: a list of
    (variable, message), the variable being the model list the problem is in.

    capacity: {node: {"gpus", "replicas", optional "memory_mib" (per GPU)}} from gpu_capacity (a bare GPU
    count per node also works); store_paths: model paths present in the store (None when unknown);
    weights: {model path: GiB of weights} measured in the seed directory (a model's own weights_gib wins).
    """
    weights = weights or {}
    models, nim_models = filled("vllm", models, default_image), filled("nim", nim_models)
    capacity = {n: c if isinstance(c, dict) else {"gpus": int(c), "replicas": 1} for n, c in capacity.items()}
    workloads = []
    for model in models:
        workloads.append(
            {
                "name": model.get("served_name", "?"),
                "gpus": model["gpus"],
                "what": "tensor_parallel_size",
                "variable": "vllm_models",
                "replicas": int(model["replicas"]),
                "max": int(model["replicas"]),
                "image": model["image"],
                "path": model.get("path"),
                "model": model,
                "drain": model,
            }
        )
    for model in nim_models:
        replicas = int(model["replicas"])
        workloads.append(
            {
                "name": model.get("served_name", "?"),
                "gpus": model["gpus"],
                "what": "gpus",
                "variable": "nim_models",
                "replicas": replicas,
                "max": max(int(model.get("max_replicas", replicas)), replicas),
                "image": model.get("image"),
                "path": None,
                "nim": True,
                "drain": model,
            }
        )
    if not capacity:
        return (
            [("vllm_models", "no GPU node in the inventory: the model servers need the GPU group")] if workloads else []
        )
    problems = []
    biggest = max(c["gpus"] for c in capacity.values())
    physical = sum(c["gpus"] for c in capacity.values())
    total = sum(c["gpus"] * c["replicas"] for c in capacity.values())
    wanted = 0
    whole_wanted = 0
    names = set()
    for work in workloads:
        name = work["name"]
        found = []
        found.extend(sharing_problems(work, capacity))
        found.extend(drain_problems(name, work["drain"]))
        if work["gpus"] > 1:
            whole_wanted += work["gpus"] * work["replicas"]
        if "model" in work:
            declared = work["model"].get("weights_gib")
            found.extend(
                memory_problems(work, capacity, declared if declared is not None else weights.get(work["path"]))
            )
        if name in names:
            found.append("%s: served_name is used twice; each model needs its own" % name)
        names.add(name)
        if work["gpus"] > biggest:
            found.append(
                "%s: %s %d is larger than the GPUs of any node (at most %d): "
                "lower it or add a node with more GPUs" % (name, work["what"], work["gpus"], biggest)
            )
        if work.get("nim") and work["replicas"] < 2:
            found.append("%s: a NIM backend needs at least 2 replicas to survive a pod or node loss" % name)
        if work.get("nim") and work["gpus"] * work["max"] > total:
            found.append(
                "%s: max_replicas %d x %d GPU(s) is more than the cluster's %d: the autoscaler would create pods "
                "that never schedule; lower max_replicas" % (name, work["max"], work["gpus"], total)
            )
        wanted += work["gpus"] * work["replicas"]
        if not image_pinned(work["image"]):
            found.append("%s: image %r is not pinned: use an explicit version tag or a digest" % (name, work["image"]))
        path_error = store_path_error(work["path"]) if work["path"] is not None else None
        if path_error:
            found.append("%s: model path %s: %s" % (name, path_error, STORE_PATH_FIX))
        elif store_paths is not None and work["path"] is not None and work["path"] not in store_paths:
            found.append(
                "%s: model path %r is not in the model store (%s): seed it first"
                % (name, work["path"], ", ".join(sorted(store_paths)) or "empty")
            )
        problems.extend((work["variable"], message) for message in found)
    whole = sum(c["gpus"] for c in capacity.values() if c["replicas"] == 1)
    sliced = sum(c["gpus"] * c["replicas"] for c in capacity.values() if c["replicas"] > 1)
    if whole_wanted and sliced and wanted - whole_wanted > sliced:
        problems.append(
            (
                "vllm_models",
                "the one-GPU models need %d GPU slices but the time-sliced nodes have %d: with multi-GPU models in the "
                "plan, one-GPU pods keep to the time-sliced nodes (the whole GPUs are for the multi-GPU pods); add "
                "slices or nodes to a shared class, or lower replicas" % (wanted - whole_wanted, sliced),
            )
        )
    if whole_wanted > whole and whole < physical:
        problems.append(
            (
                "vllm_models",
                "the multi-GPU models need %d whole GPUs in all but the nodes without time-slicing have %d: move GPUs to "
                "a class of 1 replica, or lower tensor_parallel_size or replicas" % (whole_wanted, whole),
            )
        )
    if wanted > total:
        problems.append(
            (
                "vllm_models",
                "the models request %d GPUs in all but the cluster has %d (%d GPU(s) with time-slicing): "
                "remove models or replicas" % (wanted, total, physical),
            )
        )
    return problems


def plan_problems(models, capacity, default_image, nim_models=(), store_paths=None, weights=None):
    """The messages of plan_findings."""
    return [
        message
        for _variable, message in plan_findings(models, capacity, default_image, nim_models, store_paths, weights)
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
            if gpus > 1:
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
