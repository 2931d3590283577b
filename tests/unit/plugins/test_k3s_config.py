import pytest
from conftest import load_cases

from ansible_collections.aiinfra.k3s.plugins.filter.k8s_taints import k8s_taints
from ansible_collections.aiinfra.k3s.plugins.module_utils.node import k3s_config
from ansible_collections.aiinfra.k3s.plugins.module_utils.node.k3s_config import (
    build_config,
    extra_config_problems,
    secret_keys,
)
from ansible_collections.aiinfra.k3s.plugins.module_utils.plan.inventory_spec import parse_taint


@pytest.mark.parametrize("case", load_cases("k3s_config"))
def test_build_config(case):
    if "error" in case:
        with pytest.raises(ValueError, match=case["error"]):
            build_config(case["role"], case["params"])
        return
    config = build_config(case["role"], case["params"])
    for key, value in case.get("expect", {}).items():
        assert config[key] == value, key
    for key in case.get("absent", []):
        assert key not in config, key


def test_extra_config_problems_name_the_fix():
    problems = dict(extra_config_problems("server", {"--tls-san": "x", "tls-san": ["y"], "etcd-arg": []}))
    assert set(problems) == {"--tls-san", "tls-san"}
    assert "without leading dashes" in problems["--tls-san"]
    assert "k3s_tls_san" in problems["tls-san"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("nvidia.com/gpu=present:NoSchedule", {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}),
        ("dedicated:NoExecute", {"key": "dedicated", "effect": "NoExecute"}),
        (
            "node-role.kubernetes.io/control-plane:PreferNoSchedule",
            {"key": "node-role.kubernetes.io/control-plane", "effect": "PreferNoSchedule"},
        ),
    ],
)
def test_parse_taint(text, expected):
    assert parse_taint(text) == expected
    assert k8s_taints([text]) == [expected]


@pytest.mark.parametrize("text", ["nvidia.com/gpu=present", "x:Sometimes", ":NoSchedule", ""])
def test_parse_taint_rejects(text):
    with pytest.raises(ValueError, match="key\\[=value\\]:Effect"):
        parse_taint(text)


def test_deprecated_gpu_operator_labels_get_the_operators_names():
    labels, warnings = k3s_config.gpu_node_labels(
        {"ai-workload": "true", "nvidia.com/gpu.deploy-gpu-feature": "true", "nvidia.com/gpu.deploy-dcgm": "false"}
    )
    assert labels == {
        "ai-workload": "true",
        "nvidia.com/gpu.deploy.gpu-feature-discovery": "true",
        "nvidia.com/gpu.deploy.dcgm": "false",
    }
    assert len(warnings) == 2 and all("does not read" in w for w in warnings)
    # The operator's own name wins over a deprecated one set next to it.
    labels, _warnings = k3s_config.gpu_node_labels(
        {"nvidia.com/gpu.deploy-dcgm": "false", "nvidia.com/gpu.deploy.dcgm": "true"}
    )
    assert labels == {"nvidia.com/gpu.deploy.dcgm": "true"}


@pytest.mark.parametrize(
    "extra, secret",
    [
        ({}, []),
        ({"etcd-s3": True, "etcd-s3-bucket": "b"}, []),
        ({"etcd-s3-access-key": "AK", "etcd-s3-secret-key": "SK"}, ["etcd-s3-access-key", "etcd-s3-secret-key"]),
        ({"datastore-endpoint": "postgres://u:p@db:5432/k3s"}, ["datastore-endpoint"]),
    ],
)
def test_a_config_with_a_credential_is_known_as_secret(extra, secret):
    params = {"token_file": "/t", "cluster_cidr": "10.42.0.0/16", "service_cidr": "10.43.0.0/16",
              "flannel_backend": "vxlan", "first": True, "extra": extra}  # fmt: skip
    assert secret_keys(build_config("server", params)) == secret
