"""host_firewall: its decisions (plugins/module_utils/node/host_firewall.py) as data, and the module run through
Ansible with nft and systemctl faked at the process boundary (two scripts first on PATH that keep the kernel's
table, the unit's state and every call in a directory). The module on real nodes (real nft, real systemd) runs in
the lab and in Molecule's site scenarios."""

import json
import os
import stat
from pathlib import Path

import pytest
from conftest import run_module

from ansible_collections.aiinfra.k3s.plugins.module_utils.node import host_firewall as hf

AS_ROOT = pytest.mark.skipif(os.geteuid() != 0, reason="the module gives its files to root")
RULESET = "table inet t_test {\n  chain input {\n    type filter hook input priority 0; policy accept;\n  }\n}\n"

FAKE_NFT = r"""#!/bin/sh
# nft as the module calls it: -c -f FILE (refuses a file that says BAD), list table inet NAME.
state="$FAKE_FIREWALL"
echo "nft $*" >> "$state/calls"
if [ "$1" = "-c" ]; then
  if grep -q BAD "$3"; then echo "Error: syntax error, unexpected BAD" >&2; exit 1; fi
  exit 0
fi
if [ "$1" = "list" ]; then
  [ -f "$state/table" ] || { echo "Error: No such file or directory" >&2; exit 1; }
  cat "$state/table"; exit 0
fi
exit 2
"""

FAKE_SYSTEMCTL = r"""#!/bin/sh
# systemctl: restart loads the ruleset file into the "kernel" (the listing ends with a newline, as nft's does).
state="$FAKE_FIREWALL"
echo "systemctl $*" >> "$state/calls"
case "$1" in
  daemon-reload) exit 0 ;;
  restart|start) cp "$FAKE_RULESET" "$state/table"; touch "$state/active"; exit 0 ;;
  enable) echo enabled > "$state/enabled"; exit 0 ;;
  is-enabled) if [ -f "$state/enabled" ]; then echo enabled; exit 0; fi; echo disabled; exit 1 ;;
  is-active) if [ -f "$state/active" ]; then echo active; exit 0; fi; echo inactive; exit 3 ;;
esac
exit 2
"""


@pytest.mark.parametrize(
    ("ruleset_written", "unit_written", "list_rc", "listing", "recorded", "reasons"),
    [
        (False, False, 0, "table x\n", hf.digest("table x") + "\n", []),
        (False, False, 0, "table x\n", hf.digest("table x\n"), []),  # final line ends do not count
        (False, False, 0, "table x (by hand)\n", hf.digest("table x"), [hf.TABLE_CHANGED]),
        (False, False, 0, "table x\n", None, [hf.TABLE_CHANGED]),  # never loaded by the module
        (False, False, 1, "", hf.digest("table x"), [hf.TABLE_MISSING]),
        (True, False, 0, "table x\n", hf.digest("table x"), [hf.RULESET_WRITTEN]),
        (True, True, 1, "", None, [hf.RULESET_WRITTEN, hf.UNIT_WRITTEN, hf.TABLE_MISSING]),
    ],
    ids=["current", "line-ends", "changed-by-hand", "no-digest", "missing", "file-written", "first-run"],
)
def test_load_reasons(ruleset_written, unit_written, list_rc, listing, recorded, reasons):
    assert hf.load_reasons(ruleset_written, unit_written, list_rc, listing, recorded) == reasons


@pytest.mark.parametrize(
    ("table", "path", "unit", "found"),
    [
        ("aiinfra_k3s", "/etc/a/f.nft", "/etc/systemd/system/a.service", []),
        ("1table", "/etc/a/f.nft", "/etc/systemd/system/a.service", ["table"]),
        ("a b", "/etc/a/f.nft", "/etc/systemd/system/a.service", ["table"]),
        ("t", "relative.nft", "/etc/systemd/system/a.service", ["path"]),
        ("t", "/etc/a/f.nft", "/etc/systemd/system/a.timer", ["unit"]),
    ],
)
def test_bad_params_name_the_option(table, path, unit, found):
    assert [message.split(" ", 1)[0] for message in hf.bad_params(table, path, unit)] == found


def test_the_unit_loads_the_file_before_the_network_and_k3s():
    text = hf.unit_text("aiinfra_k3s", "/etc/aiinfra-k3s/firewall.nft", "/usr/sbin/nft")
    assert "ExecStart=/usr/sbin/nft -f /etc/aiinfra-k3s/firewall.nft\n" in text
    assert "Before=network-pre.target shutdown.target k3s.service k3s-agent.service\n" in text
    assert text.endswith("[Install]\nWantedBy=sysinit.target\n")


