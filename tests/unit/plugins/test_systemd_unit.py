"""systemd_unit: its decisions (plugins/module_utils/node/systemd_unit.py) as data, and the module run through Ansible
with systemctl and systemd-analyze faked at the process boundary (scripts first on PATH that keep the unit's state and
every call in a directory). The module on real systemd runs in the lab (K3s's units) and in Molecule's scenarios."""

import os

import pytest
from conftest import run_module

from ansible_collections.aiinfra.k3s.plugins.module_utils.node import systemd_unit as su

LOADED = {"LoadState": "loaded", "ActiveState": "active", "UnitFileState": "enabled", "NeedDaemonReload": "no"}


@pytest.mark.parametrize(
    ("status", "enabled", "started", "todo"),
    [
        (LOADED, True, True, []),
        (dict(LOADED, NeedDaemonReload="yes"), True, True, ["daemon-reload"]),
        (dict(LOADED, LoadState="not-found", ActiveState="inactive", UnitFileState=""), True, True,
         ["daemon-reload", "enable", "start"]),
        (dict(LOADED, ActiveState="activating"), True, True, []),  # Type=notify, not ready yet: started
        (dict(LOADED, ActiveState="failed"), True, True, ["start"]),
        (dict(LOADED, UnitFileState="disabled"), True, None, ["enable"]),
        (dict(LOADED, UnitFileState="static"), True, True, []),
        (LOADED, False, False, ["disable", "stop"]),
        (LOADED, None, None, []),
        (dict(LOADED, NeedDaemonReload="yes"), None, None, []),  # a verification only reloads nothing
    ],
    ids=["current", "older-text", "new-unit", "activating", "failed", "disabled", "static", "off", "verify-only",
         "verify-only-older-text"],
)  # fmt: skip
def test_actions(status, enabled, started, todo):
    assert su.actions(status, enabled, started) == todo


def test_parse_show():
    text = (
        "LoadState=loaded\nActiveState=active\nFragmentPath=/etc/systemd/system/k3s.service\nExecStart={ path=/a=b }\n"
    )
    assert su.parse_show(text)["FragmentPath"] == "/etc/systemd/system/k3s.service"
    assert su.parse_show(text)["ExecStart"] == "{ path=/a=b }"


@pytest.mark.parametrize("name", ["k3s", "k3s.service; rm -rf /", "", "a b.service"])
def test_bad_name(name):
    assert su.bad_name(name)


FAKE_SYSTEMCTL = r"""#!/bin/sh
state="$FAKE_SYSTEMD"
echo "systemctl $*" >> "$state/calls"
case "$1" in
  show)
    if [ -f "$state/loaded" ]; then load=loaded; else load=not-found; fi
    if [ -f "$state/active" ]; then act=active; else act=inactive; fi
    if [ -f "$state/enabled" ]; then uf=enabled; else uf=disabled; fi
    if [ "$(cat "$state/unit")" != "$(cat "$state/loaded" 2>/dev/null)" ] && [ -f "$state/loaded" ]; then r=yes; else r=no; fi
    printf 'LoadState=%s\nActiveState=%s\nUnitFileState=%s\nNeedDaemonReload=%s\nFragmentPath=x\n' $load $act $uf $r
    exit 0 ;;
  daemon-reload) cp "$state/unit" "$state/loaded"; exit 0 ;;
  enable) touch "$state/enabled"; exit 0 ;;
  disable) rm -f "$state/enabled"; exit 0 ;;
  stop) rm -f "$state/active"; exit 0 ;;
  start) [ -f "$state/refuse-start" ] && { echo "Job for $2 failed." >&2; exit 1; }; touch "$state/active"; exit 0 ;;
esac
exit 2
"""

FAKE_ANALYZE = r"""#!/bin/sh
echo "systemd-analyze $*" >> "$FAKE_SYSTEMD/calls"
if grep -q BAD "$2"; then echo "$2:3: Unknown key name 'BAD' in section 'Service'" >&2; exit 1; fi
exit 0
"""


