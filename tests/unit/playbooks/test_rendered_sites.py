"""The test sites as playbooks/render.yml renders them (tests/unit/rendered_sites.py: example, lab, full), checked as
whole sites: each renders, every file matches its golden copy byte for byte (tests/golden/<site>), every object passes
strict Kubernetes schema validation (the K3s release's Kubernetes version) or its CRD's schema, and secrets are
written only on request and never printed. What each component's objects say is tested with its module
(tests/unit/plugins/test_<module>.py), on the same renders."""

import difflib
import hashlib
import json
import os
import stat
import subprocess
from pathlib import Path

import jsonschema
import pytest
import rendered_sites
from conftest import ROOT
from rendered_sites import CRDS, GATEWAY_KEY, K8S_VERSION, NGC_KEY, of_kind, workloads

kubernetes_validate = pytest.importorskip("kubernetes_validate")

NPM_GROUPS = ("traefik.io/", "cert-manager.io/", "monitoring.coreos.com/", "keda.sh/")  # tests/crd/validate.cjs


CRD_DIR = ROOT / "tests" / "crd"
rendered = rendered_sites.site_fixture()


@pytest.mark.parametrize("site", rendered_sites.SITES)
def test_site_renders(request, site):
    """render.yml runs to the end for each test site and writes its manifests and its site plan. When a site does not
    render, this test fails with the playbook's output and every other test of that site is skipped, pointing to the
    first test that reported it (this one, in `make unit`)."""
    got = rendered_sites.site(request, site, owner=True)
    assert got.docs and isinstance(got.plan(), dict)


def npm_validated(doc):
    return doc["apiVersion"].startswith(NPM_GROUPS)


