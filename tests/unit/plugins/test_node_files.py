"""plugins/module_utils/node/node_files.py on a real directory tree."""

import hashlib
import json
import os
import pwd
import subprocess

import pytest
from conftest import ansible_env, run_module, tool

from ansible_collections.aiinfra.k3s.plugins.module_utils.node.node_files import (
    bad_paths,
    changes,
    converged,
    diff_entries,
    free_space,
    present,
    wanted_mode,
)


def test_only_what_differs_is_planned(tmp_path):
    etc = tmp_path / "etc"
    etc.mkdir()
    (etc / "same.yaml").write_text("a: 1\n")
    (etc / "old.yaml").write_text("a: 1\n")
    (etc / "gone.yaml").write_text("x\n")
    os.symlink("/usr/local/bin/k3s", tmp_path / "kubectl")
    os.symlink("/elsewhere", tmp_path / "crictl")
    todo = changes(
        [str(etc), str(tmp_path / "new-dir")],
        {str(etc / "same.yaml"): "a: 1\n", str(etc / "old.yaml"): "a: 2\n", str(etc / "new.yaml"): "b\n"},
        {str(tmp_path / n): "/usr/local/bin/k3s" for n in ("kubectl", "crictl", "ctr")},
        [str(etc / "gone.yaml"), str(etc / "never.yaml")],
    )
    assert todo["directories"] == [str(tmp_path / "new-dir")]
    assert todo["write"] == {str(etc / "new.yaml"): (None, "b\n"), str(etc / "old.yaml"): ("a: 1\n", "a: 2\n")}
    assert todo["links"] == {
        str(tmp_path / "crictl"): ("/elsewhere", "/usr/local/bin/k3s"),
        str(tmp_path / "ctr"): (None, "/usr/local/bin/k3s"),
    }
    assert todo["remove"] == [str(etc / "gone.yaml")]


def test_missing_parents_are_planned_first_and_get_the_mode_asked_for_below_them(tmp_path):
    deep = str(tmp_path / "a" / "b" / "c")
    todo = changes([deep, str(tmp_path / "a" / "x")], {}, {}, [])
    assert todo["directories"] == [str(tmp_path / n) for n in ("a", "a/b", "a/b/c", "a/x")]
    wanted = {deep: "0750", str(tmp_path / "a" / "x"): "0700"}
    assert [wanted_mode(d, wanted) for d in todo["directories"]] == ["0750", "0750", "0750", "0700"]


def test_a_converged_tree_plans_nothing(tmp_path):
    (tmp_path / "f").write_text("x\n")
    os.symlink("f", tmp_path / "l")
    assert changes(
        [str(tmp_path)], {str(tmp_path / "f"): "x\n"}, {str(tmp_path / "l"): "f"}, [str(tmp_path / "no")]
    ) == {
        "directories": [],
        "write": {},
        "links": {},
        "remove": [],
    }


def test_a_link_where_a_file_is_wanted_is_rewritten(tmp_path):
    (tmp_path / "target").write_text("x\n")
    os.symlink("target", tmp_path / "f")
    assert changes([], {str(tmp_path / "f"): "x\n"}, {}, [])["write"] == {str(tmp_path / "f"): (None, "x\n")}


def test_a_path_both_wanted_and_absent_is_kept(tmp_path):
    (tmp_path / "f").write_text("x\n")
    assert changes([], {str(tmp_path / "f"): "x\n"}, {}, [str(tmp_path / "f")])["remove"] == []


def test_present_names_existing_paths_in_order_and_follows_links(tmp_path):
    (tmp_path / "k3s").write_text("")
    os.symlink("k3s", tmp_path / "kubectl")
    os.symlink("missing", tmp_path / "dangling")
    paths = [str(tmp_path / n) for n in ("none", "kubectl", "dangling", "k3s")]
    assert present(paths) == [str(tmp_path / "kubectl"), str(tmp_path / "k3s")]


@pytest.mark.parametrize("below", ["", "not/yet/created"])
def test_free_space_is_what_df_reports_for_the_path_or_its_nearest_parent(tmp_path, below):
    """Compared with df itself, the tool the role used before; a path not created yet is measured at its parent."""
    df = (
        subprocess.run(
            ["df", "--output=avail,target", "-B1", str(tmp_path)], capture_output=True, text=True, check=True
        )
        .stdout.splitlines()[1]
        .split()
    )
    got = free_space(str(tmp_path / below))
    assert got["mount"] == df[1]
    assert abs(got["available"] - int(df[0])) < 64 * 1024 * 1024  # other processes write meanwhile


