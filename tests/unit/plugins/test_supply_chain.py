"""plugins/module_utils/plan/supply_chain.py: download URLs, K3s pins, image digests, charts (cases in data/supply_chain.yml)."""

import copy
from pathlib import Path

import pytest
import yaml

from ansible_collections.aiinfra.k3s.plugins.filter.k3s_release_problems import k3s_release_problems
from ansible_collections.aiinfra.k3s.plugins.module_utils.node import k3s_release
from ansible_collections.aiinfra.k3s.plugins.module_utils.plan import supply_chain

DATA = yaml.safe_load((Path(__file__).parents[1] / "data" / "supply_chain.yml").read_text())
CASES = DATA["cases"]


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_supply_chain(case):
    values = dict(copy.deepcopy(DATA["base"]), **copy.deepcopy(case.get("values") or {}))
    problems = supply_chain.supply_chain_problems(values)
    found = sorted((p["code"], p["severity"], p["variable"]) for p in problems)
    assert found == sorted(tuple(e) for e in case["expect"]), problems
    text = " ".join("%s %s" % (p["problem"], p["fix"]) for p in problems)
    for fragment in case.get("says", []):
        assert fragment in text, text
    for p in problems:
        assert p["host"] == "all" and p["problem"] and (p["fix"] or p["severity"] == "error")


def test_every_variable_is_declared_by_a_role():
    from ansible_collections.aiinfra.k3s.plugins.filter.inventory_spec_problems import role_specs
    from ansible_collections.aiinfra.k3s.plugins.module_utils.plan.inventory_spec import merge_specs

    declared = merge_specs(role_specs())
    assert [v for v in supply_chain.VARIABLES if v not in declared] == []


def test_role_defaults_are_https_and_the_pinned_release_is_shipped(root):
    defaults = {}
    for path in sorted(root.glob("roles/*/defaults/main.yml")):
        defaults.update(yaml.safe_load(path.read_text()) or {})
    urls = [k for k in defaults if k.endswith("_url") or k.endswith("_chart_repo")]
    assert "k3s_release_url" in urls
    for name in urls:
        if "{{" not in str(defaults[name]):
            assert supply_chain.https_error(defaults[name]) is None, name
    assert defaults["k3s_version"] in k3s_release.RELEASE_SHA256
    assert supply_chain.k3s_pin_problems(defaults["k3s_version"], "online", {}, ["amd64"], True) == []


@pytest.mark.parametrize(
    ("reference", "parsed"),
    [
        ("vllm/vllm-openai:v0.34.0", ("vllm/vllm-openai", "v0.34.0", None)),
        (
            "registry.example:5000/team/img:1.0@sha256:" + "a" * 64,
            ("registry.example:5000/team/img", "1.0", "sha256:" + "a" * 64),
        ),
        ("redis@sha256:" + "b" * 64, ("redis", None, "sha256:" + "b" * 64)),
    ],
)
def test_parse_image(reference, parsed):
    got = supply_chain.parse_image(reference)
    assert (got["name"], got["tag"], got["digest"]) == parsed


def test_shipped_table_is_well_formed():
    for version, pins in k3s_release.RELEASE_SHA256.items():
        assert k3s_release.is_k3s_version(version)
        for name, digest in pins.items():
            assert k3s_release.artifact_arch(name) and k3s_release.SHA256_RE.match(digest), (version, name)


def test_artifacts_stage_refuses_http_and_unpinned_arm64():
    problems = k3s_release_problems(
        "v1.36.4+k3s1", "online", "http://github.com/k3s-io/k3s/releases/download", {}, ["arm64"]
    )
    assert sorted(p["code"] for p in problems) == ["INSECURE_URL", "K3S_UNPINNED"]
    assert all(p["severity"] == "error" for p in problems)
    assert "k3s-arm64" in next(p["problem"] for p in problems if p["code"] == "K3S_UNPINNED")
    # The shipped amd64 pins cover the binary and, with k3s_online_images, the image tarball.
    assert k3s_release_problems("v1.36.4+k3s1", "online", "https://x.example/dl", {}, ["amd64"], True) == []
    # Airgap reads no URL: the bundle is the operator's (its pins are k3s_sha256_pins).
    assert k3s_release_problems("v1.36.4+k3s1", "airgap", "http://unused", {}, ["arm64"]) == []
    unpinned = k3s_release_problems("v1.36.4+k3s1", "online", "https://x.example/dl", {}, ["arm64"], False, True)
    assert [(p["code"], p["severity"]) for p in unpinned] == [("K3S_UNPINNED", "warning")]
