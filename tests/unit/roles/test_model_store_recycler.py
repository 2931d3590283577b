"""roles/model_registry/files/model_store_recycler.py: which store volumes it frees, and a pass against a kubectl
faked at the process boundary (a script that answers the list and records each patch). The real thing runs in
tests/lab: the volume a lost node's pod held is Available again when the node is back."""

import importlib.util
import json
import stat
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[3] / "roles" / "model_registry" / "files" / "model_store_recycler.py"
spec = importlib.util.spec_from_file_location("model_store_recycler", SCRIPT)
recycler = importlib.util.module_from_spec(spec)
spec.loader.exec_module(recycler)

CLASS = "nvidia-ai-store"


def pv(name, phase, storage_class=CLASS, claim=True, deleting=False, version="7"):
    meta = {"name": name, "resourceVersion": version}
    if deleting:
        meta["deletionTimestamp"] = "2026-12-05T10:00:00Z"
    spec = {"storageClassName": storage_class}
    if claim:
        spec["claimRef"] = {"namespace": "ai-serving", "name": name + "-claim", "uid": "u-" + name}
    return {"metadata": meta, "spec": spec, "status": {"phase": phase}}


CASES = [
    ("a Released store volume is freed", [pv("a", "Released")], [("a", "7")]),
    ("Bound and Available ones are left", [pv("b", "Bound"), pv("c", "Available", claim=False)], []),
    ("another class is not ours", [pv("d", "Released", storage_class="local-path")], []),
    ("one being deleted is left to its deletion", [pv("e", "Released", deleting=True)], []),
    ("Released without a claimRef has nothing to remove", [pv("f", "Released", claim=False)], []),
    ("sorted by name", [pv("h", "Released", version="9"), pv("g", "Released")], [("g", "7"), ("h", "9")]),
]


@pytest.mark.parametrize(("volumes", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_to_recycle(volumes, expected):
    assert recycler.to_recycle(volumes, CLASS) == expected


def test_the_patch_tests_the_version_it_read():
    assert recycler.release_patch("42") == [
        {"op": "test", "path": "/metadata/resourceVersion", "value": "42"},
        {"op": "remove", "path": "/spec/claimRef"},
    ]


def fake_kubectl(tmp_path, items, list_rc=0, patch_rc=0, version_now="7"):
    """A kubectl that prints the volume list, answers a patch with patch_rc and a read of one volume's
    resourceVersion with version_now, and appends each call's arguments to calls.jsonl."""
    (tmp_path / "list.json").write_text(json.dumps({"items": items}))
    script = tmp_path / "kubectl"
    script.write_text(
        "#!/usr/bin/env python3\n"
        "import json, sys\n"
        f"calls = {str(tmp_path / 'calls.jsonl')!r}\n"
        "open(calls, 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n"
        "if sys.argv[1] == 'get':\n"
        f"    if {list_rc}:\n"
        "        sys.stderr.write('The connection to the server 127.0.0.1:6443 was refused\\n'); sys.exit(1)\n"
        f"    print(open({str(tmp_path / 'list.json')!r}).read() if sys.argv[2] == 'persistentvolumes' "
        f"else {version_now!r})\n"
        "if sys.argv[1] == 'patch':\n"
        "    sys.stderr.write('The request is invalid\\n')\n"
        f"    sys.exit({patch_rc})\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return [str(script)]


def calls(tmp_path):
    return [json.loads(line) for line in (tmp_path / "calls.jsonl").read_text().splitlines()]


def test_a_pass_lists_the_store_volumes_and_patches_only_the_released(tmp_path):
    kubectl = fake_kubectl(tmp_path, [pv("a", "Released"), pv("b", "Bound")])
    done, error = recycler.sweep(kubectl, CLASS)
    assert (done, error) == (["a"], "")
    listing, patch = calls(tmp_path)
    assert listing == ["get", "persistentvolumes", "-l", recycler.SELECTOR, "-o", "json"]
    assert patch[:5] == ["patch", "persistentvolume", "a", "--type", "json"]
    assert json.loads(patch[6]) == recycler.release_patch("7")


def test_a_volume_another_server_freed_first_is_not_an_error(tmp_path):
    kubectl = fake_kubectl(tmp_path, [pv("a", "Released")], patch_rc=1, version_now="8")
    assert recycler.sweep(kubectl, CLASS) == ([], "")


def test_a_patch_refused_on_an_unchanged_volume_is_an_error(tmp_path):
    kubectl = fake_kubectl(tmp_path, [pv("a", "Released")], patch_rc=1, version_now="7")
    assert recycler.sweep(kubectl, CLASS) == ([], "a: The request is invalid")


def test_an_api_that_does_not_answer_is_an_error_not_a_crash(tmp_path):
    kubectl = fake_kubectl(tmp_path, [], list_rc=1)
    assert recycler.sweep(kubectl, CLASS) == ([], "The connection to the server 127.0.0.1:6443 was refused")
    assert recycler.main(["--kubectl", *kubectl, "--storage-class", CLASS, "--once"]) == 1


def test_without_kubectl_the_unit_stops_cleanly(tmp_path):
    """After playbooks/reset.yml removed K3s: exit 0, so Restart=on-failure does not start it again."""
    assert recycler.main(["--kubectl", str(tmp_path / "gone"), "--storage-class", CLASS, "--once"]) == 0
