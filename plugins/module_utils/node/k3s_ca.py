# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The cluster CA's hash as a joining node pins it, read on the first server: K3s's hash of its self-signed CA is the
sha256 of server-ca.crt as stored, and K3s writes it into its own full token (K10<hash>::server:<secret>) beside it.
Plain functions; the module k3s_ca_info reads the two files with them. The token's secret never leaves read_ca.
The same run may read the server's admin kubeconfig (read_kubeconfig), so that the first server's play reads the CA and
the kubeconfig it hands to the controller in one module run."""

import base64
import hashlib
import os
import re

TOKEN_PREFIX = re.compile(r"^K10([0-9a-f]{64})::")


def ca_hash(ca_bytes):
    """The sha256 hex digest of the CA file's bytes, as K3s computes it for its self-signed CA."""
    return hashlib.sha256(ca_bytes).hexdigest()


def token_ca_hash(token_text):
    """The CA hash a full K3s token carries, or '' when the text is not a full token (K10<sha256>::...)."""
    match = TOKEN_PREFIX.match(token_text.strip())
    return match.group(1) if match else ""


def read_ca(server_dir):
    """{ca_hash, token_ca_hash}: '' for a file the server has not written (yet) or cannot be read."""
    result = {"ca_hash": "", "token_ca_hash": ""}
    try:
        with open(os.path.join(server_dir, "tls", "server-ca.crt"), "rb") as handle:
            result["ca_hash"] = ca_hash(handle.read())
    except OSError:
        return result
    try:
        with open(os.path.join(server_dir, "token"), encoding="utf-8", errors="replace") as handle:
            result["token_ca_hash"] = token_ca_hash(handle.read())
    except OSError:
        pass
    return result


def read_kubeconfig(path):
    """{kubeconfig (the file's bytes, base64), kubeconfig_error}: ('', why) when the file cannot be read or is empty (the
    server has not written it: K3s did not come up). The text is the admin's credentials: the task that asks for it is no_log."""
    try:
        with open(path, "rb") as handle:
            content = handle.read()
    except OSError as err:
        return {"kubeconfig": "", "kubeconfig_error": "%s: %s" % (path, err.strerror or err)}
    if not content.strip():
        return {"kubeconfig": "", "kubeconfig_error": "%s is empty" % path}
    return {"kubeconfig": base64.b64encode(content).decode("ascii"), "kubeconfig_error": ""}
