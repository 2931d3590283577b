#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
module: model_mirror
short_description: Serve model directories to the GPU nodes over HTTP for a bounded time
version_added: 0.2.0
description:
  - Serves the regular files below each directory of O(directories) over HTTP, for M(aiinfra.k3s.model_weights) on
    the GPU nodes to fetch (resumably, each file verified against its sha256 there), until O(stop_file) appears or
    O(lifetime) seconds have passed. Run it with C(async) and C(poll=0), then create O(stop_file) once the nodes are
    done.
  - Every request must carry the secret O(token) as a bearer token in its C(Authorization) header (answered 401
    otherwise), so the secret never appears in a URL. A path naming no served file, a hidden C(.cache) or
    C(.staging) segment, a link or a path leaving its directory is answered 404. Only GET and HEAD; single byte
    ranges are answered 206 (C(If-Range) on the C(ETag) or C(Last-Modified) it sends), so a cut fetch resumes. No
    access log.
  - The collection runs it on the controller to hand the GPU nodes a Hub snapshot or a seed directory. Standard
    library only; the logic is in module_utils C(node/model_mirror.py).
author:
  - aiinfra.k3s developers (@aiinfra)
options:
  directories:
    description: URL name (e.g. C(Qwen/Qwen2.5-7B-Instruct)) to the absolute directory served under it.
    type: dict
    required: true
  address:
    description: Address to listen on.
    type: str
    default: 0.0.0.0
  port:
    description: TCP port; C(0) takes a free one (written to O(port_file)).
    type: int
    default: 0
  token:
    description: The bearer token every request must carry (at least 16 characters).
    type: str
    required: true
  lifetime:
    description: Seconds after which the server stops even without O(stop_file).
    type: int
    required: true
  stop_file:
    description: The server stops as soon as this file exists.
    type: path
    required: true
  port_file:
    description: JSON file (mode 0600) the module writes with the bound C(port) once it listens.
    type: path
attributes:
  check_mode:
    support: none
    description: Serving changes nothing, but there is nothing to simulate either; do not run it in check mode.
  diff_mode:
    support: none
    description: Changes nothing.
"""

EXAMPLES = r"""
- name: Serve the controller's copy of the models
  aiinfra.k3s.model_mirror:
    directories:
      org/model: /srv/models/org/model
    token: "{{ lookup('ansible.builtin.password', '/dev/null', length=32, chars=['ascii_letters', 'digits']) }}"
    lifetime: 3600
    stop_file: /tmp/aiinfra-mirror.stop
    port_file: /tmp/aiinfra-mirror.port
  delegate_to: localhost
  run_once: true
  async: 3600
  poll: 0
  register: mirror
"""

RETURN = r"""
port:
  description: The port the server listened on.
  returned: always
  type: int
  sample: 38211
requests:
  description: Requests answered.
  returned: always
  type: int
  sample: 14
bytes_sent:
  description: Bytes of file content sent.
  returned: always
  type: int
  sample: 4294967296
refused:
  description: Requests answered 401, 404 or 416.
  returned: always
  type: int
  sample: 0
seconds:
  description: How long the server ran.
  returned: always
  type: float
  sample: 42.5
stopped_by:
  description: C(stop_file) or C(lifetime).
  returned: always
  type: str
  sample: stop_file
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.aiinfra.k3s.plugins.module_utils.node.model_mirror import serve


def main():
    module = AnsibleModule(
        argument_spec={
            "directories": {"type": "dict", "required": True},
            "address": {"type": "str", "default": "0.0.0.0"},
            "port": {"type": "int", "default": 0},
            "token": {"type": "str", "required": True, "no_log": True},
            "lifetime": {"type": "int", "required": True},
            "stop_file": {"type": "path", "required": True},
            "port_file": {"type": "path"},
        },
        supports_check_mode=False,
    )
    params = module.params
    if len(params["token"]) < 16:
        module.fail_json(msg="model_mirror: the token must have at least 16 characters")
    if params["lifetime"] < 1:
        module.fail_json(msg="model_mirror: lifetime must be at least 1 second")
    missing = sorted(n for n, d in params["directories"].items() if not os.path.isdir(str(d)))
    if missing:
        module.fail_json(msg="model_mirror: no such directory for %s" % ", ".join(missing))
    try:
        result = serve(
            params["address"],
            params["port"],
            {str(k): str(v) for k, v in params["directories"].items()},
            params["token"],
            params["lifetime"],
            params["stop_file"],
            params["port_file"],
        )
    except OSError as exc:
        module.fail_json(msg="model_mirror: cannot serve on %s:%s: %s" % (params["address"], params["port"], exc))
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
