"""playbooks/k3s.yml refuses a bad airgap bundle on the controller, before any node is contacted."""

import pytest
from conftest import run_playbook, write_inventory
from make_test_airgap import make_bundle


def run_k3s(tmp_path, bundle):
    # Nodes that cannot be reached: ssh is replaced by /bin/false, so nothing can be installed anywhere.
    node = {"ansible_ssh_executable": "/bin/false"}
    inventory = {
        "all": {
            "children": {
                "k3s_servers": {"hosts": {"cp-1": {**node, "ansible_host": "127.0.0.2"}}},
                "k3s_agents": {"hosts": {"gpu-1": {**node, "ansible_host": "127.0.0.3"}}},
                "gpu_nodes": {"hosts": {"gpu-1": {}}},
            }
        }
    }
    all_vars = {
        "k3s_token": "0123456789abcdef0123456789abcdef-test",
        "k3s_agent_token": "fedcba9876543210fedcba9876543210-agent",
        "k3s_install_mode": "airgap",
        "k3s_airgap_dir": str(bundle),
    }
    return run_playbook("k3s.yml", write_inventory(tmp_path / "inv", inventory, all_vars))


@pytest.mark.slow
@pytest.mark.parametrize(
    ("tamper", "drop", "error"),
    [
        ("binary", None, "k3s does not match its checksum"),
        ("images", None, "k3s-airgap-images-amd64.tar.zst does not match its checksum"),
        (None, "k3s-airgap-images-amd64.tar.zst", "no image tarball"),
        (None, "sha256sum-amd64.txt", "No sha256sum-<arch>.txt in k3s_airgap_dir"),
    ],
)
def test_bad_bundle_is_refused_before_any_node(tmp_path, tamper, drop, error):
    bundle = tmp_path / "bundle"
    make_bundle(bundle, tamper=tamper, drop=drop)
    proc, result = run_k3s(tmp_path, bundle)
    assert proc.returncode != 0
    assert error in proc.stdout
    stats = result["stats"]
    for node in ("cp-1", "gpu-1"):
        assert stats[node]["unreachable"] == 0 and stats[node]["failures"] == 0  # never contacted
        assert stats[node]["changed"] == 0
    assert stats["localhost"]["failures"] == 1
