# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
name: drill_availability
short_description: Availability of the gateway per drill phase
version_added: 0.1.0
description:
  - From the records of P(aiinfra.k3s.drill_load#module) and the phase start times, per phase the number of
    requests, how many were answered, availability in percent, p95 latency of answered requests and the longest
    outage (first failed request of a run of failures to the next answered one).
options:
  _input:
    description: The records (the JSON list drill_load wrote).
    type: list
    elements: dict
    required: true
  phases:
    description: "[{name, start}] in time order (start: epoch seconds); a phase lasts until the next starts."
    type: list
    elements: dict
    required: true
"""

EXAMPLES = r"""
- name: Availability per phase
  ansible.builtin.set_fact:
    report: "{{ lookup('ansible.builtin.file', '/tmp/drill-records.json') | from_json | aiinfra.k3s.drill_availability(phases) }}"
"""

RETURN = r"""
_value:
  description:
    - One entry per phase (phase, requests, answered, availability, p50_latency_s, p95_latency_s, p99_latency_s,
      longest_outage_s).
  type: list
  elements: dict
"""


def drill_availability(records, phases):
    from ansible_collections.aiinfra.k3s.plugins.module_utils.drill.report import availability

    phases = [{"name": p["name"], "start": float(p["start"])} for p in phases]
    return availability([dict(r) for r in records], sorted(phases, key=lambda p: p["start"]))


class FilterModule(object):
    def filters(self):
        return {"drill_availability": drill_availability}
