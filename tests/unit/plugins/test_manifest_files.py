"""plugins/module_utils/node/manifest_files.py on a real directory."""

from ansible_collections.aiinfra.k3s.plugins.module_utils.node.manifest_files import bad_names, changes


def test_only_differing_files_are_written_and_only_existing_ones_removed(tmp_path):
    (tmp_path / "same.yaml").write_text("a: 1\n")
    (tmp_path / "old.yaml").write_text("a: 1\n")
    (tmp_path / "gone.yaml").write_text("kind: Namespace\n")
    todo = changes(
        str(tmp_path), {"same.yaml": "a: 1\n", "old.yaml": "a: 2\n", "new.yaml": "b: 1\n"}, ["gone.yaml", "never.yaml"]
    )
    assert todo["write"] == {"old.yaml": ("a: 1\n", "a: 2\n"), "new.yaml": (None, "b: 1\n")}
    assert todo["remove"] == {"gone.yaml": "kind: Namespace\n"}


def test_a_file_both_wanted_and_absent_is_kept(tmp_path):
    (tmp_path / "x.yaml").write_text("a: 1\n")
    assert changes(str(tmp_path), {"x.yaml": "a: 1\n"}, ["x.yaml"]) == {"write": {}, "remove": {}}


def test_a_missing_directory_means_every_file_is_written(tmp_path):
    todo = changes(str(tmp_path / "nope"), {"x.yaml": "a"}, ["y.yaml"])
    assert todo == {"write": {"x.yaml": (None, "a")}, "remove": {}}


def test_names_must_stay_inside_the_directory():
    assert bad_names(["ok.yaml", "../x", "a/b", ".hidden", ""]) == ["../x", "a/b", ".hidden", ""]
