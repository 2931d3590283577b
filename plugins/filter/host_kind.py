# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
name: host_kind
short_description: Classify a host as bare-metal, vm or container from its facts
version_added: 0.1.0
description:
  - Reads the virtualization facts of a host and says whether it is a container, a virtual machine or bare metal.
  - Roles use it to skip actions that would change a shared kernel when the host is a container.
options:
  _input:
    description: The host's gathered facts (C(ansible_facts)).
    type: dict
    required: true
  override:
    description: C(auto) to detect, or a kind that wins over detection.
    type: str
    default: auto
    choices: [auto, bare-metal, vm, container]
"""

EXAMPLES = r"""
- name: Skip swapoff inside containers
  ansible.builtin.command: swapoff -a
  changed_when: true
  when: ansible_facts | aiinfra.k3s.host_kind != 'container'
"""

RETURN = r"""
_value:
  description: One of C(bare-metal), C(vm), C(container).
  type: str
"""

from ansible.errors import AnsibleFilterError


def _host_kind(facts, override="auto"):
    from ansible_collections.aiinfra.k3s.plugins.module_utils.node.host_kind import host_kind

    try:
        return host_kind(facts, override)
    except ValueError as exc:
        raise AnsibleFilterError(str(exc)) from exc


class FilterModule(object):
    def filters(self):
        return {"host_kind": _host_kind}
