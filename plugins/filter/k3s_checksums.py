# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
name: k3s_checksums
short_description: Parse a sha256sum file of a K3s release into a file name to digest mapping
version_added: 0.1.0
description:
  - Parse a sha256sum file of a K3s release into a file name to digest mapping.
options:
  _input:
    description: Text of a C(sha256sum-<arch>.txt) file.
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Digest of the amd64 binary
  ansible.builtin.debug:
    msg: "{{ (lookup('ansible.builtin.file', 'sha256sum-amd64.txt') | aiinfra.k3s.k3s_checksums)['k3s'] }}"
"""

RETURN = r"""
_value:
  description: File name to lower-case sha256 hex digest.
  type: dict
"""

from ansible.errors import AnsibleFilterError


def k3s_checksums(text):
    from ansible_collections.aiinfra.k3s.plugins.module_utils.node.k3s_release import ArtifactError, parse_sha256sum

    try:
        return parse_sha256sum(text)
    except ArtifactError as exc:
        raise AnsibleFilterError(str(exc)) from exc


class FilterModule(object):
    def filters(self):
        return {"k3s_checksums": k3s_checksums}
