# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
name: traefik_manifests
short_description: Build the gateway's Traefik routes
version_added: 0.1.0
description:
  - Takes the traefik role's settings and returns the Middlewares (HSTS, rate limit, prefix strip, HTTPS
    redirect), the HTTPS IngressRoute matching the public paths only with its TLSOption, the HTTP one that only
    redirects the host's root, and the HelmChartConfig of K3s's bundled Traefik.
options:
  _input:
    description: The traefik role's settings.
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Build the gateway's Traefik routes
  ansible.builtin.set_fact:
    __objects: "{{ __traefik_params | aiinfra.k3s.traefik_manifests }}"
"""

RETURN = r"""
_value:
  description: Kubernetes objects as mappings.
  type: list
  elements: dict
"""


def traefik_manifests(params):
    from ansible_collections.aiinfra.k3s.plugins.module_utils.k8s import edge
    from ansible_collections.aiinfra.k3s.plugins.plugin_utils.manifests import build

    return build("traefik_manifests", lambda: edge.traefik_manifests(dict(params)))


class FilterModule(object):
    def filters(self):
        return {"traefik_manifests": traefik_manifests}
