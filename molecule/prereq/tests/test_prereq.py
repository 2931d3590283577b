"""What the prereq role must leave on a lab node (a container: kernel-wide settings are skipped)."""

import pytest

PACKAGES = ["ca-certificates", "curl", "iptables", "nftables", "systemd-timesyncd"]
NETWORK_SYSCTLS = {
    "net.ipv4.ip_forward": 1,
    "net.ipv6.conf.all.forwarding": 1,
    "net.bridge.bridge-nf-call-iptables": 1,
    "net.bridge.bridge-nf-call-ip6tables": 1,
}
NETWORK_CONF = "/etc/sysctl.d/90-aiinfra-k3s-network.conf"
KERNEL_CONF = "/etc/sysctl.d/90-aiinfra-k3s-kernel.conf"


@pytest.mark.parametrize("name", PACKAGES)
def test_package_installed(host, name):
    assert host.package(name).is_installed


@pytest.mark.parametrize(("key", "value"), sorted(NETWORK_SYSCTLS.items()))
def test_network_sysctl_live_and_persistent(host, key, value):
    assert host.sysctl(key) == value
    assert f"{key}={value}" in host.file(NETWORK_CONF).content_string.split("\n")


def test_kernel_wide_sysctls_not_touched_in_container(host):
    # vm.* and kernel.* are global: setting them from a privileged container would change the host.
    assert not host.file(KERNEL_CONF).exists


def test_time_sync_enabled(host):
    assert host.service("systemd-timesyncd").is_enabled


def test_sysctl_file_mode(host):
    f = host.file(NETWORK_CONF)
    assert f.user == "root"
    assert f.mode & 0o022 == 0
