"""playbooks/k3s.yml refuses a bad airgap bundle on the controller, before any node is contacted."""

import json
import os
import subprocess

import pytest
import yaml
from conftest import ROOT, tool
from make_test_airgap import make_bundle


def run_k3s(tmp_path, bundle):
    inv = tmp_path / "inv"
    inv.mkdir()
    # Nodes that cannot be reached: ssh is replaced by /bin/false, so nothing can be installed anywhere.
    node = {"ansible_ssh_executable": "/bin/false"}
    (inv / "hosts.yml").write_text(
        yaml.safe_dump(
            {
                "all": {
                    "vars": {
                        "k3s_token": "0123456789abcdef0123456789abcdef-test",
                        "k3s_install_mode": "airgap",
                        "k3s_airgap_dir": str(bundle),
                    },
                    "children": {
                        "k3s_servers": {"hosts": {"cp-1": {**node, "ansible_host": "127.0.0.2"}}},
                        "k3s_agents": {"hosts": {"gpu-1": {**node, "ansible_host": "127.0.0.3"}}},
                        "gpu_nodes": {"hosts": {"gpu-1": {}}},
                    },
                }
            }
        )
    )
    env = dict(
        os.environ,
        ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"),
        ANSIBLE_STDOUT_CALLBACK="ansible.posix.json",
        ANSIBLE_COLLECTIONS_PATH=str(ROOT / ".cache" / "collections"),
    )
    proc = subprocess.run(
        [tool("ansible-playbook"), str(ROOT / "playbooks" / "k3s.yml"), "-i", str(inv)],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
        check=False,
    )
    return proc, json.loads(proc.stdout)


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
