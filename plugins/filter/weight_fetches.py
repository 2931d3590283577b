# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
name: weight_fetches
short_description: The model directories one GPU node fetches into its store, and from where
version_added: 0.2.0
description:
  - Combines a GPU node's C(model_registry_sources) (C(url) and C(hub) entries), its C(model_registry_seed_models)
    and the Hub snapshots the controller took into one list of fetches for M(aiinfra.k3s.model_weights), leaving out
    the directories only models placed on other nodes serve.
  - A C(url) source is fetched from its mirror by the node; a C(hub) source and a seed directory from the
    controller's M(aiinfra.k3s.model_mirror).
  - A seed directory's file list comes from its C(SHA256SUMS) with each file's size, read here on the controller, so
    a node can tell that it holds the model without the mirror.
options:
  _input:
    description: The node's C(model_registry_sources).
    type: list
    elements: dict
    required: true
  seeds:
    description: The node's C(model_registry_seed_models).
    type: list
    elements: str
    required: true
  seed_dir:
    description: C(model_registry_seed_dir) on the controller.
    type: str
    required: true
  snapshots:
    description: Model path to the result of M(aiinfra.k3s.hub_snapshot) for it (C(dest), C(files)).
    type: dict
    required: true
  elsewhere:
    description: Model paths only models placed on other nodes serve.
    type: list
    elements: str
    default: []
"""

EXAMPLES = r"""
- name: Work out what this node fetches
  ansible.builtin.set_fact:
    fetches: "{{ model_registry_sources | aiinfra.k3s.weight_fetches(model_registry_seed_models, model_registry_seed_dir, {}) }}"
"""

RETURN = r"""
_value:
  description: One entry per model directory, C(path), C(mirror), C(url), C(dir), C(files), C(source) and
    C(revision) (a source's C(headers) are left out, they may hold credentials).
  type: list
  elements: dict
"""


import os


def seed_files(seed_dir, path):
    """The file list of a seed directory on the controller (this filter runs there): its SHA256SUMS, read as
    model_weights reads it, with each file's size, so a node can tell without the controller's mirror that it holds
    the model. None when the list cannot be read whole (the node then reads SHA256SUMS through the mirror, which
    reports the problem)."""
    from ansible_collections.aiinfra.k3s.plugins.module_utils.node.model_weights import WeightsError, parse_sums

    directory = os.path.join(seed_dir, path)
    try:
        with open(os.path.join(directory, "SHA256SUMS"), encoding="utf-8") as handle:
            entries = parse_sums(handle.read(), "controller", "model_registry_seed_models")
        return [dict(e, size=os.stat(os.path.join(directory, e["path"])).st_size) for e in entries]
    except (OSError, UnicodeDecodeError, WeightsError):
        return None


def weight_fetches(sources, seeds, seed_dir, snapshots, elsewhere=()):
    from ansible_collections.aiinfra.k3s.plugins.module_utils.plan.models import weight_fetches as fetches

    seeds = list(seeds or [])
    listed = {p: seed_files(str(seed_dir), p) for p in seeds} if seed_dir else {}
    return fetches(
        list(sources or []), seeds, str(seed_dir or ""), dict(snapshots or {}), list(elsewhere or []), listed
    )


class FilterModule(object):
    def filters(self):
        return {"weight_fetches": weight_fetches}
