#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
module: drill_load
short_description: Send a bounded, paced stream of requests to the site's gateway and record every answer
version_added: 0.1.0
description:
  - Sends O(rate) requests per second to O(url) until O(duration) seconds have passed or O(max_requests) were
    sent, each bounded by O(timeout), and writes one record per request (start time, latency, status) as a JSON
    list to O(records_file). playbooks/drill.yml runs it in the background while it injects faults, then computes
    availability per phase with the P(aiinfra.k3s.drill_availability#filter) filter.
  - Meant for the site's own endpoint only; nothing else is contacted.
attributes:
  check_mode:
    support: full
    description: In check mode no request is sent and no file is written.
  diff_mode:
    support: none
    description: Changes nothing on any host, so there is nothing to diff.
options:
  url:
    description: Endpoint of the site's gateway (GET without O(body), POST with it).
    type: str
    required: true
  rate:
    description: Requests per second.
    type: float
    default: 5
  duration:
    description: Seconds to keep sending.
    type: float
    required: true
  max_requests:
    description: Hard limit on the number of requests.
    type: int
    required: true
  timeout:
    description: Seconds one request may take.
    type: float
    default: 10
  headers:
    description: Request headers (the gateway key goes here; the module never returns them).
    type: dict
    default: {}
  body:
    description: Request body (JSON text) for a POST.
    type: str
    default: ""
  ca_file:
    description: CA bundle that signs the site's certificate (private CA); the system store when empty.
    type: path
  validate_certs:
    description:
      - Check the site's certificate (against O(ca_file) or the system store) and its name. V(false) only where
        the site has no certificate a client could check yet (the lab's Traefik before cert-manager issues one); the
        traffic is still encrypted.
    type: bool
    default: true
  connect_to:
    description:
      - Send the requests to this address (C(host:port), C([v6]:port) or a host) instead of the URL's host, which
        stays the Host header and the TLS server name, like curl's C(--connect-to). For one node's edge (a NodePort,
        where no load balancer runs) or a site whose DNS does not point at it yet.
    type: str
  records_file:
    description: Where the records are written (JSON list).
    type: path
    required: true
  stop_file:
    description:
      - The stream ends early once this file exists (the drill creates it when its faults are done, so that a
        generous O(duration) does not hold the report back). Never ends early when unset.
    type: path
author:
  - aiinfra.k3s developers (@aiinfra)
"""

EXAMPLES = r"""
- name: Load the gateway for five minutes in the background
  aiinfra.k3s.drill_load:
    url: https://intranet.example.org/api/litellm/v1/models
    rate: 5
    duration: 300
    max_requests: 1600
    headers:
      Authorization: "Bearer {{ litellm_master_key }}"
    records_file: /tmp/drill-records.json
  async: 420
  poll: 0
  register: load
  no_log: true
"""

RETURN = r"""
requests:
  description: Requests sent.
  returned: always
  type: int
answered:
  description: Requests answered with a 2xx or 3xx status.
  returned: always
  type: int
records_file:
  description: The file holding the records.
  returned: always
  type: str
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.aiinfra.k3s.plugins.module_utils.drill.load import run_load, write_records


def main():
    module = AnsibleModule(
        argument_spec={
            "url": {"type": "str", "required": True},
            "rate": {"type": "float", "default": 5},
            "duration": {"type": "float", "required": True},
            "max_requests": {"type": "int", "required": True},
            "timeout": {"type": "float", "default": 10},
            "headers": {"type": "dict", "default": {}, "no_log": True},
            "body": {"type": "str", "default": ""},
            "ca_file": {"type": "path"},
            "validate_certs": {"type": "bool", "default": True},
            "connect_to": {"type": "str"},
            "records_file": {"type": "path", "required": True},
            "stop_file": {"type": "path"},
        },
        supports_check_mode=True,
    )
    p = module.params
    if module.check_mode:
        module.exit_json(changed=False, requests=0, answered=0, records_file=p["records_file"])
    try:
        stop_file = p["stop_file"]
        records = run_load(
            p["url"],
            p["rate"],
            p["duration"],
            p["max_requests"],
            p["timeout"],
            p["headers"],
            p["body"],
            p["ca_file"],
            stop=(lambda: os.path.exists(stop_file)) if stop_file else None,
            validate_certs=p["validate_certs"],
            connect_to=p["connect_to"],
        )
        write_records(p["records_file"], records)
    except (ValueError, OSError) as exc:
        module.fail_json(msg="drill load against %s failed before it could run: %s" % (p["url"], exc))
    module.exit_json(
        changed=False,
        requests=len(records),
        answered=sum(1 for r in records if r["ok"]),
        records_file=p["records_file"],
    )


if __name__ == "__main__":
    main()
