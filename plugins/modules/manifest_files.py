#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
module: manifest_files
short_description: Converge the manifest files of a directory in one pass
version_added: 0.1.0
description:
  - Writes each file of O(files) whose content differs (atomically, with O(mode), O(owner) and O(group)), and
    removes each file of O(absent) that exists, returning its content so that the objects it created can be
    deleted through the API (K3s leaves them running when their file goes).
  - One module run instead of one copy, one slurp and one file task per file; the logic is in module_utils
    C(manifest_files.py).
author:
  - aiinfra.k3s developers (@aiinfra)
options:
  path:
    description: The directory, created when missing, with O(directory_mode) and the files' O(owner) and O(group).
    type: path
    required: true
  directory_mode:
    description: Mode of the directory.
    type: str
    default: "0700"
  files:
    description: File name to its wanted content.
    type: dict
    default: {}
  absent:
    description: File names that must not exist.
    type: list
    elements: str
    default: []
  mode:
    description: Mode of the files.
    type: str
    default: "0600"
extends_documentation_fragment:
  - aiinfra.k3s.ownership
attributes:
  check_mode:
    support: full
    description: Reports what would be written and removed, and returns the removed files' content.
  diff_mode:
    support: full
    description: The old and new text of each file written or removed.
"""

EXAMPLES = r"""
- name: Write the manifests and remove those of a switched-off component
  aiinfra.k3s.manifest_files:
    path: /var/lib/rancher/k3s/server/manifests
    files:
      aiinfra-vllm.yaml: "{{ objects | map('to_nice_yaml') | join('---\n') }}"
    absent: [aiinfra-monitoring.yaml]
    owner: root
    group: root
  register: written
"""

RETURN = r"""
written:
  description: Names of the files written (or that would be, in check mode).
  returned: always
  type: list
  elements: str
removed:
  description: Name to content of each file removed (or that would be).
  returned: always
  type: dict
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.aiinfra.k3s.plugins.module_utils.node.file_ops import set_attributes, write_atomic
from ansible_collections.aiinfra.k3s.plugins.module_utils.node.manifest_files import bad_names, changes


def main():
    module = AnsibleModule(
        argument_spec={
            "path": {"type": "path", "required": True},
            "files": {"type": "dict", "default": {}},
            "absent": {"type": "list", "elements": "str", "default": []},
            "mode": {"type": "str", "default": "0600"},
            "directory_mode": {"type": "str", "default": "0700"},
            "owner": {"type": "str"},
            "group": {"type": "str"},
        },
        supports_check_mode=True,
    )
    p = module.params
    directory = p["path"]
    files = {str(k): str(v) for k, v in p["files"].items()}
    bad = bad_names(list(files) + p["absent"])
    if bad:
        module.fail_json(msg="file names must be plain names inside path: %s" % ", ".join(map(repr, bad)))
    todo = changes(directory, files, p["absent"])
    changed = not os.path.isdir(directory)
    if changed and not module.check_mode:
        os.makedirs(directory, mode=0o700)
    if os.path.isdir(directory):
        changed = set_attributes(module, directory, changed, p["directory_mode"], p["owner"], p["group"])
    diff = []
    for name, (old, new) in todo["write"].items():
        changed = True
        diff.append({"before_header": name, "after_header": name, "before": old or "", "after": new})
        if module.check_mode:
            continue
        write_atomic(module, os.path.join(directory, name), new, p["mode"])
    for name in files:
        target = os.path.join(directory, name)
        if os.path.exists(target):
            changed = set_attributes(module, target, changed, p["mode"], p["owner"], p["group"])
    for name, old in todo["remove"].items():
        changed = True
        diff.append({"before_header": name, "after_header": name, "before": old, "after": ""})
        if not module.check_mode:
            os.unlink(os.path.join(directory, name))
    result = {"changed": changed, "written": sorted(todo["write"]), "removed": todo["remove"]}
    if module._diff:
        result["diff"] = diff
    module.exit_json(**result)


if __name__ == "__main__":
    main()
