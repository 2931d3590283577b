# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
name: weights_stage_detail
short_description: The stage report's line on the model weights a run fetched
version_added: 0.2.0
description:
  - Per model, the GPU nodes it went to, from where (its source, or the node that handed it on), how many bytes and
    how long; or that every store already held its models.
options:
  _input:
    description: Every GPU node's C(model_registry_output_fetched)
      (P(aiinfra.k3s.weight_fetch_records#filter)), flattened.
    type: list
    elements: dict
    required: true
"""

EXAMPLES = r"""
- name: Record the weights stage
  aiinfra.k3s.stage_report:
    stage: weights
    status: ran
    detail: "{{ records | aiinfra.k3s.weights_stage_detail }}"
"""

RETURN = r"""
_value:
  description: One line.
  type: str
"""


def weights_stage_detail(records):
    from ansible_collections.aiinfra.k3s.plugins.module_utils.plan.stage_report import weights_detail

    return weights_detail(list(records or []))


class FilterModule(object):
    def filters(self):
        return {"weights_stage_detail": weights_stage_detail}
