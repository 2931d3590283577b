#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
module: api_objects
short_description: Server-side apply of Kubernetes objects through the API in the controller's own process
version_added: 0.1.0
description:
  - Runs on the controller only (an action plugin); it touches no host. Applies each object of O(definition), in
    order, with server-side apply (C(PATCH) with C(application/apply-patch+yaml), the field manager O(field_manager)),
    as M(kubernetes.core.k8s) does with C(apply=true) and C(server_side_apply).
  - One discovery GET per kind, one GET and one PATCH per object, over one HTTP connection, in the controller's
    process. M(kubernetes.core.k8s) starts a Python process and imports the kubernetes client for each task (about
    three quarters of a second on a small controller).
  - An object changed when it is new or its C(resourceVersion) moved (an apply that changes nothing keeps it). In check
    mode the API applies with C(dryRun=All) and nothing is stored; an object would change when the answer differs from
    the object as it is, less what only a write changes (C(resourceVersion), C(managedFields), C(generation)).
  - The kubeconfig is read as M(aiinfra.k3s.api_objects_info) reads it (client certificate or token, the kubeconfig's
    CA alone, the play's search path, Ansible Vault). A kubeconfig that needs the kubernetes client (an exec or
    auth-provider plugin, basic auth, impersonation, a proxy) is applied by M(kubernetes.core.k8s) with the same
    objects, on the controller (the task must run there); C(reader) says which one answered.
  - The logic is in module_utils C(k8s/api_client.py) as plain functions.
author:
  - aiinfra.k3s developers (@aiinfra)
options:
  definition:
    description:
      - The objects to apply, each with C(apiVersion), C(kind) and C(metadata.name); a namespaced kind without
        C(metadata.namespace) goes to C(default).
      - A kind the API does not serve (a CRD not installed yet) fails the task.
    type: list
    elements: dict
    required: true
  field_manager:
    description: The field manager the API records as the owner of the fields applied.
    type: str
    required: true
  force_conflicts:
    description: Take over fields another field manager owns, as C(kubectl apply --server-side --force-conflicts).
    type: bool
    default: true
extends_documentation_fragment:
  - aiinfra.k3s.api_connection
attributes:
  check_mode:
    support: full
    description: The API applies with C(dryRun=All); nothing is stored, and C(changed) says what would change.
  diff_mode:
    support: full
    description: Each changed object before and after, without C(managedFields); a Secret's values are hidden.
notes:
  - Objects are applied one by one; a failure stops at the object it names, and those before it stay applied.
seealso:
  - module: kubernetes.core.k8s
  - module: aiinfra.k3s.api_objects_info
"""

EXAMPLES = r"""
- name: Create the serving namespace and its Secret
  aiinfra.k3s.api_objects:
    kubeconfig: ~/.kube/site.yaml
    field_manager: aiinfra-k3s
    definition:
      - {apiVersion: v1, kind: Namespace, metadata: {name: ai-serving}}
      - apiVersion: v1
        kind: Secret
        metadata: {name: gateway-master-key, namespace: ai-serving}
        stringData: {master-key: "{{ gateway_master_key }}"}
  no_log: true
"""

RETURN = r"""
objects:
  description: Each object as the API answered the apply (with C(dryRun=All) in check mode), in the order given.
  returned: success
  type: list
  elements: dict
reader:
  description: C(api_client) (this plugin's own client) or C(kubernetes.core.k8s) (a kubeconfig it hands on).
  returned: always
  type: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.aiinfra.k3s.plugins.module_utils.k8s.api_client import APPLY_ARGUMENT_SPEC


def main():
    module = AnsibleModule(argument_spec=APPLY_ARGUMENT_SPEC, supports_check_mode=True)
    module.fail_json(msg="aiinfra.k3s.api_objects runs on the controller as an action plugin; it has no module side")


if __name__ == "__main__":
    main()
