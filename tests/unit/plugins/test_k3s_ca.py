"""plugins/module_utils/node/k3s_ca.py: the CA hash a joining node pins, on files laid out as a K3s server keeps them."""

import base64
import hashlib

import pytest

from ansible_collections.aiinfra.k3s.plugins.module_utils.node.k3s_ca import read_ca, read_kubeconfig, token_ca_hash

CA = (
    b"-----BEGIN CERTIFICATE-----\n"
    b"MIIBdzCCAR2gAwIBAgIBADAKBggqhkjOPQQDAjAjMSEwHwYDVQQDDBhrM3Mtc2VydmVy\n"
    b"-----END CERTIFICATE-----\n"
)
HASH = hashlib.sha256(CA).hexdigest()


@pytest.mark.parametrize(
    ("token", "expected"),
    [
        ("K10%s::server:0123456789abcdef\n" % HASH, HASH),
        ("K10%s::node:secret" % ("a" * 64), "a" * 64),
        ("0123456789abcdef", ""),  # a short token carries no hash
        ("K10%s::server:secret" % ("A" * 64), ""),  # K3s writes lower-case hex
        ("K10abc::server:secret", ""),
        ("", ""),
    ],
)
def test_the_hash_a_token_carries(token, expected):
    assert token_ca_hash(token) == expected


def server(tmp_path, ca=None, token=None):
    if ca is not None:
        (tmp_path / "tls").mkdir()
        (tmp_path / "tls" / "server-ca.crt").write_bytes(ca)
    if token is not None:
        (tmp_path / "token").write_text(token)
    return str(tmp_path)


def test_both_hashes_of_a_server_that_runs(tmp_path):
    got = read_ca(server(tmp_path, CA, "K10%s::server:topsecret\n" % HASH))
    assert got == {"ca_hash": HASH, "token_ca_hash": HASH}
    assert "topsecret" not in repr(got)


def test_a_custom_ca_shows_as_two_hashes(tmp_path):
    got = read_ca(server(tmp_path, CA, "K10%s::server:topsecret\n" % ("b" * 64)))
    assert got["ca_hash"] == HASH and got["token_ca_hash"] == "b" * 64


@pytest.mark.parametrize(("ca", "token"), [(None, None), (None, "K10%s::server:x" % HASH), (CA, None)])
def test_what_the_server_has_not_written_is_empty(tmp_path, ca, token):
    got = read_ca(server(tmp_path, ca, token))
    assert got == {"ca_hash": HASH if ca else "", "token_ca_hash": ""}


def test_the_admin_kubeconfig_comes_back_as_its_bytes(tmp_path):
    text = b"apiVersion: v1\nusers:\n- name: default\n  user: {client-key-data: c2VjcmV0}\n\xff"
    (tmp_path / "k3s.yaml").write_bytes(text)
    got = read_kubeconfig(str(tmp_path / "k3s.yaml"))
    assert base64.b64decode(got["kubeconfig"]) == text and got["kubeconfig_error"] == ""


def test_a_kubeconfig_the_server_has_not_written_says_why(tmp_path):
    got = read_kubeconfig(str(tmp_path / "k3s.yaml"))
    assert got["kubeconfig"] == "" and str(tmp_path / "k3s.yaml") in got["kubeconfig_error"]
    assert "No such file" in got["kubeconfig_error"]


def test_an_empty_kubeconfig_is_no_kubeconfig(tmp_path):
    (tmp_path / "k3s.yaml").write_bytes(b"\n")
    got = read_kubeconfig(str(tmp_path / "k3s.yaml"))
    assert got == {"kubeconfig": "", "kubeconfig_error": "%s is empty" % (tmp_path / "k3s.yaml")}
