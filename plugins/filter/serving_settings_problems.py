# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
name: serving_settings_problems
short_description: Settings of the GPU Operator or of the LiteLLM gateway that cannot work
version_added: 0.1.0
description:
  - C(gpu_operator) checks the MIG strategy, the time-slicing classes, the default class, the hosts' classes
    and the airgap chart archive name.
  - C(litellm) refuses an unknown placement, fewer than 2 replicas and a gateway with no model to route to.
  - C(litellm_key) refuses a missing or weak master key, never quoting it.
  - C(autoscaling) checks the engine and the gateway's replica bounds.
  - C(chart) checks a role's chart install mode and, in airgap mode, its archive name and sha256
    (O(_input) holds prefix, install_mode, chart_file, chart_sha256).
  - C(grafana_password) refuses a missing or short Grafana admin password (O(extra)), never quoting it.
  - C(edge) checks the Traefik host, path prefix and rate limit and, with O(extra) set to cert-manager's
    settings, the issuer kind and the ACME contact.
options:
  _input:
    description: The component's settings (see its role defaults, without the role prefix).
    type: dict
    required: true
  component:
    description: C(gpu_operator), C(litellm), C(litellm_key), C(grafana_password), C(edge), C(autoscaling) or C(chart).
    type: str
    required: true
  extra:
    description: >-
      C(gpu_operator) the GPU hosts' classes (host to class); C(litellm_key) the master key; C(edge)
      cert-manager's settings (or null when cert-manager is off).
    type: raw
"""

EXAMPLES = r"""
- name: Refuse a weak gateway key
  ansible.builtin.assert:
    that: problems | length == 0
    fail_msg: "{{ problems }}"
  vars:
    problems: "{{ {} | aiinfra.k3s.serving_settings_problems('litellm_key', litellm_master_key) }}"
  no_log: true
"""

RETURN = r"""
_value:
  description: One line per problem; empty when the settings can work.
  type: list
  elements: str
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.aiinfra.k3s.plugins.module_utils import autoscaling, edge, gateway, gpu_operator, serving


def litellm_problems(params):
    problems = []
    if params.get("placement") not in gateway.PLACEMENTS:
        problems.append("litellm_placement is %r: use cpu (off GPU nodes), gpu or any" % (params.get("placement"),))
    if int(params.get("replicas", 0)) < 2:
        problems.append(
            "litellm_replicas is %s: the gateway needs at least 2 to survive a pod loss" % params.get("replicas")
        )
    if params.get("models") == 0:
        problems.append("the gateway has no model to route to: add vllm_models or nim_models, or disable litellm")
    return problems


def serving_settings_problems(params, component, extra=None):
    params = dict(params)
    if component == "gpu_operator":
        return gpu_operator.operator_problems(params, dict(extra or {}))
    if component == "litellm":
        return litellm_problems(params)
    if component == "litellm_key":
        return gateway.master_key_problems(extra or "")
    if component == "grafana_password":
        password = extra or ""
        if len(password) < 16:
            return [
                "monitoring_grafana_admin_password is %s: put 16 or more random characters in a vault-encrypted "
                "group_vars file (e.g. openssl rand -base64 24)" % ("not set" if not password else "too short")
            ]
        return []
    if component == "chart":
        return serving.chart_problems(
            params["prefix"], params["install_mode"], params["chart_file"], params.get("chart_sha256")
        )
    if component == "autoscaling":
        return autoscaling.autoscaling_problems(params)
    if component == "edge":
        return edge.edge_problems(params, dict(extra) if extra else None)
    raise AnsibleFilterError(
        "unknown component %r: use gpu_operator, litellm, litellm_key, grafana_password, edge, autoscaling or chart"
        % component
    )


class FilterModule(object):
    def filters(self):
        return {"serving_settings_problems": serving_settings_problems}
