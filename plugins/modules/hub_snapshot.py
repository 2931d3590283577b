#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
module: hub_snapshot
short_description: Download one Hugging Face Hub model repository at a pinned commit, verified, with SHA256SUMS
version_added: 0.2.0
description:
  - Downloads the files of one model repository of the Hugging Face Hub, or of a mirror of it (C(HF_ENDPOINT)
    semantics, e.g. olah), at one commit into O(dest) with the real C(huggingface_hub) client
    (C(snapshot_download) with C(local_dir)), on the controller or a designated fetch node.
  - The client's fast transfer backend C(hf_xet) is used by the client by itself where the server offers Xet storage
    (the public Hub); against olah and other plain mirrors the files come over plain HTTP(S).
  - Verifies every file once against the Hub's tree listing of that commit (C(list_repo_tree)) - an LFS file by
    its sha256, any other file by its git blob id - since the client checks sizes only. A file that does not match
    is removed and the module fails naming it, the repository, the commit and the endpoint.
  - Writes O(dest)/C(SHA256SUMS) (sha256sum format, paths relative to O(dest)) and a manifest
    O(dest)/C(.aiinfra-snapshot.json) (repository, commit, endpoint, patterns, and each file's size, sha256 and
    mtime). What is distributed to the nodes is the files of C(SHA256SUMS); the client's metadata directory
    O(dest)/C(.cache/) and the manifest are not part of it.
  - A run with O(verify=fast) whose manifest still matches the disk (same repository, commit, patterns, and each
    file's size and mtime) neither hashes nor contacts the endpoint and reports no change. A file whose size
    changed is downloaded again; one whose mtime alone changed is hashed and downloaded again unless it still
    matches. O(verify=full) rehashes every file.
  - A branch or tag as O(revision) is refused before anything is downloaded; the problem tells the commit it
    resolves to now, to pin.
  - Before anything is downloaded (or removed), the files to download - those of the tree listing that the patterns
    keep and that are not complete in O(dest) already, at their listed sizes, less the copies on disk they replace -
    must fit in the free room of the file system of O(dest) (of its nearest existing parent); else the module
    fails with C(NO_ROOM), in check mode too.
  - Every failure is returned as data in RV(problems) (code, severity, host, variable, problem, fix), mapped from
    the client's exception classes; the module fails when there is one.
  - The client resumes a file only within one run (huggingface_hub 2.4); files finished by an interrupted run are
    kept and verified by the next.
  - The logic is in module_utils C(node/hub_snapshot.py).
author:
  - aiinfra.k3s developers (@aiinfra)
requirements:
  - huggingface_hub >= 1.0 (tested with 2.4.0; it brings hf_xet)
options:
  repo_id:
    description: The model repository, C(<namespace>/<name>).
    type: str
    required: true
  revision:
    description:
      - The full 40-hex commit sha to download. A branch or tag name (or a short sha) is refused, with the commit
        it resolves to now in the problem.
    type: str
    required: true
  endpoint:
    description:
      - The Hub or its mirror, as C(HF_ENDPOINT) would name it (e.g. C(https://hf-mirror.example.com)).
      - The environment's C(HF_ENDPOINT) is not read; omitted, the public Hub.
    type: str
    default: https://huggingface.co
  token:
    description:
      - A Hub token for a gated or private repository (keep it in the vault).
      - Without it no token is sent, not even one of the environment (C(HF_TOKEN)) or of C(~/.cache/huggingface).
    type: str
  allow_patterns:
    description: Only the files matching one of these patterns (fnmatch, as C(snapshot_download)).
    type: list
    elements: str
  ignore_patterns:
    description: None of the files matching one of these patterns.
    type: list
    elements: str
  dest:
    description:
      - Absolute path of the directory that holds this repository at this commit and nothing else, e.g.
        C(<cache>/<namespace>/<name>/<commit>). Created if missing.
      - Files that a previous run's manifest lists and the current patterns exclude are removed; other files are
        left alone.
    type: path
    required: true
  verify:
    description:
      - C(fast) trusts a file whose size and mtime are those the manifest recorded after verifying it.
      - C(full) hashes every file again.
    type: str
    choices: [fast, full]
    default: fast
  timeout:
    description: Seconds each request may wait for the server (connect, read); every request is bounded by it.
    type: float
    default: 30
attributes:
  check_mode:
    support: full
    description:
      - Lists the files the run would download (those missing or failing verification here; sizes from the
        client's dry run, which runs in a temporary directory of its own since it writes metadata into a
        C(local_dir)); writes and removes nothing in O(dest).
  diff_mode:
    support: none
    description: Weights are binary; RV(files) says what was downloaded.
notes:
  - Runs where huggingface_hub is installed; for a fetch node, delegate the task to it and distribute O(dest)
    from there.
  - O(dest) must not be shared by two runs at the same time.
"""

EXAMPLES = r"""
- name: Fetch the weights of Qwen2.5 0.5B Instruct at a pinned commit into the controller's cache
  aiinfra.k3s.hub_snapshot:
    repo_id: Qwen/Qwen2.5-0.5B-Instruct
    revision: 7ae557604adf67be50417f59c2c2f167def9a775
    allow_patterns: ["*.safetensors", "*.json", "tokenizer*", "*.txt"]
    dest: "{{ playbook_dir }}/.cache/hub/Qwen/Qwen2.5-0.5B-Instruct/7ae557604adf67be50417f59c2c2f167def9a775"
  delegate_to: localhost
  run_once: true
  register: weights

- name: A gated model through the site's mirror, with the vaulted token
  aiinfra.k3s.hub_snapshot:
    repo_id: meta-llama/Llama-3.1-8B-Instruct
    revision: 0e9e39f249a16976918f6564b8830bc894c89659
    endpoint: https://hf-mirror.example.internal
    token: "{{ vault_hf_token }}"
    ignore_patterns: ["original/*"]
    dest: /var/cache/aiinfra/hub/meta-llama/Llama-3.1-8B-Instruct/0e9e39f249a16976918f6564b8830bc894c89659
    verify: full
  delegate_to: "{{ groups['fetch'][0] }}"
  run_once: true
"""

RETURN = r"""
dest:
  description: The directory holding the files, C(SHA256SUMS) and the manifest.
  returned: always
  type: str
revision:
  description: The commit (as given).
  returned: always
  type: str
files:
  description:
    - Each file of the snapshot, C(path) relative to RV(dest), C(size), C(sha256) and C(downloaded) (downloaded
      by this run; in check mode, would be).
    - In check mode C(sha256) is null for a non-LFS file not on disk yet (the listing gives its git id only).
  returned: always
  type: list
  elements: dict
  sample: [{path: model-00001-of-00002.safetensors, size: 4976698672, sha256: 3f0b..., downloaded: true}]
bytes_total:
  description: Sum of the sizes of RV(files).
  returned: always
  type: int
bytes_downloaded:
  description: Bytes downloaded by this run (in check mode, that it would download).
  returned: always
  type: int
seconds:
  description: Wall time of the run.
  returned: always
  type: float
rate:
  description: RV(bytes_downloaded) per second of RV(seconds) (0 when nothing was downloaded).
  returned: always
  type: float
no_op:
  description: True when the manifest alone answered (verify=fast, nothing hashed, the endpoint not contacted).
  returned: always
  type: bool
problems:
  description:
    - Every problem, each with C(code), C(severity), C(host) (the name of the machine that ran the module),
      C(variable) (the option to look at), C(message), C(problem) (the same text, for the problem_line filter) and
      C(fix). Codes -
      C(HUB_PARAMETER), C(HUB_REVISION_NOT_PINNED), C(HUB_REPO_NOT_FOUND), C(HUB_REVISION_NOT_FOUND),
      C(HUB_GATED), C(HUB_ACCESS_DENIED), C(HUB_UNREACHABLE), C(HUB_HTTP_ERROR), C(HUB_CHECKSUM_MISMATCH),
      C(HUB_NO_FILES), C(HUB_LOCAL_ERROR), C(HUB_CLIENT_ERROR), C(NO_ROOM) (the same code as model_weights gives).
  returned: always
  type: list
  elements: dict
"""

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.aiinfra.k3s.plugins.module_utils.node import hub_snapshot


def main():
    module = AnsibleModule(
        argument_spec={
            "repo_id": {"type": "str", "required": True},
            "revision": {"type": "str", "required": True},
            "endpoint": {"type": "str", "default": hub_snapshot.PUBLIC_HUB},
            "token": {"type": "str", "no_log": True},
            "allow_patterns": {"type": "list", "elements": "str"},
            "ignore_patterns": {"type": "list", "elements": "str"},
            "dest": {"type": "path", "required": True},
            "verify": {"type": "str", "choices": ["fast", "full"], "default": "fast"},
            "timeout": {"type": "float", "default": 30},
        },
        supports_check_mode=True,
    )
    if hub_snapshot.HUB_IMPORT_ERROR:
        module.fail_json(msg=missing_required_lib("huggingface_hub"), exception=hub_snapshot.HUB_IMPORT_ERROR)
    result = hub_snapshot.run(dict(module.params), check_mode=module.check_mode)
    errors = [p for p in result["problems"] if p["severity"] == "error"]
    if errors:
        module.fail_json(
            msg="; ".join("%s %s - %s" % (p["code"], p["variable"], p["problem"]) for p in errors), **result
        )
    module.exit_json(**result)


if __name__ == "__main__":
    main()
