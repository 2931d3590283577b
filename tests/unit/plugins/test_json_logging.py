"""plugins/module_utils/k8s/json_logging.py: vLLM's logging ConfigMap, as rendered for every test site
(tests/unit/rendered_sites.py), makes vLLM log one JSON object per line."""

import json
import subprocess
import sys

import rendered_sites
from rendered_sites import of_kind, workloads

from ansible_collections.aiinfra.k3s.plugins.module_utils.k8s import json_logging

rendered = rendered_sites.site_fixture()


def test_vllm_logs_json_through_its_configmap(rendered, tmp_path):
    """The ConfigMap's formatter and dictConfig, loaded as vLLM loads them, print one JSON object per line."""
    _site, docs, _out, _proc = rendered
    (cm,) = [d for d in of_kind(docs, "ConfigMap") if d["metadata"]["name"] == "vllm-logging"]
    for name, content in cm["data"].items():
        (tmp_path / name).write_text(content)
    env = next(d for d in workloads(docs) if d["metadata"]["name"].startswith("vllm-"))
    env = {e["name"]: e.get("value") for e in env["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["VLLM_LOGGING_CONFIG_PATH"] == env["PYTHONPATH"] + "/logging.json"
    code = (
        "import json, logging, logging.config, sys\n"
        "logging.config.dictConfig(json.load(open(sys.argv[1])))\n"
        "logging.getLogger('vllm.engine').info('loaded %s in %ds', 'model \"x\"', 42)\n"
        "logging.getLogger('uvicorn.access').warning('GET /health 200')\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "logging.json")],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(tmp_path)},
        timeout=30,
        check=True,
    )
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [(e["logger"], e["level"]) for e in lines] == [("vllm.engine", "INFO"), ("uvicorn.access", "WARNING")]
    assert lines[0]["message"] == 'loaded model "x" in 42s'
    assert json_logging.MODULE + ".py" in cm["data"]
