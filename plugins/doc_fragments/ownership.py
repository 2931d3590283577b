# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)


class ModuleDocFragment(object):
    # Modules that write files and set their owner and group (module_utils file_ops.set_attributes).
    DOCUMENTATION = r"""
options:
  owner:
    description: Owner of every path the module writes; unchanged when not given.
    type: str
  group:
    description: Group of every path the module writes; unchanged when not given.
    type: str
"""
