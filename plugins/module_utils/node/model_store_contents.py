# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a node's model store holds, and the removal of the models nobody keeps or uses any more.

A model is a directory of the store holding model_weights' manifest (``.aiinfra-weights.json``); the listing does
not descend into a model and never enters ``<store>/.staging`` or follows a symbolic link. A directory without the
manifest that holds no model was put there by other means (rsync, a shared disk, NIM's own cache layout): it is
reported as unmanaged and never removed.

A listed model whose path is neither kept nor in use is stale; with prune it is removed under the store's lock
(``<store>/.staging/.lock``, the one model_weights holds for a fetch and its publish, so a fetch and a removal never
overlap), with what an interrupted fetch of the same path left in ``<store>/.staging/<path>`` and then its parent
directories while they are empty. A path relates to a model when it is the model's, lies inside the model (a file
of it a server names) or holds the model (a directory a server reads whole); ``.`` in ``in_use`` is the whole store
(a pod that mounts the store as its cache, as NIM does, may read any model).

Problems are data, ``{code, severity, host, variable, message, problem, fix}`` (model_weights.problem)."""

import os
import shutil
import stat

from ansible_collections.aiinfra.k3s.plugins.module_utils.node.model_weights import (
    LOCK,
    MANIFEST,
    RETIRED,
    STAGING,
    VERIFY_MODES,
    WeightsError,
    given_files,
    lock_store,
    model_current,
    model_path_error,
    nested_models,
    node_name,
    problem,
    prune_empty,
    read_manifest,
    unlock_store,
)

WHOLE_STORE = "."
KEEP_FIX = "name each model by its directory relative to the store, e.g. Qwen/Qwen2.5-7B-Instruct"
EXPECTED_FIX = (
    "give each model's directory relative to the store, e.g. Qwen/Qwen2.5-7B-Instruct (model_registry_sources)"
)
LOOK_FOR_FIX = "give the paths relative to the store (model_registry_expected_models)"
IN_USE_FIX = "give the model paths relative to the store the pods use (aiinfra.k3s.models_in_use), or '.' for all"


def related(path, other):
    """Whether two store paths concern the same model: equal, one inside the other, or either the whole store."""
    if WHOLE_STORE in (path, other):
        return True
    return path == other or path.startswith(other + "/") or other.startswith(path + "/")


def check_params(params, host):
    """Problems of the parameters themselves (store, keep, in_use, lock_timeout), as a list."""
    out = []
    store = params.get("store")
    if not isinstance(store, str) or not os.path.isabs(store):
        out.append(problem("STORE", host, "store", "store is %r, not an absolute path" % (store,)))
    keep = params.get("keep")
    if keep is None and not params.get("prune"):
        pass  # only listed: no model is called stale
    elif not isinstance(keep, list):
        out.append(problem("KEEP", host, "keep", "keep is %r, not a list of model paths" % (keep,), KEEP_FIX))
    else:
        for index, path in enumerate(keep):
            why = model_path_error(path)
            if why:
                out.append(problem("KEEP", host, "keep", "keep[%d]: %s" % (index, why), KEEP_FIX))
    in_use = params.get("in_use") or []
    if not isinstance(in_use, list):
        out.append(problem("IN_USE", host, "in_use", "in_use is %r, not a list of model paths" % (in_use,), IN_USE_FIX))
    else:
        for index, path in enumerate(in_use):
            why = None if path == WHOLE_STORE else model_path_error(path)
            if why:
                out.append(problem("IN_USE", host, "in_use", "in_use[%d]: %s" % (index, why), IN_USE_FIX))
    for index, item in enumerate(params.get("expected") or []):
        why = model_path_error(item.get("path") if isinstance(item, dict) else None)
        if why:
            out.append(problem("EXPECTED", host, "expected", "expected[%d]: %s" % (index, why), EXPECTED_FIX))
    for index, path in enumerate(params.get("look_for") or []):
        why = model_path_error(path)
        if why:
            out.append(problem("LOOK_FOR", host, "look_for", "look_for[%d]: %s" % (index, why), LOOK_FOR_FIX))
    if (params.get("verify") or "fast") not in VERIFY_MODES:
        out.append(problem("VERIFY", host, "verify", "verify is %r, not fast or full" % (params.get("verify"),)))
    timeout = params.get("lock_timeout", 1800)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout < 0:
        out.append(problem("LOCK_TIMEOUT", host, "lock_timeout", "lock_timeout is %r, not seconds" % (timeout,)))
    return out


def has_manifest(directory):
    """Whether a directory holds the manifest as a regular file (a link named so does not count)."""
    try:
        return stat.S_ISREG(os.lstat(os.path.join(directory, MANIFEST)).st_mode)
    except OSError:
        return False


def tree_bytes(directory):
    """Bytes of the regular files under a directory, links neither followed nor counted."""
    total = 0
    for top, subdirs, names in os.walk(directory):
        subdirs[:] = [d for d in subdirs if not os.path.islink(os.path.join(top, d))]
        for name in names:
            try:
                st = os.lstat(os.path.join(top, name))
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                total += st.st_size
    return total


def model_entry(store, rel):
    """{path, bytes, source, revision, readable} of the model directory <store>/<rel>."""
    directory = os.path.join(store, rel)
    manifest = read_manifest(directory)
    return {
        "path": rel,
        "bytes": tree_bytes(directory),
        "source": (manifest or {}).get("source"),
        "revision": (manifest or {}).get("revision"),
        "readable": manifest is not None,
    }


def scan(store, rel=""):
    """(models, unmanaged) under <store>/<rel>: the model directories (not descended into), and the links and the
    directories without a model anywhere below them (reported at the highest such level)."""
    models, unmanaged = [], []
    base = os.path.join(store, rel) if rel else store
    with os.scandir(base) as entries:
        children = sorted(entries, key=lambda e: e.name)
    for entry in children:
        if not rel and entry.name == STAGING:
            continue
        child = entry.name if not rel else rel + "/" + entry.name
        if entry.is_symlink():
            unmanaged.append(child)
        elif not entry.is_dir(follow_symlinks=False):
            continue
        elif has_manifest(entry.path):
            models.append(model_entry(store, child))
        else:
            below, others = scan(store, child)
            if below:
                models += below
                unmanaged += others
            else:
                unmanaged.append(child)
    return models, unmanaged


def list_store(store):
    """The store's models and unmanaged entries ({"models": [...], "unmanaged": [...]}); empty when the store does
    not exist."""
    if not os.path.lexists(store):
        return {"models": [], "unmanaged": []}
    if not os.path.isdir(store):
        raise NotADirectoryError(store)
    models, unmanaged = scan(store)
    return {"models": sorted(models, key=lambda m: m["path"]), "unmanaged": sorted(unmanaged)}


def sort_out(models, keep, in_use):
    """(stale, held, removable): the listed models no keep path relates to, those of them a path in use relates to,
    and the rest of them, whose manifest can be read (the model entries)."""
    stale = [m for m in models if not any(related(m["path"], k) for k in keep)]
    held = [m for m in stale if any(related(m["path"], u) for u in in_use)]
    removable = [m for m in stale if m not in held and m["readable"]]
    return stale, held, removable


def plain_directory(store, rel):
    """Whether <store>/<rel> is reached through real directories only (no link on the way, none at the end); the
    store itself for an empty rel."""
    path = store
    for part in rel.split("/") if rel else []:
        path = os.path.join(path, part)
        try:
            if not stat.S_ISDIR(os.lstat(path).st_mode):
                return False
        except OSError:
            return False
    return True


def remove_model(store, rel):
    """Remove the model directory <store>/<rel> (still a model, reached without links), what a fetch of the same
    path left in staging, and the parents of both while they are empty. Returns False when the directory is no
    longer a model there (nothing removed)."""
    if model_path_error(rel) or not plain_directory(store, rel) or not has_manifest(os.path.join(store, rel)):
        return False
    target = os.path.join(store, rel)
    shutil.rmtree(target)
    staging_root = os.path.join(store, STAGING)
    leftover = os.path.join(staging_root, rel)
    own = rel.split("/")[0] in (LOCK, RETIRED)  # names model_weights gives its own files in staging
    if not own and plain_directory(store, STAGING) and plain_directory(staging_root, os.path.dirname(rel)):
        if plain_directory(staging_root, rel):
            shutil.rmtree(leftover)
        elif os.path.lexists(leftover):
            os.unlink(leftover)  # a file or a link, itself (nothing it points to)
        prune_empty(os.path.dirname(leftover), staging_root)
    prune_empty(os.path.dirname(target), store)
    return True


def current_models(store, expected, params, host):
    """(current, lacking): the paths of ``expected`` ([{path, files, source, revision}]) whose published model in the
    store is what model_weights would leave unchanged with the same files, source, revision, verify, modes and owner
    (model_weights.model_current: manifest records against stat, no file read with verify fast), and the others. A
    model given without a file list, a bad list, a model nested in another or a store that cannot be read counts as
    lacking: model_weights' own run says why."""
    current, lacking = [], []
    for item in expected:
        path = item["path"]
        try:
            entries = given_files(item.get("files"), host) if item.get("files") else None
            good = bool(entries) and not nested_models(store, path)
            if good:
                wanted = dict(params, source=item.get("source"), revision=item.get("revision"))
                good = model_current(store, path, entries, wanted, host)[0]
        except (WeightsError, OSError, ValueError):
            good = False
        (current if good else lacking).append(path)
    return current, lacking


