#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
module: verified_files
short_description: Tell which large files of a node hold their known sha256, hashing each one only once
version_added: 0.2.0
description:
  - For each file of O(files) (the K3s binary, the airgap image tarball, files whose sha256 the controller verified),
    says whether the node holds it with that sha256 (RV(current)) or not (RV(stale), missing or other bytes).
  - A file is hashed once; the module then keeps in O(record) its sha256 with its size, mtime, ctime and inode. A
    later run whose stat of the file still equals the record knows the file is unchanged without reading it. Any
    write, replacement, C(chmod) or C(chown) changes the file's ctime, which cannot be set back, so such a file is
    hashed again.
  - Copy the stale files (M(ansible.builtin.copy)), then run the module again on them with O(require=true), which
    hashes what arrived, records it, and fails if a file still does not hold its sha256.
  - Keeping the record is bookkeeping, not a change of the node, so the module never reports C(changed).
    The logic is in module_utils C(node/verified_files.py).
author:
  - aiinfra.k3s developers (@aiinfra)
options:
  files:
    description: Absolute path of each file to its wanted C(sha256) (64 hex digits) and, optionally, C(size) in bytes
      (a file of another size is stale without being read), C(mode) (four octal digits as a string), C(owner) and
      C(group) (a file whose mode, owner or group differs is stale, so that the copy that follows sets them).
    type: dict
    required: true
  record:
    description: The record file (JSON, mode 0600, its directory created 0700).
    type: path
    default: /var/lib/aiinfra/verified-files.json
  require:
    description: Fail when a file is stale (after a copy, to verify what arrived).
    type: bool
    default: false
attributes:
  check_mode:
    support: full
    description: Files are read and hashed as in a normal run; the record is not written.
  diff_mode:
    support: none
    description: Changes no managed file, so there is nothing to diff.
"""

EXAMPLES = r"""
- name: Find which verified artifacts the node lacks
  aiinfra.k3s.verified_files:
    files:
      /usr/local/bin/k3s: {sha256: "{{ release.binary.sha256 }}", size: "{{ release.binary.size }}"}
  register: verified

- name: Install the K3s binary
  ansible.builtin.copy:
    src: "{{ release.binary.path }}"
    dest: /usr/local/bin/k3s
    mode: "0755"
  when: "'/usr/local/bin/k3s' in verified.stale"

- name: Verify what arrived
  aiinfra.k3s.verified_files:
    files: "{{ verified.wanted | dict2items | selectattr('key', 'in', verified.stale) | items2dict }}"
    require: true
  when: verified.stale | length > 0
"""

RETURN = r"""
current:
  description: Files that hold their sha256.
  returned: always
  type: list
  elements: str
  sample: [/usr/local/bin/k3s]
stale:
  description: Files that are missing, hold other bytes, or lack the mode, owner or group asked for.
  returned: always
  type: list
  elements: str
  sample: [/var/lib/rancher/k3s/agent/images/k3s-airgap-images-amd64.tar.zst]
hashed:
  description: Files this run had to read, and the sha256 it found (not proven by the record).
  returned: always
  type: dict
  sample: {/usr/local/bin/k3s: "0f1e..."}
bytes_hashed:
  description: Bytes this run read to hash them (0 when every file was proven by the record).
  returned: always
  type: int
  sample: 0
wanted:
  description: The O(files) argument, as given.
  returned: always
  type: dict
  sample: {/usr/local/bin/k3s: {sha256: "0f1e...", size: 71000000}}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.aiinfra.k3s.plugins.module_utils.node.verified_files import (
    bad_files,
    check,
)


def main():
    module = AnsibleModule(
        argument_spec={
            "files": {"type": "dict", "required": True},
            "record": {"type": "path", "default": "/var/lib/aiinfra/verified-files.json"},
            "require": {"type": "bool", "default": False},
        },
        supports_check_mode=True,
    )
    files = module.params["files"]
    problems = bad_files(files)
    if problems:
        module.fail_json(msg="verified_files: " + "; ".join(problems))
    try:
        result = check(files, module.params["record"], keep=not module.check_mode)
    except OSError as exc:
        module.fail_json(msg="verified_files: cannot write the record %s: %s" % (module.params["record"], exc))
    out = {
        "changed": False,
        "current": result["current"],
        "stale": result["stale"],
        "hashed": result["hashed"],
        "bytes_hashed": result["bytes_hashed"],
        "wanted": files,
    }
    if module.params["require"] and result["stale"]:
        module.fail_json(
            msg="these files do not hold their sha256, mode or owner (or are missing): %s; the copy was damaged, the "
            "file was changed while it was written, or its mode or owner could not be set: run again"
            % ", ".join(result["stale"]),
            **out,
        )
    module.exit_json(**out)


if __name__ == "__main__":
    main()
