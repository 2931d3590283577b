"""lab/diskuse.py: what `make test` drops after each part, only in CI (AIINFRA_CI_PRUNE=1), and only caches that
no later part of the Makefile's `test` target reads."""

import re
from pathlib import Path

import pytest

from lab import diskuse

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def caches(tmp_path, monkeypatch):
    """A .cache with a vLLM venv, and Go caches at tmp paths (go clean is replaced by removing the tree)."""
    cache = tmp_path / "cache"
    for name in ("vllm-venv", "litellm-venv", "node"):
        (cache / name).mkdir(parents=True)
        (cache / name / "f").write_bytes(b"x" * 100)
    go = {"GOCACHE": tmp_path / "go-build", "GOMODCACHE": tmp_path / "go-mod"}
    for path in go.values():
        path.mkdir()
        (path / "f").write_bytes(b"x")
    monkeypatch.setattr(diskuse, "CACHE", cache)
    monkeypatch.setattr(diskuse, "go_env", lambda name: go[name])

    def clean(argv, check):
        import shutil

        shutil.rmtree(go["GOCACHE" if argv[-1] == "-cache" else "GOMODCACHE"])

    monkeypatch.setattr(diskuse.subprocess, "run", clean)
    return cache, go


CASES = [
    # (AIINFRA_CI_PRUNE, stage, what is gone afterwards)
    (None, "runtime", set()),
    ("0", "lab-live", set()),
    ("1", "unit", set()),
    ("1", "runtime", {"vllm-venv"}),
    ("1", "lab-live", {"go-build", "go-mod"}),
    ("1", "molecule", set()),
]


@pytest.mark.parametrize(("prune", "stage", "gone"), CASES)
def test_after_removes_only_what_the_stage_was_last_to_read(caches, monkeypatch, capsys, prune, stage, gone):
    cache, go = caches
    if prune is None:
        monkeypatch.delenv("AIINFRA_CI_PRUNE", raising=False)
    else:
        monkeypatch.setenv("AIINFRA_CI_PRUNE", prune)
    assert diskuse.main(["after", stage]) == 0
    where = {
        "vllm-venv": cache / "vllm-venv",
        "litellm-venv": cache / "litellm-venv",
        "node": cache / "node",
        "go-build": go["GOCACHE"],
        "go-mod": go["GOMODCACHE"],
    }
    assert {name for name, path in where.items() if not path.exists()} == gone
    out = capsys.readouterr().out
    assert out.splitlines()[-1].startswith("[disk] after %s: " % stage)
    for name in gone:
        assert "[disk] removed %s" % name in out


def make_variable(text: str, name: str) -> str:
    return re.search(r"^%s := (.+)$" % name, text, re.MULTILINE).group(1).strip()


def test_each_pruned_cache_is_read_by_no_later_part_of_make_test():
    """The Makefile's `test` order decides what may go: vLLM after runtime (which precedes the Go builds), the Go
    caches after lab-live, the last part that builds from Go."""
    text = (ROOT / "Makefile").read_text()
    assert "for t in $(TEST_PARTS); do" in text
    order = make_variable(text, "TEST_PARTS").split()
    assert set(diskuse.PRUNE_AFTER) <= set(order)
    # the parts that run go (kube-build's builds, also a prerequisite of gateway, live and lab-live; the CRD and Traefik
    # builds of unit and gateway; lab-live's node build)
    readers = {"vllm-venv": {"runtime"}, "go-build": {"kube-build", "unit", "gateway", "live", "lab-live"}}
    readers["go-mod"] = readers["go-build"]
    for stage, names in diskuse.PRUNE_AFTER.items():
        later = order[order.index(stage) + 1 :]
        for name in names:
            assert not readers[name] & set(later), (name, stage, later)
    assert order.index("runtime") < order.index("kube-build")
