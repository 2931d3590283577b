# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
name: rollout_pending
short_description: The written workloads that are not rolled out yet, from one list of the API's workloads
version_added: 0.2.0
description:
  - Takes the built manifests and the workloads the API returned for one LIST, and names each Deployment (or
    each workload of O(kinds)) of the manifests that is missing there or not rolled out yet (a replica not updated
    to the current revision, not available, or an old one left). An empty list means every one is rolled out.
options:
  _input:
    description: Manifests (the workloads of O(kinds) among them are considered).
    type: list
    elements: dict
    required: true
  found:
    description: The workloads as the API returned them.
    type: list
    elements: dict
    required: true
  kinds:
    description: Kinds to consider.
    type: list
    elements: str
    default: [Deployment]
  missing_only:
    description: Name only the workloads the API does not hold yet (whether they are rolled out is not looked at).
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: Wait for the Deployments
  kubernetes.core.k8s_info:
    kind: Deployment
    label_selectors: [app.kubernetes.io/managed-by=aiinfra.k3s]
  register: deployments
  until: deployments.resources is defined and manifests_objects | aiinfra.k3s.rollout_pending(deployments.resources) | length == 0
  retries: 60
  delay: 5
"""

RETURN = r"""
_value:
  description: C(kind namespace/name) and the reason, for each workload not rolled out yet.
  type: list
  elements: str
"""


def rollout_pending(objects, found, kinds=("Deployment",), missing_only=False):
    from ansible_collections.aiinfra.k3s.plugins.module_utils.k8s.rollout import pending

    return pending(list(objects or []), list(found or []), tuple(kinds), bool(missing_only))


class FilterModule(object):
    def filters(self):
        return {"rollout_pending": rollout_pending}
