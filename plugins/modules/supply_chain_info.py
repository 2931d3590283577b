#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
module: supply_chain_info
short_description: Check where the site's software comes from (URLs, image digests, charts, K3s pins) on the controller
version_added: 0.1.0
description:
  - Runs on the controller only (an action plugin); it touches no host.
  - Reads the inventory's value of each variable it checks, or the owning role's default when the inventory sets
    none, and returns every problem as data with a severity, naming the variable and the fix.
  - Errors are download URLs that are not https, K3s pins that cannot work, an online K3s install with release files
    that nothing pins (unless C(k3s_allow_unpinned)) and malformed image digests; warnings are images pinned by tag
    only and charts fetched online without a digest check.
  - The logic is the plain function C(supply_chain_problems) in module_utils C(supply_chain.py).
author:
  - aiinfra.k3s developers (@aiinfra)
options: {}
extends_documentation_fragment:
  - aiinfra.k3s.attributes.read_only
"""

EXAMPLES = r"""
- name: Check the site's sources
  aiinfra.k3s.supply_chain_info:
  register: supply

- name: Stop on a source that cannot be trusted
  ansible.builtin.assert:
    that: supply.problems | selectattr('severity', '==', 'error') | list | length == 0
    fail_msg: "{{ supply.problems | map('aiinfra.k3s.problem_line') }}"
"""

RETURN = r"""
problems:
  description: Every problem found, each with C(code), C(severity), C(host), C(variable), C(problem) and C(fix).
  returned: always
  type: list
  elements: dict
"""

from ansible.module_utils.basic import AnsibleModule


def main():
    module = AnsibleModule(argument_spec={}, supports_check_mode=True)
    module.fail_json(
        msg="aiinfra.k3s.supply_chain_info runs on the controller as an action plugin; it has no module side"
    )


if __name__ == "__main__":
    main()
