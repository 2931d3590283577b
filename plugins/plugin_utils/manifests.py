# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the manifest filters share: a builder's missing or malformed setting becomes one filter error."""

from ansible.errors import AnsibleFilterError


def build(what, builder):
    try:
        return builder()
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise AnsibleFilterError("cannot build %s: missing or bad setting %s" % (what, exc)) from exc
