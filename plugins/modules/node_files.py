#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
module: node_files
short_description: Converge a node's configuration files, directories and links in one pass
version_added: 0.1.0
description:
  - Creates each directory of O(directories) that is missing, writes each file of O(files) and O(secret_files) whose
    content differs (atomically), points each link of O(links) at its target and removes each path of O(absent)
    that exists; then sets mode, owner and group where they differ.
  - Like M(ansible.builtin.file), a missing parent of a directory is created with that directory's mode, owner and
    group, and C(~) and environment variables in a path are expanded.
  - One module run instead of one file, copy or template task per path; on a node whose files are already right
    it only reads them. The logic is in module_utils C(node_files.py).
  - On the controller's own connection without become (a file written on the controller), an action plugin reads
    the files in the controller's process first and, when nothing differs (no O(links)), returns without a module
    run; any change runs the module, which alone writes.
author:
  - aiinfra.k3s developers (@aiinfra)
options:
  directories:
    description: Absolute path of a directory that must exist to its mode (C(null) for 0755).
    type: dict
    default: {}
  files:
    description: Files and their wanted text.
    type: list
    elements: dict
    default: []
    suboptions:
      path:
        description: Absolute path.
        type: path
        required: true
      content:
        description: The wanted text.
        type: str
        required: true
      mode:
        description: Mode of the file.
        type: str
        default: "0644"
  secret_files:
    description:
      - Absolute path to the wanted text of a file that holds a secret (a token, registry credentials).
      - Written with mode 0600; the text never appears in the module's output, its arguments or its diff.
    type: dict
    default: {}
  links:
    description: Absolute path of a symbolic link to its target.
    type: dict
    default: {}
  absent:
    description: Absolute paths that must not exist (a file or a link).
    type: list
    elements: str
    default: []
  verified:
    description:
      - Each absolute path of a file whose content the controller verified, to its wanted C(sha256) and, optionally,
        C(size), C(mode), C(owner) and C(group), as M(aiinfra.k3s.verified_files) takes them. Only read, in the same
        run as the rest; RV(stale) names those the node lacks, for the copy that follows (which this module does not
        make), and the record of O(verified_record) keeps each file proven by its hash, so that the next run knows it
        from its stat.
    type: dict
    default: {}
  verified_record:
    description: The record file of O(verified) (JSON, mode 0600), shared with M(aiinfra.k3s.verified_files).
    type: path
    default: /var/lib/aiinfra/verified-files.json
  probe:
    description:
      - Absolute paths the module only looks at; those that exist are returned in RV(present). Saves a C(stat) run
        for a path the caller's next step depends on (the binary a service runs, for example).
    type: list
    elements: str
    default: []
    version_added: 0.1.0
  free_space:
    description:
      - Absolute paths whose file system the module measures after converging (the nearest existing parent's in
        check mode); returned in RV(free_space). Saves a C(df) run for a store that must have room.
    type: list
    elements: str
    default: []
    version_added: 0.1.0
extends_documentation_fragment:
  - aiinfra.k3s.ownership
