import subprocess
import sys

import pytest

from lab.live import kubebuild

GOMOD = """module k8s.io/kubernetes

go 1.24.0

require (
\tgithub.com/blang/semver/v4 v4.0.0
\tgo.etcd.io/etcd/client/v3 v3.5.21
\tk8s.io/api v0.0.0
)

require go.etcd.io/etcd/server/v3 v3.5.21 // indirect

replace (
\tk8s.io/api => ./staging/src/k8s.io/api
\tgithub.com/some/fork => github.com/other/fork v1.2.3
)

replace go.etcd.io/etcd => ./FORBIDDEN_DEPENDENCY
"""


@pytest.mark.parametrize(
    ("k3s", "kube", "staging"),
    [("v1.33.5+k3s1", "v1.33.5", "v0.33.5"), ("v1.36.3+k3s2", "v1.36.3", "v0.36.3")],
)
def test_kubernetes_version_of_a_k3s_tag(k3s, kube, staging):
    assert kubebuild.kubernetes_version(k3s) == kube
    assert kubebuild.staging_version(kube) == staging


@pytest.mark.parametrize("bad", ["v1.33.5", "1.33.5+k3s1", "latest", "v1.33+k3s1", ""])
def test_a_non_k3s_tag_is_refused_by_name(bad):
    with pytest.raises(kubebuild.BuildError, match="not a K3s release tag"):
        kubebuild.kubernetes_version(bad)


def test_gomod_blocks_and_single_lines_are_read():
    go, requires, replaces = kubebuild.parse_gomod(GOMOD)
    assert go == "1.24.0"
    assert requires["go.etcd.io/etcd/server/v3"] == "v3.5.21"
    assert requires["k8s.io/api"] == "v0.0.0"
    assert replaces["k8s.io/api"] == "./staging/src/k8s.io/api"


def test_local_replaces_become_published_versions():
    out = kubebuild.published_replaces(GOMOD, "v0.33.5")
    assert out == {"k8s.io/api": "k8s.io/api v0.33.5", "github.com/some/fork": "github.com/other/fork v1.2.3"}
    with pytest.raises(kubebuild.BuildError, match="no version known"):
        kubebuild.published_replaces(GOMOD)


def test_the_version_flags_name_the_release():
    flags = kubebuild.version_ldflags("v1.33.5")
    assert "-X k8s.io/component-base/version.gitVersion=v1.33.5" in flags
    assert "-X k8s.io/client-go/pkg/version.gitMinor=33" in flags


def test_the_cache_key_follows_versions_and_recipe():
    key = kubebuild.recipe_key("v1.33.5", "v3.5.21", "go1.26.8")
    assert key.startswith("v1.33.5-")
    assert key == kubebuild.recipe_key("v1.33.5", "v3.5.21", "go1.26.8")
    assert key != kubebuild.recipe_key("v1.33.5", "v3.5.22", "go1.26.8")


@pytest.mark.parametrize(
    ("stderr", "line"),
    [
        (
            "go: k8s.io/kubernetes@v1.99.0: reading https://proxy.golang.org/...: 403 Forbidden\n"
            "\tserver response: This module version is not available.\n",
            "This module version is not available.",
        ),
        ("go: downloading x\ngo: unknown revision v9\n", "go: unknown revision v9"),
    ],
)
def test_one_line_of_a_go_failure(stderr, line):
    assert kubebuild.proxy_error(stderr) == line


@pytest.mark.parametrize("version", ["not-a-tag", "v1.99.0+k3s1"])
def test_bad_versions_give_one_clear_error_and_no_stack(root, version):
    proc = subprocess.run(
        [sys.executable, "-m", "lab.live.kubebuild", "build", "--k3s-version", version],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 1
    assert proc.stderr.startswith("[kubebuild] ERROR:") and proc.stderr.count("\n") == 1, proc.stderr
    assert "Traceback" not in proc.stderr and "goroutine" not in proc.stderr
