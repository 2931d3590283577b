"""The test sites as playbooks/render.yml renders them (example, lab, full), rendered once per test session.

Rendering runs ansible-playbook (seconds per site), so every test of a site reads one render: a test module takes
the `rendered` fixture with `rendered = rendered_sites.site_fixture()` (one test per site, ids example/lab/full) and
gets a Rendered (site, docs, out, proc). A render that fails is cached as such, and reported once: the first test
that needs the site fails with the playbook's own output (tests/unit/playbooks/test_rendered_sites.py's
test_site_renders[<site>] always does, and runs first in `make unit`), every later test of that site is skipped
with a pointer to that failure. So one broken render is one failure that says why, not one traceback per test, and
no selection of tests can pass over a site that did not render.
"""

import json
import subprocess
import traceback
from pathlib import Path
from typing import NamedTuple

import pytest
import yaml
from conftest import DATA, ROOT, run_playbook, write_site

K8S_VERSION = "1.36"  # K3s v1.36.4+k3s1 (roles/k3s/defaults/main.yml)
CRDS = {
    (d["properties"]["apiVersion"]["const"], d["properties"]["kind"]["const"]): d
    for d in (yaml.safe_load(p.read_text()) for p in sorted((DATA / "crds").glob("*.yml")))
}
GATEWAY_KEY = "sk-3e8b1d6f9a2c4e7b0d5f8a1c3e6b9d2f4a7c"
NGC_KEY = "nvapi-7Hq2Lm9Xw4Rt8Yp3Kd6Fz1Vb5Nc0Gs"
NIM_IMAGE = "nvcr.io/nim/meta/llama-3.1-8b-instruct:1.3.3"
EXAMPLE = ROOT / "inventories" / "example"
# A bigger site than the notes: two GPU nodes with two GPUs, one shared by time-slicing, a NIM backend next to
# vLLM, the gateway on the GPU nodes (the notes' placement) and the secrets rendered too.
FULL_VARS = {
    "aiinfra_namespace": "ia-services-payed",
    "litellm_master_key": GATEWAY_KEY,
    "litellm_placement": "gpu",
    "nim_ngc_api_key": NGC_KEY,
    "nim_models": [{"served_name": "llama-8b", "image": NIM_IMAGE, "gpus": 1, "replicas": 2, "max_replicas": 3}],
    "vllm_models": [
        {"served_name": "nemotron-35b", "path": "nvidia/Nemotron-4-35B", "tensor_parallel_size": 2},
        {"served_name": "qwen-7b", "path": "Qwen/Qwen2-7B", "replicas": 2},
    ],
    "gpu_operator_time_slicing_classes": {"shared": 2, "exclusive": 1},
    "gpu_operator_time_slicing_default": "exclusive",
    "gpu_operator_mig_strategy": "single",
    "gpu_operator_registry": "registry.site.internal:5000",
    "traefik_host": "llm.example.org",
    "traefik_path_prefix": "/",
    "cert_manager_issuer_kind": "acme",
    "cert_manager_acme_email": "ops@example.org",
    "monitoring_grafana_admin_password": "Gq8wE3rT6yU1iO4pA7sD",
    "monitoring_token_prices": {"nemotron-35b": {"prompt": 0.000002, "completion": 0.000006}},
}
NODES = {
    "example": {"gx10-db4d": 1},
    "lab": {"lab-gpu-1": 2, "lab-gpu-2": 2},  # inventories/lab/group_vars/gpu_nodes.yml
    "full": {"gpu-a": 2, "gpu-b": 2},
}
SITES = list(NODES)
# The example and the full site name the notes' namespace; the lab takes the collection's default.
NAMESPACE = {"example": "ia-services-payed", "lab": "ai-serving", "full": "ia-services-payed"}
FULL_CLASSES = {"gpu-a": "shared"}  # gpu-b takes the default class, exclusive
ALLOCATABLE = {"example": NODES["example"], "lab": NODES["lab"], "full": {"gpu-a": 4, "gpu-b": 2}}


class Rendered(NamedTuple):
    site: str
    docs: list  # every object of every file render.yml wrote
    out: Path  # the render directory; the site plan is beside it, f"{out}.plan"
    proc: subprocess.CompletedProcess  # ansible-playbook's run (its output must not hold a secret)

    def plan(self):
        return yaml.safe_load(Path(f"{self.out}.plan").read_text())


