import os
import subprocess

import pytest
from conftest import ansible_env, run_module, tool
from make_test_airgap import make_bundle

from ansible_collections.aiinfra.k3s.plugins.module_utils.node import k3s_release as rel

SHA = "a" * 64


def test_names():
    assert rel.binary_name("amd64") == "k3s" and rel.binary_name("arm64") == "k3s-arm64"
    assert rel.checksum_name("arm64") == "sha256sum-arm64.txt"
    assert rel.image_names("amd64")[0] == "k3s-airgap-images-amd64.tar.zst"
    assert rel.k3s_arch("x86_64") == "amd64" and rel.k3s_arch("aarch64") == "arm64"
    with pytest.raises(rel.ArtifactError, match="unsupported architecture 'riscv64'"):
        rel.k3s_arch("riscv64")


@pytest.mark.parametrize(
    ("version", "ok"),
    [
        ("v1.33.5+k3s1", True),
        ("v1.30.0+k3s12", True),
        ("1.33.5", False),
        ("v1.33.5-k3s1", False),
        ("v1.33+k3s1", False),
        ("", False),
    ],
)
def test_version_form(version, ok):
    assert rel.is_k3s_version(version) is ok


def test_parse_sha256sum_text_and_binary_modes():
    sums = rel.parse_sha256sum(f"{SHA}  k3s\n{SHA.upper()} *k3s-airgap-images-amd64.tar.zst\n\n# comment\n")
    assert sums == {"k3s": SHA, "k3s-airgap-images-amd64.tar.zst": SHA}


def test_parse_sha256sum_rejects_garbage():
    with pytest.raises(rel.ArtifactError, match="line 2"):
        rel.parse_sha256sum(f"{SHA}  k3s\nnot a line\n")


def test_good_bundle_verifies(tmp_path):
    made = make_bundle(tmp_path)
    result = rel.verify_release(str(tmp_path), ["amd64"], require_images=True)
    assert result["amd64"]["binary"]["sha256"] == rel.sha256_file(made["binary"])
    assert result["amd64"]["images"]["name"] == "k3s-airgap-images-amd64.tar.zst"


@pytest.mark.parametrize(
    ("tamper", "drop", "require_images", "error"),
    [
        ("binary", None, False, "k3s does not match its checksum"),
        ("images", None, False, "k3s-airgap-images-amd64.tar.zst does not match its checksum"),
        ("sums", None, False, "not '<sha256>  <file>'"),
        (None, "sha256sum-amd64.txt", False, "sha256sum-amd64.txt is missing"),
        (None, "k3s", False, "k3s is missing"),
        (None, "k3s-airgap-images-amd64.tar.zst", True, "no image tarball"),
    ],
)
def test_bad_bundles_are_refused(tmp_path, tamper, drop, require_images, error):
    make_bundle(tmp_path, tamper=tamper, drop=drop)
    with pytest.raises(rel.ArtifactError, match=error):
        rel.verify_release(str(tmp_path), ["amd64"], require_images=require_images)


def test_missing_architecture_and_unlisted_file(tmp_path):
    make_bundle(tmp_path)
    with pytest.raises(rel.ArtifactError, match=r"sha256sum-arm64\.txt is missing"):
        rel.verify_release(str(tmp_path), ["amd64", "arm64"])
    (tmp_path / "sha256sum-amd64.txt").write_text(f"{SHA}  something-else\n")
    with pytest.raises(rel.ArtifactError, match="not listed in the checksum file"):
        rel.verify_release(str(tmp_path), ["amd64"])


def test_operator_pin_must_agree(tmp_path):
    make_bundle(tmp_path)
    with pytest.raises(rel.ArtifactError, match="pinned sha256"):
        rel.verify_release(str(tmp_path), ["amd64"], pins={"k3s": SHA})


def test_pin_missing_from_the_checksum_file_is_an_error(tmp_path):
    # The old code skipped a pin whose file the checksum file does not list: the pin was never checked.
    make_bundle(tmp_path)
    with pytest.raises(rel.ArtifactError, match=r"k3s-airgap-images-amd64\.tar\.gz is pinned .* does not list it"):
        rel.verify_release(str(tmp_path), ["amd64"], pins={"k3s-airgap-images-amd64.tar.gz": SHA})


def test_pin_naming_no_release_file_is_an_error(tmp_path):
    make_bundle(tmp_path)
    with pytest.raises(rel.ArtifactError, match="'k3s-amd64' names no file of a K3s release"):
        rel.verify_release(str(tmp_path), ["amd64"], pins={"k3s-amd64": SHA})
    with pytest.raises(rel.ArtifactError, match="not a sha256"):
        rel.verify_release(str(tmp_path), ["amd64"], pins={"k3s": "abc"})


def test_matching_pins_verify_and_are_reported(tmp_path):
    made = make_bundle(tmp_path)
    pins = {
        "k3s": rel.sha256_file(made["binary"]).upper(),
        "sha256sum-amd64.txt": rel.sha256_file(str(tmp_path / "sha256sum-amd64.txt")),
        "k3s-arm64": SHA,  # another architecture's pin: applies when an arm64 node is installed
    }
    result = rel.verify_release(str(tmp_path), ["amd64"], pins=pins)
    assert result["amd64"]["pinned"] == ["k3s", "sha256sum-amd64.txt"]


