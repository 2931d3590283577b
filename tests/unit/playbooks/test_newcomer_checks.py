"""The newcomer site of issue 29 (tests/unit/data/newcomer) with the mistakes its operator first made (items 9-11):
a misspelt top-level variable, a path prefix the public paths already start with and a key typo in a model entry.
One validate run names all three, then fails once."""

import shutil

import pytest
import yaml
from conftest import DATA, run_playbook


def newcomer_with(tmp_path, change):
    site = tmp_path / "newcomer"
    shutil.copytree(DATA / "newcomer", site)
    main = site / "group_vars" / "all" / "main.yml"
    values = yaml.safe_load(main.read_text())
    change(values)
    main.write_text(yaml.safe_dump(values, sort_keys=False))
    return site


def first_mistakes(values):
    values["traefik_path_prefix"] = "/v1"  # item 10: served /v1/v1/chat/completions
    values["traefik_rate_limt_burst"] = 400  # item 9: a misspelt top-level variable
    qwen = next(m for m in values["vllm_models"] if m["served_name"].startswith("qwen"))
    qwen["tensor_paralel_size"] = qwen.pop("tensor_parallel_size", 1)  # item 11: a key typo


@pytest.mark.slow
def test_the_newcomer_site_first_mistakes_come_out_in_one_run(tmp_path):
    proc = run_playbook("validate.yml", newcomer_with(tmp_path, first_mistakes), callback="default")[0]
    out = " ".join(proc.stdout.split())
    assert proc.returncode != 0
    assert "Traceback" not in out, out[-4000:]
    for fragment in (
        "ERROR UNKNOWN_VARIABLE [cp1,gpu1,gpu2,gpu3] traefik_rate_limt_burst",
        "did you mean traefik_rate_limit_burst?",
        "has the key 'tensor_paralel_size', which is not one of its settings (did you mean tensor_parallel_size?)",
        "traefik_path_prefix is '/v1' and the public paths already start with it",
        "clients would call https://api.example.internal/v1/v1/chat/completions",
    ):
        assert fragment in out, (fragment, out[-4000:])
    assert out.count("fatal:") == 1, out[-4000:]
