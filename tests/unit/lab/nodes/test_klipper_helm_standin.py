"""lab/nodes/programs/klipper-helm/entry (the STAND-IN for klipper-helm's entry): the helm commands it runs for the Jobs
helm-controller makes, with a fake `helm` on PATH (it records its arguments and answers `helm ls` from the test)
and the real jq. The Job's files (/config, /chart, /auth, /ca-files) are absent here: those paths are not created."""

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from lab.nodes import nodeimages

ENTRY = nodeimages.KLIPPER_HELM_ENTRY
SEP = "\x1f"
FAKE_HELM = f"""#!/bin/bash
printf '%s{SEP}' "$@" >>"$FAKE_HELM_LOG"
printf '\\n' >>"$FAKE_HELM_LOG"
if [[ $1 == ls ]]; then printf '%s' "${{FAKE_HELM_LS:-[]}}"; fi
if [[ $1 == "${{FAKE_HELM_FAIL:-}}" ]]; then echo "fake helm: $1 failed" >&2; exit 1; fi
"""
HASH = "--labels", "helmcharts.helm.cattle.io/configHash=abc123"
LS = ["ls", "--namespace", "cert-manager", "--filter", "^cert-manager$", "--output", "json"]
URL = "https://10.43.0.1:443/static/charts/cert-manager-v1.21.2.tgz"
JOB_ARGS = ["install", "--namespace", "cert-manager", "--version", "v1.21.2", "--set", "crds.enabled=true"]

pytestmark = [
    pytest.mark.skipif(shutil.which("jq") is None or shutil.which("bash") is None, reason="needs bash and jq"),
    pytest.mark.skipif(
        any(Path(p).exists() for p in ("/config", "/chart", "/auth", "/ca-files")),
        reason="this machine has a Job's paths (/config, /chart, /auth, /ca-files)",
    ),
]


def release(status, revision):
    return json.dumps(
        [{"name": "cert-manager", "chart": "cert-manager-v1.21.2", "status": status, "revision": revision}]
    )


def run_entry(tmp_path, args, env=None, ls="[]"):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    fake = bin_dir / "helm"
    fake.write_text(FAKE_HELM)
    fake.chmod(0o755)
    log = tmp_path / "helm.log"
    log.write_text("")
    jq_dir = str(Path(shutil.which("jq")).parent)
    job_env = {
        "PATH": f"{bin_dir}:{jq_dir}:/usr/bin:/bin",
        "HOME": str(tmp_path / "home"),
        "TERM_LOG": str(tmp_path / "termination-log"),
        "FAKE_HELM_LOG": str(log),
        "FAKE_HELM_LS": ls,
        "KUBERNETES_SERVICE_HOST": "10.43.0.1",
        "KUBERNETES_SERVICE_PORT": "443",
        # what helm-controller sets for the collection's cert-manager HelmChart
        "NAME": "cert-manager",
        "CHART": "https://%{KUBERNETES_API}%/static/charts/cert-manager-v1.21.2.tgz",
        "REPO": "",
        "VERSION": "v1.21.2",
        "HELM_DRIVER": "secret",
        "CHART_NAMESPACE": "kube-system",
        "HELM_VERSION": "",
        "TARGET_NAMESPACE": "cert-manager",
        "AUTH_PASS_CREDENTIALS": "false",
        "INSECURE_SKIP_TLS_VERIFY": "false",
        "PLAIN_HTTP": "false",
        "FAILURE_POLICY": "reinstall",
        "SERVER_SIDE": "auto",
        "FORCE_CONFLICTS": "false",
        "EXPECTED_RELEASE_REVISION": "0",
        "CONFIG_HASH": "abc123",
        **(env or {}),
    }
    proc = subprocess.run(
        [str(ENTRY), *args], env=job_env, capture_output=True, text=True, timeout=60, check=False, cwd=tmp_path
    )
    calls = [line.split(SEP)[:-1] for line in log.read_text().splitlines()]
    return proc, calls


