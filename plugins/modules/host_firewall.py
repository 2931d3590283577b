#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
module: host_firewall
short_description: Converge a node's own nftables table, its ruleset file and the unit that loads it at boot
version_added: 0.1.0
description:
  - Creates the directory of O(path) (mode 0700, root), writes O(ruleset) to O(path) (mode 0600) when its text
    differs, after C(nft -c) has checked it, and writes the oneshot unit O(unit) that loads O(path) at boot,
    before the network and K3s.
  - Loads the table now (restarts the unit, so that C(nft) replaces the table in one transaction) when the file or
    the unit was written, when the kernel holds no table O(table), or when the kernel's listing of it no longer
    hashes to the digest recorded beside O(path) after the last load (the table was changed by hand). Then records
    the new listing's digest.
  - Enables the unit and starts it where it is not.
  - One module run instead of a task per file, read and service call; on a node that is already right it reads the
    two files, the digest, the kernel's table and the unit's state, and changes nothing. The decisions are in
    module_utils C(host_firewall.py).
author:
  - aiinfra.k3s developers (@aiinfra)
requirements:
  - nftables (C(nft)) and systemd on the node; the module runs as root (become).
notes:
  - In check mode a ruleset C(nft -c) refuses fails the task, as in a real run. A node without C(nft) yet (the run
    that installs nftables, in check mode) is reported as having no table, without that check.
options:
  table:
    description: The name of the C(inet) table O(ruleset) defines.
    type: str
    required: true
  ruleset:
    description: The nftables ruleset (C(nft -f) input) that defines table O(table).
    type: str
    required: true
  path:
    description: Absolute path of the ruleset file; its directory also holds C(loaded.sha256).
    type: path
    required: true
  unit:
    description: Absolute path of the systemd unit file (C(.service)) that loads O(path) at boot.
    type: path
    required: true
  nft:
    description: The C(nft) program, as the unit runs it.
    type: path
    default: /usr/sbin/nft
attributes:
  check_mode:
    support: full
    description:
      - Checks the ruleset with C(nft -c) and reports what would be written and why the table would be loaded;
        starts nothing. A unit not written yet is not asked for its state.
  diff_mode:
    support: full
    description: The old and new text of the ruleset file and of the unit.
"""

EXAMPLES = r"""
- name: Converge the node's firewall
  aiinfra.k3s.host_firewall:
    table: aiinfra_k3s
    ruleset: "{{ rules | aiinfra.k3s.nftables_ruleset(['cni0', 'flannel.1']) }}"
    path: /etc/aiinfra-k3s/firewall.nft
    unit: /etc/systemd/system/aiinfra-k3s-firewall.service
"""

RETURN = r"""
written:
  description: The paths created or written (or that would be, in check mode).
  returned: always
  type: list
  elements: str
load_reasons:
  description:
    - Why the table was (or would be) loaded, empty when the kernel held what was loaded last; in this order of
      C(ruleset_written), C(unit_written), C(table_missing) (the kernel has no such table) and C(table_changed) (its
      listing differs from the one recorded at the last load).
  returned: always
  type: list
  elements: str
  sample: [table_changed]
unit_enabled:
  description: Whether the unit was (or would be) enabled because it was not (always, for a unit this run writes).
  returned: always
  type: bool
unit_started:
  description: Whether the unit was (or would be) started because it was not active and the table was not loaded.
  returned: always
  type: bool
