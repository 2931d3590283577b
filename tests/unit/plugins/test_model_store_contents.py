"""plugins/module_utils/node/model_store_contents.py on real directories: the listing of a store (models, unmanaged
directories and links), the prune (kept, held, removed, staging leftovers, empty parents), check mode, a second run,
refused parameters, the store's lock shared with model_weights, and links that would lead out of the store."""

import hashlib
import os
import threading
import time

import pytest
from conftest import run_module

from ansible_collections.aiinfra.k3s.plugins.module_utils.node import model_store_contents as ms
from ansible_collections.aiinfra.k3s.plugins.module_utils.node import model_weights as mw


def publish(store, path, files=None, source=None, revision="0" * 40):
    """A published model as model_weights leaves it: its files, SHA256SUMS and the manifest (model_weights' own
    functions write them)."""
    files = files or {"config.json": b'{"architectures": []}\n', "model.safetensors": path.encode() * 1000}
    model = os.path.join(str(store), path)
    os.makedirs(model, exist_ok=True)
    entries, recs = [], {}
    for name, data in files.items():
        target = os.path.join(model, name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "wb") as handle:
            handle.write(data)
        entry = {"path": name, "sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
        entries.append(entry)
        recs[name] = mw.record(entry, os.lstat(target), mw.now_text())
    entries.sort(key=lambda e: e["path"])
    mw.write_file_atomic(os.path.join(model, mw.SUMS), mw.sums_text(entries).encode())
    mw.write_json(os.path.join(model, mw.MANIFEST), mw.manifest_data(entries, recs, source or "url " + path, revision))
    return model


def disk_bytes(directory):
    return sum(os.path.getsize(os.path.join(top, n)) for top, _dirs, names in os.walk(directory) for n in names)


def tree(root):
    """Every path under root with its kind and, for files, content: a snapshot to compare."""
    out = {}
    for top, dirs, names in os.walk(root):
        for name in dirs + names:
            full = os.path.join(top, name)
            rel = os.path.relpath(full, root)
            if os.path.islink(full):
                out[rel] = ("link", os.readlink(full))
            elif os.path.isdir(full):
                out[rel] = ("dir",)
            else:
                with open(full, "rb") as handle:
                    out[rel] = ("file", handle.read())
    return out


def params(store, keep, **more):
    return dict({"store": str(store), "keep": keep, "in_use": [], "prune": False, "lock_timeout": 5}, **more)


@pytest.fixture
def store(tmp_path):
    """Three published models (two nested under meta/), a kept one's interrupted fetch and a removed one's."""
    root = tmp_path / "store"
    publish(root, "Qwen/Qwen2.5-7B-Instruct", source="hub Qwen/Qwen2.5-7B-Instruct@a09a354", revision="a09a354")
    publish(root, "meta/llama-3-8b")
    publish(root, "meta/llama-3-8b-old")
    (root / ".staging" / "meta" / "llama-3-8b-old").mkdir(parents=True)
    (root / ".staging" / "meta" / "llama-3-8b-old" / "model.safetensors.aiinfra-part").write_bytes(b"x" * 10)
    (root / ".staging" / "Qwen" / "Qwen2.5-7B-Instruct").mkdir(parents=True)
    (root / ".staging" / "Qwen" / "Qwen2.5-7B-Instruct" / "x.aiinfra-part").write_bytes(b"y")
    return root


def test_listing_names_models_with_bytes_source_and_revision(store, tmp_path):
    (store / "ngc" / "hub" / "models--nim").mkdir(parents=True)  # NIM's own cache layout: no manifest
    (store / "meta" / "README").write_text("notes\n")  # a file beside models: neither model nor unmanaged
    (store / "meta" / "scratch").mkdir()  # a directory without a model beside models
    (store / "latest").symlink_to("meta/llama-3-8b")
    publish(store, "meta/llama-3-8b/draft")  # inside a model: the listing does not descend into it
    result = ms.converge(params(store, ["Qwen/Qwen2.5-7B-Instruct", "meta/llama-3-8b", "meta/llama-3-8b-old"]))
    assert result["problems"] == []
    assert [m["path"] for m in result["models"]] == [
        "Qwen/Qwen2.5-7B-Instruct",
        "meta/llama-3-8b",
        "meta/llama-3-8b-old",
    ]
    qwen = result["models"][0]
    assert qwen == {
        "path": "Qwen/Qwen2.5-7B-Instruct",
        "bytes": disk_bytes(store / "Qwen" / "Qwen2.5-7B-Instruct"),
        "source": "hub Qwen/Qwen2.5-7B-Instruct@a09a354",
        "revision": "a09a354",
    }
    assert result["models"][1]["bytes"] == disk_bytes(store / "meta" / "llama-3-8b")  # the nested draft counted
    assert result["unmanaged"] == ["latest", "meta/scratch", "ngc"]
    assert (result["stale"], result["removed"], result["held"], result["changed"]) == ([], [], [], False)


def test_a_missing_store_holds_nothing_and_is_not_made(tmp_path):
    result = ms.converge(params(tmp_path / "absent", [], prune=True))
    assert (result["models"], result["problems"], result["changed"]) == ([], [], False)
    assert not (tmp_path / "absent").exists()


def test_without_prune_stale_models_are_only_reported(store):
    before = tree(store)
    result = ms.converge(params(store, ["Qwen/Qwen2.5-7B-Instruct"], in_use=["meta/llama-3-8b"]))
    assert result["stale"] == ["meta/llama-3-8b", "meta/llama-3-8b-old"]
    assert result["held"] == ["meta/llama-3-8b"]
    assert (result["removed"], result["changed"], result["problems"]) == ([], False, [])
    assert tree(store) == before


def test_prune_removes_what_is_neither_kept_nor_used_then_changes_nothing(store):
    old_bytes = disk_bytes(store / "meta" / "llama-3-8b-old")
    args = params(store, ["Qwen/Qwen2.5-7B-Instruct"], in_use=["meta/llama-3-8b"], prune=True)
    result = ms.converge(args)
    assert result["problems"] == []
    assert result["removed"] == [{"path": "meta/llama-3-8b-old", "bytes": old_bytes}]
    assert result["bytes_removed"] == old_bytes and result["changed"] is True
    assert result["held"] == ["meta/llama-3-8b"]
    assert not (store / "meta" / "llama-3-8b-old").exists()
    assert (store / "meta" / "llama-3-8b" / mw.MANIFEST).is_file()  # in use: held
    assert (store / "Qwen" / "Qwen2.5-7B-Instruct" / mw.MANIFEST).is_file()  # kept
    # The removed path's interrupted fetch is gone with its empty parent; the kept model's is left to model_weights.
    assert not (store / ".staging" / "meta").exists()
    assert (store / ".staging" / "Qwen" / "Qwen2.5-7B-Instruct" / "x.aiinfra-part").is_file()
    assert (store / ".staging" / mw.LOCK).is_file()  # the lock model_weights takes
    again = ms.converge(args)
    assert (again["removed"], again["changed"], again["problems"]) == ([], False, [])
    # Once the pod is gone, the held model goes too, and its parent directory with it (now empty).
    last = ms.converge(dict(args, in_use=[]))
    assert [r["path"] for r in last["removed"]] == ["meta/llama-3-8b"]
    assert not (store / "meta").exists() and (store / "Qwen").is_dir()


def test_check_mode_reports_what_would_go_and_touches_nothing(store):
    before = tree(store)
    lock_free = not (store / ".staging" / mw.LOCK).exists()
    result = ms.converge(params(store, ["meta/llama-3-8b"], prune=True), check_mode=True)
    assert [r["path"] for r in result["removed"]] == ["Qwen/Qwen2.5-7B-Instruct", "meta/llama-3-8b-old"]
    assert result["changed"] is True and result["bytes_removed"] == sum(r["bytes"] for r in result["removed"])
    assert tree(store) == before
    assert lock_free and not (store / ".staging" / mw.LOCK).exists()  # not even the lock file is made


@pytest.mark.parametrize(
    "in_use, held",
    [
        (["meta/llama-3-8b-old/model.safetensors"], ["meta/llama-3-8b-old"]),  # a file inside the model
        (["meta"], ["meta/llama-3-8b", "meta/llama-3-8b-old"]),  # a directory holding models, read whole
        (["."], ["Qwen/Qwen2.5-7B-Instruct", "meta/llama-3-8b", "meta/llama-3-8b-old"]),  # the whole store (NIM)
        (["meta/llama-3"], []),  # a prefix of a name is not the model
    ],
)
def test_a_path_in_use_holds_every_model_it_concerns(store, in_use, held):
    result = ms.converge(params(store, [], in_use=in_use, prune=True))
    assert result["held"] == held
    assert sorted(r["path"] for r in result["removed"]) == sorted(set(result["stale"]) - set(held))
    for path in held:
        assert (store / path / mw.MANIFEST).is_file()


def test_a_kept_directory_keeps_the_models_under_it(store):
    result = ms.converge(params(store, ["meta"], prune=True))
    assert [r["path"] for r in result["removed"]] == ["Qwen/Qwen2.5-7B-Instruct"]
    assert (store / "meta" / "llama-3-8b-old").is_dir()


def test_directories_without_the_manifest_and_links_are_never_removed(store, tmp_path):
    outside = tmp_path / "elsewhere"
    publish(outside, "org/model")  # a model outside the store, reachable through links
    (store / "hand-made" / "weights").mkdir(parents=True)
    (store / "hand-made" / "weights" / "model.bin").write_bytes(b"z" * 100)
    (store / "linked").symlink_to(outside / "org")
    (store / "meta" / "alias").symlink_to(outside / "org" / "model")
    # An interrupted fetch's directory for the removed path that is a link out of the store: the link goes, not its
    # target.
    (store / ".staging" / "meta" / "llama-3-8b-old").rename(store / ".staging" / "moved-away")
    (store / ".staging" / "meta" / "llama-3-8b-old").symlink_to(outside / "org" / "model")
    outside_before = tree(outside)
    result = ms.converge(params(store, [], prune=True))
    assert sorted(r["path"] for r in result["removed"]) == [
        "Qwen/Qwen2.5-7B-Instruct",
        "meta/llama-3-8b",
        "meta/llama-3-8b-old",
    ]
    assert result["unmanaged"] == ["hand-made", "linked", "meta/alias"]
    assert (store / "hand-made" / "weights" / "model.bin").is_file()
    assert (store / "linked").is_symlink() and (store / "meta" / "alias").is_symlink()
    assert (store / "meta").is_dir()  # still holds the link
    assert not os.path.lexists(store / ".staging" / "meta" / "llama-3-8b-old")
    assert tree(outside) == outside_before


def test_a_link_on_the_way_to_staging_is_not_followed(store, tmp_path):
    outside = tmp_path / "elsewhere"
    (outside / "llama-3-8b-old").mkdir(parents=True)
    (outside / "llama-3-8b-old" / "precious").write_bytes(b"p")
    staging_meta = store / ".staging" / "meta"
    for top, dirs, names in os.walk(staging_meta, topdown=False):
        for name in names:
            os.unlink(os.path.join(top, name))
        for name in dirs:
            os.rmdir(os.path.join(top, name))
    staging_meta.rmdir()
    staging_meta.symlink_to(outside)
    result = ms.converge(params(store, ["Qwen/Qwen2.5-7B-Instruct", "meta/llama-3-8b"], prune=True))
    assert [r["path"] for r in result["removed"]] == ["meta/llama-3-8b-old"]
    assert (outside / "llama-3-8b-old" / "precious").is_file()


@pytest.mark.parametrize(
    "keep, in_use, codes",
    [
        (["../etc"], [], ["KEEP"]),
        (["/data/model-registry/x"], [], ["KEEP"]),
        ([".staging/x"], [], ["KEEP"]),
        (["a//b"], ["x/../y"], ["KEEP", "IN_USE"]),
        ([], [".."], ["IN_USE"]),
        ("Qwen", [], ["KEEP"]),
    ],
)
def test_paths_that_leave_the_store_are_refused_and_nothing_is_removed(store, keep, in_use, codes):
    before = tree(store)
    result = ms.converge(params(store, keep, in_use=in_use, prune=True))
    assert [p["code"] for p in result["problems"]] == codes
    assert all(p["severity"] == "error" and p["fix"] and p["problem"] == p["message"] for p in result["problems"])
    assert (result["removed"], result["changed"]) == ([], False)
    assert tree(store) == before


def test_a_relative_store_is_refused(store):
    result = ms.converge(params("relative/store", [], prune=True))
    assert [p["code"] for p in result["problems"]] == ["STORE"]


def test_an_unreadable_manifest_is_kept_with_a_warning(store):
    (store / "meta" / "llama-3-8b-old" / mw.MANIFEST).write_text("{not json")
    result = ms.converge(params(store, ["Qwen/Qwen2.5-7B-Instruct", "meta/llama-3-8b"], prune=True, host="gpu-1"))
    assert result["removed"] == [] and result["changed"] is False
    (warning,) = result["problems"]
    assert (warning["code"], warning["severity"], warning["host"]) == ("MANIFEST", "warning", "gpu-1")
    assert "meta/llama-3-8b-old" in warning["message"]
    assert (store / "meta" / "llama-3-8b-old").is_dir()
    assert result["models"][-1] == {
        "path": "meta/llama-3-8b-old",
        "bytes": disk_bytes(store / "meta" / "llama-3-8b-old"),
        "source": None,
        "revision": None,
    }


def test_a_fetch_holding_the_lock_blocks_the_removal(store):
    fd = mw.lock_store(str(store), 1)
    try:
        result = ms.converge(params(store, ["Qwen/Qwen2.5-7B-Instruct"], prune=True, lock_timeout=0, host="gpu-1"))
    finally:
        mw.unlock_store(fd)
    assert [p["code"] for p in result["problems"]] == ["LOCK_TIMEOUT"]
    assert result["problems"][0]["variable"] == "lock_timeout"
    assert result["removed"] == [] and (store / "meta" / "llama-3-8b-old").is_dir()


def test_the_store_is_listed_again_under_the_lock(store):
    """A fetch holding the lock changes the store; the removal that waited sees the store as the fetch left it."""
    fd = mw.lock_store(str(store), 1)
    out = {}
    worker = threading.Thread(
        target=lambda: out.update(ms.converge(params(store, ["Qwen/Qwen2.5-7B-Instruct"], prune=True, lock_timeout=30)))
    )
    worker.start()
    time.sleep(0.5)  # the removal is waiting for the lock
    try:
        assert worker.is_alive()
        os.rename(store / "meta" / "llama-3-8b-old", store / "meta" / "renamed-meanwhile")
        publish(store, "org/published-meanwhile")
    finally:
        mw.unlock_store(fd)
    worker.join(30)
    assert out["problems"] == []
    assert sorted(r["path"] for r in out["removed"]) == [
        "meta/llama-3-8b",
        "meta/renamed-meanwhile",
        "org/published-meanwhile",
    ]
    assert not (store / "meta").exists() and not (store / "org").exists()


def test_related():
    assert ms.related("a/b", "a/b") and ms.related("a/b", "a/b/c.json") and ms.related("a/b", "a")
    assert ms.related("a/b", ".") and not ms.related("a/b", "a/bc") and not ms.related("a/bc", "a/b")


def test_remove_model_refuses_what_is_no_model_or_is_reached_through_a_link(store, tmp_path):
    """The last check before a removal (a directory may change between the listing and the removal)."""
    outside = tmp_path / "elsewhere"
    publish(outside, "org/model")
    (store / "linked").symlink_to(outside / "org")
    (store / "hand-made").mkdir()
    (store / "hand-made" / "weights.bin").write_bytes(b"w")
    (store / "meta" / "half").mkdir()
    (store / "meta" / "half" / mw.MANIFEST).symlink_to(store / "meta" / "llama-3-8b" / mw.MANIFEST)
    for path in ("linked/model", "hand-made", "meta/half", "../elsewhere/org/model", ".staging", "meta"):
        assert ms.remove_model(str(store), path) is False, path
    assert tree(outside)["org/model/" + mw.MANIFEST][0] == "file"
    assert (store / "hand-made" / "weights.bin").is_file() and (store / "meta" / "half").is_dir()
    assert ms.remove_model(str(store), "meta/llama-3-8b") is True and not (store / "meta" / "llama-3-8b").exists()


def test_a_model_named_like_the_lock_leaves_the_lock_alone(tmp_path):
    store = tmp_path / "store"
    publish(store, ".lock")
    result = ms.converge(params(store, [], prune=True))
    assert [r["path"] for r in result["removed"]] == [".lock"]
    assert (store / ".staging" / mw.LOCK).is_file()  # the lock file stays; unlinking it would let two runs in


# ---------------------------------------------------------------- which expected models the store holds current


def listed(model):
    """The file list of a published model, as the weight_fetches filter gives it (from its SHA256SUMS)."""
    with open(os.path.join(model, mw.SUMS)) as handle:
        text = handle.read()
    return [dict(e) for e in mw.parse_sums(text, "gpu-1")]


def sized(files, model):
    return [dict(f, size=os.path.getsize(os.path.join(model, f["path"]))) for f in files]


def touch(model, name):
    os.utime(os.path.join(model, name), ns=(1, 1))


def chmod(model, name):
    os.chmod(os.path.join(model, name), 0o600)


def extra(model, name):
    with open(os.path.join(model, "unlisted.bin"), "wb") as handle:
        handle.write(b"x")


def append(model, name):
    with open(os.path.join(model, name), "ab") as handle:
        handle.write(b"x")


# (what is done to the published model or its entry, whether the store holds it current)
CURRENT_CASES = {
    "as published": (None, {}, True),
    "another source": (None, {"source": "controller /srv/other"}, False),
    "another revision": (None, {"revision": "1" * 40}, False),
    "a file's time changed": (touch, {}, False),
    "a file grew": (append, {}, False),
    "a file's mode changed": (chmod, {}, False),
    "an unlisted file": (extra, {}, False),
    "no file list": (None, {"files": None}, False),
    "another file list": (None, {"files": "other"}, False),
}


@pytest.mark.parametrize("change, entry, current", CURRENT_CASES.values(), ids=list(CURRENT_CASES))
def test_expected_models_are_current_exactly_when_model_weights_would_change_nothing(
    tmp_path, monkeypatch, change, entry, current
):
    """model_store's answer is model_weights' own check mode (same files, source, revision, modes), read from the
    manifest and the files' stat: with verify fast no file is hashed."""
    store = tmp_path / "store"
    model = publish(store, "org/tiny", source="controller /srv/seed/org/tiny", revision=None)
    files = sized(listed(model), model)
    item = {"path": "org/tiny", "files": files, "source": "controller /srv/seed/org/tiny", "revision": None}
    item.update(entry)
    if item["files"] == "other":
        item["files"] = [dict(files[0], sha256="f" * 64), *files[1:]]
    if change:
        change(model, "config.json")
    weights = {
        "store": str(store),
        "path": "org/tiny",
        "url": "http://controller.invalid/org/tiny",
        "files": item["files"] or None,
        "source": item["source"],
        "revision": item["revision"],
        "mode": "0644",
        "directory_mode": "0755",
    }
    hashed = []
    monkeypatch.setattr(mw, "sha256_file", lambda *a, **k: hashed.append(a[0]) or hashlib.sha256(b""))
    result = ms.converge(
        {"store": str(store), "expected": [item, {"path": "org/absent", "files": files}], "look_for": ["org/tiny"]}
    )
    assert (result["current"], result["lacking"]) == (
        (["org/tiny"], ["org/absent"]) if current else ([], ["org/tiny", "org/absent"])
    )
    assert (result["present"], result["stale"], result["problems"], result["changed"]) == (["org/tiny"], [], [], False)
    assert hashed == []
    if item["files"]:  # model_weights' check mode says the same (the file list given: no request is sent)
        assert mw.converge(weights, check_mode=True)["changed"] is not current
    if current:  # and a real run of model_weights changes nothing (only its lock under .staging) and sends no request
        before = tree(store / "org")
        assert (mw.converge(weights)["changed"], tree(store / "org")) == (False, before)


def test_verify_full_hashes_each_file_of_an_expected_model(tmp_path):
    store = tmp_path / "store"
    model = publish(store, "org/tiny", source="s", revision=None)
    item = {"path": "org/tiny", "files": sized(listed(model), model), "source": "s", "revision": None}
    assert ms.converge({"store": str(store), "expected": [item], "verify": "full"})["current"] == ["org/tiny"]
    with open(os.path.join(model, "config.json"), "r+b") as handle:  # same size, other bytes, time set back
        st = os.fstat(handle.fileno())
        handle.write(b"X")
    os.utime(os.path.join(model, "config.json"), ns=(st.st_atime_ns, st.st_mtime_ns))
    assert ms.converge({"store": str(store), "expected": [item]})["current"] == ["org/tiny"]  # fast: stat only
    assert ms.converge({"store": str(store), "expected": [item], "verify": "full"})["lacking"] == ["org/tiny"]


@pytest.mark.parametrize(
    "more, codes",
    [
        ({"prune": True}, ["KEEP"]),
        ({"expected": [{"path": "../etc"}]}, ["EXPECTED"]),
        ({"expected": [{"files": []}]}, ["EXPECTED"]),
        ({"look_for": ["/etc"]}, ["LOOK_FOR"]),
        ({"verify": "sometimes"}, ["VERIFY"]),
    ],
)
def test_store_step_parameters_refused(store, more, codes):
    before = tree(store)
    result = ms.converge(dict({"store": str(store)}, **more))
    assert [p["code"] for p in result["problems"]] == codes
    assert tree(store) == before


def test_without_keep_nothing_is_stale(store):
    result = ms.converge({"store": str(store)})
    assert (result["stale"], result["problems"]) == ([], [])
    assert [m["path"] for m in result["models"]] == [
        "Qwen/Qwen2.5-7B-Instruct",
        "meta/llama-3-8b",
        "meta/llama-3-8b-old",
    ]


# ---------------------------------------------------------------- the module's store step (create, room, owner)

STORE_STEP_CASES = {
    # (what is at the store path before, extra arguments, rc, a word of the message, the store a directory after)
    "created with its parents": (None, {}, 0, None, True),
    "a file in the way": ("file", {}, 2, "not a directory", False),
    "a bad look_for creates nothing": (None, {"look_for": ["../x"]}, 2, "LOOK_FOR", False),
}


@pytest.mark.parametrize("before, more, rc, word, made", STORE_STEP_CASES.values(), ids=list(STORE_STEP_CASES))
def test_the_store_step_creates_the_store_and_reads_its_room(tmp_path, before, more, rc, word, made):
    store = tmp_path / "data" / "model-registry"
    if before == "file":
        store.parent.mkdir()
        store.write_text("x")
    args = dict({"store": str(store), "create": True, "directory_mode": "0750", "free_space": True}, **more)
    checked_rc, checked = run_module("aiinfra.k3s.model_store", args, check=True)
    assert not store.is_dir()  # check mode creates nothing
    got_rc, result = run_module("aiinfra.k3s.model_store", args)
    assert (checked_rc, got_rc) == (rc, rc), result
    assert store.is_dir() is made
    if word:
        assert word in result["msg"]
        return
    assert checked["changed"] and result["changed"]
    assert oct(store.stat().st_mode & 0o777) == "0o750"
    assert result["room"]["available"] > 0 and os.path.ismount(result["room"]["mount"])
    again_rc, again = run_module("aiinfra.k3s.model_store", args)
    assert (again_rc, again["changed"]) == (0, False)
