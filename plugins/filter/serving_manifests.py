# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
name: serving_manifests
short_description: Build the Kubernetes manifests of a serving component
version_added: 0.1.0
description:
  - C(model_registry) takes the GPU node names and returns the StorageClass, one local PersistentVolume per
    node pinned to it, and the claim.
  - C(vllm) takes the model list and returns a Deployment and a Service per model, built by the shared GPU
    workload builder (GPU limits equal to the tensor-parallel size, GPU toleration and node selector, probes
    sized for slow model loads, graceful shutdown, read-only model store, memory-backed /dev/shm, JSON logs).
  - C(nim) takes the NIM model list and returns, per model, a Deployment and a Service from the same builder,
    a PodDisruptionBudget and a HorizontalPodAutoscaler.
  - C(ngc_secrets) takes the NGC API key and returns the nvcr.io pull Secret, and the key Secret when C(download).
  - C(gpu_operator) ignores its input and returns the namespace, the time-slicing ConfigMap and the K3s
    HelmChart of the NVIDIA GPU Operator.
  - C(litellm) takes the rendered model-server objects and returns the gateway routing to exactly their
    Services; C(litellm_secret) takes the master key and returns its Secret.
  - C(traefik) returns the gateway's Middlewares (rate limit, prefix strip, HTTPS redirect), its HTTPS and HTTP
    IngressRoutes and the HelmChartConfig of K3s's bundled Traefik; C(cert_manager) returns cert-manager's
    namespace and HelmChart, the ClusterIssuer(s) and the Certificates.
  - C(network_policies) returns the serving namespace's NetworkPolicies (default deny, then ingress controller to
    gateway, gateway to model servers, Prometheus scrapes, DNS, cert-manager's HTTP-01 solver).
  - C(monitoring) returns kube-prometheus-stack's namespace and HelmChart, the scrape targets, the PrometheusRule
    and the dashboard ConfigMaps; C(grafana_secret) takes Grafana's admin password and returns its Secret.
options:
  _input:
    description: >-
      GPU capacity per node (model_registry, as aiinfra.k3s.gpu_capacity returns it), a model list, rendered
      objects or a secret, depending on O(component).
    type: raw
    required: true
  component:
    description: >-
      One of C(model_registry), C(vllm), C(nim), C(ngc_secrets), C(gpu_operator), C(litellm), C(litellm_secret),
      C(traefik), C(cert_manager), C(network_policies), C(monitoring), C(grafana_secret).
    type: str
    required: true
  params:
    description: Settings of the component (see the roles' defaults).
    type: dict
    required: true
  site:
    description: Namespace, GPU node selector, GPU toleration key and runtime class (C(vllm) only).
    type: dict
    default: {}
"""

EXAMPLES = r"""
- name: vLLM manifests
  ansible.builtin.set_fact:
    manifests: "{{ vllm_models | aiinfra.k3s.serving_manifests('vllm', vllm_defaults, site) }}"
"""

RETURN = r"""
_value:
  description: Kubernetes objects.
  type: list
  elements: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.aiinfra.k3s.plugins.module_utils import (
    edge,
    gateway,
    gpu_operator,
    monitoring,
    netpol,
    serving,
)

BUILDERS = {
    "model_registry": lambda items, params, site: serving.model_registry_manifests(dict(items), params),
    "vllm": lambda items, params, site: serving.vllm_manifests(list(items), site, params),
    "nim": lambda items, params, site: serving.nim_manifests(list(items), site, params),
    "ngc_secrets": lambda key, params, site: serving.ngc_secrets(
        key, params["namespace"], params["api_secret"], params["pull_secret"], bool(params.get("download"))
    ),
    "gpu_operator": lambda _items, params, site: gpu_operator.gpu_operator_manifests(params),
    "litellm": lambda objects, params, site: gateway.gateway_manifests(list(objects), params),
    "litellm_secret": lambda key, params, site: [gateway.gateway_secret(params, key)],
    "traefik": lambda _items, params, site: edge.traefik_manifests(params),
    "cert_manager": lambda _items, params, site: edge.cert_manager_manifests(params),
    "network_policies": lambda _items, params, site: netpol.network_policies(params),
    "monitoring": lambda _items, params, site: monitoring.monitoring_manifests(params),
    "grafana_secret": lambda password, params, site: [monitoring.grafana_secret(params, password)],
}


def serving_manifests(items, component, params, site=None):
    if component not in BUILDERS:
        raise AnsibleFilterError("unknown serving component %r: use one of %s" % (component, ", ".join(BUILDERS)))
    try:
        return BUILDERS[component](items, dict(params), dict(site or {}))
    except (KeyError, TypeError, ValueError) as exc:
        raise AnsibleFilterError("cannot build the %s manifests: missing or bad %s" % (component, exc)) from exc


class FilterModule(object):
    def filters(self):
        return {"serving_manifests": serving_manifests}
