#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
module: consumer_keys
short_description: Issue, rotate and drop the gateway consumers' keys, keeping only their hashes
version_added: 0.1.0
description:
  - "Runs on the controller (C(delegate_to: localhost)) for C(playbooks/consumers.yml)."
  - Each active consumer of the site plan that has no key (neither a hash in O(hashes) nor a key in the vault) gets
    a new random key (C(sk-) and 48 hex characters); so does each consumer named in O(rotate). The key is written
    once to C(O(keys_dir)/<consumer>.key) (mode 0600, directory 0700) for the operator to hand out and delete; it
    never appears in the module's output. Only its SHA-256 is kept, in O(hashes_file) (the inventory variable
    C(litellm_consumer_key_hashes)), which the gateway's consumers Secret is rendered from.
  - Hashes of consumers that are revoked or no longer listed are dropped from O(hashes_file), and their keys stop
    working at the next converge of the gateway.
  - The logic is the plain function C(issue_keys) in module_utils C(consumers.py).
author:
  - aiinfra.k3s developers (@aiinfra)
options:
  consumers:
    description: The site plan's consumers (C(site_plan_current.consumers)).
    type: list
    elements: dict
    required: true
  hashes:
    description: The current C(litellm_consumer_key_hashes) (consumer name to SHA-256).
    type: dict
    default: {}
  rotate:
    description: Consumers whose key is replaced by a new one (the old one stops working at the next converge).
    type: list
    elements: str
    default: []
  hashes_file:
    description:
      - YAML file the hashes are written to, as C(litellm_consumer_key_hashes). Its directory must exist, and must
        not be a group_vars directory that a C(<group>.yml) file of the same name would be hidden by.
    type: path
    required: true
  keys_dir:
    description: Directory (created 0700) that receives each new key in a 0600 file.
    type: path
    required: true
attributes:
  check_mode:
    support: full
    description: Reports which keys would be issued or dropped; writes nothing.
  diff_mode:
    support: full
    description: Shows the change of the hashes file (hashes only).
"""

EXAMPLES = r"""
- name: Issue the keys of new consumers, rotate one
  aiinfra.k3s.consumer_keys:
    consumers: "{{ site_plan_current.consumers }}"
    hashes: "{{ litellm_consumer_key_hashes }}"
    rotate: [chat-frontend]
    hashes_file: "{{ inventory_dir }}/group_vars/all/litellm_consumer_key_hashes.yml"
    keys_dir: "~/.aiinfra/site-a/consumer-keys"
  delegate_to: localhost
  run_once: true
"""

RETURN = r"""
hashes:
  description: The hashes now in the file (consumer name to SHA-256).
  returned: always
  type: dict
  sample: {chat-frontend: 2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae}
issued:
  description: Consumers that got a new key.
  returned: always
  type: list
  elements: str
key_files:
  description: Where each new key was written (0600), by consumer.
  returned: always
  type: dict
dropped:
  description: Consumers whose hash was removed (revoked or no longer listed).
  returned: always
  type: list
  elements: str
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.aiinfra.k3s.plugins.module_utils.plan.consumers import hashes_document, issue_keys


def _read(path):
    try:
        with open(path) as handle:
            return handle.read()
    except OSError:
        return ""


def _write_private(path, text):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
    os.chmod(path, 0o600)


def main():
    module = AnsibleModule(
        argument_spec={
            "consumers": {"type": "list", "elements": "dict", "required": True},
            "hashes": {"type": "dict", "default": {}},
            "rotate": {"type": "list", "elements": "str", "default": []},
            "hashes_file": {"type": "path", "required": True},
            "keys_dir": {"type": "path", "required": True},
        },
        supports_check_mode=True,
    )
    p = module.params
    directory = os.path.dirname(p["hashes_file"])
    shadow = directory + ".yml"
    if os.path.basename(os.path.dirname(directory)) == "group_vars" and (
        os.path.exists(shadow) or os.path.exists(directory + ".yaml")
    ):
        module.fail_json(
            msg="%s exists: Ansible reads group_vars/%s/ instead of it once that directory exists. Move it to "
            "%s/main.yml first (the layout README.md shows), or set litellm_consumer_hashes_file elsewhere"
            % (shadow, os.path.basename(directory), directory)
        )
    if not os.path.isdir(directory):
        module.fail_json(msg="the directory of hashes_file, %s, does not exist: create it" % directory)
    try:
        hashes, issued = issue_keys(p["consumers"], p["hashes"], p["rotate"])
    except ValueError as err:
        module.fail_json(msg=str(err))
    before = _read(p["hashes_file"])
    after = hashes_document(hashes)
    dropped = sorted(set(p["hashes"] or {}) - set(hashes))
    changed = before != after or bool(issued)
    key_files = {name: os.path.join(p["keys_dir"], name + ".key") for name in sorted(issued)}
    result = {
        "changed": changed,
        "hashes": hashes,
        "issued": sorted(issued),
        "key_files": key_files,
        "dropped": dropped,
    }
    if module._diff and before != after:
        result["diff"] = {
            "before": before,
            "after": after,
            "before_header": p["hashes_file"],
            "after_header": p["hashes_file"],
        }
    if module.check_mode or not changed:
        module.exit_json(**result)
    if issued:
        os.makedirs(p["keys_dir"], mode=0o700, exist_ok=True)
        os.chmod(p["keys_dir"], 0o700)
        for name, key in issued.items():
            _write_private(key_files[name], key + "\n")
    if before != after:
        tmp = p["hashes_file"] + ".tmp"
        with open(tmp, "w") as handle:
            handle.write(after)
        os.chmod(tmp, 0o644)
        os.replace(tmp, p["hashes_file"])
    module.exit_json(**result)


if __name__ == "__main__":
    main()
