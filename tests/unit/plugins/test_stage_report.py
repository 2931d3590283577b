import pytest

from ansible_collections.aiinfra.k3s.plugins.module_utils.stage_report import report_lines


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
