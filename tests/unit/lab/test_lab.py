"""lab/__init__.py: the repository root and the collection's module_utils, found wherever they live."""

import pytest

import lab


def test_root_is_the_repository():
    assert (lab.ROOT / "galaxy.yml").is_file() and (lab.ROOT / "lab" / "__init__.py").is_file()


def test_collection_module_finds_a_module_utils_by_name():
    k8s_support = lab.collection_module("k8s_support")
    assert k8s_support.__name__.startswith("ansible_collections.aiinfra.k3s.plugins.module_utils.")
    assert k8s_support.__name__.endswith(".k8s_support")
    assert callable(k8s_support.end_of_support)


def test_collection_module_refuses_an_unknown_name():
    with pytest.raises(ImportError, match=r"expected one no_such_module\.py"):
        lab.collection_module("no_such_module")
