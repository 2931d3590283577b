# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
name: firewall_rules
short_description: K3s firewall rules limited to the cluster's own addresses
version_added: 0.1.0
description:
  - Expands C(prereq_firewall_rules) into one rule per allowed source. C(from=cluster) allows every node,
    C(from=servers) the server nodes, C(from=admin) every node and C(prereq_firewall_admin_networks). A node's
    address is C(k3s_node_ip), else C(ansible_host) when it is an IP, else its default IPv4 fact.
options:
  _input:
    description: hostvars.
    type: dict
    required: true
  cluster:
    description: The cluster's hosts.
    type: list
    elements: str
    required: true
  servers:
    description: The server hosts.
    type: list
    elements: str
    required: true
  rules:
    description: The port rules, each C({port, proto, from, server_only, comment}).
    type: list
    elements: dict
    required: true
  admin_networks:
    description: Networks (CIDR) that may reach SSH and the API server besides the nodes (never every address).
    type: list
    elements: str
    default: []
  host:
    description: Only this host's rules (a server gets every rule, another node those not C(server_only)).
    type: str
  client:
    description:
      - C({address, port}) of the connection the run uses; C(client_admitted) in the result says whether the
        rules still let it in.
    type: dict
"""

EXAMPLES = r"""
- name: Rules of this host
  ansible.builtin.debug:
    msg: >-
      {{ hostvars | aiinfra.k3s.firewall_rules(groups['__aiinfra_cluster'], groups['__aiinfra_servers'],
         prereq_firewall_rules, prereq_firewall_admin_networks, host=inventory_hostname,
         client={'address': '198.51.100.7', 'port': 22}) }}
"""

RETURN = r"""
_value:
  description:
    - C(rules) (C({port, proto, source, comment, server_only}) each), C(problems) (lines) and C(client_admitted)
      (true, false, or null without a client).
  type: dict
"""


def firewall_rules(hostvars, cluster, servers, rules, admin_networks=None, host=None, client=None):
    from ansible_collections.aiinfra.k3s.plugins.module_utils.node.firewall import firewall_rules as expand

    return expand(
        hostvars,
        list(cluster),
        list(servers),
        list(rules or []),
        list(admin_networks or []),
        host,
        dict(client) if client else None,
    )


class FilterModule(object):
    def filters(self):
        return {"firewall_rules": firewall_rules}