def validate_with_npm_schemas(docs):
    """tests/crd/validate.cjs: each object against the CRD schema shipped by @kubernetes-models (pinned)."""
    if not (CRD_DIR / "node_modules").is_dir():
        pytest.fail("CRD schema packages missing: run `make crd-deps` (npm ci in tests/crd)")
    proc = subprocess.run(
        ["node", str(CRD_DIR / "validate.cjs")],
        input=json.dumps(docs),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return proc.returncode, [json.loads(line) for line in proc.stdout.splitlines()]


def test_every_builtin_manifest_passes_strict_schema_validation(rendered):
    _site, docs, _out, _proc = rendered
    builtin = [d for d in docs if (d["apiVersion"], d["kind"]) not in CRDS and not npm_validated(d)]
    assert builtin
    for doc in builtin:
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


def test_custom_resources_pass_their_crd_schema(rendered):
    _site, docs, _out, _proc = rendered
    custom = [d for d in docs if (d["apiVersion"], d["kind"]) in CRDS]
    assert custom, "the GPU Operator HelmChart is missing"
    for doc in custom:
        jsonschema.validate(doc, CRDS[(doc["apiVersion"], doc["kind"])])


def test_crd_schema_refuses_a_typo():
    """The schema is strict: a misspelt field is an error, not silently pruned as the API server would."""
    good = {"apiVersion": "helm.cattle.io/v1", "kind": "HelmChart", "metadata": {"name": "x", "namespace": "y"}}
    schema = CRDS[("helm.cattle.io/v1", "HelmChart")]
    jsonschema.validate(dict(good, spec={"chart": "gpu-operator", "version": "v1"}), schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(dict(good, spec={"chart": "gpu-operator", "valuesContents": "x"}), schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(dict(good, spec={"chart": "c", "failurePolicy": "retry"}), schema)


def test_traefik_and_cert_manager_resources_pass_their_crd_schemas(rendered):
    _site, docs, _out, _proc = rendered
    custom = [d for d in docs if npm_validated(d)]
    assert {d["kind"] for d in custom} >= {
        "IngressRoute",
        "Middleware",
        "ClusterIssuer",
        "Certificate",
        "PrometheusRule",
    }
    rc, lines = validate_with_npm_schemas(custom)
    assert rc == 0, [line for line in lines if not line["ok"]]
    assert len(lines) == len(custom)


def test_npm_crd_schemas_refuse_bad_objects():
    """The validator is not a rubber stamp: a wrong type and a missing issuer are refused."""
    bad = [
        {
            "apiVersion": "traefik.io/v1alpha1",
            "kind": "Middleware",
            "metadata": {"name": "m", "namespace": "n"},
            "spec": {"rateLimit": {"average": "lots"}},
        },
        {
            "apiVersion": "cert-manager.io/v1",
            "kind": "Certificate",
            "metadata": {"name": "c", "namespace": "n"},
            "spec": {"secretName": "s", "dnsNames": ["a.example.org"]},
        },
    ]
    rc, lines = validate_with_npm_schemas(bad)
    assert rc == 1 and [line["ok"] for line in lines] == [False, False]
    assert "average" in lines[0]["error"] and "issuerRef" in lines[1]["error"]


def test_secrets_are_rendered_only_on_request_and_never_printed(rendered):
    site, docs, out, proc = rendered
    assert not of_kind(docs, "Secret") or site == "full"
    secrets_file = out / "secrets.yaml"
    if site != "full":
        assert not secrets_file.exists()
        return
    assert stat.S_IMODE(secrets_file.stat().st_mode) == 0o600
    assert GATEWAY_KEY not in proc.stdout + proc.stderr and NGC_KEY not in proc.stdout + proc.stderr
    secrets = {s["metadata"]["name"]: s for s in of_kind(docs, "Secret")}
    assert secrets["litellm-master-key"]["stringData"]["LITELLM_MASTER_KEY"] == GATEWAY_KEY
    assert "ngc-api" not in secrets  # only with nim_download
    auths = json.loads(secrets["ngc-registry"]["stringData"][".dockerconfigjson"])["auths"]
    assert auths["nvcr.io"]["username"] == "$oauthtoken" and auths["nvcr.io"]["password"] == NGC_KEY
    for path in out.glob("*.yaml"):
        if path != secrets_file:
            assert GATEWAY_KEY not in path.read_text() and NGC_KEY not in path.read_text()
    (dep,) = [d for d in workloads(docs) if d["metadata"]["name"] == "litellm-ha"]
    # Issue 28, item 9: no function of the key material in the workloads (they carried sha256(key:Redis password),
    # which anyone who may read Deployments could test guesses against); a new key rolls them through the Secrets'
    # resourceVersions (test_a_new_key_rolls_the_gateway_and_its_redis). The Redis password (derived from the master
    # key here) is in its Secret, nowhere else.
    (redis,) = [d for d in workloads(docs) if d["metadata"]["name"] == "litellm-ha-redis"]
    password = secrets["litellm-redis"]["stringData"]["password"]
    material = [GATEWAY_KEY, password, GATEWAY_KEY + ":", GATEWAY_KEY + ":" + password]
    digests = {hashlib.sha256(m.encode()).hexdigest() for m in material}
    for workload in (dep, redis):
        text = json.dumps(workload)
        assert "aiinfra.io/secret-sha256" not in text
        assert not [d for d in digests if d in text] and GATEWAY_KEY not in text and password not in text
    assert "requirepass %s\n" % password in secrets["litellm-redis"]["stringData"]["redis.conf"]
    for path in out.glob("*.yaml"):
        if path != secrets_file:
            assert password not in path.read_text()


GOLDEN = ROOT / "tests" / "golden"


PLAN_FILE = "site-plan.yaml"


def test_rendered_manifests_match_the_golden_files(rendered):
    """Every file render.yml writes for each test site, byte for byte (stored as <file>.golden, outside the YAML
    linters). A change that alters them on purpose regenerates them with AIINFRA_UPDATE_GOLDEN=1 make unit and
    says why in its commit."""
    site, _docs, out, _proc = rendered
    golden = GOLDEN / site
    files = sorted(p.name for p in out.glob("*.yaml") if p.name != "secrets.yaml")  # secrets stay out of git
    texts = {name: (out / name).read_text() for name in files}
    texts[PLAN_FILE] = Path(f"{out}.plan").read_text()  # the site plan render.yml writes beside the manifests
    if os.environ.get("AIINFRA_UPDATE_GOLDEN") == "1":
        golden.mkdir(parents=True, exist_ok=True)
        for old in golden.glob("*.golden"):
            old.unlink()
        for name, text in texts.items():
            (golden / (name + ".golden")).write_text(text)
    assert sorted(p.name.removesuffix(".golden") for p in golden.glob("*.golden")) == sorted(texts)
    for name, got in texts.items():
        want = (golden / (name + ".golden")).read_text()
        if want != got:
            diff = difflib.unified_diff(
                want.splitlines(), got.splitlines(), f"golden/{site}/{name}", "rendered", lineterm=""
            )
            pytest.fail("\n".join(list(diff)[:80]))
