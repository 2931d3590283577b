"""Make `ansible_collections.aiinfra.k3s` importable from the working tree and load YAML cases."""

import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
COLLECTIONS = ROOT / ".cache" / "collections"
LINK = COLLECTIONS / "ansible_collections" / "aiinfra" / "k3s"
DATA = Path(__file__).parent / "data"

if not LINK.exists():
    LINK.parent.mkdir(parents=True, exist_ok=True)
    LINK.symlink_to(Path("../../../.."))
for path in (str(COLLECTIONS), str(ROOT / "lab")):
    if path not in sys.path:
        sys.path.insert(0, path)


def load_cases(name):
    """Cases from tests/unit/data/<name>.yml as pytest params, each with its id."""
    cases = yaml.safe_load((DATA / f"{name}.yml").read_text())
    return [pytest.param(case, id=case["id"]) for case in cases]


@pytest.fixture
def root():
    return ROOT


def tool(name):
    """A console script of the venv running the tests (ansible-playbook, ansible), whatever PATH says."""
    return str(Path(sys.executable).parent / name)
