#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
module: k3s_ca_info
short_description: Read the hash of a K3s server's cluster CA, and the CA hash in its own token, in one run
version_added: 0.1.0
description:
  - Reads C(tls/server-ca.crt) under O(server_dir) and returns its sha256, the hash a joining node pins in its token
    (C(K10<hash>::...)) so that it refuses a server whose CA does not hash to it.
  - Reads K3s's own full token beside it and returns only the CA hash it carries, never its secret, so that a site
    whose CA K3s hashes another way (a custom CA) is found before nodes are given tokens they cannot join with.
  - Reads only. The parsing is in module_utils C(node/k3s_ca.py).
author:
  - aiinfra.k3s developers (@aiinfra)
options:
  server_dir:
    description: K3s's server data directory.
    type: path
    default: /var/lib/rancher/k3s/server
attributes:
  check_mode:
    support: full
    description: Reads only, in check mode as in a normal run.
  diff_mode:
    support: none
    description: Nothing changes, so there is nothing to show.
"""

EXAMPLES = r"""
- name: Read the cluster CA hash on the first server
  aiinfra.k3s.k3s_ca_info:
  delegate_to: "{{ groups['k3s_servers'][0] }}"
  run_once: true
  register: cluster_ca
"""

RETURN = r"""
ca_hash:
  description: sha256 hex digest of C(tls/server-ca.crt); empty while the server has not created its CA.
  returned: always
  type: str
  sample: 2f6cf9a1c1bd7e2a3e3ac1d79f1c6b5e0a4ad0b8d7e4cf2ac2fa5b8a0fcb8c3d
token_ca_hash:
  description: The CA hash in K3s's own full token (C(server/token)); empty when there is no CA, no token or no full
    token in it.
  returned: always
  type: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.aiinfra.k3s.plugins.module_utils.node.k3s_ca import read_ca


def main():
    module = AnsibleModule(
        argument_spec={"server_dir": {"type": "path", "default": "/var/lib/rancher/k3s/server"}},
        supports_check_mode=True,
    )
    module.exit_json(changed=False, **read_ca(module.params["server_dir"]))


if __name__ == "__main__":
    main()
