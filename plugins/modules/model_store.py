#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
module: model_store
short_description: Keep a node's model store, say which models it holds current, remove those nobody keeps or uses
version_added: 0.2.0
description:
  - With O(create=true), creates the store directory (and its missing parents) with O(directory_mode), O(owner) and
    O(group), and brings an existing store to them; with O(free_space=true), reports the room on its file system in
    RV(room). One node call does what a role needs before any model moves.
  - For each model of O(expected), says whether the store holds it current (RV(current)), that is, as
    M(aiinfra.k3s.model_weights) would leave it unchanged with the same file list, source, revision, O(verify), modes
    and owner. With O(verify=fast) only the model's manifest and the files' sizes and times are read, no file is
    hashed, so a role learns which models need a fetch without starting one. The others are in RV(lacking).
  - Lists the models of O(store), the directories holding the manifest that M(aiinfra.k3s.model_weights) writes
    (C(.aiinfra-weights.json)), with their size and the source and revision the manifest records. The listing does
    not descend into a model, never enters C(<store>/.staging) and never follows a symbolic link.
  - A model whose path O(keep) does not name is stale. With O(prune=true) every stale model that no path of
    O(in_use) concerns is removed, with what an interrupted fetch of the same path left in C(<store>/.staging/<path>),
    and then its parent directories while they are empty, up to the store.
  - A path concerns a model when it is the model's, lies inside the model (a file of it) or holds it (a directory
    read whole). V(.) in O(in_use) is the whole store (a pod that mounts the store as its cache, as NIM does, may read
    any model), so nothing is removed then.
  - The removal holds the exclusive lock on C(<store>/.staging/.lock) that M(aiinfra.k3s.model_weights) holds for a
    fetch and its publish, and lists the store again under it, so a fetch running at the same time and a removal never
    overlap.
  - A directory without the manifest (something put there by hand, by rsync, or NIM's own cache layout) is never
    removed; those that hold no model are reported in RV(unmanaged).
  - Only the Python standard library on the node. The logic is in module_utils C(node/model_store_contents.py).
author:
  - aiinfra.k3s developers (@aiinfra)
options:
  store:
    description: Absolute path of the model store. A store that does not exist holds no model.
    type: path
    required: true
  keep:
    description:
      - The model paths, relative to O(store), the node is meant to hold (e.g. C(Qwen/Qwen2.5-7B-Instruct)).
      - Required with O(prune=true), so that a forgotten list never reads as "keep nothing"; without it no model is
        stale. Absolute paths, C(.), C(..) and empty segments, control characters and a first segment C(.staging)
        are refused.
    type: list
    elements: str
  create:
    description: Create the store (and its missing parents) when missing, and give it O(directory_mode), O(owner) and
      O(group).
    type: bool
    default: false
  directory_mode:
    description: Mode of the store (with O(create)) and of the directories of the models in O(expected).
    type: str
    default: "0755"
  mode:
    description: Mode of the files of the models in O(expected).
    type: str
    default: "0644"
  free_space:
    description: Report the store's file system and the bytes available there in RV(room) (read at the nearest
      existing parent when the store does not exist, as in check mode).
    type: bool
    default: false
  expected:
    description:
      - Models to compare with the store, each a dict with C(path) (the model's directory, relative to O(store)),
        C(files) (its files, each with C(path), C(sha256) and C(size), as M(aiinfra.k3s.model_weights) takes them),
        C(source) and C(revision) (what the model's manifest must record). Other keys are ignored, so the entries of
        the C(aiinfra.k3s.weight_fetches) filter can be given as they are.
      - A model without C(files) is lacking (its list is not known here, as for a model fetched from a URL mirror).
    type: list
    elements: dict
    default: []
  verify:
    description: V(fast) compares the manifest's records with the files' size and mtime; V(full) hashes every file of
      O(expected).
    type: str
    choices: [fast, full]
    default: fast
  look_for:
    description: Paths relative to O(store) whose presence RV(present) reports (a model placed by other means counts).
    type: list
    elements: str
    default: []
  in_use:
    description:
      - Model paths, relative to O(store), that pods use now, never removed (read with M(kubernetes.core.k8s_info) and
        the C(aiinfra.k3s.models_in_use) filter). V(.) is the whole store.
    type: list
    elements: str
    default: []
  prune:
    description: Remove the stale models not in use. When false, only report them.
    type: bool
    default: false
  lock_timeout:
    description: Seconds to wait for another run (a model fetch) holding the store's lock.
    type: int
    default: 1800
  host:
    description: The name problems give the node; the node's host name when not given.
    type: str
extends_documentation_fragment:
  - aiinfra.k3s.ownership
notes:
  - O(owner) and O(group) are set on the store (with O(create)) and are the owner the models of O(expected) must have.
attributes:
  check_mode:
    support: full
    description: Lists the store and reports in RV(removed) what would be removed and in C(changed) whether the store
      would be created or its mode or owner set; touches nothing, takes no lock.
  diff_mode:
    support: none
    description: RV(removed) lists the model directories removed.
"""

EXAMPLES = r"""
- name: Create the store, read its room, and find which models need a fetch
  aiinfra.k3s.model_store:
    store: /data/model-registry
    create: true
    directory_mode: "0755"
    free_space: true
    expected:
      - path: org/tiny
        files: [{path: config.json, sha256: "{{ '0' * 64 }}", size: 2}]
        source: controller
  register: store
- name: Report the models of the store the inventory no longer names
  aiinfra.k3s.model_store:
    store: /data/model-registry
    keep: [Qwen/Qwen2.5-7B-Instruct, meta/llama-3-8b]
  register: store

- name: Remove them, except those the pods of this node use
  aiinfra.k3s.model_store:
    store: /data/model-registry
    keep: [Qwen/Qwen2.5-7B-Instruct, meta/llama-3-8b]
    in_use: "{{ pods.resources | aiinfra.k3s.models_in_use(inventory_hostname) }}"
    prune: true
    host: "{{ inventory_hostname }}"
"""

RETURN = r"""
models:
  description:
    - The models the store held when the run started (the removed ones included), sorted by path, with the bytes of
      their files and the source and revision their manifest records (null when it records none or cannot be read).
  returned: always
  type: list
  elements: dict
  sample: [{path: meta/llama-3-8b, bytes: 16060522496, source: "hub meta-llama/Meta-Llama-3-8B@8cde5ca8", revision: 8cde5ca8}]
stale:
  description: Paths of the models O(keep) does not name (the held ones included).
  returned: always
  type: list
  elements: str
  sample: [org/old-model]
removed:
  description: The stale models removed (would be removed, in check mode), with their bytes; empty without O(prune).
  returned: always
  type: list
  elements: dict
  sample: [{path: org/old-model, bytes: 988097824}]
bytes_removed:
  description: Bytes of the models in RV(removed).
  returned: always
  type: int
  sample: 988097824
held:
  description: Stale models kept because a path of O(in_use) concerns them.
  returned: always
  type: list
  elements: str
  sample: [org/previous-revision]
unmanaged:
  description: Links, and directories without the manifest that hold no model (reported, never removed).
  returned: always
  type: list
  elements: str
  sample: [ngc]
current:
  description: The paths of O(expected) the store holds current.
  returned: always
  type: list
  elements: str
  sample: [Qwen/Qwen2.5-7B-Instruct]
lacking:
  description: The paths of O(expected) that need a fetch (missing, incomplete, changed, or given without a file list).
  returned: always
  type: list
  elements: str
  sample: [meta/llama-3-8b]
present:
  description: The paths of O(look_for) that exist in the store.
  returned: always
  type: list
  elements: str
  sample: [Qwen/Qwen2.5-7B-Instruct]
room:
  description: With O(free_space), the C(mount) point of the store's file system and the bytes C(available) there.
  returned: when O(free_space=true)
  type: dict
  sample: {mount: /data, available: 107374182400}
problems:
  description:
    - One dict per problem with C(code) (STORE, KEEP, IN_USE, LOCK_TIMEOUT, STORE_IO errors; MANIFEST, NOT_REMOVED
      warnings), C(severity), C(host), C(variable), C(message), C(problem) (the same text, for the problem_line filter)
      and C(fix). The module fails on an error; warnings name stale models it kept.
  returned: always
  type: list
  elements: dict
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.aiinfra.k3s.plugins.module_utils.node.file_ops import set_attributes
from ansible_collections.aiinfra.k3s.plugins.module_utils.node.model_store_contents import check_params, converge
from ansible_collections.aiinfra.k3s.plugins.module_utils.node.model_weights import node_name
from ansible_collections.aiinfra.k3s.plugins.module_utils.node.node_files import changes, free_space


def keep_store(module, store):
    """Create the store and its missing parents (check mode: say so) and set its mode and owner; returns changed."""
    p = module.params
    if os.path.lexists(store) and not os.path.isdir(store):
        module.fail_json(
            msg="ERROR STORE: %s exists and is not a directory: move it away or choose another store" % store
        )
    missing = changes([store], {}, {}, [])["directories"]
    changed = bool(missing)
    if not module.check_mode:
        for path in missing:  # parents first
            os.mkdir(path, 0o700)
    for path in dict.fromkeys([*missing, store]):  # the store is among the missing when it is
        if os.path.isdir(path):
            changed = set_attributes(module, path, changed, p["directory_mode"], p["owner"], p["group"])
    return changed


def main():
    module = AnsibleModule(
        argument_spec={
            "store": {"type": "path", "required": True},
            "keep": {"type": "list", "elements": "str"},
            "in_use": {"type": "list", "elements": "str", "default": []},
            "prune": {"type": "bool", "default": False},
            "lock_timeout": {"type": "int", "default": 1800},
            "host": {"type": "str"},
            "create": {"type": "bool", "default": False},
            "directory_mode": {"type": "str", "default": "0755"},
            "mode": {"type": "str", "default": "0644"},
            "owner": {"type": "str"},
            "group": {"type": "str"},
            "free_space": {"type": "bool", "default": False},
            "expected": {"type": "list", "elements": "dict", "default": []},
            "verify": {"type": "str", "choices": ["fast", "full"], "default": "fast"},
            "look_for": {"type": "list", "elements": "str", "default": []},
        },
        required_if=[("prune", True, ["keep"])],
        supports_check_mode=True,
    )
    store = os.path.normpath(module.params["store"])
    host = node_name(module.params["host"])
    refused = check_params(module.params, host)
    if refused:  # before the store is created
        module.fail_json(msg="; ".join("ERROR %s: %s" % (p["code"], p["message"]) for p in refused), problems=refused)
    created = False
    if module.params["create"]:
        try:
            created = keep_store(module, store)
        except OSError as exc:
            module.fail_json(msg="ERROR STORE_IO: %s: %s: check the model store's file system" % (host, exc))
    result = converge(module.params, check_mode=module.check_mode)
    result["changed"] = result["changed"] or created
    if module.params["free_space"]:
        result["room"] = free_space(store)
    errors = [p for p in result["problems"] if p["severity"] == "error"]
    if errors:
        lines = ["%s %s: %s" % (p["severity"].upper(), p["code"], p["message"]) for p in errors]
        module.fail_json(msg="; ".join(lines), **result)
    for warning in result["problems"]:
        module.warn("%s: %s" % (warning["code"], warning["message"]))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
