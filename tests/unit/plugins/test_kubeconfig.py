import pytest
import yaml

from ansible_collections.aiinfra.k3s.plugins.plugin_utils.kubeconfig import site_kubeconfig

K3S_YAML = """apiVersion: v1
clusters:
- cluster:
    certificate-authority-data: Q0E=
    server: https://127.0.0.1:6443
  name: default
contexts:
- context:
    cluster: default
    user: default
  name: default
current-context: default
kind: Config
preferences: {}
users:
- name: default
  user:
    client-certificate-data: Q0VSVA==
    client-key-data: S0VZ
"""


def test_points_at_endpoint_and_names_after_site():
    out = yaml.safe_load(site_kubeconfig(K3S_YAML, "https://10.0.0.10:6443", "gamorcloud"))
    assert out["clusters"][0] == {
        "cluster": {"certificate-authority-data": "Q0E=", "server": "https://10.0.0.10:6443"},
        "name": "gamorcloud",
    }
    assert out["contexts"][0] == {"context": {"cluster": "gamorcloud", "user": "gamorcloud"}, "name": "gamorcloud"}
    assert out["current-context"] == "gamorcloud"
    assert out["users"][0]["user"]["client-key-data"] == "S0VZ"


@pytest.mark.parametrize(
    ("text", "server", "error"),
    [
        ("{", "https://a:6443", "not valid YAML"),
        ("[]", "https://a:6443", "not a mapping"),
        (K3S_YAML, "http://a:6443", "must start with https://"),
        ("clusters: []\nusers: []\ncontexts: []\n", "https://a:6443", "exactly one entry"),
    ],
)
def test_rejects(text, server, error):
    with pytest.raises(ValueError, match=error):
        site_kubeconfig(text, server, "x")
