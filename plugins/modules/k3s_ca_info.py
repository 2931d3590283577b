#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
module: k3s_ca_info
short_description: Read the hash of a K3s server's cluster CA, the CA hash in its own token, and its admin kubeconfig
version_added: 0.1.0
description:
  - Reads C(tls/server-ca.crt) under O(server_dir) and returns its sha256, the hash a joining node pins in its token
    (C(K10<hash>::...)) so that it refuses a server whose CA does not hash to it.
  - Reads K3s's own full token beside it and returns only the CA hash it carries, never its secret, so that a site
    whose CA K3s hashes another way (a custom CA) is found before nodes are given tokens they cannot join with.
  - With O(kubeconfig), also returns that file (the admin kubeconfig K3s writes), so that the first server's play reads
    the CA and the credentials it hands to the controller in one run. That text is a secret; set C(no_log) on the task.
  - Reads only. The parsing is in module_utils C(node/k3s_ca.py).
author:
  - aiinfra.k3s developers (@aiinfra)
options:
  server_dir:
    description: K3s's server data directory.
    type: path
    default: /var/lib/rancher/k3s/server
  kubeconfig:
    description:
      - A kubeconfig to read and return as RV(kubeconfig), such as K3s's C(/etc/rancher/k3s/k3s.yaml). Not read when
        omitted.
    type: path
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

- name: Read the CA hash and the admin kubeconfig on the first server
  aiinfra.k3s.k3s_ca_info:
    kubeconfig: /etc/rancher/k3s/k3s.yaml
  no_log: true
  register: first_server
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
kubeconfig:
  description: The content of O(kubeconfig), base64-encoded (as M(ansible.builtin.slurp) returns it); empty when it
    cannot be read or is empty. A secret.
  returned: when O(kubeconfig) is given
  type: str
kubeconfig_error:
  description: Why RV(kubeconfig) is empty (the file cannot be read, or is empty); empty when it was read.
  returned: when O(kubeconfig) is given
  type: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.aiinfra.k3s.plugins.module_utils.node.k3s_ca import read_ca, read_kubeconfig


def main():
    module = AnsibleModule(
        argument_spec={
            "server_dir": {"type": "path", "default": "/var/lib/rancher/k3s/server"},
            "kubeconfig": {"type": "path"},
        },
        supports_check_mode=True,
    )
    result = read_ca(module.params["server_dir"])
    if module.params["kubeconfig"]:
        result.update(read_kubeconfig(module.params["kubeconfig"]))
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
