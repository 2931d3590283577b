"""lab/live/helmbuild.py: helm's build flags and cache key, and a refused version as one error line."""

import pytest

from lab.live import helmbuild


def test_helm_ldflags_follow_helms_makefile():
    flags = helmbuild.version_ldflags("v4.3.2", "abc123")
    assert flags.split()[:2] == ["-w", "-s"]
    assert "-X helm.sh/helm/v4/internal/version.version=v4.3.2" in flags
    assert "-X helm.sh/helm/v4/internal/version.gitCommit=abc123" in flags
    assert "-X helm.sh/helm/v4/internal/version.gitTreeState=clean" in flags
    assert "gitCommit" not in helmbuild.version_ldflags("v4.3.2")


def test_helm_recipe_key_changes_with_version_and_go():
    key = helmbuild.recipe_key("v4.3.2", "go1.26.8")
    assert key.startswith("v4.3.2-") and len(key) == len("v4.3.2-") + 12
    assert key == helmbuild.recipe_key("v4.3.2", "go1.26.8")
    assert key != helmbuild.recipe_key("v4.3.1", "go1.26.8")
    assert key != helmbuild.recipe_key("v4.3.2", "go1.27.3")


@pytest.mark.parametrize(
    ("stderr", "expected"),
    [
        (
            "go: helm.sh/helm/v4@v9.9.9: reading https://proxy.test/helm.sh/helm/v4/@v/v9.9.9.info: 404 Not Found\n"
            "\tserver response: not found: helm.sh/helm/v4@v9.9.9: invalid version: unknown revision v9.9.9\n",
            "404 Not Found: not found: helm.sh/helm/v4@v9.9.9: invalid version: unknown revision v9.9.9",
        ),
        ("go: something\ngo: 403 Forbidden\n", "go: 403 Forbidden"),
        ("", "no output"),
    ],
)
def test_proxy_error_is_one_line(stderr, expected):
    assert helmbuild.proxy_error(stderr) == expected


def test_refused_helm_version_is_one_error_line(monkeypatch, capsys, tmp_path):
    def refuse(module, version):
        raise helmbuild.BuildError(f"{module}@{version} is not available from the Go module proxy: 403 Forbidden")

    monkeypatch.setattr(helmbuild, "go_version", lambda: "go1.26.8")
    monkeypatch.setattr(helmbuild, "module_info", refuse)
    monkeypatch.setattr(helmbuild, "CACHE", tmp_path)
    assert helmbuild.main(["build", "--version", "v4.0.99"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "403 Forbidden" in err and "Traceback" not in err
