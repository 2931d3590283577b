"""plugins/module_utils/node/file_ops.py with Ansible's own AnsibleModule.atomic_move, under the umask of a root shell."""

import json
import os
import stat

import pytest
from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

from ansible_collections.aiinfra.k3s.plugins.module_utils.node.file_ops import octal_mode, write_atomic


@pytest.fixture
def module():
    with patch_module_args({}):
        yield basic.AnsibleModule(argument_spec={})


@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    yield
    os.umask(old)


def watch_moves(module, monkeypatch):
    """The mode the target has the moment atomic_move returns (before the caller sets the wanted mode)."""
    seen = []
    real = module.atomic_move

    def move(src, dest, *args, **kwargs):
        real(src, dest, *args, **kwargs)
        seen.append(stat.S_IMODE(os.stat(dest).st_mode))

    monkeypatch.setattr(module, "atomic_move", move)
    return seen


@pytest.mark.parametrize("existing_mode", [None, 0o644, 0o600], ids=["new-file", "loose-file", "tight-file"])
def test_a_secret_is_never_readable_by_others_at_any_step(tmp_path, module, umask_022, monkeypatch, existing_mode):
    target = tmp_path / "cluster-token"
    if existing_mode is not None:
        target.write_text("old\n")
        target.chmod(existing_mode)
    seen = watch_moves(module, monkeypatch)
    write_atomic(module, str(target), "secret\n", "0600")
    assert target.read_text() == "secret\n"
    assert seen == [0o600]  # atomic_move alone leaves a new file 0644 under umask 022, and keeps a 0644 file so
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".aiinfra-")]


def test_without_a_mode_atomic_move_decides_as_before(tmp_path, module, umask_022, monkeypatch):
    seen = watch_moves(module, monkeypatch)
    write_atomic(module, str(tmp_path / "unit"), json.dumps({}))
    assert seen == [0o644]


def test_a_link_at_the_target_is_replaced_not_followed(tmp_path, module, umask_022):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_text("keep\n")
    elsewhere.chmod(0o644)
    (tmp_path / "token").symlink_to(elsewhere)
    write_atomic(module, str(tmp_path / "token"), "secret\n", 0o600)
    assert not (tmp_path / "token").is_symlink() and elsewhere.read_text() == "keep\n"
    assert stat.S_IMODE((tmp_path / "token").stat().st_mode) == 0o600


@pytest.mark.parametrize("given, mode", [("0600", 0o600), (0o640, 0o640), ("u=rw", None), (None, None)])
def test_octal_mode(given, mode):
    assert octal_mode(given) == mode
