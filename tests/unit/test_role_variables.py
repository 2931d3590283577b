"""Each role's defaults and vars carry its own prefix, so no two roles define the same name.

validate.yml imports several roles into one play, and an imported role's defaults and vars apply to the whole play
(role vars above inventory vars): a name defined by two roles would silently take one role's value in the other."""

from pathlib import Path

import pytest
import yaml

ROLES = Path(__file__).resolve().parents[2] / "roles"
FILES = sorted(p for p in ROLES.glob("*/*/main.yml") if p.parent.name in ("defaults", "vars"))


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parts[-3]}/{p.parts[-2]}")
def test_names_carry_the_role_prefix(path):
    role, kind = path.parts[-3], path.parts[-2]
    prefix = f"{role}_" if kind == "defaults" else f"__{role}_"
    wrong = [name for name in yaml.safe_load(path.read_text()) or {} if not name.startswith(prefix)]
    assert wrong == [], f"roles/{role}/{kind}/main.yml: {wrong} must start with {prefix!r}"


def test_no_name_is_defined_by_two_roles():
    owners = {}
    for path in FILES:
        for name in yaml.safe_load(path.read_text()) or {}:
            owners.setdefault(name, set()).add(path.parts[-3])
    shared = {name: sorted(roles) for name, roles in owners.items() if len(roles) > 1}
    assert shared == {}
    assert len(FILES) > 20 and len(owners) > 100  # the roles were read
