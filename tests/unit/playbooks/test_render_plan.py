"""playbooks/render.yml shows what the plan holds (issue 29 items 9 and 15): every problem, warnings included, in
its output and in the plan file; a misspelt variable stops the render after the plan is written for review."""

from pathlib import Path

import pytest
import yaml
from conftest import run_playbook, write_site

from ansible_collections.aiinfra.k3s.plugins.module_utils.k8s import edge

MODEL = {"served_name": "qwen", "path": "Qwen/Qwen2.5-7B-Instruct"}
EDGE = {"traefik_host": "api.example.internal", "traefik_path_prefix": "/api/litellm"}


def render(tmp_path, group_vars):
    inventory = write_site(tmp_path / "inv", ["cp-1"], {"gpu-1": 1}, group_vars)
    plan = tmp_path / "plan.yml"
    extra = ["-e", "render_dir=%s" % (tmp_path / "out"), "-e", "render_plan_file=%s" % plan]
    proc = run_playbook("render.yml", inventory, callback="default", extra=extra)[0]
    return proc, " ".join(proc.stdout.split()), plan


@pytest.mark.slow
def test_render_shows_and_writes_every_warning_and_the_plan(tmp_path):
    (tmp_path / "inv").mkdir()
    proc, out, plan_path = render(tmp_path, {"vllm_models": [MODEL], "site_dns_zone": "example.internal", **EDGE})
    assert proc.returncode == 0, out[-3000:]
    # A variable close to no known one and the plan's own warning (one GPU node: no N-1 capacity), both printed.
    assert "WARNING UNKNOWN_VARIABLE [cp-1,gpu-1] site_dns_zone" in out, out[-3000:]
    assert "WARNING NODE_LOSS [all] vllm_models - qwen" in out, out[-3000:]
    plan = yaml.safe_load(plan_path.read_text())
    codes = {(p["code"], p["severity"]) for p in plan["problems"]}
    assert {("UNKNOWN_VARIABLE", "warning"), ("NODE_LOSS", "warning")} <= codes, plan["problems"]
    # The plan's models with their defaults, and the edge.
    (model,) = plan["models"]
    assert model["served_name"] == "qwen" and model["server"] == "vllm" and model["gpus"] == 1
    assert plan["edge"]["host"] == "api.example.internal"
    if "public_urls" not in plan["edge"]:
        pytest.skip("site_plan.edge_plan does not carry edge.public_urls yet")
    values = dict(EDGE, traefik_public_paths=list(edge.PUBLIC_PATHS))
    assert plan["edge"]["public_urls"] == edge.public_urls(values)
    assert "https://api.example.internal/api/litellm/v1/chat/completions" in out


@pytest.mark.slow
def test_a_misspelt_variable_stops_the_render_and_is_in_the_plan(tmp_path):
    (tmp_path / "inv").mkdir()
    proc, out, plan_path = render(tmp_path, {"vllm_models": [MODEL], "traefik_path_prefx": "/v1", **EDGE})
    assert proc.returncode != 0
    assert "ERROR UNKNOWN_VARIABLE [cp-1,gpu-1] traefik_path_prefx" in out, out[-3000:]
    assert "did you mean traefik_path_prefix?" in out
    assert "The site has 1 problem(s)" in out, out[-3000:]
    assert not list((tmp_path / "out").glob("*.yaml"))  # no manifest of a site that cannot work
    plan = yaml.safe_load(Path(plan_path).read_text())
    assert [p["variable"] for p in plan["problems"] if p["severity"] == "error"] == ["traefik_path_prefx"]


@pytest.mark.slow
def test_a_doubled_prefix_stops_the_render(tmp_path):
    (tmp_path / "inv").mkdir()
    proc, out, _plan = render(tmp_path, {"vllm_models": [MODEL], **dict(EDGE, traefik_path_prefix="/v1")})
    assert proc.returncode != 0
    assert "ERROR EDGE [all] traefik_host - traefik_path_prefix is '/v1' and the public paths already start" in out
    assert "set traefik_path_prefix to / to serve https://api.example.internal/v1/chat/completions" in out