def present_paths(store, paths):
    """The paths (relative to the store) that exist there, in the order given (a link counts when its target does)."""
    return [p for p in paths if os.path.exists(os.path.join(store, p))]


def result_base():
    return {
        "changed": False,
        "models": [],
        "stale": [],
        "removed": [],
        "held": [],
        "unmanaged": [],
        "bytes_removed": 0,
        "current": [],
        "lacking": [],
        "present": [],
        "problems": [],
    }


def fill(result, listing, keep, in_use, host):
    """Put the listing and its sorting into the result; returns the models to remove (unreadable manifests are
    warned about and kept)."""
    stale, held, removable = sort_out(listing["models"], keep, in_use) if keep is not None else ([], [], [])
    result["models"] = [{k: m[k] for k in ("path", "bytes", "source", "revision")} for m in listing["models"]]
    result["stale"] = [m["path"] for m in stale]
    result["held"] = [m["path"] for m in held]
    result["unmanaged"] = listing["unmanaged"]
    result["problems"] = [
        problem(
            "MANIFEST",
            host,
            "store",
            "%s: %s has a manifest (%s) that cannot be read: it was kept" % (host, m["path"], MANIFEST),
            "fetch the model again with model_weights, or remove the directory by hand",
            severity="warning",
        )
        for m in stale
        if not m["readable"] and m not in held
    ]
    return removable


