#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
module: gpu_allocation_info
short_description: Compare the GPUs nodes have, advertise, can allocate and hand out; report every disagreement
version_added: 0.1.0
description:
  - Reads the Nodes and Pods of a cluster, from the Kubernetes API (one paginated LIST per kind using C(limit) and
    C(continue), never one call per node) or from C(kubectl get nodes -o json) and C(kubectl get pods -A -o json)
    files (offline analysis of a support bundle).
  - On the controller's own connection (C(delegate_to=localhost)) an action plugin runs the same analysis in the
    controller's process, sparing a module process; a kubeconfig that needs the kubernetes client (an exec or
    auth-provider plugin, basic auth, a proxy) and any other host run the module.
  - For every GPU node (matching O(gpu_node_selector), named in O(expected_gpus), labelled
    C(nvidia.com/gpu.present=true), or advertising GPUs) it returns physical, expected, capacity, allocatable,
    requested and free GPU devices, and a list of findings with stable codes.
  - Counts extended resources as the scheduler does, requests default to limits; an init container counts as the
    max of any single init container (plus earlier sidecars) versus the sum of app containers and sidecars;
    Succeeded and Failed pods hold no GPU; C(nvidia.com/mig-*) resources count as slices.
  - The expected capacity of a node is its physical GPUs times C(nvidia.com/gpu.replicas) (time-slicing). On a MIG
    node it is its MIG slices (plus, under the mixed strategy, the GPUs not in MIG mode advertised whole), from
    the counts of M(aiinfra.k3s.gpu_facts) in O(expected_gpus), else from GPU Feature Discovery's labels
    (C(nvidia.com/mig.strategy); under the single strategy C(nvidia.com/gpu.count), the MIG device count; under
    mixed C(nvidia.com/mig-<profile>.count) and C(.replicas)). Where it cannot be known (a plain physical count on a
    mixed-strategy node with several GPUs, or MIG without those labels) the node is not compared and the finding is
    C(GPU_CAPACITY_UNKNOWN) (info), never a mismatch.
  - Finding codes (severity) are a stable contract, C(GPU_NOT_ADVERTISED) (error), C(GPU_CAPACITY_MISMATCH) (error),
    C(GPU_CAPACITY_UNKNOWN) (info), C(GPU_UNHEALTHY) (warning), C(GPU_OVERCOMMIT) (error), C(GPU_POD_PENDING) (error),
    C(GPU_POD_ADMISSION_FAILED) (error), C(GPU_POD_NO_TOLERATION) (error), C(GPU_NODE_NOT_TAINTED) (warning),
    C(GPU_NODE_UNLABELED) (warning), C(NON_GPU_POD_ON_GPU_NODE) (warning), C(GPU_NODE_NOT_READY) (error),
    C(GPU_IDLE) (info).
author:
  - aiinfra.k3s developers (@aiinfra)
