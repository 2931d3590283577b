"""plugins/module_utils/node/sysctl_settings.py against a /proc/sys-shaped tree."""

import pytest

from ansible_collections.aiinfra.k3s.plugins.module_utils.node.sysctl_settings import (
    HEADER,
    bad_keys,
    live_changes,
    normal,
    proc_path,
    render,
)


@pytest.mark.parametrize(
    ("value", "text"), [(1, "1"), (True, "1"), (False, "0"), ("1024\t 65535", "1024 65535"), ("10\n", "10")]
)
def test_values_are_compared_as_the_kernel_prints_them(value, text):
    assert normal(value) == text


def test_the_file_is_sorted_key_value_lines():
    assert render({"net.ipv4.ip_forward": 1, "kernel.panic": 10}) == HEADER + "kernel.panic=10\nnet.ipv4.ip_forward=1\n"


def test_dots_are_levels_unless_the_key_uses_slashes():
    assert proc_path("net.ipv4.ip_forward", "/p") == "/p/net/ipv4/ip_forward"
    assert proc_path("net/ipv4/conf/eth0.10/forwarding", "/p") == "/p/net/ipv4/conf/eth0.10/forwarding"


def test_only_differing_and_missing_live_values_are_reported(tmp_path):
    (tmp_path / "net" / "ipv4").mkdir(parents=True)
    (tmp_path / "net" / "ipv4" / "ip_forward").write_text("1\n")
    (tmp_path / "net" / "ipv4" / "ip_local_port_range").write_text("32768\t60999\n")
    values = {"net.ipv4.ip_forward": 1, "net.ipv4.ip_local_port_range": "1024 65535", "net.bridge.nope": 1}
    assert live_changes(values, str(tmp_path)) == {
        "net.bridge.nope": (None, "1"),
        "net.ipv4.ip_local_port_range": ("32768 60999", "1024 65535"),
    }


def test_names_that_are_not_sysctls_are_refused():
    assert bad_keys({"net.ipv4.ip_forward": 1, "": 1, "a b": 1, "a=b": 1, "net..x": 1}) == ["", "a b", "a=b", "net..x"]
