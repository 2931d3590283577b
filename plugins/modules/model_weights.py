#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
module: model_weights
short_description: Put one model directory into a node's model store from an HTTP(S) location
version_added: 0.2.0
description:
  - Fetches the files of one model from O(url) into O(store)/O(path), resumably, verifying each file's sha256 once,
    and publishes the model in one step, so a model server never sees half of it.
  - The file list and checksums come from C(<url>/SHA256SUMS) (sha256sum format, paths relative to the model
    directory), or from O(files).
  - Files are fetched into C(<store>/.staging/<path>/) on the store's file system. Files of the published model
    that are still good are hard-linked there instead of fetched. A fetch cut short (the process killed, the
    connection lost) leaves its part there; the next run hashes the part and asks for the rest with an HTTP Range
    request (If-Range with the ETag or Last-Modified seen before; a full answer starts the file over).
  - The staging tree replaces the published directory with C(renameat2(RENAME_EXCHANGE)) (Linux, glibc 2.28 or
    later), then the old tree is removed; where the file system has no such call the old directory is renamed away
    first (RV(swapped) says C(fallback)). A new model is a plain rename.
  - The published directory holds C(SHA256SUMS) (C(sha256sum --check SHA256SUMS) works there) and the manifest
    C(.aiinfra-weights.json) with the source, the revision and, per file, path, size, sha256, mtime_ns and when it
    was verified.
    With O(verify=fast) a model whose manifest names the wanted files and sha256s, and whose files have the size and
    mtime_ns it records, is not read at all.
  - An exclusive lock on C(<store>/.staging/.lock) covers the fetch and the publish; a second run waits (at most
    O(lock_timeout) seconds), then finds the model current.
  - Before anything is fetched, the files to fetch must fit in the free room of the store's file system. A file
    whose size the file list does not give (C(SHA256SUMS) carries none) is asked for it with one HEAD request; a
    server that gives no C(Content-Length) leaves it unknown (RV(sizes_unknown)), and such a file is not counted.
  - With O(progress_file), the progress of the fetch is written there while files are fetched (see the option).
    With O(progress_interval), the action plugin runs the module asynchronously and shows that progress as the
    fetch goes.
  - Only the Python standard library on the node. The logic is in module_utils C(model_weights.py).
author:
  - aiinfra.k3s developers (@aiinfra)