class Broken:
    """A render that failed: its message, and the test that reported it (None until one has)."""

    def __init__(self, site, message):
        self.site, self.message, self.reported_by = site, message, None

    def report(self, nodeid, owner=False):
        if owner or self.reported_by is None:
            self.reported_by = self.reported_by or nodeid
            pytest.fail(self.message, pytrace=False)
        pytest.skip(f"the {self.site} site did not render: see {self.reported_by}")


def render(inventory, out, extra=()):
    """render.yml for one inventory into `out`; fails with the end of the playbook's output."""
    proc = run_playbook("render.yml", inventory, callback="default", extra=["-e", f"render_dir={out}", *extra])[0]
    assert proc.returncode == 0, proc.stdout[-3000:]
    return proc


def load_docs(out):
    docs = []
    for path in sorted(out.glob("*.yaml")):
        docs.extend(d for d in yaml.safe_load_all(path.read_text()) if d)
    return docs


def site_inputs(site, tmp_path_factory):
    """The inventory and extra arguments of a test site."""
    if site == "example":
        return EXAMPLE, []
    if site == "lab":  # the lab's hosts.yml is written by labctl; render its default shape
        return write_site(tmp_path_factory.mktemp("lab-inv"), ["lab-cp-1"], NODES["lab"], link_lab=True), []
    inventory = write_site(
        tmp_path_factory.mktemp("full-inv"), ["cp-1"], NODES["full"], FULL_VARS, classes=FULL_CLASSES
    )
    return inventory, ["-e", "render_secrets=true", "-vvv"]  # secrets must not reach even the most verbose output


_RENDERS = {}  # name -> Rendered or Broken, for the whole session


def _render(name, inputs, tmp_path_factory):
    out = tmp_path_factory.mktemp(f"render-{name}")
    try:
        inventory, extra = inputs(tmp_path_factory)
        argv = [*extra, "-e", f"render_plan_file={out}.plan"]
        proc = run_playbook("render.yml", inventory, callback="default", extra=["-e", f"render_dir={out}", *argv])[0]
        if proc.returncode != 0:
            return Broken(
                name,
                f"render.yml did not render the {name} site (ansible-playbook -i {inventory} {' '.join(argv)} exited"
                f" {proc.returncode}); the end of its output:\n{proc.stdout[-3000:]}{proc.stderr[-2000:]}",
            )
        return Rendered(name, load_docs(out), out, proc)
    except Exception:  # a timeout, an unreadable file: said as such, once
        return Broken(name, f"rendering the {name} site raised:\n{traceback.format_exc()}")


def site(request, name, inputs=None, owner=False):
    """The session's render of `name` (a test site, or any render given its inputs(tmp_path_factory) ->
    (inventory, extra arguments)); a failed render fails the first test that asks (and always the owner) and
    skips the others."""
    if name not in _RENDERS:
        inputs = inputs or (lambda factory: site_inputs(name, factory))
        _RENDERS[name] = _render(name, inputs, request.getfixturevalue("tmp_path_factory"))
    got = _RENDERS[name]
    if isinstance(got, Broken):
        got.report(request.node.nodeid, owner)
    return got


def example_with(extra_vars):
    """Inputs for site(): the example inventory with more variables."""
    return lambda _factory: (EXAMPLE, ["-e", json.dumps(extra_vars)])


def site_fixture():
    """The `rendered` fixture of a test module: parametrized over the test sites, each test reading the session's
    render (function scope, so that a failed render is reported once, not cached as every test's error)."""

    @pytest.fixture(params=SITES)
    def rendered(request):
        return site(request, request.param)

    return rendered


def of_kind(docs, kind):
    return [d for d in docs if d["kind"] == kind]


def workloads(docs):
    """The Deployments: the gateway and the model servers (one store claim per pod)."""
    return [d for d in docs if d["kind"] in ("Deployment", "StatefulSet")]


def gpu_deployments(docs):
    return [
        d
        for d in workloads(docs)
        if "nvidia.com/gpu" in d["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    ]
