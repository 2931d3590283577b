#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
module: site_plan
short_description: Compute the site plan of the inventory (what the serving stack becomes) on the controller
version_added: 0.1.0
description:
  - Runs on the controller only (an action plugin); it touches no host.
  - Reads the inventory's value of each variable the plan needs, or the owning role's default when the
    inventory sets none, and the C(aiinfra_gpu_count), C(aiinfra_gpu_class), C(aiinfra_gpu_memory_mib),
    C(aiinfra_gpu_type) and C(aiinfra_node_group) of the GPU hosts. Measures the weight files of models seeded
    from the controller (C(model_registry_seed_dir)).
  - Returns the plan (GPU nodes and classes, capacity, placement, every model with its defaults filled in,
    each workload's replica bounds and autoscaler, the gateway's model routes, the edge, and every problem found as
    data with a severity). The aiinfra.k3s.site_plan role sets it as the C(site_plan_current) fact, which the
    serving roles read.
  - The logic is the plain function C(site_plan) in module_utils C(site_plan.py).
author:
  - aiinfra.k3s developers (@aiinfra)
options:
  gpu_hosts:
    description: The GPU hosts (the inventory's GPU group).
    type: list
    elements: str
    required: true
  cluster_hosts:
    description:
      - Every cluster node (servers and agents); the nodes the gateway may run on follow from them and
        C(litellm_placement). Left out or empty, the gateway's spread over nodes is not checked.
    type: list
    elements: str
    default: []
  secrets:
    description:
      - Check the secrets (LiteLLM master key, Grafana password, NGC key) as well. Off for a render without
        secrets, where they are neither needed nor read.
    type: bool
    default: true
extends_documentation_fragment:
  - aiinfra.k3s.attributes.read_only
"""

EXAMPLES = r"""
- name: Compute the site plan
  aiinfra.k3s.site_plan:
    gpu_hosts: "{{ groups['gpu_nodes'] }}"
    cluster_hosts: "{{ groups['k3s_servers'] + groups['k3s_agents'] }}"
  register: site

- name: Stop on a plan that cannot work
  ansible.builtin.assert:
    that: site.plan.problems | selectattr('severity', '==', 'error') | list | length == 0
    fail_msg: "{{ site.plan.problems | map('aiinfra.k3s.problem_line') }}"
"""

RETURN = r"""
plan:
  description: The site plan; see module_utils C(site_plan.py).
  returned: always
  type: dict
  contains:
    nodes:
      description:
        - GPU node to its C(class), C(gpus), C(replicas) per GPU, C(memory_mib), and C(gpu_type) and C(node_group)
          where the host sets them.
      type: dict
    classes:
      description: Class to its C(nodes), C(gpus), C(replicas) and C(slices).
      type: dict
    capacity:
      description: C(gpus), C(slices) and C(whole_gpus) of the site.
      type: dict
    placement:
      description: C(shared_replicas) (time-slicing replicas of the sliced nodes) and C(reserve_whole).
      type: dict
    models:
      description:
        - Every vLLM and NIM model with its defaults filled in, its C(server) and C(autoscaled), and where it may run,
          its C(placement) (its C(gpu_types) and C(node_groups)), C(nodes) (the GPU nodes that match its placement and
          can hold a replica), C(node_affinity) (the required node affinity its pods get) and C(spread) (C(hard) when
          its replicas must be on different nodes, C(soft) when that is only preferred, with a SPREAD warning).
      type: list
      elements: dict
    workloads:
      description:
        - Each scalable workload with C(name), C(kind), C(namespace), C(min), C(max) and C(autoscaler); the gateway's
          also with C(nodes) (where C(litellm_placement) lets it run) when the cluster hosts are known.
      type: list
      elements: dict
    model_routes:
      description: The gateway's model routes (C(model), C(service), C(namespace), C(port), C(component)).
      type: list
      elements: dict
    edge:
      description: C(host), C(namespace), C(tls_secret) and C(certificate) of the public route.
      type: dict
    node_loss:
      description:
        - N-1 capacity, model to C(replicas), C(after_node_loss) (replicas running after the loss of the GPU node
          whose loss hurts it most; the others stay where they are) and C(worst_node).
      type: dict
    secrets:
      description: Whether the secrets were checked.
      type: bool
    problems:
      description: Problems as C({code, severity, host, variable, problem, fix}).
      type: list
      elements: dict
"""

from ansible.module_utils.basic import AnsibleModule


def main():
    module = AnsibleModule(
        argument_spec={
            "gpu_hosts": {"type": "list", "elements": "str", "required": True},
            "cluster_hosts": {"type": "list", "elements": "str", "default": []},
            "secrets": {"type": "bool", "default": True},
        },
        supports_check_mode=True,
    )
    module.fail_json(msg="aiinfra.k3s.site_plan runs on the controller as an action plugin; it has no module side")


if __name__ == "__main__":
    main()