def converge(params, check_mode=False):
    """List the store of params (the module's parameters, defaults filled in) and, with prune, remove its stale models
    that no pod uses. Returns the result dict (see the module's RETURN); on failure its ``problems`` holds an error
    and nothing more was removed."""
    host = node_name(params.get("host"))
    result = result_base()
    problems = check_params(params, host)
    if problems:
        result["problems"] = problems
        return result
    store = os.path.normpath(params["store"])
    keep = None if params.get("keep") is None else list(params["keep"])
    in_use = list(params.get("in_use") or [])
    try:
        removable = fill(result, list_store(store), keep, in_use, host)
        wanted = {k: params.get(k) for k in ("mode", "directory_mode", "owner", "group")}
        wanted["verify"] = params.get("verify") or "fast"
        result["current"], result["lacking"] = current_models(store, params.get("expected") or [], wanted, host)
        result["present"] = present_paths(store, params.get("look_for") or [])
        if not params.get("prune") or not removable:
            return result
        if check_mode:
            result["removed"] = [{"path": m["path"], "bytes": m["bytes"]} for m in removable]
        else:
            fd = lock_store(store, float(params.get("lock_timeout", 1800)))
            if fd is None:
                result["problems"].append(
                    problem(
                        "LOCK_TIMEOUT",
                        host,
                        "lock_timeout",
                        "%s: another run held %s for more than %s seconds: nothing was removed"
                        % (host, os.path.join(store, STAGING, LOCK), params.get("lock_timeout", 1800)),
                        "let the other run (a model fetch) finish, or raise lock_timeout",
                    )
                )
                return result
            try:
                # Listed again under the lock: a fetch that held it may have published or replaced a model.
                for model in fill(result, list_store(store), keep, in_use, host):
                    if remove_model(store, model["path"]):
                        result["removed"].append({"path": model["path"], "bytes": model["bytes"]})
                    else:
                        result["problems"].append(
                            problem(
                                "NOT_REMOVED",
                                host,
                                "store",
                                "%s: %s was not removed: its path is not one model_weights writes, or a link is on "
                                "the way to it" % (host, model["path"]),
                                "look at the directory and remove it by hand if it is not wanted",
                                severity="warning",
                            )
                        )
            finally:
                unlock_store(fd)
    except OSError as exc:  # the store's disk: unreadable directories, a read-only file system
        result["problems"].append(
            problem("STORE_IO", host, "store", "%s: %s" % (host, exc), "check the model store's file system")
        )
    result["bytes_removed"] = sum(m["bytes"] for m in result["removed"])
    result["changed"] = bool(result["removed"])
    return result
