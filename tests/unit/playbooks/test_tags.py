"""What a tagged run of site.yml loads, as Ansible itself lists it (--list-tasks, no host contacted).

Ansible puts an argument-spec check tagged `always` at the start of every role it loads statically. The stage
report's arguments name facts of their own stage (`__prereq_host_kind`, `__manifests_sets`, ...), so the stage
report must be loaded only when its play runs (include_role, which a tag that is not selected skips): an import
would run its check in every play whatever --tags says and fail on the facts of a stage that did not run."""

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
def test_a_stage_that_is_not_selected_loads_no_stage_report(tag):
    plays = listed(tag)
    assert plays, "site.yml listed no play"
    skipped = [(name, tasks) for name, tags, tasks in plays if tag not in tags and "always" not in tags]
    loaded = [(name, task) for name, tasks in skipped for task in tasks if "stage_report" in task]
    assert loaded == [], f"--tags {tag} would run these in plays it does not select: {loaded}"