def test_secret_text_never_reaches_the_diff():
    todo = {
        "directories": [],
        "write": {"/etc/token": ("old-secret\n", "new-secret\n"), "/etc/config.yaml": (None, "a: 1\n")},
        "links": {},
        "remove": ["/etc/registries.yaml"],
    }
    entries = diff_entries(todo, {"/etc/token", "/etc/registries.yaml"})
    text = repr(entries)
    assert "secret\\n" not in text and "old-secret" not in text and "new-secret" not in text
    token = next(e for e in entries if e["after_header"] == "/etc/token")
    assert token["before"] != token["after"], "a changed secret must still show as changed"
    assert next(e for e in entries if e["after_header"] == "/etc/config.yaml")["after"] == "a: 1\n"


def test_only_absolute_paths_without_parent_steps():
    assert bad_paths(["/etc/x", "etc/x", "/etc/../x", "", "/a/b..c"]) == ["etc/x", "/etc/../x", ""]


@pytest.mark.slow
def test_module_creates_parents_like_file_whatever_the_umask_and_expands_variables(tmp_path, monkeypatch):
    """Under umask 077 the parents the module creates still get the mode asked for (as ansible.builtin.file gives
    them), and $VARS in a path are expanded as for a `path` option."""
    monkeypatch.setenv("NODE_FILES_TEST_ROOT", str(tmp_path))
    old = os.umask(0o077)
    try:
        rc, result = run_module(
            "aiinfra.k3s.node_files",
            {"directories": {"$NODE_FILES_TEST_ROOT/var/lib/store": "0755"}, "free_space": ["$NODE_FILES_TEST_ROOT"]},
        )
    finally:
        os.umask(old)
    assert rc == 0 and result["changed"], result
    modes = {p: oct((tmp_path / p).stat().st_mode & 0o777) for p in ("var", "var/lib", "var/lib/store")}
    assert modes == {"var": "0o755", "var/lib": "0o755", "var/lib/store": "0o755"}
    assert result["written"] == [str(tmp_path / p) for p in ("var", "var/lib", "var/lib/store")]
    assert list(result["free_space"]) == ["$NODE_FILES_TEST_ROOT"]  # keyed as asked


def test_module_converges_files_modes_and_links_then_reports_nothing(tmp_path):
    """The module as Ansible runs it: check mode touches nothing, the run writes with the modes asked for (the
    secret 0600), a drifted mode is put back, and a run with nothing to do reports changed=false."""
    etc = tmp_path / "etc"
    args = {
        "directories": {str(etc): "0750"},
        "files": [{"path": str(etc / "config.yaml"), "content": "a: 1\n"}],
        "secret_files": {str(etc / "token"): "s3cret\n"},
        "links": {str(tmp_path / "kubectl"): "/usr/local/bin/k3s"},
        "probe": [str(tmp_path / "k3s"), str(etc)],
        "free_space": [str(etc)],
    }
    (tmp_path / "k3s").write_text("")
    rc, result = run_module("aiinfra.k3s.node_files", args, check=True)
    assert rc == 0 and result["changed"] and not etc.exists()
    assert result["present"] == [str(tmp_path / "k3s")]
    assert result["free_space"][str(etc)]["available"] > 0
    rc, result = run_module("aiinfra.k3s.node_files", args)
    assert rc == 0 and result["changed"]
    assert (etc / "config.yaml").read_text() == "a: 1\n" and (etc / "token").read_text() == "s3cret\n"
    modes = {p.name: oct(p.stat().st_mode & 0o777) for p in (etc, etc / "config.yaml", etc / "token")}
    assert modes == {"etc": "0o750", "config.yaml": "0o644", "token": "0o600"}
    assert os.readlink(tmp_path / "kubectl") == "/usr/local/bin/k3s"
    assert "s3cret" not in json.dumps(result)
    (etc / "token").chmod(0o644)
    rc, result = run_module("aiinfra.k3s.node_files", args)
    assert rc == 0 and result["changed"] and oct((etc / "token").stat().st_mode & 0o777) == "0o600"
    rc, result = run_module("aiinfra.k3s.node_files", args)
    assert rc == 0 and not result["changed"] and result["written"] == []
    assert result["present"] == [str(tmp_path / "k3s"), str(etc)]


