# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
name: k3s_release_problems
short_description: What stops the K3s release from being fetched and verified safely
version_added: 0.1.0
description:
  - Problems as data (C(code), C(severity), C(host), C(variable), C(problem), C(fix)) of the K3s release settings
    once the nodes' architectures are known. An http O(release_url) (INSECURE_URL), a pin that cannot work
    (K3S_PIN) and, online, a binary or image tarball that neither the collection nor O(pins) pins (K3S_UNPINNED; a
    warning with O(allow_unpinned)).
options:
  _input:
    description: The K3s version (C(k3s_version)).
    type: str
    required: true
  install_mode:
    description: C(online) or C(airgap).
    type: str
    required: true
  release_url:
    description: C(k3s_release_url).
    type: str
    required: true
  pins:
    description: C(k3s_sha256_pins).
    type: dict
    default: {}
  arches:
    description: K3s architectures of the nodes (C(amd64), C(arm64)).
    type: list
    elements: str
    default: []
  online_images:
    description: C(k3s_online_images).
    type: bool
    default: false
  allow_unpinned:
    description: C(k3s_allow_unpinned).
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: Refuse an unsafe download
  ansible.builtin.assert:
    that: problems | selectattr('severity', '==', 'error') | list | length == 0
    fail_msg: "{{ problems | map('aiinfra.k3s.problem_line') }}"
  vars:
    problems: >-
      {{ k3s_version | aiinfra.k3s.k3s_release_problems(k3s_install_mode, k3s_release_url, k3s_sha256_pins,
         ['amd64']) }}
"""

RETURN = r"""
_value:
  description: Problems as dicts; empty when the release can be fetched and verified.
  type: list
  elements: dict
"""


def k3s_release_problems(
    version, install_mode, release_url, pins=None, arches=None, online_images=False, allow_unpinned=False
):
    from ansible_collections.aiinfra.k3s.plugins.module_utils.plan import supply_chain

    out = supply_chain.url_problems("k3s_release_url", release_url) if install_mode == "online" else []
    return out + supply_chain.k3s_pin_problems(
        version, install_mode, pins or {}, list(arches or []), online_images, allow_unpinned
    )


class FilterModule(object):
    def filters(self):
        return {"k3s_release_problems": k3s_release_problems}
