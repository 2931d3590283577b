import subprocess

import pytest
import yaml

from lab.nodes import labctl

PACKAGES = "# comment\nsystemd\n\npython3  # inline\nsudo\n"


def test_read_packages_ignores_comments_and_blanks():
    assert labctl.read_packages(PACKAGES) == ["systemd", "python3", "sudo"]


def test_recipe_hash_is_stable_and_order_insensitive_for_packages():
    a = labctl.recipe_hash(PACKAGES, "echo hi\n")
    assert a == labctl.recipe_hash("sudo\npython3\nsystemd\n", "echo hi\n")
    assert a != labctl.recipe_hash(PACKAGES + "curl\n", "echo hi\n")
    assert a != labctl.recipe_hash(PACKAGES, "echo bye\n")
    assert a != labctl.recipe_hash(PACKAGES, "echo hi\n", suite="trixie")


def test_image_tag_follows_the_files_in_the_repo():
    tag, digest = labctl.image_tag()
    assert tag == f"{labctl.IMAGE_REPO}:{digest[:16]}"


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        (
            [
                (
                    "debian.sources",
                    "Types: deb\nURIs: http://mirror.test/debian/\nSuites: bookworm bookworm-updates\n"
                    "Components: main\n\nTypes: deb\nURIs: http://mirror.test/debian-security\n"
                    "Suites: bookworm-security\n",
                )
            ],
            "http://mirror.test/debian",
        ),
        (
            [
                (
                    "sources.list",
                    "# deb http://old.test/debian bookworm main\n"
                    "deb [arch=amd64] http://one.test/debian bookworm main\n",
                )
            ],
            "http://one.test/debian",
        ),
        ([("x.sources", "Types: deb-src\nURIs: http://src.test/\nSuites: bookworm\n")], None),
        ([("sources.list", "deb http://one.test/debian trixie main\n")], None),
    ],
)
def test_debian_mirror(files, expected):
    assert labctl.debian_mirror(files) == expected


def test_node_names():
    assert labctl.node_names(1, 2) == {"lab-cp-1": "server", "lab-gpu-1": "gpu", "lab-gpu-2": "gpu"}
    assert list(labctl.node_names(3, 0)) == ["lab-cp-1", "lab-cp-2", "lab-cp-3"]
    with pytest.raises(labctl.LabError, match="at least 1"):
        labctl.node_names(0, 2)


def test_node_addresses_are_fixed_and_distinct_in_the_network():
    names = labctl.node_names(1, 2)
    addresses = labctl.node_addresses(names, "10.89.3.0/24")
    assert addresses == {"lab-cp-1": "10.89.3.11", "lab-gpu-1": "10.89.3.12", "lab-gpu-2": "10.89.3.13"}
    assert labctl.node_addresses(dict(reversed(list(names.items()))), "10.89.3.0/24") == addresses


def test_render_inventory_is_yaml_with_the_three_groups():
    nodes = {
        "lab-cp-1": {"kind": "server", "ip": "10.89.0.2", "hostkey": "ssh-ed25519 AAA"},
        "lab-gpu-1": {"kind": "gpu", "ip": "10.89.0.3", "hostkey": "ssh-ed25519 BBB"},
    }
    inv = yaml.safe_load(labctl.render_inventory(nodes, "/k/id", "/k/known"))
    children = inv["all"]["children"]
    python = {"ansible_python_interpreter": "/usr/bin/python3"}
    assert children["k3s_servers"]["hosts"] == {"lab-cp-1": {"ansible_host": "10.89.0.2", **python}}
    assert children["k3s_agents"]["hosts"] == {"lab-gpu-1": {"ansible_host": "10.89.0.3", **python}}
    assert "ansible_python_interpreter" not in inv["all"]["vars"]  # localhost keeps the controller's venv
    assert list(children["gpu_nodes"]["hosts"]) == ["lab-gpu-1"]
    assert inv["all"]["vars"]["ansible_user"] == "ansible"
    assert "StrictHostKeyChecking=yes" in inv["all"]["vars"]["ansible_ssh_common_args"]
    assert labctl.known_hosts_lines(nodes).splitlines()[1] == "lab-gpu-1,10.89.0.3 ssh-ed25519 BBB"


def test_lab_secrets_go_into_the_inventory_and_stay_private(tmp_path, monkeypatch):
    monkeypatch.setattr(labctl, "STATE_DIR", tmp_path)
    first = labctl.ensure_secrets()
    assert set(first) == {"k3s_token", "k3s_agent_token", "litellm_master_key", "monitoring_grafana_admin_password"}
    assert first["litellm_master_key"].startswith("sk-") and len(first["litellm_master_key"]) == 51
    assert labctl.ensure_secrets() == first  # made once, then reused
    assert all((tmp_path / f).stat().st_mode & 0o777 == 0o600 for f in labctl.LAB_SECRETS)
    inv = yaml.safe_load(labctl.render_inventory({"lab-cp-1": {"kind": "server", "ip": "1"}}, "k", "kh", first))
    assert {k: inv["all"]["vars"][k] for k in first} == first


