"""plugins/module_utils/node/verified_files.py on real files: hashed once, then proven by stat."""

import hashlib
import json
import os
import stat

import pytest
from conftest import run_module

from ansible_collections.aiinfra.k3s.plugins.module_utils.node.verified_files import (
    bad_files,
    inspect,
    load_record,
    sha256_file,
    write_record,
)

CONTENT = b"k3s binary stand-in\n" * 1000


def counting():
    """A hash function that counts the files it reads."""
    calls = []

    def hash_file(path):
        calls.append(path)
        return sha256_file(path)

    return hash_file, calls


@pytest.fixture
def artifact(tmp_path):
    path = tmp_path / "k3s"
    path.write_bytes(CONTENT)
    return str(path), {"sha256": hashlib.sha256(CONTENT).hexdigest(), "size": len(CONTENT)}


def test_hashed_once_then_proven_by_the_record(artifact):
    path, want = artifact
    hash_file, calls = counting()
    first = inspect({path: want}, {}, hash_file)
    assert (first["current"], first["stale"], first["bytes_hashed"]) == ([path], [], len(CONTENT))
    second = inspect({path: want}, first["entries"], hash_file)
    assert (second["current"], second["hashed"], second["bytes_hashed"]) == ([path], {}, 0)
    assert second["entries"] == first["entries"]
    assert calls == [path]


# How a file can change under its record, and what the next run then does: each rewrite is hashed again.
CHANGES = {
    "same size, other bytes, mtime set back": (lambda p: _rewrite(p, CONTENT.upper(), keep_mtime=True), "stale"),
    "same bytes written again": (lambda p: _rewrite(p, CONTENT, keep_mtime=False), "current"),
    "mode changed": (lambda p: os.chmod(p, 0o700), "current"),
    "other size": (lambda p: _rewrite(p, CONTENT + b"x", keep_mtime=False), "stale"),
    "removed": (os.unlink, "stale"),
}


def _rewrite(path, data, keep_mtime):
    before = os.stat(path)
    with open(path, "r+b") as handle:
        handle.write(data)
        handle.truncate()
    if keep_mtime:
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_a_change_is_never_taken_for_the_recorded_file(artifact, change):
    path, want = artifact
    record = inspect({path: want}, {})["entries"]
    mutate, expected = CHANGES[change]
    mutate(path)
    hash_file, calls = counting()
    result = inspect({path: want}, record, hash_file)
    assert (result["current"] if expected == "current" else result["stale"]) == [path]
    assert (path in result["entries"]) == (expected == "current")
    # A file of the wanted size is read again; one of another size or missing is stale without reading it.
    assert calls == (
        [path]
        if change in ("same size, other bytes, mtime set back", "same bytes written again", "mode changed")
        else []
    )


def test_missing_and_foreign_entries(tmp_path, artifact):
    path, want = artifact
    other = str(tmp_path / "absent.tar.zst")
    record = {"/elsewhere": {"sha256": "0" * 64, "size": 1, "mtime_ns": 1, "ctime_ns": 1, "ino": 1}}
    result = inspect({path: want, other: {"sha256": "1" * 64}}, record)
    assert result["stale"] == [other] and result["current"] == [path]
    assert set(result["entries"]) == {"/elsewhere", path}  # entries of other callers are kept


def test_record_round_trip_and_mode(tmp_path, artifact):
    path, want = artifact
    record_path = str(tmp_path / "state" / "verified-files.json")
    entries = inspect({path: want}, {})["entries"]
    write_record(record_path, entries)
    assert load_record(record_path) == entries
    assert stat.S_IMODE(os.stat(record_path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(os.path.dirname(record_path)).st_mode) == 0o700
    # Another version, or garbage, is no record: every file is hashed again.
    for text in ('{"version": 99, "files": {}}', "not json"):
        with open(record_path, "w", encoding="utf-8") as handle:
            handle.write(text)
        assert load_record(record_path) == {}


@pytest.mark.parametrize(
    "files, count",
    [
        ({"/usr/local/bin/k3s": {"sha256": "a" * 64}}, 0),
        ({"relative/k3s": {"sha256": "a" * 64}}, 1),
        ({"/var/../etc/k3s": {"sha256": "a" * 64}}, 1),
        ({"/usr/local/bin/k3s": {"sha256": "xyz"}}, 1),
        ({"/usr/local/bin/k3s": {}}, 1),
    ],
)
def test_bad_files(files, count):
    assert len(bad_files(files)) == count


def test_module_run_twice_and_require(tmp_path, artifact):
    path, want = artifact
    record = str(tmp_path / "record.json")
    args = {"files": {path: want}, "record": record}
    rc, first = run_module("aiinfra.k3s.verified_files", args)
    assert rc == 0 and first["changed"] is False and first["bytes_hashed"] == len(CONTENT)
    rc, second = run_module("aiinfra.k3s.verified_files", args)
    assert rc == 0 and second["current"] == [path] and second["bytes_hashed"] == 0
    with open(path, "ab") as handle:
        handle.write(b"tampered")
    rc, failed = run_module("aiinfra.k3s.verified_files", dict(args, require=True))
    assert rc != 0 and failed["stale"] == [path] and path in failed["msg"]
    # Check mode reads and hashes but never writes the record.
    os.unlink(record)
    rc, checked = run_module("aiinfra.k3s.verified_files", {"files": {path: want}, "record": record}, check=True)
    assert rc == 0 and not os.path.exists(record)
    assert json.dumps(checked["wanted"]) == json.dumps({path: want})


def test_a_file_of_another_mode_or_owner_is_stale_without_being_read(artifact):
    """The content is right, but the mode (or owner) the caller names is not: stale, so the copy that follows sets it;
    with the mode back it is current again."""
    path, want = artifact
    os.chmod(path, 0o644)
    hash_file, calls = counting()
    me = __import__("pwd").getpwuid(os.getuid()).pw_name
    out = inspect({path: dict(want, mode="0600", owner=me)}, {}, hash_file)
    assert out["stale"] == [path] and calls == []
    os.chmod(path, 0o600)
    assert inspect({path: dict(want, mode="0600", owner=me)}, {}, hash_file)["current"] == [path]
    other = next(u.pw_name for u in __import__("pwd").getpwall() if u.pw_uid != os.getuid())
    assert inspect({path: dict(want, owner=other)}, {}, hash_file)["stale"] == [path]


@pytest.mark.parametrize(
    ("extra", "found"),
    [
        ({"mode": 600}, "mode"),
        ({"mode": "u+rw"}, "mode"),
        ({"owner": "no-such-user-x"}, "owner"),
        ({"mode": "0640"}, None),
    ],
)
def test_bad_mode_and_owner(extra, found):
    problems = bad_files({"/a/b": dict({"sha256": "a" * 64}, **extra)})
    assert [p.split(" ")[1] for p in problems] == ([found] if found else [])
