# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
name: kubeconfig_for_site
short_description: Point the admin kubeconfig written by K3s at the API endpoint and name it after the site
version_added: 0.1.0
description:
  - Point the admin kubeconfig written by K3s at the API endpoint and name it after the site.
options:
  _input:
    description: Text of C(/etc/rancher/k3s/k3s.yaml).
    type: str
    required: true
  server:
    description: API URL the controller should use, e.g. C(https://10.0.0.1:6443).
    type: str
    required: true
  name:
    description: Cluster, user and context name (the site name).
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Site kubeconfig
  ansible.builtin.copy:
    content: "{{ k3s_yaml | aiinfra.k3s.kubeconfig_for_site('https://10.0.0.1:6443', 'gamorcloud') }}"
    dest: ~/.kube/aiinfra-gamorcloud.yaml
    mode: "0600"
"""

RETURN = r"""
_value:
  description: The kubeconfig as YAML text.
  type: str
"""

from ansible.errors import AnsibleFilterError


def kubeconfig_for_site(text, server, name):
    from ansible_collections.aiinfra.k3s.plugins.plugin_utils.kubeconfig import site_kubeconfig

    try:
        # Plain str: Ansible's tagged strings (ansible-core >= 2.19) cannot be represented by yaml.safe_dump.
        return site_kubeconfig(str(text), str(server), str(name))
    except ValueError as exc:
        raise AnsibleFilterError(str(exc)) from exc


class FilterModule(object):
    def filters(self):
        return {"kubeconfig_for_site": kubeconfig_for_site}
