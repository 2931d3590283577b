# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Rollouts read from one LIST of the workloads the API holds: which written workloads are not rolled out yet, and
which Secret rollout patches would change a workload. Plain functions on the objects the API returned, so a converge
of a cluster already right reads the workloads once instead of once per workload."""


def _key(obj):
    metadata = obj.get("metadata") or {}
    return (obj.get("kind"), metadata.get("namespace"), metadata.get("name"))


def index(found):
    """{(kind, namespace, name): object} of a list of API objects."""
    return {_key(obj): obj for obj in found or []}


def rolled_out(obj):
    """Why a Deployment or StatefulSet the API returned is not rolled out yet (None when it is): every replica
    updated to the current revision, available and no other replica left. Not the Available condition: the model
    servers roll out with maxUnavailable 1, so a one-replica model server is Available with no pod ready."""
    status = obj.get("status") or {}
    generation = (obj.get("metadata") or {}).get("generation")
    if status.get("observedGeneration", 0) != generation:
        return "generation %s not observed yet (%s)" % (generation, status.get("observedGeneration", 0))
    wanted = (obj.get("spec") or {}).get("replicas", 1)
    ready = "availableReplicas" if obj.get("kind") == "Deployment" else "readyReplicas"
    counts = {n: status.get(n, 0) for n in ("updatedReplicas", ready, "replicas")}
    if set(counts.values()) != {wanted}:
        return "%s of %s replicas (%s)" % (
            counts[ready],
            wanted,
            ", ".join("%s %s" % (k, v) for k, v in sorted(counts.items())),
        )
    return None


def pending(objects, found, kinds=("Deployment",), missing_only=False):
    """'kind namespace/name: reason' for each workload of `objects` of one of `kinds` that `found` (the API's list)
    lacks or holds not rolled out yet (only those it lacks with `missing_only`), in the order of `objects`."""
    held = index(found)
    out = []
    for obj in objects or []:
        if obj.get("kind") not in kinds:
            continue
        kind, namespace, name = _key(obj)
        current = held.get((kind, namespace, name))
        reason = "not created yet" if current is None else None if missing_only else rolled_out(current)
        if reason:
            out.append("%s %s/%s: %s" % (kind, namespace, name, reason))
    return out


def effective_patches(patches, found):
    """The merge patches of pod-template annotations that would change a workload `found` holds: a patch whose
    workload does not exist (its pods will read the current Secrets when they start) or already carries every
    annotation of the patch is dropped."""
    held = index(found)
    out = []
    for patch in patches or []:
        current = held.get(_key(patch))
        if current is None:
            continue
        have = ((((current.get("spec") or {}).get("template") or {}).get("metadata") or {}).get("annotations")) or {}
        want = patch["spec"]["template"]["metadata"]["annotations"]
        if any(have.get(k) != v for k, v in want.items()):
            out.append(patch)
    return out
