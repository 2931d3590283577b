# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
name: nftables_ruleset
short_description: The nftables file of a K3s node's host firewall
version_added: 0.1.0
description:
  - Renders one host's firewall as an nftables file holding only the collection's own table
    (C(inet aiinfra_k3s)), replaced in one transaction when the file is loaded. Its input chain drops what no rule
    allows; established traffic, loopback, ICMP, DHCP replies and the pod networks' interfaces are let in, then each
    port only from its sources. Forwarded traffic (pods, Services, NodePorts) and other tables are left alone.
options:
  _input:
    description: This host's rules, C({port, proto, source, comment}) each, as C(aiinfra.k3s.firewall_rules) gives them.
    type: list
    elements: dict
    required: true
  trusted_interfaces:
    description: Interfaces pod traffic arrives on (the site plan's C(firewall.trusted_interfaces)).
    type: list
    elements: str
    required: true
"""

EXAMPLES = r"""
- name: Write the ruleset
  ansible.builtin.copy:
    content: "{{ rules | aiinfra.k3s.nftables_ruleset(site_plan_current.firewall.trusted_interfaces) }}"
    dest: /etc/aiinfra-k3s/firewall.nft
    mode: "0600"
"""

RETURN = r"""
_value:
  description: The file's text, for C(nft -f).
  type: str
"""


def nftables_ruleset(rules, trusted_interfaces):
    from ansible_collections.aiinfra.k3s.plugins.module_utils.node.firewall import nftables_ruleset as render

    return render([dict(r) for r in rules or []], [str(i) for i in trusted_interfaces or []])


class FilterModule(object):
    def filters(self):
        return {"nftables_ruleset": nftables_ruleset}
