#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
module: api_objects_info
short_description: Read Kubernetes objects through the API in the controller's own process
version_added: 0.1.0
description:
  - Runs on the controller only (an action plugin); it touches no host. Returns the objects in
    M(kubernetes.core.k8s_info)'s keys (C(resources), C(api_found)), for the reads the collection makes on every run.
  - The read costs one discovery GET and one GET or paginated LIST over one HTTP connection, in the controller's
    process. M(kubernetes.core.k8s_info) starts a Python process and imports the kubernetes client for each task
    (about half a second on a small controller).
  - It speaks the kubeconfigs K3s writes and most others - client certificate (file or data), token or token file,
    CA file or data, C(insecure-skip-tls-verify), C(tls-server-name). The server's certificate must chain to the
    kubeconfig's CA alone when it names one (to the system's CAs when it names none), as the kubernetes client checks
    it. A kubeconfig whose user needs an exec or auth-provider plugin, basic auth or impersonation, whose cluster sets
    a C(proxy-url), or whose server the proxy environment variables send through a proxy, is read by
    M(kubernetes.core.k8s_info) instead, with the same options, on the controller (the task must run there);
    C(reader) says which one answered.
  - The kubeconfig is found and decrypted as M(kubernetes.core.k8s_info) finds it (the play's search path, Ansible
    Vault) and read on the controller.
  - Differences from M(kubernetes.core.k8s_info) - I(kind) is the exact Kind and I(api_version) the exact
    group/version (C(v1) is the core group only); a selector the API refuses fails the task (k8s_info returns no
    objects); a LIST is read in pages of 500.
  - The logic is in module_utils C(k8s/api_client.py) as plain functions.
author:
  - aiinfra.k3s developers (@aiinfra)
options:
  api_version:
    description: The group/version of I(kind), as in an object's C(apiVersion) (C(v1), C(apps/v1), ...).
    type: str
    default: v1
  kind:
    description: The kind to read (C(Node), C(Deployment), ...), resolved through the API's discovery.
    type: str
    required: true
  name:
    description: Read only the object of this name; C(resources) is empty when it does not exist.
    type: str
  namespace:
    description: The namespace of a namespaced kind; all namespaces when omitted. Ignored for cluster-scoped kinds.
    type: str
  label_selectors:
    description: Label selectors (C(key=value), C(key!=value), C(key in (a,b)), ...), all of which must match.
    type: list
    elements: str
    default: []
  field_selectors:
    description: Field selectors (C(spec.nodeName=gpu-1), ...), all of which must match.
    type: list
    elements: str
    default: []
extends_documentation_fragment:
  - aiinfra.k3s.api_connection
  - aiinfra.k3s.attributes.read_only
notes:
  - Items of a LIST carry C(apiVersion) and C(kind), as a single GET returns them.
seealso:
  - module: kubernetes.core.k8s_info
"""

EXAMPLES = r"""
- name: Read the nodes
  aiinfra.k3s.api_objects_info:
    kubeconfig: "{{ k3s_kubeconfig_dest }}"
    kind: Node
  register: nodes

- name: Read the Deployments this collection manages
  aiinfra.k3s.api_objects_info:
    kubeconfig: ~/.kube/site.yaml
    api_version: apps/v1
    kind: Deployment
    label_selectors: [app.kubernetes.io/managed-by=aiinfra.k3s]
  register: deployments
"""

RETURN = r"""
resources:
  description: The objects read, each as the API returns it, with C(apiVersion) and C(kind).
  returned: success
  type: list
  elements: dict
api_found:
  description: Whether the API serves I(kind) in I(api_version); C(resources) is empty when it does not.
  returned: success
  type: bool
reader:
  description: C(api_client) (this plugin's own reader) or C(kubernetes.core.k8s_info) (a kubeconfig it hands on).
  returned: always
  type: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.aiinfra.k3s.plugins.module_utils.k8s.api_client import ARGUMENT_SPEC


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    module.fail_json(
        msg="aiinfra.k3s.api_objects_info runs on the controller as an action plugin; it has no module side"
    )


if __name__ == "__main__":
    main()