@pytest.fixture
def fake(tmp_path, monkeypatch):
    bin_dir, state = tmp_path / "bin", tmp_path / "state"
    bin_dir.mkdir()
    state.mkdir()
    for name, text in (("systemctl", FAKE_SYSTEMCTL), ("systemd-analyze", FAKE_ANALYZE)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    monkeypatch.setenv("PATH", "%s:%s" % (bin_dir, os.environ["PATH"]))
    monkeypatch.setenv("FAKE_SYSTEMD", str(state))
    unit = tmp_path / "k3s-test.service"
    unit.write_text("[Service]\nExecStart=/bin/true\n")
    (state / "unit").write_text(unit.read_text())
    return {"name": "k3s-test.service", "path": str(unit)}, state, unit


def calls(state):
    path = state / "calls"
    text = path.read_text() if path.exists() else ""
    path.write_text("")
    return [line.split(" --property")[0] for line in text.splitlines()]


@pytest.mark.slow
def test_first_run_then_nothing_then_a_new_text(fake):
    args, state, unit = fake
    rc, out = run_module("aiinfra.k3s.systemd_unit", dict(args, enabled=True, started=True), check=True)
    assert rc == 0 and out["changed"] and out["actions"] == ["daemon-reload", "enable", "start"]
    assert calls(state) == ["systemd-analyze verify " + str(unit), "systemctl show k3s-test.service"]  # no action
    rc, out = run_module("aiinfra.k3s.systemd_unit", dict(args, enabled=True, started=True))
    assert rc == 0 and out["actions"] == ["daemon-reload", "enable", "start"]
    assert calls(state)[2:] == ["systemctl daemon-reload", "systemctl enable k3s-test.service",
                                "systemctl start k3s-test.service"]  # fmt: skip
    rc, out = run_module("aiinfra.k3s.systemd_unit", dict(args, enabled=True, started=True))
    assert rc == 0 and not out["changed"] and out["actions"] == []
    assert len(calls(state)) == 2  # verify and show only: no daemon-reload on a run that changed nothing
    (state / "unit").write_text("[Service]\nExecStart=/bin/false\n")  # the unit file was rewritten
    rc, out = run_module("aiinfra.k3s.systemd_unit", dict(args, enabled=True, started=True))
    assert out["changed"] and out["actions"] == ["daemon-reload"] and out["status"]["NeedDaemonReload"] == "yes"


@pytest.mark.slow
def test_a_refused_unit_is_never_reloaded_or_started(fake):
    args, state, unit = fake
    unit.write_text("[Service]\nBAD=1\n")
    rc, out = run_module("aiinfra.k3s.systemd_unit", dict(args, enabled=True, started=True))
    assert rc != 0 and "Unknown key name 'BAD'" in out["msg"]
    assert calls(state) == ["systemd-analyze verify " + str(unit)]


@pytest.mark.slow
def test_a_failed_start_fails_with_systemctl_words(fake):
    args, state = fake[:2]
    (state / "refuse-start").touch()
    rc, out = run_module("aiinfra.k3s.systemd_unit", dict(args, started=True, verify=False))
    assert rc != 0 and "systemctl start k3s-test.service failed" in out["msg"] and "Job for" in out["msg"]
    assert calls(state) == [
        "systemctl show k3s-test.service",
        "systemctl daemon-reload",
        "systemctl start k3s-test.service",
    ]


@pytest.mark.slow
def test_verify_only_then_off(fake):
    """Verification alone runs no action even on a unit systemd holds an older text of; asked off, it stops and
    disables."""
    args, state = fake[:2]
    rc, out = run_module("aiinfra.k3s.systemd_unit", dict(args, enabled=True, started=True))
    (state / "unit").write_text("[Service]\nExecStart=/bin/false\n")
    calls(state)
    rc, out = run_module("aiinfra.k3s.systemd_unit", args)
    assert rc == 0 and not out["changed"] and out["status"]["NeedDaemonReload"] == "yes"
    assert len(calls(state)) == 2
    rc, out = run_module("aiinfra.k3s.systemd_unit", dict(args, enabled=False, started=False, verify=False))
    assert out["actions"] == ["daemon-reload", "disable", "stop"]
    assert not (state / "enabled").exists() and not (state / "active").exists()
