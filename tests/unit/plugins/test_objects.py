"""plugins/module_utils/k8s/objects.py: the object helpers every component uses (namespaces with their Pod Security
level, the pods' hardening for Pod Security restricted, Helm charts online and air-gapped, pinned images), on the
rendered test sites (tests/unit/rendered_sites.py) and as functions."""

import pytest
import rendered_sites
from conftest import write_site
from rendered_sites import load_docs, of_kind, render, workloads

from ansible_collections.aiinfra.k3s.plugins.module_utils.k8s import objects as sv

rendered = rendered_sites.site_fixture()


def test_every_namespace_has_a_pod_security_level(rendered):
    _site, docs, _out, _proc = rendered
    for ns in of_kind(docs, "Namespace"):
        labels = ns["metadata"].get("labels") or {}
        assert labels.get("pod-security.kubernetes.io/enforce") in ("restricted", "baseline", "privileged"), ns


def test_every_serving_pod_is_hardened_for_pod_security_restricted(rendered):
    _site, docs, _out, _proc = rendered
    serving = {d["metadata"]["namespace"] for d in workloads(docs)}
    for ns in of_kind(docs, "Namespace"):
        if ns["metadata"]["name"] in serving:
            assert ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    for dep in workloads(docs):
        pod = dep["spec"]["template"]["spec"]
        assert pod["automountServiceAccountToken"] is False, dep["metadata"]["name"]
        assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] > 0
        for container in pod["containers"]:
            ctx = container["securityContext"]
            assert ctx["readOnlyRootFilesystem"] is True and ctx["allowPrivilegeEscalation"] is False
            assert ctx["capabilities"] == {"drop": ["ALL"]}
            assert {"name": "HOME", "value": "/tmp"} in container["env"]
            assert {"name": "tmp", "mountPath": "/tmp"} in container["volumeMounts"]


def test_airgap_charts_are_served_by_k3s(tmp_path):
    (tmp_path / "inv").mkdir()
    airgap = {"k3s_install_mode": "airgap", "litellm_enabled": False}
    for prefix in ("gpu_operator", "cert_manager", "monitoring", "autoscaling"):
        airgap[f"{prefix}_chart_sha256"] = "0" * 64
    inventory = write_site(tmp_path / "inv", ["cp-1"], {"gpu-1": 1}, airgap)
    render(inventory, tmp_path / "out")
    charts = {c["metadata"]["name"]: c["spec"] for c in of_kind(load_docs(tmp_path / "out"), "HelmChart")}
    assert set(charts) == {"gpu-operator", "cert-manager", "kube-prometheus-stack", "keda"}
    for name, spec in charts.items():
        assert spec["chart"] == f"https://%{{KUBERNETES_API}}%/static/charts/{name}-{spec['version']}.tgz"
        assert "repo" not in spec


def test_airgap_without_digests_is_refused_with_every_chart_named():
    problems = sv.chart_problems("cert_manager", "airgap", "cert-manager-v1.18.2.tgz", "")
    assert problems and "cert_manager_chart_sha256 is not a sha256" in problems[0]
    assert sv.chart_problems("keda", "online", "x", "") == []
    assert "use online or airgap" in sv.chart_problems("monitoring", "usb-stick", "x.tgz", "")[0]


@pytest.mark.parametrize(
    ("image", "ok"),
    [
        ("vllm/vllm-openai:v0.6.3", True),
        ("vllm/vllm-openai:latest", False),
        ("vllm/vllm-openai", False),
        ("reg.local:5000/vllm/vllm-openai", False),
        ("reg.local:5000/vllm/vllm-openai:v1", True),
        ("vllm/vllm-openai@sha256:" + "a" * 64, True),
    ],
)
def test_image_pinned(image, ok):
    assert sv.image_pinned(image) is ok
