"""The stage report: module_utils stage_report.py, and the aiinfra.k3s.stage_report action as a playbook runs it."""

import pytest
from conftest import run_playbook, write_inventory

from ansible_collections.aiinfra.k3s.plugins.module_utils.plan.stage_report import (
    record,
    report_lines,
    weight_records,
    weights_detail,
)


def test_all_ran():
    lines = report_lines(
        [
            {"stage": "validate", "status": "ran", "detail": "ok"},
            {"stage": "prereq", "status": "ran", "detail": "3 nodes"},
        ]
    )
    assert lines[0].split() == ["validate", "RAN", "ok"]
    assert lines[-1] == "2 stage(s): 2 ran, 0 skipped"


def test_skipped_stage_is_named_and_site_incomplete():
    lines = report_lines(
        [
            {"stage": "validate", "status": "ran", "detail": ""},
            {"stage": "k3s", "status": "skipped", "detail": "no release reachable"},
        ]
    )
    assert "SKIPPED" in lines[1] and "no release reachable" in lines[1]
    assert lines[-1].endswith("1 skipped (k3s): the site is NOT complete")


@pytest.mark.parametrize("entry", [{"stage": "x", "status": "maybe"}, {"status": "ran"}])
def test_malformed_entry(entry):
    with pytest.raises(ValueError, match="needs a stage name and a status"):
        report_lines([entry])


def test_record_appends_without_changing_the_report_given():
    first = record([], "validate", "ran", "  checked \n", "run-1")
    second = record(first, "k3s_release", "skipped", "offline", "run-1")
    assert first == [{"stage": "validate", "status": "ran", "detail": "checked", "run": "run-1"}]
    assert [e["stage"] for e in second] == ["validate", "k3s_release"] and second[1]["status"] == "skipped"


def test_record_drops_the_entries_of_another_run():
    earlier = record(record([], "validate", "ran", "", "run-1"), "prereq", "ran", "3 node(s)", "run-1")
    assert record(earlier, "prereq", "skipped", "", "run-2") == [
        {"stage": "prereq", "status": "skipped", "detail": "", "run": "run-2"}
    ]


@pytest.mark.parametrize(("stage", "status"), [("", "ran"), ("prereq", "done"), ("prereq", None)])
def test_record_refuses_a_nameless_stage_or_unknown_status(stage, status):
    with pytest.raises(ValueError, match="needs a name and a status"):
        record([], stage, status, "", "run-1")


PLAYBOOK = """
- name: Two nodes record their stages
  hosts: all
  gather_facts: false
  tasks:
    - name: Record the first stage
      aiinfra.k3s.stage_report:
        stage: prereq
        detail: "{{ ansible_play_hosts | length }} node(s) prepared"
      delegate_to: localhost
      delegate_facts: true
      run_once: true
    - name: Record the second stage
      aiinfra.k3s.stage_report:
        stage: k3s_nodes
        status: "{{ 'skipped' }}"
        detail: no binary
      delegate_to: localhost
      delegate_facts: true
      run_once: true
    - name: Record without keeping the report on localhost
      aiinfra.k3s.stage_report:
        stage: serving
      ignore_errors: true
    - name: Record a stage with an unknown status
      aiinfra.k3s.stage_report:
        stage: serving
        status: done
      delegate_to: localhost
      delegate_facts: true
      run_once: true
      ignore_errors: true
"""


def test_the_action_keeps_one_report_on_localhost_in_check_mode_too(tmp_path):
    """The action as site.yml runs it: on a play of two hosts each stage is recorded once, on localhost, in order;
    a task that would scatter the report over the play's hosts, or gives an unknown status, fails. With a fact
    cache that outlives the run (jsonfile), the next run's report holds only its own stages."""
    (tmp_path / "play.yml").write_text(PLAYBOOK)
    inventory = write_inventory(
        tmp_path / "inv", {"all": {"hosts": {"node-a": None, "node-b": None}, "vars": {"ansible_connection": "local"}}}
    )
    cache = {"ANSIBLE_CACHE_PLUGIN": "jsonfile", "ANSIBLE_CACHE_PLUGIN_CONNECTION": str(tmp_path / "facts")}
    for check in ([], ["--check"]):
        proc, result = run_playbook(str(tmp_path / "play.yml"), inventory, extra=check, env=cache)
        tasks = {t["task"]["name"]: t["hosts"] for t in result["plays"][0]["tasks"]}
        report = tasks["Record the second stage"]["node-a"]["ansible_facts"]["aiinfra_stage_report"]
        assert [{k: e[k] for k in ("stage", "status", "detail")} for e in report] == [
            {"stage": "prereq", "status": "ran", "detail": "2 node(s) prepared"},
            {"stage": "k3s_nodes", "status": "skipped", "detail": "no binary"},
        ]
        assert len({e["run"] for e in report}) == 1
        scattered = tasks["Record without keeping the report on localhost"]
        assert all(r["failed"] and "delegate_facts: true" in r["msg"] for r in scattered.values()), scattered
        assert (
            "value of status must be one of: ran, skipped"
            in tasks["Record a stage with an unknown status"]["node-a"]["msg"]
        )
        assert proc.returncode == 0, proc.stdout[-2000:]
    assert "aiinfra_stage_report" in "".join(
        p.read_text() for p in (tmp_path / "facts").iterdir()
    )  # the cache did keep it


def fetch_result(path, changed=True, peer=None, fetched=2 * 10**9, seconds=8.0, **extra):
    """A model_weights loop result as the role registers it (its item: a fetch entry)."""
    item = {"path": path, "source": "controller /srv/seeds/" + path, "peer": peer, "mirror": True}
    return {"item": item, "changed": changed, "bytes_fetched": fetched, "bytes_total": fetched, "seconds": seconds,
            "bytes_resumed": 0, "problems": [], **extra}  # fmt: skip


def test_the_weights_stage_says_which_models_went_where_how_much_and_how_long():
    records = weight_records([fetch_result("org/m", seconds=12.0)], "gpu-1") + weight_records(
        [
            fetch_result("org/m", peer="gpu-1", seconds=7.5),
            fetch_result("org/current", changed=False, fetched=0),  # found current: not listed
            fetch_result("org/bad", failed=True, problems=[{"code": "HTTP"}]),  # failed: not listed
        ],
        "gpu-2",
    )
    assert [(r["host"], r["path"], r["peer"]) for r in records] == [
        ("gpu-1", "org/m", None),
        ("gpu-2", "org/m", "gpu-1"),
    ]
    assert weights_detail(records) == (
        "2 fetch(es), 4.00 GB: org/m (controller /srv/seeds/org/m; 4.00 GB): "
        "gpu-1 from the source in 12.0 s, gpu-2 from gpu-1 in 7.5 s"
    )
    assert weights_detail([]) == "every GPU node's store held its models: nothing fetched"