attributes:
  check_mode:
    support: full
    description: Reports what would be created, written, linked and removed.
  diff_mode:
    support: full
    description: The old and new text of each file written (a secret file's text is replaced by a placeholder).
"""

EXAMPLES = r"""
- name: Write the token, config.yaml and the unit of a K3s server
  aiinfra.k3s.node_files:
    directories:
      /etc/rancher/k3s: "0755"
    files:
      - path: /etc/rancher/k3s/config.yaml
        content: "{{ lookup('ansible.builtin.template', 'config.yaml.j2') }}"
        mode: "0600"
      - path: /etc/systemd/system/k3s.service
        content: "{{ lookup('ansible.builtin.template', 'k3s.service.j2') }}"
    secret_files:
      /etc/rancher/k3s/cluster-token: "{{ k3s_token }}\n"
    links:
      /usr/local/bin/kubectl: /usr/local/bin/k3s
    absent: [/etc/rancher/k3s/registries.yaml]
    probe: [/usr/local/bin/k3s]
    owner: root
    group: root
  register: k3s_files

- name: Start K3s only where its binary is installed
  ansible.builtin.systemd_service:
    name: k3s.service
    state: started
  when: "'/usr/local/bin/k3s' in k3s_files.present"

- name: Write the unit and find, in the same run, whether the node holds the verified binary
  aiinfra.k3s.node_files:
    files:
      - {path: /etc/systemd/system/k3s.service, content: "{{ unit_text }}"}
    verified:
      /usr/local/bin/k3s: {sha256: "{{ release.binary.sha256 }}", size: "{{ release.binary.size }}"}
  register: k3s_files

- name: Copy the binary only where the node lacks it
  ansible.builtin.copy:
    src: "{{ release.binary.path }}"
    dest: /usr/local/bin/k3s
    mode: "0755"
  when: "'/usr/local/bin/k3s' in k3s_files.stale"
"""

RETURN = r"""
written:
  description: Paths created, written, linked or removed (or that would be, in check mode).
  returned: always
  type: list
  elements: str
present:
  description: The paths of O(probe) that exist (a link counts when its target exists).
  returned: always
  type: list
  elements: str
  sample: [/usr/local/bin/k3s]
free_space:
  description: Each path of O(free_space) to the C(mount) point of its file system and the bytes C(available) there.
  returned: always
  type: dict
  sample: {/data/model-registry: {mount: /data, available: 107374182400}}
stale:
  description: The paths of O(verified) that are missing, hold other bytes, or lack the mode, owner or group asked for.
  returned: when O(verified) is given
  type: list
  elements: str
  sample: [/usr/local/bin/k3s]
bytes_hashed:
  description: Bytes this run read to hash the files of O(verified) (0 when the record proved each one).
  returned: when O(verified) is given
  type: int
  sample: 0
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.aiinfra.k3s.plugins.module_utils.node.file_ops import set_attributes, write_atomic
from ansible_collections.aiinfra.k3s.plugins.module_utils.node.node_files import (
    ARGUMENT_SPEC,
    changes,
    diff_entries,
    free_space,
    present,
    wanted,
    wanted_mode,
)
from ansible_collections.aiinfra.k3s.plugins.module_utils.node.verified_files import (
    bad_files,
    check,
)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    p = module.params
    want = wanted(p)
    texts, secrets, modes, dirs = want["texts"], want["secrets"], want["modes"], want["dirs"]
    links, absent, probe, measure = want["links"], want["absent"], want["probe"], want["measure"]
    if want["bad"]:
        module.fail_json(msg="node_files takes absolute paths without '..': %s" % ", ".join(map(repr, want["bad"])))

    problems = bad_files(p["verified"])
    if problems:
        module.fail_json(msg="node_files verified: " + "; ".join(problems))

    todo = changes(list(dirs), texts, links, absent)
    changed = bool(todo["directories"] or todo["write"] or todo["links"] or todo["remove"])
    if not module.check_mode:
        for path in todo["directories"]:  # parents first; each gets its mode and owner below
            os.mkdir(path, 0o700)
        for path, (_old, new) in todo["write"].items():
            write_atomic(module, path, new, modes.get(path))
        for path, (old, target) in todo["links"].items():
            if old is not None or os.path.lexists(path):
                os.unlink(path)
            os.symlink(target, path)
        for path in todo["remove"]:
            os.unlink(path)
    created = [(path, wanted_mode(path, dirs)) for path in todo["directories"] if path not in dirs]
    for path, mode in created + list(dirs.items()) + [(path, modes[path]) for path in texts]:
        if os.path.exists(path):
            changed = set_attributes(module, path, changed, mode, p["owner"], p["group"])
    for path in links:
        if os.path.lexists(path):
            changed = set_attributes(module, path, changed, None, p["owner"], p["group"])
    written = todo["directories"] + list(todo["write"]) + list(todo["links"]) + todo["remove"]
    result = {
        "changed": changed,
        "written": written,
        "present": [path for path in probe if present([probe[path]])],
        "free_space": {path: free_space(measure[path]) for path in measure},
    }
    if p["verified"]:
        try:
            found = check(p["verified"], p["verified_record"], keep=not module.check_mode)
        except OSError as exc:
            module.fail_json(msg="node_files: cannot write the record %s: %s" % (p["verified_record"], exc))
        result.update(stale=found["stale"], bytes_hashed=found["bytes_hashed"])
    if module._diff:
        result["diff"] = diff_entries(todo, secrets)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
