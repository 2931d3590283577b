#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
module: sysctl_settings
short_description: Set kernel parameters, persistent and live, in one pass
version_added: 0.1.0
description:
  - Writes O(path) (one C(key=value) line per parameter, sorted) when its text differs, and writes each live value
    under C(/proc/sys) that differs from the wanted one.
  - One module run for a whole set of parameters instead of one C(ansible.posix.sysctl) run per parameter. The logic
    is in module_utils C(sysctl_settings.py).
  - Fails, naming the parameter, when the kernel has no such parameter or refuses the value.
author:
  - aiinfra.k3s developers (@aiinfra)
options:
  path:
    description: The persistent file (under C(/etc/sysctl.d)); written with mode 0644.
    type: path
    required: true
  values:
    description: Parameter name (dotted, as C(sysctl) takes it) to its value.
    type: dict
    required: true
  live:
    description: Also set the live values (false only writes the file, for the next boot).
    type: bool
    default: true
attributes:
  check_mode:
    support: full
    description: Reports the file and the live values that would change.
  diff_mode:
    support: full
    description: The old and new text of the file, and the old and new live values.
"""

EXAMPLES = r"""
- name: Set the network sysctls K3s needs
  aiinfra.k3s.sysctl_settings:
    path: /etc/sysctl.d/90-aiinfra-k3s-network.conf
    values:
      net.ipv4.ip_forward: 1
      net.bridge.bridge-nf-call-iptables: 1
"""

RETURN = r"""
file_changed:
  description: Whether the persistent file was (or would be) written.
  returned: always
  type: bool
live_changed:
  description: Parameter to its old live value, for each live value set (or that would be).
  returned: always
  type: dict
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.aiinfra.k3s.plugins.module_utils.node.file_ops import set_attributes, write_atomic
from ansible_collections.aiinfra.k3s.plugins.module_utils.node.manifest_files import read
from ansible_collections.aiinfra.k3s.plugins.module_utils.node.sysctl_settings import (
    bad_keys,
    live_changes,
    proc_path,
    render,
)


def main():
    module = AnsibleModule(
        argument_spec={
            "path": {"type": "path", "required": True},
            "values": {"type": "dict", "required": True},
            "live": {"type": "bool", "default": True},
        },
        supports_check_mode=True,
    )
    p = module.params
    values = {str(k): v for k, v in p["values"].items()}
    bad = bad_keys(values)
    if bad:
        module.fail_json(msg="not sysctl names: %s" % ", ".join(map(repr, bad)))
    text = render(values)
    old = read(p["path"])
    live = live_changes(values) if p["live"] else {}
    missing = sorted(k for k, (now, _want) in live.items() if now is None)
    if missing:
        module.fail_json(msg="the kernel has no parameter %s (%s)" % (", ".join(missing), proc_path(missing[0])))
    changed = old != text or bool(live)
    if not module.check_mode:
        if old != text:
            write_atomic(module, p["path"], text)
        for key, (_now, want) in live.items():
            try:
                with open(proc_path(key), "w") as handle:
                    handle.write(want)
            except OSError as exc:
                module.fail_json(msg="the kernel refused %s=%s: %s" % (key, want, exc))
    if os.path.exists(p["path"]):
        changed = set_attributes(module, p["path"], changed, "0644")
    result = {"changed": changed, "file_changed": old != text, "live_changed": {k: v[0] for k, v in live.items()}}
    if module._diff:
        result["diff"] = [
            {"before_header": p["path"], "after_header": p["path"], "before": old or "", "after": text},
            {
                "before_header": "live values",
                "after_header": "live values",
                "before": "".join("%s=%s\n" % (k, v[0]) for k, v in live.items()),
                "after": "".join("%s=%s\n" % (k, v[1]) for k, v in live.items()),
            },
        ]
    module.exit_json(**result)


if __name__ == "__main__":
    main()