options:
  store:
    description: Absolute path of the model store (created when missing).
    type: path
    required: true
  path:
    description:
      - The model's directory relative to O(store), e.g. C(Qwen/Qwen2.5-7B-Instruct).
      - Absolute paths, C(.), C(..) and empty segments, control characters and a first segment C(.staging) (reserved
        for fetches in progress) are refused.
    type: str
    required: true
  url:
    description:
      - HTTP or HTTPS URL of the model directory; each file is fetched from C(<url>/<file path>).
      - Without O(files), C(<url>/SHA256SUMS) gives the file list; its entries may not be absolute or hold C(..).
    type: str
    required: true
  files:
    description: The file list, given instead of C(<url>/SHA256SUMS).
    type: list
    elements: dict
    suboptions:
      path:
        description: Path relative to the model directory.
        type: str
        required: true
      sha256:
        description: The file's sha256, 64 hexadecimal digits.
        type: str
        required: true
      size:
        description: The file's size in bytes (check mode reports it instead of asking the server).
        type: int
  headers:
    description:
      - HTTP headers sent with every request, e.g. C(Authorization) for a private mirror. They are not sent on a
        redirect to another host.
    type: dict
    default: {}
  verify:
    description:
      - V(fast) trusts a file whose manifest record has the wanted sha256, size and mtime_ns, and reads nothing then;
        a file the manifest does not record is hashed once; one whose size or mtime_ns differs is fetched again.
      - V(full) hashes every file of the published model and fetches the ones that do not match.
    type: str
    choices: [fast, full]
    default: fast
  source:
    description: Free text recorded in the manifest, e.g. C(url https://mirror/x) or C(hub org/repo@<sha>).
    type: str
  revision:
    description: The model's revision, recorded in the manifest.
    type: str
  mode:
    description: Mode of every file published (the mirror's modes are not kept).
    type: raw
    default: "0644"
  directory_mode:
    description: Mode of every directory published, and of the parents of the model directory the module creates.
    type: raw
    default: "0755"
  timeout:
    description: Seconds each HTTP request may wait for the server (to connect, and for each read).
    type: int
    default: 60
  retries:
    description:
      - How many more times a request is tried after a 5xx answer or a connection error, waiting 1, 2, 4 ... (at most
        10) seconds between tries. A 4xx answer (or 501 Not Implemented) is not tried again.
    type: int
    default: 3
  run_timeout:
    description:
      - Seconds the run may take. Once past them, the module stops between two reads, instead of trying a request
        again, after the store's lock is taken, or before publishing; it publishes nothing and fails with a
        C(RUN_TIMEOUT) problem. What it fetched stays in staging and the next run resumes it. Near the limit a
        request waits for the server only until the limit (and a second), not the whole O(timeout).
      - The wait for the store's lock is bounded by O(lock_timeout) alone; a run past its limit once it has the
        lock stops there. A published model that is current is left as it is (its manifest and modes fixed).
      - With O(progress_interval), the action plugin sets it to O(progress_timeout) when it is not given or is
        longer; the problem's C(variable) is then C(progress_timeout).
      - Not given - no limit.
    type: int
  lock_timeout:
    description: Seconds to wait for another run holding the store's lock.
    type: int
    default: 1800
  ca_path:
    description: A PEM file of CA certificates to trust for HTTPS instead of the system's (a site CA).
    type: path
  host:
    description: The name problems give the node; the node's host name when not given.
    type: str
  progress_file:
    description:
      - Absolute path on the node of a progress file, written while files are fetched and removed when the module
        ends (success or failure). Its directory must exist; a file that cannot be written does not fail the fetch.
      - "JSON: C(path) (the model), C(file) (the file being fetched), C(bytes_done) (bytes of the model in place:
        files kept, reused and fetched, and the part of the current file), C(bytes_total) (the model's size; null
        while a file's size is unknown), C(bytes_fetched) (received in this run), C(started) and C(updated) (epoch
        seconds), C(rate) (bytes per second of this run so far)."
      - Rewritten atomically (mode 0600) at most once a second and at the end of each file.
      - It may not be inside the model's directory or its staging directory. Without it (and without
        O(progress_interval)) no progress file is written.
    type: path
  progress_interval:
    description:
      - Handled by the action plugin on the controller, never by the module on the node.
      - "When above 0 (and the task is neither in check mode nor async), the module runs asynchronously on the node,
        and every this many seconds the controller reads its progress file and shows one line, C(<host>: <path>
        <GB done>/<GB total> GB, <MB/s> MB/s, ETA <seconds> s (<file>)), on standard error (the stdout callback's
        output stays as it is). The task's result is the module's, as without it."
      - The progress file is O(progress_file), else C(<store>/.staging/.progress-<path with / as __>.json).
      - 0 or none - no progress shown, the module runs as any other.
    type: int
  progress_timeout:
    description:
      - Handled by the action plugin. Seconds the asynchronous run may take with O(progress_interval) before it
        is stopped; the fetch resumes on the next run.
      - The module stops itself at that time (it gets it as O(run_timeout), unless a shorter one is given);
        async_wrapper's limit for the job is 30 seconds (or two intervals, if more) later, for a module that could
        not stop itself (hashing a large model it already holds).
    type: int
    default: 7200
extends_documentation_fragment:
  - aiinfra.k3s.ownership
attributes:
  action:
    support: full
    description: The action plugin shows the progress of the fetch (O(progress_interval)).
  async:
    support: full
    description: An async task runs the module as any other; O(progress_interval) is then not used.
  check_mode:
    support: full
    description: Reads the file list and the store only, and reports what would be fetched with the sizes.
  diff_mode:
    support: none
    description: Model weights are binary; RV(fetched) lists what changed.
"""

EXAMPLES = r"""
- name: Fetch a model from the site's mirror into the store
  aiinfra.k3s.model_weights:
    store: /data/model-registry
    path: Qwen/Qwen2.5-7B-Instruct
    url: https://mirror.example.internal/models/Qwen/Qwen2.5-7B-Instruct
    headers:
      Authorization: "Bearer {{ mirror_token }}"
    source: url https://mirror.example.internal/models/Qwen/Qwen2.5-7B-Instruct
    revision: a09a35458c702b33eeacc393d103063234e8bc28
    owner: root
    group: root
  register: weights

