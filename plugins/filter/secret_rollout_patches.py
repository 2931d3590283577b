# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
name: secret_rollout_patches
short_description: Patches that roll the workloads whose Secrets were just applied
version_added: 0.1.0
description:
  - Takes built manifests and the metadata of the Secrets just applied through the API, and returns a merge patch
    for each workload whose pods read one of them at start (environment references, Secret volumes that are not
    optional), giving its pod template the Secrets' resourceVersions (annotation C(aiinfra.io/secret-versions)).
  - The pods roll when a Secret's content changed (a new resourceVersion) and only then; nothing derived from the
    Secrets' content is written.
options:
  _input:
    description: Manifests (the workloads among them are considered).
    type: list
    elements: dict
    required: true
  applied:
    description: Metadata (C(name), C(namespace), C(resourceVersion)) of the Secrets as the API returned them.
    type: list
    elements: dict
    required: true
  current:
    description:
      - The workloads as the API returns them now. When given, only the patches that would change one of them are
        returned (a workload that does not exist yet, or already carries the annotation, gets none).
    type: list
    elements: dict
    version_added: 0.2.0
"""

EXAMPLES = r"""
- name: Roll the gateway when its Secrets changed
  kubernetes.core.k8s:
    state: patched
    definition: "{{ item }}"
  loop: "{{ litellm_output_objects | aiinfra.k3s.secret_rollout_patches(__applied_secret_metadata) }}"
"""

RETURN = r"""
_value:
  description: Merge patches (apiVersion, kind, metadata name and namespace, the pod template's annotation).
  type: list
  elements: dict
"""


def secret_rollout_patches(objects, applied, current=None):
    from ansible_collections.aiinfra.k3s.plugins.module_utils.k8s import gateway
    from ansible_collections.aiinfra.k3s.plugins.module_utils.k8s.rollout import effective_patches

    patches = gateway.rollout_patches(list(objects or []), [dict(m) for m in applied or []])
    return patches if current is None else effective_patches(patches, list(current))


class FilterModule(object):
    def filters(self):
        return {"secret_rollout_patches": secret_rollout_patches}
