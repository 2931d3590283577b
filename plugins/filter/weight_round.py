# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
name: weight_round
short_description: The next round of handing the controller's models to the GPU nodes, node to node
version_added: 0.2.0
description:
  - The controller hands each of its models (Hub snapshots, seed directories) to one GPU node that the others can
    reach; from then on the nodes that hold it verified hand it on, each to one other node per round, so the
    controller's link carries each model once and more nodes add rounds instead of load on one link.
  - Without peers (C(model_registry_peers) false), or where no node needing a model can be reached by the others,
    every node takes it from the controller at once.
  - Nodes that hold a model already (a node added to a running site) hand it to the new ones; the controller is then
    not needed for it.
options:
  _input:
    description: The GPU hosts still in the play, in play order.
    type: list
    elements: str
    required: true
  pending:
    description: Host to the fetches it still needs from the controller or a peer (entries of
      P(aiinfra.k3s.weight_fetches#filter) with C(mirror) true).
    type: dict
    required: true
  held:
    description: Host to the model paths it holds verified.
    type: dict
    required: true
  distribution:
    description: The site plan's C(weights) (C(peers), C(port), C(addresses)).
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Work out this round
  ansible.builtin.set_fact:
    round: "{{ ansible_play_hosts | aiinfra.k3s.weight_round(pending, held, site_plan_current.weights) }}"
  run_once: true
"""

RETURN = r"""
_value:
  description: C(fetches), host to its fetch entries for this round, each with C(peer) (the host serving it, none for
    the controller) and C(url) (the peer's URL of the model); C(servers), host to the model paths it serves this
    round. Empty C(fetches) when nothing is pending.
  type: dict
"""


def weight_round(hosts, pending, held, distribution):
    from ansible_collections.aiinfra.k3s.plugins.module_utils.plan.models import weight_round as next_round

    return next_round(list(hosts or []), dict(pending or {}), dict(held or {}), dict(distribution or {}))


class FilterModule(object):
    def filters(self):
        return {"weight_round": weight_round}