@pytest.fixture
def fake(tmp_path, monkeypatch):
    """The fake nft and systemctl, their state directory and the module's arguments."""
    bin_dir, state = tmp_path / "bin", tmp_path / "state"
    bin_dir.mkdir()
    state.mkdir()
    for name, text in (("nft", FAKE_NFT), ("systemctl", FAKE_SYSTEMCTL)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    ruleset_path = tmp_path / "etc" / "fw" / "firewall.nft"
    monkeypatch.setenv("PATH", "%s:%s" % (bin_dir, os.environ["PATH"]))
    monkeypatch.setenv("FAKE_FIREWALL", str(state))
    monkeypatch.setenv("FAKE_RULESET", str(ruleset_path))
    args = {
        "table": "t_test",
        "ruleset": RULESET,
        "path": str(ruleset_path),
        "unit": str(tmp_path / "units" / "fw-test.service"),
        "nft": str(bin_dir / "nft"),
    }
    (tmp_path / "units").mkdir()
    return args, state


def calls(state):
    """The calls since the last look (the file is emptied)."""
    path = state / "calls"
    text = path.read_text() if path.exists() else ""
    path.write_text("")
    return [line for line in text.splitlines() if not line.startswith("nft -c")]


def run(args, check=False):
    rc, result = run_module("aiinfra.k3s.host_firewall", args, check=check)
    assert rc == 0, json.dumps(result)[:2000]
    return result


@AS_ROOT
def test_first_run_writes_loads_and_enables_then_a_rerun_only_reads(fake):
    args, state = fake
    first = run(args)
    assert first["changed"] and first["unit_enabled"]
    assert first["written"] == [os.path.dirname(args["path"]), args["path"], args["unit"]]
    assert first["load_reasons"] == ["ruleset_written", "unit_written", "table_missing"]
    assert calls(state) == [
        "nft list table inet t_test",
        "systemctl daemon-reload",
        "systemctl restart fw-test.service",
        "nft list table inet t_test",
        "systemctl is-enabled fw-test.service",
        "systemctl enable fw-test.service",
    ]
    directory = os.path.dirname(args["path"])
    assert stat.S_IMODE(os.stat(directory).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(args["path"]).st_mode) == 0o600 and Path(args["path"]).read_text() == RULESET
    recorded = (Path(directory) / hf.DIGEST_NAME).read_text()
    assert recorded == hf.digest(RULESET) + "\n"

    again = run(args)
    assert not again["changed"] and again["written"] == [] and again["load_reasons"] == []
    assert calls(state) == [
        "nft list table inet t_test",
        "systemctl is-enabled fw-test.service",
        "systemctl is-active fw-test.service",
    ]


@AS_ROOT
def test_a_table_changed_by_hand_or_gone_is_loaded_again(fake):
    args, state = fake
    run(args)
    calls(state)
    (state / "table").write_text(RULESET.replace("accept", "drop"))  # someone edited the live table
    changed = run(args)
    assert changed["changed"] and changed["load_reasons"] == ["table_changed"] and changed["written"] == []
    assert "systemctl restart fw-test.service" in calls(state) and (state / "table").read_text() == RULESET
    (state / "table").unlink()  # nft flush ruleset, or a reboot without the unit
    assert run(args)["load_reasons"] == ["table_missing"]
    assert run(args)["load_reasons"] == []


@AS_ROOT
def test_a_ruleset_nft_refuses_is_not_written(fake):
    args, state = fake
    run(args)
    calls(state)
    rc, result = run_module("aiinfra.k3s.host_firewall", dict(args, ruleset=RULESET + "BAD\n"))
    assert rc != 0 and result["failed"] and "nft -c refused the ruleset" in result["msg"]
    assert "unexpected BAD" in result["msg"]
    assert Path(args["path"]).read_text() == RULESET  # the loaded file stays
    assert not [c for c in calls(state) if c.startswith("systemctl restart")]


@AS_ROOT
def test_check_mode_reports_and_touches_nothing(fake):
    args, state = fake
    planned = run(args, check=True)
    assert planned["changed"] and planned["load_reasons"] == ["ruleset_written", "unit_written", "table_missing"]
    assert planned["unit_enabled"] and not planned["unit_started"]  # enabled with the new unit; loading starts it
    assert not os.path.exists(os.path.dirname(args["path"])) and not os.path.exists(args["unit"])
    assert calls(state) == ["nft list table inet t_test"]  # the unit is not written yet: no systemctl at all
    run(args)
    calls(state)
    changed = dict(args, ruleset=RULESET.replace("accept", "drop"))
    planned = run(changed, check=True)
    assert planned["load_reasons"] == ["ruleset_written"] and Path(args["path"]).read_text() == RULESET
    assert not [c for c in calls(state) if not c.startswith(("nft list", "systemctl is-"))]


@AS_ROOT
def test_a_disabled_or_stopped_unit_is_enabled_or_started_without_a_reload(fake):
    args, state = fake
    run(args)
    (state / "enabled").unlink()  # systemctl disable
    enabled = run(args)
    assert enabled["changed"] and enabled["unit_enabled"] and enabled["load_reasons"] == []
    assert "systemctl enable fw-test.service" in calls(state)
    (state / "active").unlink()  # systemctl stop: the unit is inactive, the kernel's table is as loaded
    started = run(args)
    assert started["changed"] and started["unit_started"] and not started["unit_enabled"]
    assert calls(state)[-1] == "systemctl start fw-test.service"
    assert not run(args)["changed"]


@AS_ROOT
def test_without_nft_check_mode_reports_no_table_and_a_run_fails_saying_what_to_install(fake, tmp_path):
    args, state = fake
    missing = dict(args, nft=str(tmp_path / "no" / "nft"))  # nftables not installed yet (check mode installs nothing)
    planned = run(missing, check=True)
    assert planned["changed"] and planned["load_reasons"] == ["ruleset_written", "unit_written", "table_missing"]
    assert calls(state) == []
    rc, result = run_module("aiinfra.k3s.host_firewall", missing)
    assert rc != 0 and "install nftables" in result["msg"]
    assert not os.path.exists(os.path.dirname(args["path"])) and not os.path.exists(args["unit"])  # nothing touched
