"""The built collection carries what an installed collection needs and nothing of the development tree;
installed into an empty path, its playbooks run by name."""

import os
import subprocess
import tarfile

import pytest
import yaml
from conftest import ROOT, tool

# Top-level entries an installed collection has (docs, the example site and the changelog included).
SHIPPED = {
    "MANIFEST.json",
    "FILES.json",
    "README.md",
    "meta",
    "roles",
    "plugins",
    "playbooks",
    "docs",
    "inventories",
    "changelogs",
}
DEVELOPMENT = (
    ".ruff_cache",
    ".cache",
    ".venv",
    "ansible.cfg",
    "pytest.ini",
    "ruff.toml",
    ".yamllint",
    ".ansible-lint",
    "Makefile",
    "requirements-dev.in",
    "requirements-dev.txt",
    "tests/",
    "lab/",
    "molecule/",
    "benchmarks/",
    "inventories/lab",
    "changelogs/fragments",
    "changelogs/config.yaml",
    "docs/gen_role_vars.py",
    "__pycache__",
    ".ci/",
)
SECRETS = {
    "k3s_token": "5d0b9e3a7c1f4e8b2a6d9c0f3e7b1a4d8c2f6e0b",
    "k3s_agent_token": "a1c3e5f7b9d2a4c6e8f0b1d3a5c7e9f2b4d6a8c0",
    "litellm_master_key": "sk-8e2c5a9f1d7b3e6c0a4f8d2b5e9c1a7f3d6b",
    "monitoring_grafana_admin_password": "Vb4nM8qT2xL6rP0wK3sJ",
}


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("collection")
    clean = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env = dict(clean, ANSIBLE_HOME=str(tmp / "home"), ANSIBLE_NOCOLOR="1")
    subprocess.run(
        [tool("ansible-galaxy"), "collection", "build", "--output-path", str(tmp), str(ROOT)],
        check=True, capture_output=True, text=True, env=env, cwd=tmp, timeout=300,
    )  # fmt: skip
    (archive,) = tmp.glob("aiinfra-k3s-*.tar.gz")
    target = tmp / "collections"
    subprocess.run(
        [tool("ansible-galaxy"), "collection", "install", "--no-deps", "-p", str(target), str(archive)],
        check=True, capture_output=True, text=True, env=env, cwd=tmp, timeout=300,
    )  # fmt: skip
    with tarfile.open(archive) as tar:
        names = tar.getnames()
    return {"names": names, "env": dict(env, ANSIBLE_COLLECTIONS_PATH=str(target)), "tmp": tmp}


def test_the_archive_ships_the_collection_and_nothing_of_the_development_tree(installed):
    names = installed["names"]
    assert {n.split("/")[0] for n in names} == SHIPPED
    leaked = [n for n in names if any(n == d.rstrip("/") or n.startswith(d) or "/" + d in "/" + n for d in DEVELOPMENT)]
    assert leaked == []
    for needed in (
        "meta/runtime.yml",
        "playbooks/site.yml",
        "roles/k3s/meta/argument_specs.yml",
        "roles/vllm/README.md",
        "plugins/module_utils/plan/inventory_spec.py",
        "inventories/example/hosts.yml",
    ):
        assert needed in names


@pytest.mark.slow
@pytest.mark.parametrize("playbook", ["aiinfra.k3s.validate", "aiinfra.k3s.render"])
def test_installed_playbooks_run_by_name(installed, playbook):
    tmp = installed["tmp"]
    site = tmp / "site"
    (site / "group_vars").mkdir(parents=True, exist_ok=True)
    hosts = {"all": {"children": {
        "k3s_servers": {"hosts": {"cp-1": {"ansible_host": "192.0.2.10", "ansible_ssh_executable": "/bin/false"}}},
        "k3s_agents": {"hosts": {"gpu-1": {"ansible_host": "192.0.2.11", "ansible_ssh_executable": "/bin/false"}}},
        "gpu_nodes": {"hosts": {"gpu-1": {"aiinfra_gpu_count": 1}}},
    }}}  # fmt: skip
    (site / "hosts.yml").write_text(yaml.safe_dump(hosts))
    (site / "group_vars" / "all.yml").write_text(
        yaml.safe_dump(dict(SECRETS, vllm_models=[{"served_name": "qwen-7b", "path": "Qwen/Qwen2-7B"}]))
    )
    out = tmp / ("rendered-" + playbook.rsplit(".", 1)[1])
    proc = subprocess.run(
        [tool("ansible-playbook"), playbook, "-i", str(site), "-e", "render_dir=%s" % out],
        capture_output=True, text=True, env=installed["env"], cwd=tmp, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert str(ROOT) not in proc.stdout  # the installed copy ran, not the working tree
    if playbook.endswith("render"):
        assert (out / "vllm.yaml").is_file() and (out / "litellm.yaml").is_file()
    else:
        assert "Inventory sound: 1 server(s), 1 agent(s), 1 GPU node(s)" in " ".join(proc.stdout.split())


def test_no_plugin_claims_a_release_the_collection_has_not_had():
    """Until a release is in the changelog, everything is new in galaxy.yml's version: a version_added above it
    (or of a release never made) would tell users of a history that does not exist."""
    version = yaml.safe_load((ROOT / "galaxy.yml").read_text())["version"]
    released = set((yaml.safe_load((ROOT / "changelogs" / "changelog.yaml").read_text()) or {}).get("releases") or {})
    allowed = released | {version}
    wrong = []
    for path in sorted((ROOT / "plugins").rglob("*.py")):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if line.strip().startswith("version_added:"):
                added = line.split(":", 1)[1].strip().strip("'\"")
                if added not in allowed:
                    wrong.append("%s:%d: %s" % (path.relative_to(ROOT), number, added))
    assert not wrong, "version_added not in %s: %s" % (sorted(allowed), wrong)