- name: Re-hash every file of a model and fetch what does not match
  aiinfra.k3s.model_weights:
    store: /data/model-registry
    path: org/small-model
    url: http://mirror.example.internal/org/small-model
    files:
      - path: config.json
        sha256: 0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0
        size: 684
      - path: model.safetensors
        sha256: 8a7b6c5d4e3f201918171615141312110f0e0d0c0b0a09080706050403020100
        size: 988097824
    verify: full
    ca_path: /etc/ssl/site-ca.pem
"""

RETURN = r"""
fetched:
  description: The files fetched, or finished from an earlier interrupted run (would be fetched, in check mode).
  returned: always
  type: list
  elements: dict
  sample: [{path: model.safetensors, size: 988097824}]
reused:
  description: How many files of the published model were kept (hard-linked into the new tree, or left in place).
  returned: always
  type: int
hashed:
  description: The files of the published model read to verify them (none on an unchanged model with O(verify=fast)).
  returned: always
  type: list
  elements: str
bytes_fetched:
  description: Bytes received from the server in this run.
  returned: always
  type: int
bytes_resumed:
  description: Bytes of parts (and finished files) left by an interrupted run that were kept instead of fetched.
  returned: always
  type: int
bytes_total:
  description: Size of the model's files.
  returned: always
  type: int
sizes_unknown:
  description:
    - The files to fetch whose size neither the file list nor the server's HEAD answer gave (no Content-Length);
      the room check did not count them, and RV(bytes_total) of check mode leaves them out.
  returned: always
  type: list
  elements: str
seconds:
  description: How long the run took.
  returned: always
  type: float
rate:
  description: RV(bytes_fetched) per second of the run.
  returned: always
  type: float
swapped:
  description:
    - How the model was published. V(new) a rename (no model there before), V(exchange) an atomic swap with the old
      directory, V(fallback) the old directory renamed away first (the file system has no exchange), V(none)
      nothing published.
  returned: always
  type: str
  sample: exchange
manifest:
  description: Path of the model's manifest.
  returned: always
  type: str
  sample: /data/model-registry/Qwen/Qwen2.5-7B-Instruct/.aiinfra-weights.json
problems:
  description:
    - Why the run failed, one dict per problem with C(code) (MODEL_PATH, STORE, URL, MODE, VERIFY, FILES,
      SUMS_ENTRY, HTTP, SHA256_MISMATCH, SIZE_MISMATCH, NESTED_MODEL, OWNER, LOCK_TIMEOUT, RUN_TIMEOUT,
      RUN_TIMEOUT_VALUE, STORE_IO, NO_ROOM, PROGRESS_FILE), C(severity),
      C(host), C(variable), C(message), C(problem) (the same text, for the problem_line filter) and C(fix); empty on
      success.
    - Nothing is published when there are problems; parts fetched stay in staging for the next run.
  returned: always
  type: list
  elements: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.aiinfra.k3s.plugins.module_utils.node.model_weights import converge


def main():
    module = AnsibleModule(
        argument_spec={
            "store": {"type": "path", "required": True},
            "path": {"type": "str", "required": True},
            "url": {"type": "str", "required": True},
            "files": {
                "type": "list",
                "elements": "dict",
                "options": {
                    "path": {"type": "str", "required": True},
                    "sha256": {"type": "str", "required": True},
                    "size": {"type": "int"},
                },
            },
            "headers": {"type": "dict", "default": {}, "no_log": True},
            "verify": {"type": "str", "choices": ["fast", "full"], "default": "fast"},
            "source": {"type": "str"},
            "revision": {"type": "str"},
            "mode": {"type": "raw", "default": "0644"},
            "directory_mode": {"type": "raw", "default": "0755"},
            "timeout": {"type": "int", "default": 60},
            "retries": {"type": "int", "default": 3},
            "run_timeout": {"type": "int"},
            "lock_timeout": {"type": "int", "default": 1800},
            "ca_path": {"type": "path"},
            "host": {"type": "str"},
            "owner": {"type": "str"},
            "group": {"type": "str"},
            "progress_file": {"type": "path"},
            # Options of the action plugin (it removes them before the module runs): accepted and not used here.
            "progress_interval": {"type": "int"},
            "progress_timeout": {"type": "int", "default": 7200},
        },
        supports_check_mode=True,
    )
    result = converge(module.params, check_mode=module.check_mode)
    if result["problems"]:
        lines = ["%s %s: %s" % (p["severity"].upper(), p["code"], p["message"]) for p in result["problems"]]
        module.fail_json(msg="; ".join(lines), **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
