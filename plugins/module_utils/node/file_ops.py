# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The two file operations the node modules share: an atomic write, and setting mode, owner and group.

Both take the AnsibleModule, whose atomic_move and set_*_if_different keep SELinux contexts and report
changes the way Ansible's own file modules do."""

import os
import tempfile


def octal_mode(mode):
    """0o600 from "0600" or 0o600; None for no mode or a symbolic one (u=rw), which set_attributes applies later."""
    if mode is None or isinstance(mode, int):
        return mode
    try:
        return int(str(mode), 8)
    except ValueError:
        return None


def write_atomic(module, path, text, mode=None):
    """Write text (UTF-8) to a temporary file beside path, then move it over path in one step.

    With mode (an int such as 0o600, or a string such as "0600"), the content is never readable under a looser
    mode, not even for an instant: atomic_move gives a new file the umask's default mode (0644 under umask 022)
    and a replaced file the mode of the file it replaces, so the target is first created empty (O_EXCL) or
    tightened to mode, and the move then keeps that mode."""
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".aiinfra-")  # 0600
    with os.fdopen(fd, "wb") as handle:
        handle.write(text.encode("utf-8"))
    mode = octal_mode(mode)
    if mode is not None:
        if os.path.islink(path):
            os.unlink(path)
        if os.path.exists(path):
            if os.stat(path).st_mode & 0o7777 & ~mode:
                os.chmod(path, os.stat(path).st_mode & 0o7777 & mode)
        else:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600 & mode))
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