def test_pinned_checksum_file_is_hashed(tmp_path):
    make_bundle(tmp_path)
    with pytest.raises(rel.ArtifactError, match="not the release's checksum file"):
        rel.verify_release(str(tmp_path), ["amd64"], pins={"sha256sum-amd64.txt": SHA})


def test_release_pins_and_artifact_names():
    shipped = rel.release_pins("v1.36.4+k3s1")
    assert shipped["k3s"] == "835873f37245fc615f547a2fe2af9402a347875f13fa64a1f136de644955ea3f"
    assert rel.release_pins("v1.36.4+k3s1", {"k3s-arm64": SHA.upper()}, shipped=False) == {"k3s-arm64": SHA}
    assert rel.release_pins("v9.9.9+k3s1") == {}
    assert [
        rel.artifact_arch(n) for n in ("k3s", "k3s-arm64", "sha256sum-arm64.txt", "k3s-airgap-images-amd64.tar")
    ] == [
        "amd64",
        "arm64",
        "arm64",
        "amd64",
    ]
    assert rel.artifact_arch("k3s-amd64") is None


def test_arm64_bundle(tmp_path):
    make_bundle(tmp_path, arch="arm64")
    assert rel.verify_release(str(tmp_path), ["arm64"])["arm64"]["binary"]["path"].endswith("k3s-arm64")


@pytest.mark.slow
def test_module_reports_artifacts_in_check_mode(tmp_path):
    make_bundle(tmp_path)
    rc, result = run_module(
        "aiinfra.k3s.k3s_release_info",
        {"path": str(tmp_path), "architectures": ["x86_64"], "require_images": True},
        check=True,
    )
    assert rc == 0 and result["changed"] is False
    assert set(result["artifacts"]) == {"amd64"}


@pytest.mark.slow
def test_module_fails_on_tampered_binary_naming_the_file(tmp_path):
    make_bundle(tmp_path, tamper="binary")
    rc, result = run_module("aiinfra.k3s.k3s_release_info", {"path": str(tmp_path)})
    assert rc != 0 and result["failed"]
    assert result["msg"].startswith(f"K3s artifacts in {tmp_path} cannot be used: {tmp_path}/k3s does not match")


def test_a_record_spares_hashing_unchanged_artifacts_and_never_hides_a_change(tmp_path, monkeypatch):
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    made = make_bundle(bundle)
    hashed = []
    real = rel.sha256_file
    monkeypatch.setattr(rel, "sha256_file", lambda path: hashed.append(path) or real(path))
    record = {}
    first = rel.verify_release(str(bundle), ["amd64"], require_images=True, record=record)
    assert sorted(hashed) == sorted([str(made["binary"]), str(bundle / "k3s-airgap-images-amd64.tar.zst")])
    assert set(record) == set(hashed)
    hashed.clear()
    again = rel.verify_release(str(bundle), ["amd64"], require_images=True, record=record)
    assert hashed == [] and again == first
    # A binary replaced by other bytes (its mtime set back) is hashed again and refused.
    before = (bundle / "k3s").stat()
    (bundle / "k3s").write_bytes(b"x" * before.st_size)
    os.utime(bundle / "k3s", ns=(before.st_atime_ns, before.st_mtime_ns))
    with pytest.raises(rel.ArtifactError, match="k3s does not match its checksum"):
        rel.verify_release(str(bundle), ["amd64"], require_images=True, record=record)
    assert str(made["binary"]) not in record


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="becomes root with su, which asks no password of root only")
def test_in_the_controllers_process_or_as_a_module_with_become(tmp_path):
    """On the controller's own connection the action verifies in its process (no command is executed); with become it
    runs the module (Ansible executes its AnsiballZ wrapper), which finds the same artifacts."""
    make_bundle(tmp_path)
    found = []
    for extra in ([], ["--become", "--become-method", "su"]):
        argv = [tool("ansible"), "localhost", "-m", "aiinfra.k3s.k3s_release_info", "-a", "path=%s" % tmp_path, "-vvv"]
        proc = subprocess.run(
            argv + extra, capture_output=True, text=True, env=ansible_env("default"), timeout=120, check=False
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        found.append(("EXEC " in proc.stdout, "k3s-airgap-images-amd64.tar.zst" in proc.stdout))
    assert found == [(False, True), (True, True)]


def test_module_keeps_the_record_outside_check_mode(tmp_path):
    make_bundle(tmp_path)
    record = tmp_path / "cache" / "verified-files.json"
    args = {"path": str(tmp_path), "require_images": True, "record": str(record)}
    rc, checked = run_module("aiinfra.k3s.k3s_release_info", args, check=True)
    assert rc == 0 and checked["changed"] is False and not record.exists()
    rc, result = run_module("aiinfra.k3s.k3s_release_info", args)
    assert rc == 0 and result["changed"] is False and record.exists()
    assert oct(record.stat().st_mode & 0o777) == "0o600"
