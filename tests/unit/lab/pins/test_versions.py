"""lab/pins/versions.py: pins read from the role defaults, newest-version choice, the end-of-support verdict."""

import datetime

from lab.pins import versions


def test_every_pin_is_read_from_its_role_defaults():
    found = {pin.name: versions.pinned(pin) for pin in versions.PINS}
    assert found["K3s"].startswith("v1.") and "+k3s" in found["K3s"]
    assert found["Kubernetes (in K3s)"] == found["K3s"].split("+")[0]
    assert found["vLLM"].startswith("v") and ":" not in found["vLLM"]


def test_newest_ignores_pre_releases_and_compares_numbers():
    assert versions.newest(["v1.9.0", "v1.10.0", "v1.11.0-rc.1", "1.10.1"]) == "1.10.1"
    assert versions.newest(["latest"]) == ""


def test_a_pin_past_end_of_support_is_an_error():
    assert versions.support_problems("v1.33.5+k3s1", datetime.date(2026, 12, 3))
    assert versions.support_problems("v1.36.4+k3s1", datetime.date(2026, 12, 3)) == []
    assert "not in the end-of-support table" in versions.support_problems("v1.99.0+k3s1", datetime.date(2026, 1, 1))[0]


def test_the_offline_run_reports_and_exits_by_the_support_date(capsys):
    assert versions.main(["--offline", "--today", "2026-12-03"]) == 0
    out = capsys.readouterr().out
    assert "not checkable offline" in out and "upstream support until" in out
    assert versions.main(["--offline", "--today", "2099-01-01"]) == 1
