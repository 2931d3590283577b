"""What a tagged run of site.yml loads, as Ansible itself lists it (--list-tasks, no host contacted).

`site.yml --tags serving` (docs/operations.md) must run nothing of the stages it does not select. Ansible puts an
argument-spec check tagged `always` at the start of every role it loads statically; such a check reads only the
role's own variables and is harmless. Anything else tagged `always` in such a play would run: a stage record, for
one, names facts of its own stage (`prereq_output_host_kind`, `manifests_output_sets`, ...) and would fail on the facts of a
stage that did not run (a statically imported stage_report role did exactly that before it became an action)."""

import re

import pytest
from conftest import ROOT, run_playbook

STAGE_TAGS = ["validate", "prereq", "k3s", "node_labels", "serving", "verify"]
PLAY = re.compile(r"^\s+play #\d+ \(.*\): (?P<name>.*?)\tTAGS: \[(?P<tags>.*)\]$")


def listed(tag):
    """(play name, play tags, [task lines]) for each play of site.yml run with --tags tag."""
    proc = run_playbook(
        "site.yml", ROOT / "inventories" / "example", callback="default", extra=["--tags", tag, "--list-tasks"]
    )[0]
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    plays = []
    for line in proc.stdout.splitlines():
        match = PLAY.match(line)
        if match:
            plays.append((match["name"], {t.strip() for t in match["tags"].split(",")}, []))
        elif plays and line.startswith("      ") and line.strip():
            plays[-1][2].append(line.strip())
    return plays


@pytest.mark.slow
@pytest.mark.parametrize("tag", STAGE_TAGS)
def test_a_stage_that_is_not_selected_runs_nothing_but_argument_checks(tag):
    plays = listed(tag)
    assert plays, "site.yml listed no play"
    skipped = [(name, tasks) for name, tags, tasks in plays if tag not in tags and "always" not in tags]
    loaded = [
        (name, task)
        for name, tasks in skipped
        for task in tasks
        if ": Validating arguments against arg spec" not in task
    ]
    assert loaded == [], f"--tags {tag} would run these in plays it does not select: {loaded}"