options:
  kubeconfig:
    description: Path of the kubeconfig; defaults to C(KUBECONFIG) or C(~/.kube/config). Ignored with files.
    type: path
  context:
    description: Context of the kubeconfig to use.
    type: str
  validate_certs:
    description: Verify the API server certificate.
    type: bool
    default: true
  nodes_file:
    description: Output of C(kubectl get nodes -o json); with O(pods_file), no API is contacted.
    type: path
  pods_file:
    description: Output of C(kubectl get pods -A -o json).
    type: path
  page_size:
    description: Items per LIST page.
    type: int
    default: 500
  expected_gpus:
    description:
      - Node name to physical GPU count, or to the counts of M(aiinfra.k3s.gpu_facts) (filter
        C(aiinfra.k3s.gpu_expected)), a mapping with C(physical), C(mig_slices) and C(mig_gpus) (the GPUs in MIG
        mode). Without an entry the C(nvidia.com/gpu.count) label gives the physical count (except under
        the MIG single strategy, where it counts MIG devices).
      - A physical count says nothing of MIG slices; on a MIG node the slices come from C(mig_slices), else from
        GPU Feature Discovery's labels, else the node's expected capacity is unknown (C(GPU_CAPACITY_UNKNOWN)).
    type: dict
    default: {}
  gpu_node_selector:
    description: Labels that mark GPU nodes.
    type: dict
    default: {ai-workload: "true"}
  gpu_taint:
    description: Taint GPU nodes carry and GPU pods must tolerate, as C(key=value:Effect).
    type: str
    default: nvidia.com/gpu=present:NoSchedule
  allowed_pods:
    description:
      - Pods that may run on GPU nodes without requesting a GPU (the site's own placement choices), each a mapping
        of C(namespace), C(name_prefix) and/or C(labels); a pod matching every key of one rule is allowed.
    type: list
    elements: dict
    default: []
  system_namespaces:
    description: Namespaces whose pods are never reported as C(NON_GPU_POD_ON_GPU_NODE).
    type: list
    elements: str
    default: [kube-system, kube-public, kube-node-lease, gpu-operator, nvidia-gpu-operator]
  fail_on:
    description: Severities that fail the task; C([]) never fails. Results are returned either way.
    type: list
    elements: str
    choices: [error, warning, info]
    default: [error]
requirements:
  - kubernetes (Python client) when reading from the API with a kubeconfig that needs an exec or auth-provider
    plugin, basic auth or a proxy; other kubeconfigs are read by module_utils C(k8s/api_client.py)
extends_documentation_fragment:
  - aiinfra.k3s.attributes.read_only
"""

EXAMPLES = r"""
- name: Check GPU allocation on the live cluster
  aiinfra.k3s.gpu_allocation_info:
    kubeconfig: ~/.kube/aiinfra-gamorcloud.yaml
    expected_gpus:
      gx10-db4d: 1
  delegate_to: localhost
  register: gpu

- name: Check GPU allocation against the GPUs nvidia-smi read on the GPU hosts (MIG slices included)
  aiinfra.k3s.gpu_allocation_info:
    kubeconfig: ~/.kube/aiinfra-gamorcloud.yaml
    expected_gpus: "{{ hostvars | aiinfra.k3s.gpu_expected(groups['gpu_nodes']) }}"
  delegate_to: localhost
  register: gpu

- name: A MIG node by hand, two GPUs of which one in MIG mode with seven slices
  aiinfra.k3s.gpu_allocation_info:
    kubeconfig: ~/.kube/aiinfra-gamorcloud.yaml
    expected_gpus:
      gx10-db4d: {physical: 2, mig_slices: 7, mig_gpus: 1}
  delegate_to: localhost
  register: gpu

- name: Analyse a support bundle offline, never failing
  aiinfra.k3s.gpu_allocation_info:
    nodes_file: bundle/nodes.json
    pods_file: bundle/pods.json
    fail_on: []
  register: gpu
"""

RETURN = r"""
nodes:
  description:
    - One entry per GPU node. C(expected) is null where the expected capacity cannot be known, C(physical) where the
      physical GPU count is not known.
  returned: always
  type: list
  elements: dict
  sample:
    - {name: gx10-db4d, ready: true, schedulable: true, physical: 1, expected: 1, capacity: 1, allocatable: 1,
       requested: 1, free: 0, replicas: 1, gpu_pods: 1,
       resources: {capacity: {nvidia.com/gpu: 1}, allocatable: {nvidia.com/gpu: 1}, requested: {nvidia.com/gpu: 1}}}
gpu_pods:
  description: Pods that request GPUs.
  returned: always
  type: list
  elements: dict
  sample:
    - {namespace: ai-serving, name: vllm-0, node: gx10-db4d, phase: Running, gpus: 1,
       resources: {nvidia.com/gpu: 1}}
summary:
  description: Totals over the GPU nodes, GPU pod count, pending GPU pods and findings per severity.
  returned: always
  type: dict
  sample: {nodes: 1, physical: 1, capacity: 1, allocatable: 1, requested: 1, free: 0, gpu_pods: 1, pending: 0,
           findings: {error: 0, warning: 0, info: 0}}
findings:
  description: Every disagreement found, errors first.
  returned: always
  type: list
  elements: dict
  sample:
    - {code: GPU_IDLE, severity: info, node: gx10-db4d, pod: null,
       message: gx10-db4d has 1 allocatable GPU device(s) that no pod requests}
source:
  description: Where the objects came from (C(api) or C(files)) and how many LIST pages were read.
  returned: always
  type: dict
"""

import json
from urllib.parse import urlencode

from ansible.module_utils.basic import AnsibleModule, missing_required_lib
from ansible.module_utils.urls import open_url

from ansible_collections.aiinfra.k3s.plugins.module_utils.gpu.allocation_info import (
    ARGUMENT_SPEC,
    REQUIRED_TOGETHER,
    api_lists,
    connect,
    connection_pager,
    file_lists,
    report,
    unreadable,
)
from ansible_collections.aiinfra.k3s.plugins.module_utils.k8s import api_client


def client_pager(params, module):
    """pager(path) through the kubernetes client's kubeconfig loader, for what api_client does not speak (exec
    or auth-provider plugins, basic auth, a proxy): the client reads the kubeconfig and runs its plugins; the
    requests go through Ansible's open_url. Imported only then: the import alone costs a third of a second."""
    try:
        from kubernetes import config as kube_config
        from kubernetes.client import Configuration
    except ImportError:
        module.fail_json(msg=missing_required_lib("kubernetes"))
    conf = Configuration()
    kube_config.load_kube_config(
        config_file=params["kubeconfig"], context=params["context"], client_configuration=conf, persist_config=False
    )
    headers = {"Accept": "application/json"}
    for setting in conf.auth_settings().values():
        if setting.get("in") == "header" and setting.get("value"):
            headers[setting["key"]] = setting["value"]
    host = conf.host.rstrip("/")

    def pager(path):
        def fetch(limit, token):
            query = [("limit", limit)] + ([("continue", token)] if token else [])
            response = open_url(
                "%s%s?%s" % (host, path, urlencode(query)),
                headers=headers,
                timeout=60,
                validate_certs=params["validate_certs"] and conf.verify_ssl,
                ca_path=conf.ssl_ca_cert,
                client_cert=conf.cert_file,
                client_key=conf.key_file,
            )
            return json.loads(response.read())

        return fetch

    return pager


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, required_together=REQUIRED_TOGETHER, supports_check_mode=True)
    p = module.params
    try:
        if p["nodes_file"]:
            nodes, pods, source = file_lists(p)
        else:
            try:
                pager = connection_pager(connect(p))
            except api_client.Unsupported:
                pager = client_pager(p, module)
            nodes, pods, source = api_lists(pager, p["page_size"])
        result, failure = report(p, nodes, pods, source)
    except Exception as exc:  # one error path: what could not be read, and why
        module.fail_json(msg=unreadable(p, exc))
    if failure:
        module.fail_json(msg=failure, changed=False, **result)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
