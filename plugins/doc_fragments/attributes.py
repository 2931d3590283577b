# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)


class ModuleDocFragment(object):
    # Modules that only read state: full check mode, nothing to diff.
    READ_ONLY = r"""
attributes:
  check_mode:
    support: full
    description: Read-only; runs the same in check mode and reports C(changed=false).
  diff_mode:
    support: none
    description: Changes nothing, so there is nothing to diff.
"""
