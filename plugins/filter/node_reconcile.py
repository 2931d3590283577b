# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
name: node_reconcile
short_description: What reconciling a registered node's labels and taints takes
version_added: 0.2.0
description:
  - Compares a Node object read from the API with the labels and taints the inventory sets, and with the two
    annotations in which the collection records the names it set, and returns what to patch, add and remove.
  - A node whose labels, annotations and taints are already right gets C(patch=false), C(add_taints=false) and no
    C(remove_taints), so a re-run writes nothing to the API.
options:
  _input:
    description: The Node object (as M(kubernetes.core.k8s_info) returns it).
    type: dict
    required: true
  labels:
    description: Label name to value the node must carry.
    type: dict
    required: true
  taints:
    description: C(key[=value]:Effect) taints the node must carry.
    type: list
    elements: str
    required: true
  labels_annotation:
    description: Annotation that records the names of the labels the collection set.
    type: str
    required: true
  taints_annotation:
    description: Annotation that records the taints the collection set.
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Work out each node's labels and taints
  ansible.builtin.set_fact:
    reconcile: "{{ nodes.resources | map('aiinfra.k3s.node_reconcile', {}, [], 'a/labels', 'a/taints') | list }}"
"""

RETURN = r"""
_value:
  description: C(name), C(labels) (dropped ones set to null), C(annotations), C(patch), C(taints) (API objects),
    C(add_taints), C(remove_taints) (API objects of dropped taints still on the node).
  type: dict
"""

from ansible.errors import AnsibleFilterError


def node_reconcile(node, labels, taints, labels_annotation, taints_annotation):
    from ansible_collections.aiinfra.k3s.plugins.module_utils.k8s.node_reconcile import reconcile

    try:
        return reconcile(node, labels, taints, labels_annotation, taints_annotation)
    except ValueError as exc:
        raise AnsibleFilterError(str(exc)) from exc


class FilterModule(object):
    def filters(self):
        return {"node_reconcile": node_reconcile}
