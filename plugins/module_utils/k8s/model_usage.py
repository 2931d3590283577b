# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which models of a node's store the pods on that node use, read from the Pod objects (as kubernetes.core.k8s_info
returns them), so that the store's prune (model_store) never removes a model a server has open.

A pod uses the store through the volume store_volume() names ("models"), mounted in a container at some path (vLLM:
vllm_store_mount, /data/models; NIM: nim_store_mount, /opt/nim/.cache). What the container names under that path in
its command, arguments or environment values is the model it uses: vLLM's ``--model <mount>/<path>`` (also
``--model=<mount>/<path>``, ``vllm serve <mount>/<path>``, a tokenizer or chat template inside a model). A reference
to the mount itself is the whole store, ``.``: NIM's builder sets NIM_CACHE_PATH to the mount and names no model, so
NIM may read any directory of the store. A container that mounts the store and names nothing in it is counted as the
whole store too: what it reads cannot be told."""

import posixpath
import re

from ansible_collections.aiinfra.k3s.plugins.module_utils.k8s.model_store import store_volume

STORE_VOLUME = store_volume({"storage_class": "", "size": ""})["name"]
WHOLE_STORE = "."
FINISHED = ("Succeeded", "Failed")
# What separates the paths inside one argument or value: blanks and quotes (a shell command line), '=' (--flag=path),
# ',' ';' ':' (lists of paths).
SEPARATORS = re.compile(r"[\s'\"=,;:]+")


def pod_key(pod):
    meta = pod.get("metadata") or {}
    return "%s/%s" % (meta.get("namespace") or "default", meta.get("name") or "?")


def active_on(pod, node):
    """Whether the pod is scheduled on the node and not finished (Pending, Running, Unknown, or being deleted)."""
    if not isinstance(pod, dict):
        return False
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    return spec.get("nodeName") == node and status.get("phase") not in FINISHED


def has_store_volume(pod):
    return any(
        isinstance(v, dict) and v.get("name") == STORE_VOLUME for v in (pod.get("spec") or {}).get("volumes") or []
    )


def containers(pod):
    spec = pod.get("spec") or {}
    out = []
    for kind in ("initContainers", "containers", "ephemeralContainers"):
        out += [c for c in spec.get(kind) or [] if isinstance(c, dict)]
    return out


def references(container):
    """The strings of a container that may name a path: command, arguments, environment values."""
    out = [str(a) for a in (container.get("command") or []) + (container.get("args") or [])]
    out += [str(e["value"]) for e in container.get("env") or [] if isinstance(e, dict) and e.get("value") is not None]
    return out


def store_path(piece, mount, sub_path):
    """The store path (relative to the store, '.' for all of it) an absolute path names through a mount of the store
    at `mount` (of its sub_path), or None when it names nothing there."""
    if not piece.startswith("/"):
        return None
    path = posixpath.normpath(piece)
    if mount != "/" and path != mount and not path.startswith(mount + "/"):
        return None
    inside = posixpath.relpath(path, mount)
    rel = posixpath.normpath(posixpath.join(sub_path, inside)) if sub_path else inside
    if rel == ".." or rel.startswith("../"):
        return None
    return WHOLE_STORE if rel in (".", "") else rel


def container_paths(container):
    """Store paths one container uses ({} when it does not mount the store)."""
    mounts = [m for m in container.get("volumeMounts") or [] if isinstance(m, dict) and m.get("name") == STORE_VOLUME]
    found = set()
    for mount in mounts:
        if mount.get("subPathExpr"):
            found.add(WHOLE_STORE)  # expanded by the kubelet: which directory cannot be told here
            continue
        at = posixpath.normpath(str(mount.get("mountPath") or "/"))
        sub = posixpath.normpath(str(mount["subPath"])) if mount.get("subPath") else ""
        named = set()
        for text in references(container):
            for piece in SEPARATORS.split(text):
                rel = store_path(piece, at, sub)
                if rel:
                    named.add(rel)
        found |= named or {sub or WHOLE_STORE}
    return found


def pod_paths(pod):
    """Sorted store paths a pod uses through its store volume."""
    if not has_store_volume(pod):
        return []
    found = set()
    for container in containers(pod):
        found |= container_paths(container)
    return sorted(found)


def models_in_use(pods, node, by_pod=False):
    """The store paths (relative to the store; '.' the whole store) that the pods scheduled on `node` and not finished
    use, sorted; by_pod: {"<namespace>/<name>": [paths]} of the pods that use some."""
    out = {}
    for pod in pods or []:
        if active_on(pod, node):
            paths = pod_paths(pod)
            if paths:
                out[pod_key(pod)] = paths
    if by_pod:
        return out
    return sorted({path for paths in out.values() for path in paths})
