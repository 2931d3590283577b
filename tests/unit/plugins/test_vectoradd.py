"""plugins/module_utils/k8s/vectoradd.py: the CUDA vectorAdd check's Job and namespace, and the namespaces it refuses
(cases in data/vectoradd.yml)."""

import pytest
import yaml
from conftest import DATA

from ansible_collections.aiinfra.k3s.plugins.filter.problem_line import problem_line
from ansible_collections.aiinfra.k3s.plugins.filter.vectoradd_objects import vectoradd_objects
from ansible_collections.aiinfra.k3s.plugins.filter.vectoradd_problems import vectoradd_problems
from ansible_collections.aiinfra.k3s.plugins.module_utils.k8s import vectoradd

CASES = yaml.safe_load((DATA / "vectoradd.yml").read_text())
PARAMS = {
    "namespace": "aiinfra-gpu-verify",
    "image": "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0",
    "timeout": 300,
}


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_namespaces_the_check_refuses(case):
    found = vectoradd_problems(case["name"], "localhost", case.get("plan"), case.get("existing"))
    assert [[p["code"], p["host"], p["variable"]] for p in found] == case["expect"], found
    for p in found:
        line = problem_line(p)
        assert p["severity"] == "error" and p["fix"]
        for part in case.get("says", []):
            assert part in line, line


def objects(nodes=("gpu-1",)):
    return vectoradd_objects(list(nodes), PARAMS)


def test_the_namespace_is_labelled_as_the_checks_own_and_enforces_baseline():
    ns = objects()[0]
    assert ns["kind"] == "Namespace" and ns["metadata"]["name"] == "aiinfra-gpu-verify"
    labels = ns["metadata"]["labels"]
    assert labels["app.kubernetes.io/managed-by"] == "aiinfra.k3s"
    assert labels["aiinfra.io/purpose"] == "gpu-verify"
    assert labels["pod-security.kubernetes.io/enforce"] == "baseline"
    assert labels["pod-security.kubernetes.io/warn"] == "restricted"
    # The labels it gets are the labels the ownership check asks for.
    assert vectoradd.ownership_problems("aiinfra-gpu-verify", [ns], "localhost") == []


def test_one_job_per_node_pinned_to_it_with_one_gpu():
    jobs = objects(("gpu-1", "gpu-2"))[1:]
    assert [j["metadata"]["name"] for j in jobs] == ["vectoradd-gpu-1", "vectoradd-gpu-2"]
    for job, node in zip(jobs, ("gpu-1", "gpu-2")):
        assert job["kind"] == "Job" and job["metadata"]["namespace"] == "aiinfra-gpu-verify"
        pod = job["spec"]["template"]["spec"]
        assert pod["nodeSelector"] == {"kubernetes.io/hostname": node}
        assert pod["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": 1}
        assert pod["restartPolicy"] == "Never" and job["spec"]["backoffLimit"] == 0
        assert job["spec"]["activeDeadlineSeconds"] == 420


def test_the_job_runs_without_root_token_privileges_or_capabilities():
    """Issue 28, item 12: the Job ran as root with a service-account token. The CUDA sample needs neither."""
    pod = objects()[1]["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == vectoradd.RUN_AS_USER != 0
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert "hostNetwork" not in pod and "hostPID" not in pod and "hostIPC" not in pod
    assert all("hostPath" not in v for v in pod.get("volumes", []))
    (container,) = pod["containers"]
    sc = container["securityContext"]
    assert sc["allowPrivilegeEscalation"] is False and sc.get("privileged") is not True
    assert sc["capabilities"] == {"drop": ["ALL"]}
    assert sc["runAsNonRoot"] is True and sc["readOnlyRootFilesystem"] is True
    assert {"name": "HOME", "value": "/tmp"} in container["env"]


def test_a_long_node_name_gives_a_valid_job_name():
    name = vectoradd.job_name("a" * 49 + "-" + "b" * 30)
    assert name == "vectoradd-" + "a" * 49 and len(name) <= 63
