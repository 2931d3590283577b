# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The two file operations the node modules share: an atomic write, and setting mode, owner and group.

Both take the AnsibleModule, whose atomic_move and set_*_if_different keep SELinux contexts and report
changes the way Ansible's own file modules do."""

import os
import tempfile


def write_atomic(module, path, text):
    """Write text (UTF-8) to a temporary file beside path, then move it over path in one step."""
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".aiinfra-")
    with os.fdopen(fd, "wb") as handle:
        handle.write(text.encode("utf-8"))
    module.atomic_move(tmp, path)


def set_attributes(module, path, changed, mode=None, owner=None, group=None):
    """Set whichever of mode, owner and group is given on an existing path; returns changed, updated."""
    if mode:
        changed = module.set_mode_if_different(path, mode, changed, expand=False)
    if owner:
        changed = module.set_owner_if_different(path, owner, changed, expand=False)
    if group:
        changed = module.set_group_if_different(path, group, changed, expand=False)
    return changed
