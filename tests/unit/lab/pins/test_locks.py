"""lab/pins/locks.py and the lock files: every Python environment installs from a lock with hashes, and a replaced release
(a hash that no longer matches) fails to install."""

import re
import subprocess
import sys

import pytest

from lab.pins import locks

# Releases of LiteLLM that were trojanized on PyPI (March 2026: a credential stealer started from a .pth file).
TROJANIZED = {"litellm": {"1.82.7", "1.82.8"}}


@pytest.mark.parametrize("name", sorted(locks.LOCKS))
def test_lock_pins_and_hashes_every_package(name):
    lock = locks.LOCKS[name]
    assert locks.lock_problems(lock.read_text(), lock.with_suffix(".in").read_text()) == []
    pins = {n: v for n, v, _h in locks.requirements(lock.read_text())}
    for package, bad in TROJANIZED.items():
        assert pins.get(package) not in bad, "%s pins a trojanized %s" % (lock, package)


def test_litellm_is_pinned_where_the_image_is():
    pins = {n: v for n, v, _h in locks.requirements(locks.LOCKS["litellm"].read_text())}
    assert pins["litellm"] == "1.110.2"


def test_lock_problems_name_unhashed_and_drifted_lines():
    lock = "a==1 \\\n    --hash=sha256:%s\nb==2\nc>=3\n" % ("0" * 64)
    assert locks.lock_problems(lock, "a==1.1\nd==4\n") == [
        "b==2 has no --hash=sha256",
        "'c>=3' is not pinned with ==",
        "a==1.1 of the input is 1 in the lock",
        "d==4 of the input is missing in the lock",
    ]


def test_every_pip_install_of_a_lock_requires_hashes(root):
    makefile = (root / "Makefile").read_text()
    installs = [line for line in makefile.splitlines() if re.search(r"pip\"? install", line)]
    assert installs and all("--require-hashes" in line for line in installs), installs
    assert "--require-hashes" in (root / "lab" / "live" / "runtime.py").read_text()
    assert "--require-hashes" in (root / "lab" / "nodes" / "nodeimages.py").read_text()


def one_requirement(name, version, digest_lines):
    return "%s==%s \\\n%s\n" % (name, version, " \\\n".join("    --hash=sha256:%s" % d for d in digest_lines))


def pip_download(tmp_path, text):
    tmp_path.mkdir(parents=True, exist_ok=True)
    req = tmp_path / "req.txt"
    req.write_text(text)
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--no-cache-dir",
            "--require-hashes",
            "--only-binary=:all:",
            "--disable-pip-version-check",
            "-q",
            "-d",
            str(tmp_path / "dl"),
            "-r",
            str(req),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.mark.slow
def test_a_tampered_hash_fails_to_install(tmp_path):
    # One small pure-Python package of the dev lock, fetched from PyPI with its locked hashes and then with one changed
    # hash: the second must fail as a release replaced on PyPI would (the file no longer matches the lock).
    entries = {n: (v, h) for n, v, h in locks.requirements(locks.LOCKS["dev"].read_text())}
    version, hashes = entries["jmespath"]
    good = pip_download(tmp_path / "good", one_requirement("jmespath", version, hashes))
    if good.returncode != 0:
        if re.search(r"(?i)connection|resolve|network|timed out|No matching distribution", good.stderr):
            pytest.skip("PyPI is not reachable: %s" % good.stderr.strip().splitlines()[-1])
        pytest.fail(good.stderr)
    tampered = [h[:-1] + ("0" if h[-1] != "0" else "1") for h in hashes]
    bad = pip_download(tmp_path / "bad", one_requirement("jmespath", version, tampered))
    assert bad.returncode != 0
    assert "THESE PACKAGES DO NOT MATCH THE HASHES" in bad.stderr, bad.stderr
