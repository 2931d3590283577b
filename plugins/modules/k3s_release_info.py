#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
module: k3s_release_info
short_description: Verify K3s release artifacts in a directory against their checksum files
version_added: 0.1.0
description:
  - Reads C(sha256sum-<arch>.txt) in O(path) and checks the K3s binary (C(k3s) for amd64, C(k3s-<arch>)
    otherwise) and, when present, the airgap image tarball of every architecture in O(architectures).
  - Fails, naming the file, when an artifact is missing, not listed in the checksum file, or does not match
    its digest, so that nothing unverified is ever installed.
  - Read-only; runs where the artifacts are (normally the controller, with C(delegate_to=localhost)). On the
    controller's own connection without become, an action plugin verifies in the controller's process, sparing a
    module process; elsewhere the module runs.
author:
  - aiinfra.k3s developers (@aiinfra)
options:
  path:
    description: Directory holding the release artifacts and checksum files.
    type: path
    required: true
  architectures:
    description: K3s architectures to verify (C(amd64), C(arm64)); machine names such as C(x86_64) are accepted.
    type: list
    elements: str
    default: [amd64]
  require_images:
    description: Fail when an architecture has no airgap image tarball (airgap installs need it).
    type: bool
    default: false
  pins:
    description: Artifact name to sha256 pinned by the operator; must agree with the checksum file.
    type: dict
    default: {}
  record:
    description:
      - A record file (JSON, mode 0600) of the artifacts already hashed, as M(aiinfra.k3s.verified_files) keeps it.
        An artifact whose size, mtime, ctime and inode still equal its entry for the sha256 the checksum file lists
        is not read again; one hashed by this run is entered. Unset, every artifact is hashed on each run.
      - The checksum files are always read, and pinned ones hashed.
    type: path
    version_added: 0.2.0
extends_documentation_fragment:
  - aiinfra.k3s.attributes.read_only
"""

EXAMPLES = r"""
- name: Verify an airgap bundle on the controller
  aiinfra.k3s.k3s_release_info:
    path: /srv/k3s/v1.33.5+k3s1
    architectures: [amd64, arm64]
    require_images: true
  delegate_to: localhost
  run_once: true
  register: k3s_release
"""

RETURN = r"""
artifacts:
  description: Verified artifacts per architecture.
  returned: success
  type: dict
  sample:
    amd64:
      checksum_file: /srv/k3s/sha256sum-amd64.txt
      binary: {path: /srv/k3s/k3s, sha256: "0f1e...", size: 71000000}
      images: {path: /srv/k3s/k3s-airgap-images-amd64.tar.zst, name: k3s-airgap-images-amd64.tar.zst,
               sha256: "9a8b...", size: 150000000}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.aiinfra.k3s.plugins.module_utils.node.k3s_release import (
    RELEASE_INFO_SPEC,
    ArtifactError,
    release_info,
)


def main():
    module = AnsibleModule(argument_spec=RELEASE_INFO_SPEC, supports_check_mode=True)
    try:
        artifacts, warning = release_info(module.params, module.check_mode)
    except (ArtifactError, OSError) as exc:
        module.fail_json(msg="K3s artifacts in %s cannot be used: %s" % (module.params["path"], exc))
    if warning:
        module.warn(warning)
    module.exit_json(changed=False, artifacts=artifacts)


if __name__ == "__main__":
    main()
