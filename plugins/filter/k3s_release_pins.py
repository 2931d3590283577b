# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
name: k3s_release_pins
short_description: The sha256 pins of a K3s release's files that apply to an install
version_added: 0.1.0
description:
  - The sha256 the collection ships for the files of O(_input) (module_utils C(k3s_release.py) C(RELEASE_SHA256),
    used when O(shipped) is true, i.e. online installs), then the operator's O(pins), lower-cased.
options:
  _input:
    description: The K3s version (C(k3s_version)).
    type: str
    required: true
  pins:
    description: C(k3s_sha256_pins).
    type: dict
    default: {}
  shipped:
    description: Include the shipped table.
    type: bool
    default: true
"""

EXAMPLES = r"""
- name: Pins of an online install
  ansible.builtin.debug:
    msg: "{{ k3s_version | aiinfra.k3s.k3s_release_pins(k3s_sha256_pins) }}"
"""

RETURN = r"""
_value:
  description: Release file name to sha256.
  type: dict
"""


def k3s_release_pins(version, pins=None, shipped=True):
    from ansible_collections.aiinfra.k3s.plugins.module_utils.node.k3s_release import release_pins

    return release_pins(version, pins or {}, bool(shipped))


class FilterModule(object):
    def filters(self):
        return {"k3s_release_pins": k3s_release_pins}
