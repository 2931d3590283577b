# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
name: weight_fetch_records
short_description: What a GPU node's model_weights runs put into its store, for the stage report
version_added: 0.2.0
description:
  - Keeps, of a registered loop of M(aiinfra.k3s.model_weights), the models that were fetched (not those found
    current, not the failed ones), each with the node, the model path, its source, the node that handed it on (if
    any), the bytes fetched and the seconds it took.
options:
  _input:
    description: The C(results) of the registered loop; each has its loop C(item), a fetch entry.
    type: list
    elements: dict
    required: true
  host:
    description: The GPU node.
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Record what this node fetched
  ansible.builtin.set_fact:
    model_registry_output_fetched: "{{ fetched.results | aiinfra.k3s.weight_fetch_records(inventory_hostname) }}"
"""

RETURN = r"""
_value:
  description: One C(host), C(path), C(source), C(peer), C(bytes), C(total), C(resumed), C(seconds) per model fetched.
  type: list
  elements: dict
"""


def weight_fetch_records(results, host):
    from ansible_collections.aiinfra.k3s.plugins.module_utils.plan.stage_report import weight_records

    return weight_records(list(results or []), str(host))


class FilterModule(object):
    def filters(self):
        return {"weight_fetch_records": weight_fetch_records}