def test_a_lab_secret_the_collection_refuses_is_drawn_again(tmp_path, monkeypatch):
    """A random hex master key can hold "1234", which the gateway's check takes for a placeholder (CI failed on one):
    a stored one is replaced, and a draw the checks refuse is made again."""
    monkeypatch.setattr(labctl, "STATE_DIR", tmp_path)
    refused = "sk-72fd75956d49d86d414b5bb5fb6746bab9c1523b1234f44d"
    (tmp_path / "litellm-master-key").write_text(refused + "\n")
    draws = iter(["sk-" + "1234" * 12, "sk-" + "ab12cd34ef56" * 4])
    real = labctl.LAB_SECRETS["litellm-master-key"]
    monkeypatch.setitem(labctl.LAB_SECRETS, "litellm-master-key", (real[0], lambda: next(draws)))
    got = labctl.ensure_secrets()["litellm_master_key"]
    assert got == "sk-" + "ab12cd34ef56" * 4
    assert (tmp_path / "litellm-master-key").read_text().strip() == got
    assert oct((tmp_path / "litellm-master-key").stat().st_mode & 0o777) == "0o600"
    assert not labctl.secret_refused("litellm_master_key", got) and labctl.secret_refused("litellm_master_key", refused)


def test_the_machine_running_the_lab_is_the_firewalls_admin_network():
    nodes = {"lab-cp-1": {"kind": "server", "ip": "10.89.0.11"}}
    inv = yaml.safe_load(labctl.render_inventory(nodes, "k", "kh", None, ["10.89.0.1/32"]))
    assert inv["all"]["vars"]["prereq_firewall_admin_networks"] == ["10.89.0.1/32"]
    assert (
        "prereq_firewall_admin_networks" not in yaml.safe_load(labctl.render_inventory(nodes, "k", "kh"))["all"]["vars"]
    )


def test_no_gpu_agents_gives_empty_groups():
    inv = yaml.safe_load(labctl.render_inventory({"lab-cp-1": {"kind": "server", "ip": "1"}}, "k", "kh"))
    assert inv["all"]["children"]["gpu_nodes"]["hosts"] == {}


class FakePodman:
    """Stands in for the podman binary at the process boundary; records every call."""

    def __init__(self, image_exists):
        self.image_exists = image_exists
        self.calls = []

    def __call__(self, cmd, **kw):
        self.calls.append(cmd)
        rc = 0 if (cmd[:3] != ["podman", "image", "exists"] or self.image_exists) else 1
        return subprocess.CompletedProcess(cmd, rc, b"", b"")


def test_cached_image_is_not_rebuilt(monkeypatch):
    fake = FakePodman(image_exists=True)
    monkeypatch.setattr(labctl, "run", fake)
    tag = labctl.build_image()
    assert tag == labctl.image_tag()[0]
    assert [c[0] for c in fake.calls] == ["podman"]
    assert not any("debootstrap" in c for c in fake.calls)


def test_missing_image_is_debootstrapped_with_the_recipe_packages(monkeypatch, tmp_path):
    fake = FakePodman(image_exists=False)
    monkeypatch.setattr(labctl, "run", fake)
    monkeypatch.setattr(labctl, "STATE_DIR", tmp_path)
    monkeypatch.setenv("LAB_MIRROR", "http://mirror.test/debian")

    def fake_run(cmd, **kw):
        fake.calls.append(cmd)
        if cmd[0] == "debootstrap":
            (tmp_path / "done").write_text("")
            rootfs = cmd[-2]
            import os

            os.makedirs(os.path.join(rootfs, "tmp"))
            return subprocess.CompletedProcess(cmd, 0, b"", b"")
        return (
            FakePodman.__call__(fake, cmd, **kw)
            if cmd[0] == "podman"
            else subprocess.CompletedProcess(cmd, 0, b"", b"")
        )

    monkeypatch.setattr(labctl, "run", fake_run)
    labctl.build_image()
    deboot = next(c for c in fake.calls if c[0] == "debootstrap")
    assert deboot[-1] == "http://mirror.test/debian"
    included = deboot[2].split("=", 1)[1].split(",")
    assert {
        "systemd",
        "python3",
        "python3-apt",
        "openssh-server",
        "sudo",
        "iproute2",
        "ca-certificates",
        "curl",
    } <= set(included)
    assert any(c[:2] == ["podman", "import"] for c in fake.calls)