CASES = {
    "no release: install from the static charts URL": (
        JOB_ARGS,
        {},
        "[]",
        0,
        [LS, ["install", "cert-manager", URL, *JOB_ARGS[1:], "--namespace", "cert-manager", *HASH]],
    ),
    "deployed at the expected revision: upgrade": (
        JOB_ARGS,
        {"EXPECTED_RELEASE_REVISION": "1"},
        release("deployed", 1),
        0,
        [
            LS,
            ["upgrade", "cert-manager", URL, *JOB_ARGS[1:], "--namespace", "cert-manager", *HASH, "--server-side=auto"],
        ],
    ),
    "another revision than the Job expected: nothing": (
        JOB_ARGS,
        {"EXPECTED_RELEASE_REVISION": "1"},
        release("deployed", 2),
        0,
        [LS],
    ),
    "failed with failurePolicy reinstall: uninstall, install": (
        JOB_ARGS,
        {"EXPECTED_RELEASE_REVISION": "1"},
        release("failed", 1),
        0,
        [
            LS,
            ["uninstall", "cert-manager", "--namespace", "cert-manager", "--wait"],
            ["install", "cert-manager", URL, *JOB_ARGS[1:], "--namespace", "cert-manager", *HASH],
        ],
    ),
    "failed with failurePolicy abort: an operator is needed": (
        JOB_ARGS,
        {"EXPECTED_RELEASE_REVISION": "1", "FAILURE_POLICY": "abort"},
        release("failed", 1),
        1,
        [LS],
    ),
    "failed with failurePolicy retry: upgrade": (
        JOB_ARGS,
        {"EXPECTED_RELEASE_REVISION": "1", "FAILURE_POLICY": "retry"},
        release("failed", 1),
        0,
        [
            LS,
            ["upgrade", "cert-manager", URL, *JOB_ARGS[1:], "--namespace", "cert-manager", *HASH, "--server-side=auto"],
        ],
    ),
    "timeout, server-side, force-conflicts, plain http, insecure": (
        ["install"],
        {"TIMEOUT": "30s", "SERVER_SIDE": "true", "FORCE_CONFLICTS": "true", "PLAIN_HTTP": "true"}
        | {"INSECURE_SKIP_TLS_VERIFY": "true"},
        "[]",
        0,
        [
            LS,
            [
                *("install", "cert-manager", URL, "--namespace", "cert-manager", "--plain-http", "--timeout", "30s"),
                *("--force-conflicts", *HASH, "--server-side=true", "--insecure-skip-tls-verify"),
            ],
        ],
    ),
    "a chart repository: repo add and update, then install NAME/CHART": (
        ["install", "--version", "0.1.0"],
        {"REPO": "https://charts.example/stable", "CHART": "demo/demo", "AUTH_PASS_CREDENTIALS": "true"},
        "[]",
        0,
        [
            LS,
            ["repo", "add", "cert-manager", "https://charts.example/stable", "--force-update", "--pass-credentials"],
            ["repo", "update", "cert-manager"],
            [
                *("install", "cert-manager", "demo/demo", "--version", "0.1.0", "--namespace", "cert-manager"),
                *(*HASH, "--pass-credentials"),
            ],
        ],
    ),
    "an OCI repository: the chart under it, no repo add": (
        ["install"],
        {"REPO": "oci://registry.example/charts/", "CHART": "demo"},
        "[]",
        0,
        [LS, ["install", "cert-manager", "oci://registry.example/charts/demo", "--namespace", "cert-manager", *HASH]],
    ),
    "delete a release": (
        ["delete"],
        {"TIMEOUT": "5m0s"},
        release("deployed", 3),
        0,
        [LS, ["uninstall", "cert-manager", "--namespace", "cert-manager", "--wait", "--timeout", "5m0s"]],
    ),
    "delete with no release: nothing": (["delete"], {}, "[]", 0, [LS]),
    "delete whose uninstall fails: still done": (
        ["delete"],
        {"FAKE_HELM_FAIL": "uninstall"},
        release("failed", 1),
        0,
        [LS, ["uninstall", "cert-manager", "--namespace", "cert-manager", "--wait"]],
    ),
    "Helm v2: refused": (JOB_ARGS, {"HELM_VERSION": "v2"}, "[]", 64, []),
    "an unknown action: refused": (["upgrade"], {}, "[]", 2, [LS]),
}


@pytest.mark.parametrize(("args", "env", "ls", "rc", "calls"), CASES.values(), ids=list(CASES))
def test_the_helm_commands_for_a_job(tmp_path, args, env, ls, rc, calls):
    proc, seen = run_entry(tmp_path, args, env, ls)
    assert proc.returncode == rc, proc.stdout + proc.stderr
    assert seen == calls, proc.stdout + proc.stderr


def test_an_ipv6_api_address_is_bracketed(tmp_path):
    proc, seen = run_entry(tmp_path, ["install"], {"KUBERNETES_SERVICE_HOST": "fd00::1"})
    assert proc.returncode == 0, proc.stderr
    assert seen[-1][2] == "https://[fd00::1]:443/static/charts/cert-manager-v1.21.2.tgz"


def test_a_failed_install_fails_the_job_and_says_what_it_tried_in_the_termination_log(tmp_path):
    (tmp_path / "termination-log").write_text("")
    proc, seen = run_entry(tmp_path, JOB_ARGS, {"FAKE_HELM_FAIL": "install"})
    assert proc.returncode == 1
    assert [call[0] for call in seen] == ["ls", "install"]
    assert "installing cert-manager from " + URL in (tmp_path / "termination-log").read_text()


def test_the_entry_is_shellcheck_clean():
    if shutil.which("shellcheck") is None:
        pytest.skip("shellcheck is not installed")
    proc = subprocess.run(["shellcheck", str(ENTRY)], capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert os.access(ENTRY, os.X_OK)