"""

import os
import tempfile

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.aiinfra.k3s.plugins.module_utils.node.file_ops import set_attributes, write_atomic
from ansible_collections.aiinfra.k3s.plugins.module_utils.node.host_firewall import (
    bad_params,
    digest,
    digest_path,
    load_reasons,
    unit_text,
)
from ansible_collections.aiinfra.k3s.plugins.module_utils.node.manifest_files import read


def checked_ruleset(module, nft, ruleset, directory):
    """Fail unless `nft -c -f` accepts ruleset (from a temporary file in directory, or the system's when it does not
    exist yet)."""
    where = directory if os.path.isdir(directory) else None
    fd, tmp = tempfile.mkstemp(dir=where, prefix=".aiinfra-check-", suffix=".nft")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(ruleset)
        rc, out, err = module.run_command([nft, "-c", "-f", tmp])
    finally:
        os.unlink(tmp)
    if rc != 0:
        module.fail_json(msg="nft -c refused the ruleset, nothing was written: %s" % (err or out).strip())


def systemctl(module, *args, must=False):
    """systemctl's output, stripped (a query such as is-enabled); with must (an action), the module fails when
    systemctl does."""
    rc, out, err = module.run_command([module.get_bin_path("systemctl", required=True), *args])
    if must and rc != 0:
        module.fail_json(msg="systemctl %s failed (rc %s): %s" % (" ".join(args), rc, err.strip()))
    return out.strip()


def main():
    module = AnsibleModule(
        argument_spec={
            "table": {"type": "str", "required": True},
            "ruleset": {"type": "str", "required": True},
            "path": {"type": "path", "required": True},
            "unit": {"type": "path", "required": True},
            "nft": {"type": "path", "default": "/usr/sbin/nft"},
        },
        supports_check_mode=True,
    )
    p = module.params
    problems = bad_params(p["table"], p["path"], p["unit"])
    if problems:
        module.fail_json(msg="; ".join(problems))
    check, nft, path, unit = module.check_mode, p["nft"], p["path"], p["unit"]
    unit_name = os.path.basename(unit)
    directory = os.path.dirname(path)
    changed, written, diff = False, [], []
    has_nft = os.path.exists(nft)
    if not (has_nft or check):
        module.fail_json(msg="%s does not exist: install nftables on the node first (prereq's packages)" % nft)

    if not os.path.isdir(directory):
        written.append(directory)
        if not check:
            os.makedirs(directory, 0o700)
    if os.path.isdir(directory):
        changed = set_attributes(module, directory, changed, "0700", "root", "root")

    wanted = {path: (p["ruleset"], "0600"), unit: (unit_text(p["table"], path, nft), "0644")}
    old = {name: read(name) for name in wanted}
    for name, (text, mode) in wanted.items():
        if old[name] != text:
            if name == path and has_nft:
                checked_ruleset(module, nft, text, directory)
            written.append(name)
            diff.append({"before_header": name, "after_header": name, "before": old[name] or "", "after": text})
            if not check:
                write_atomic(module, name, text, mode)
        if os.path.exists(name):
            changed = set_attributes(module, name, changed, mode, "root", "root")
    unit_new = unit in written

    list_rc, listing = 1, ""  # no nft yet (check mode): no table
    if has_nft:
        list_rc, listing, _err = module.run_command([nft, "list", "table", "inet", p["table"]])
    reasons = load_reasons(path in written, unit_new, list_rc, listing, read(digest_path(path)))
    if reasons and not check:
        if unit_new:
            systemctl(module, "daemon-reload", must=True)
        systemctl(module, "restart", unit_name, must=True)
        list_rc, listing, err = module.run_command([nft, "list", "table", "inet", p["table"]])
        if list_rc != 0:
            module.fail_json(
                msg="nft list table inet %s after the load failed (rc %s): %s" % (p["table"], list_rc, err.strip())
            )
        write_atomic(module, digest_path(path), digest(listing) + "\n", "0600")
        changed = set_attributes(module, digest_path(path), changed, "0600", "root", "root")

    enable, start = check and unit_new, False  # a unit only this run would write has no state to ask: enabled then
    if not (check and unit_new):
        enable = systemctl(module, "is-enabled", unit_name) != "enabled"
        start = not reasons and systemctl(module, "is-active", unit_name) != "active"
        if enable and not check:
            systemctl(module, "enable", unit_name, must=True)
        if start and not check:
            systemctl(module, "start", unit_name, must=True)
        changed = changed or enable or start

    result = {
        "changed": changed or bool(written) or bool(reasons),
        "written": written,
        "load_reasons": reasons,
        "unit_enabled": enable,
        "unit_started": start,
    }
    if module._diff:
        result["diff"] = diff
    module.exit_json(**result)


if __name__ == "__main__":
    main()
