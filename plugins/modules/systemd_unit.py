#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
module: systemd_unit
short_description: Verify a systemd unit, load its current text, enable and start it, in one run
version_added: 0.1.0
description:
  - Checks the unit file with C(systemd-analyze verify) (on every run, so that a unit systemd refuses is never started
    or reloaded by a later run either), then reads the unit's state with one C(systemctl show).
  - Runs C(systemctl daemon-reload) only when systemd holds an older text of the unit (C(NeedDaemonReload)) or has
    not loaded it, then enables and starts the unit where it is not. A unit that is C(activating) counts as started,
    as M(ansible.builtin.systemd_service) counts it.
  - One module run where a C(command) task and a M(ansible.builtin.systemd_service) task reloading systemd took two,
    and no daemon-reload of the whole system manager on a run that changed no unit.
  - The decisions are the plain functions of module_utils C(node/systemd_unit.py).
author:
  - aiinfra.k3s developers (@aiinfra)
options:
  name:
    description: The unit's name (C(k3s.service)).
    type: str
    required: true
  path:
    description: The unit file to verify; C(/etc/systemd/system/<name>) by default.
    type: path
  verify:
    description: Check the unit file with C(systemd-analyze verify) first; the module fails, touching nothing, when
      systemd refuses it.
    type: bool
    default: true
  enabled:
    description:
      - Whether the unit must start at boot; left as it is when omitted.
      - With O(enabled) and O(started) both omitted the module only verifies the unit and reads its state; it runs no
        action, not even a daemon-reload.
    type: bool
  started:
    description: Whether the unit must run now; left as it is when omitted.
    type: bool
attributes:
  check_mode:
    support: full
    description: Verifies and reads as in a normal run and reports what it would do; runs no action.
  diff_mode:
    support: none
    description: Writes no file.
requirements:
  - systemd (C(systemctl), C(systemd-analyze))
"""

EXAMPLES = r"""
- name: Verify, enable and start K3s
  aiinfra.k3s.systemd_unit:
    name: k3s.service
    enabled: true
    started: true
  register: k3s_started
"""

RETURN = r"""
actions:
  description: The systemctl actions the run took (or would take, in check mode), in order.
  returned: always
  type: list
  elements: str
  sample: [daemon-reload, enable, start]
status:
  description: The unit's properties as C(systemctl show) gave them before any action.
  returned: always
  type: dict
  sample: {LoadState: loaded, ActiveState: active, UnitFileState: enabled, NeedDaemonReload: "no"}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.aiinfra.k3s.plugins.module_utils.node.systemd_unit import (
    PROPERTIES,
    actions,
    bad_name,
    parse_show,
)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            name=dict(type="str", required=True),
            path=dict(type="path"),
            verify=dict(type="bool", default=True),
            enabled=dict(type="bool"),
            started=dict(type="bool"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    problem = bad_name(p["name"])
    if problem:
        module.fail_json(msg=problem)
    path = p["path"] or "/etc/systemd/system/" + p["name"]
    if p["verify"]:
        rc, out, err = module.run_command([module.get_bin_path("systemd-analyze", required=True), "verify", path])
        if rc != 0:
            module.fail_json(
                msg="systemd-analyze verify %s refused the unit (rc %s): %s" % (path, rc, (err or out).strip())
            )
    systemctl = module.get_bin_path("systemctl", required=True)
    query = [systemctl, "show", p["name"]] + ["--property=" + prop for prop in PROPERTIES]
    rc, out, err = module.run_command(query)
    if rc != 0:
        module.fail_json(msg="systemctl show %s failed (rc %s): %s" % (p["name"], rc, err.strip()))
    status = parse_show(out)
    todo = actions(status, p["enabled"], p["started"])
    if not module.check_mode:
        for action in todo:
            argv = [systemctl, action] if action == "daemon-reload" else [systemctl, action, p["name"]]
            rc, out, err = module.run_command(argv)
            if rc != 0:
                module.fail_json(
                    msg="systemctl %s failed (rc %s): %s" % (" ".join(argv[1:]), rc, (err or out).strip()),
                    actions=todo,
                    status=status,
                )
    module.exit_json(changed=bool(todo), actions=todo, status=status)


if __name__ == "__main__":
    main()
