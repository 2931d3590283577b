#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
module: model_store
short_description: List the models of a node's model store and remove those nobody keeps or uses
version_added: 0.2.0
description:
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
      - Required, so that a forgotten list never reads as "keep nothing". Absolute paths, C(.), C(..) and empty
        segments, control characters and a first segment C(.staging) are refused.
    type: list
    elements: str
    required: true
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
attributes:
  check_mode:
    support: full
    description: Lists the store and reports in RV(removed) what would be removed; touches nothing, takes no lock.
  diff_mode:
    support: none
    description: RV(removed) lists the model directories removed.
"""

EXAMPLES = r"""
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
problems:
  description:
    - One dict per problem with C(code) (STORE, KEEP, IN_USE, LOCK_TIMEOUT, STORE_IO errors; MANIFEST, NOT_REMOVED
      warnings), C(severity), C(host), C(variable), C(message), C(problem) (the same text, for the problem_line filter)
      and C(fix). The module fails on an error; warnings name stale models it kept.
  returned: always
  type: list
  elements: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.aiinfra.k3s.plugins.module_utils.node.model_store_contents import converge


def main():
    module = AnsibleModule(
        argument_spec={
            "store": {"type": "path", "required": True},
            "keep": {"type": "list", "elements": "str", "required": True},
            "in_use": {"type": "list", "elements": "str", "default": []},
            "prune": {"type": "bool", "default": False},
            "lock_timeout": {"type": "int", "default": 1800},
            "host": {"type": "str"},
        },
        supports_check_mode=True,
    )
    result = converge(module.params, check_mode=module.check_mode)
    errors = [p for p in result["problems"] if p["severity"] == "error"]
    if errors:
        lines = ["%s %s: %s" % (p["severity"].upper(), p["code"], p["message"]) for p in errors]
        module.fail_json(msg="; ".join(lines), **result)
    for warning in result["problems"]:
        module.warn("%s: %s" % (warning["code"], warning["message"]))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