def test_module_finds_the_verified_files_the_node_lacks_in_the_same_run_and_keeps_their_record(tmp_path):
    """verified: a file of the wanted bytes is current (hashed once, then proven by the record from its stat), a
    missing one, one of other bytes and one of another mode are stale; nothing is copied or changed by it, and check
    mode writes no record. A bad sha256 fails before anything is written."""
    good, other, moded = tmp_path / "k3s", tmp_path / "images.tar", tmp_path / "chart.tgz"
    good.write_bytes(b"binary")
    other.write_bytes(b"old images")
    moded.write_bytes(b"chart")
    moded.chmod(0o644)
    record = tmp_path / "record" / "verified.json"
    verified = {
        str(good): {"sha256": hashlib.sha256(b"binary").hexdigest(), "size": 6},
        str(other): {"sha256": hashlib.sha256(b"new images").hexdigest()},
        str(moded): {"sha256": hashlib.sha256(b"chart").hexdigest(), "mode": "0600"},
        str(tmp_path / "missing"): {"sha256": "0" * 64},
    }
    args = {"files": [{"path": str(tmp_path / "unit"), "content": "u\n"}], "verified": verified,
            "verified_record": str(record)}  # fmt: skip
    rc, result = run_module("aiinfra.k3s.node_files", args, check=True)
    assert rc == 0 and sorted(result["stale"]) == sorted([str(other), str(moded), str(tmp_path / "missing")])
    assert not record.exists() and not (tmp_path / "unit").exists()
    rc, result = run_module("aiinfra.k3s.node_files", args)
    assert rc == 0 and result["written"] == [str(tmp_path / "unit")] and result["bytes_hashed"] > 0
    assert sorted(result["stale"]) == sorted([str(other), str(moded), str(tmp_path / "missing")])
    assert other.read_bytes() == b"old images" and oct(moded.stat().st_mode & 0o777) == "0o644"  # only read
    assert list(json.loads(record.read_text())["files"]) == [str(good)]
    rc, result = run_module("aiinfra.k3s.node_files", args)
    # The record proves the current file now; only the stale one of no given size is read again.
    assert rc == 0 and not result["changed"] and result["bytes_hashed"] == len(b"old images")
    rc, result = run_module("aiinfra.k3s.node_files", dict(args, verified={str(good): {"sha256": "abc"}},
                                                           files=[{"path": str(tmp_path / "u2"), "content": "x"}]))  # fmt: skip
    assert rc != 0 and str(good) in result["msg"] and not (tmp_path / "u2").exists()


def _converged_args(tmp_path, **extra):
    etc = tmp_path / "etc"
    etc.mkdir(mode=0o700, exist_ok=True)
    etc.chmod(0o700)
    (etc / "kubeconfig").write_text("k: 1\n")
    (etc / "kubeconfig").chmod(0o600)
    args = {"directories": {str(etc): "0700"}, "files": [], "secret_files": {str(etc / "kubeconfig"): "k: 1\n"},
            "links": {}, "absent": [], "probe": [str(etc)], "free_space": [], "owner": None, "group": None}  # fmt: skip
    args.update(extra)
    return args, etc


def test_converged_is_read_here_and_any_difference_leaves_it_to_the_module(tmp_path):
    args, etc = _converged_args(tmp_path)
    assert converged(args) == {"changed": False, "written": [], "present": [str(etc)], "free_space": {}}
    user = pwd.getpwuid(os.getuid()).pw_name
    assert converged(dict(args, owner=user, group=str(os.getgid()))) is not None
    assert converged(dict(args, owner="no-such-user-here")) is None
    assert converged(dict(args, secret_files={str(etc / "kubeconfig"): "k: 2\n"})) is None
    assert converged(dict(args, directories={str(etc): "u=rwx"})) is None  # symbolic: only the module can tell
    assert converged(dict(args, links={str(tmp_path / "l"): "/x"})) is None
    assert converged(dict(args, absent=[str(etc / "kubeconfig.old")])) is not None
    (etc / "kubeconfig").chmod(0o644)
    assert converged(args) is None


@pytest.mark.slow
def test_the_action_answers_a_converged_local_tree_itself_and_runs_the_module_for_a_change(tmp_path):
    """On the controller's own connection: nothing to change is found in the action's process (Ansible executes
    nothing); a drifted mode makes it run the module, which puts it back."""
    args, etc = _converged_args(tmp_path)
    args = {k: v for k, v in args.items() if v is not None}
    argv = [tool("ansible"), "localhost", "-m", "aiinfra.k3s.node_files", "-a", json.dumps(args), "-vvv"]
    runs = []
    for drift in (False, True):
        if drift:
            (etc / "kubeconfig").chmod(0o644)
        proc = subprocess.run(
            argv, capture_output=True, text=True, env=ansible_env("default"), timeout=120, check=False
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        runs.append(("EXEC " in proc.stdout, "CHANGED" in proc.stdout))
    assert runs == [(False, False), (True, True)]
    assert oct((etc / "kubeconfig").stat().st_mode & 0o777) == "0o600"
    assert "k: 1" not in proc.stdout
