"""Ansible loads every filter file of a collection to find one filter, and does so again in the forked worker of
each task, without a bytecode cache. A filter file that imports the collection's module_utils at module level makes
every task that uses any aiinfra.k3s filter compile and run all of those imports: about 0.13 s per task on a 2-core
controller (measured while working on issue 13), against 0.025 s when the imports are made inside the filter."""

import ast
from pathlib import Path

import pytest

FILTERS = sorted((Path(__file__).resolve().parents[3] / "plugins" / "filter").glob("*.py"))


@pytest.mark.parametrize("path", FILTERS, ids=lambda p: p.name)
def test_filter_files_import_the_collection_only_when_called(path):
    tree = ast.parse(path.read_text())
    top_level = [
        node.module
        for node in tree.body
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("ansible_collections.aiinfra.k3s.")
    ]
    assert top_level == [], f"{path.name}: import {', '.join(top_level)} inside the filter function"


def test_there_are_filter_files_to_check():
    assert len(FILTERS) > 20
