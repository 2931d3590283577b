# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
name: inventory_spec_problems
short_description: Check every variable an inventory sets against the roles' argument specs and Kubernetes' rules
version_added: 0.1.0
description:
  - Reads the argument specs of every role of the collection and checks each variable the inventory gives a
    host - type, choices, the keys of list-of-dict entries (unknown keys with the closest known name), and
    formats (Kubernetes names, label names and values, taints, ports, counts, paths, addresses, token strength).
  - A variable no role declares whose name is close to one that does (C(k3s_verison)) is an error naming the known
    one ("did you mean"); any other variable no role declares is a warning.
  - Reports two inventory hosts that reach one machine. Contacts no host; raises for no input.
  - Returns problems as data, C({code, severity, host, variable, problem, fix}).
options:
  _input:
    description: The C(hostvars) of the play.
    type: dict
    required: true
  hosts:
    description: The inventory hosts to check (C(groups['all'])).
    type: list
    elements: str
    required: true
"""

EXAMPLES = r"""
- name: Stop on any error of the inventory's variables
  ansible.builtin.assert:
    that: __errors | length == 0
    fail_msg: "{{ __errors | map(attribute='problem') }}"
  vars:
    __errors: "{{ hostvars | aiinfra.k3s.inventory_spec_problems(groups['all']) | selectattr('severity', '==', 'error') }}"
"""

RETURN = r"""
_value:
  description: One dict per problem (code, severity, host, variable, problem, fix); empty when sound.
  type: list
  elements: dict
"""

import os

import yaml
from ansible.errors import AnsibleError

ROLES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "roles")


def role_specs(roles_dir=ROLES):
    out = {}
    for role in sorted(os.listdir(roles_dir)):
        path = os.path.join(roles_dir, role, "meta", "argument_specs.yml")
        if os.path.isfile(path):
            with open(path) as handle:
                out[role] = yaml.safe_load(handle)
    return out


def host_values(hostvars, host):
    """(values, names) of one host's variables; a value that cannot be templated (an undefined vault variable)
    is left out of the checks rather than raising."""
    try:
        hv = hostvars[host]
        names = list(hv.keys())
    except (AnsibleError, KeyError, TypeError):  # a host whose variables cannot be read: the group checks say
        return {}, []
    values = {}
    for name in names:
        if name.startswith("__") or name in ("hostvars", "groups", "vars", "omit"):
            continue
        try:
            values[name] = hv[name]
        except (AnsibleError, KeyError, TypeError, ValueError):  # e.g. "{{ vault_x }}" with no vault loaded
            continue
    return values, names


def inventory_spec_problems(hostvars, hosts):
    from ansible_collections.aiinfra.k3s.plugins.module_utils.plan import inventory_spec

    specs = inventory_spec.merge_specs(role_specs())
    values, declared = {}, {}
    for host in hosts:
        values[host], declared[host] = host_values(hostvars, host)
    return inventory_spec.spec_problems(specs, values, declared)


class FilterModule(object):
    def filters(self):
        return {"inventory_spec_problems": inventory_spec_problems}
