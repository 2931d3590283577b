import json

import pytest

from ansible_collections.aiinfra.k3s.plugins.module_utils.gpu import allocation as ga
from ansible_collections.aiinfra.k3s.plugins.module_utils.k8s import api_list as kl

ITEMS = [{"metadata": {"name": f"n{i}"}, "note": 'x,]}[{"items"'} for i in range(3)]


@pytest.mark.parametrize(
    "doc",
    [
        {"apiVersion": "v1", "items": ITEMS, "kind": "List", "metadata": {"resourceVersion": ""}},
        {"metadata": {"items": "decoy"}, "kind": "NodeList", "items": ITEMS},
    ],
)
def test_streamed_items_equal_json_loads(doc):
    for text in (json.dumps(doc), json.dumps(doc, indent=4)):
        assert list(kl.iter_list_text(text)) == json.loads(text)["items"]


def test_null_items_single_object_and_garbage():
    assert list(kl.iter_list_text('{"kind": "List", "items": null}')) == []
    assert list(kl.iter_list_text('{"kind": "Node", "metadata": {"name": "a"}}')) == [
        {"kind": "Node", "metadata": {"name": "a"}}
    ]
    with pytest.raises(kl.ListError, match="no items"):
        list(kl.iter_list_text('{"kind": "List"}'))
    with pytest.raises(kl.ListError, match="not a JSON object"):
        list(kl.iter_list_text("[1, 2]"))
    with pytest.raises(ValueError):
        list(kl.iter_list_text('{"items": [{"a": }]}'))


def test_iter_list_file_errors_name_the_file(tmp_path):
    bad = tmp_path / "pods.json"
    bad.write_text('{"items": [{"a": ')
    with pytest.raises(kl.ListError, match=r"cannot parse .*pods\.json"):
        list(kl.iter_list_file(str(bad)))
    with pytest.raises(kl.ListError, match="cannot read"):
        list(kl.iter_list_file(str(tmp_path / "missing.json")))


def test_pagination_follows_continue_and_counts_pages():
    pages = {
        None: {"items": [1, 2], "metadata": {"continue": "a"}},
        "a": {"items": [3], "metadata": {"continue": "b"}},
        "b": {"items": [], "metadata": {}},
    }
    calls = []

    def fetch(limit, token):
        calls.append((limit, token))
        return pages[token]

    assert kl.list_all(fetch, 2) == ([1, 2, 3], 3)
    assert calls == [(2, None), (2, "a"), (2, "b")]


def test_table_reads_at_a_glance():
    result = ga.analyze(
        [
            {
                "metadata": {"name": "gx10-db4d", "labels": {"ai-workload": "true"}},
                "spec": {"taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]},
                "status": {
                    "capacity": {"nvidia.com/gpu": "2"},
                    "allocatable": {"nvidia.com/gpu": "1"},
                    "conditions": [{"type": "Ready", "status": "True"}],
                },
            }
        ],
        [],
        {"gx10-db4d": 2},
    )
    lines = ga.table(result, {"gx10-db4d": {"physical": 2, "mig_slices": 0}})
    assert lines[0].split() == [
        "NODE",
        "READY",
        "HW",
        "EXPECTED",
        "CAPACITY",
        "ALLOCATABLE",
        "REQUESTED",
        "FREE",
        "PODS",
        "STATUS",
    ]
    assert lines[1].split() == ["gx10-db4d", "yes", "2", "2", "2", "1", "0", "1", "0", "GPU_UNHEALTHY"]
    assert lines[2].startswith("TOTAL: 1 GPU node(s), 2 expected device(s) on 2 physical GPU(s), 1 allocatable")
    assert lines[3].startswith("WARNING GPU_UNHEALTHY gx10-db4d has 1 allocatable of 2")
    assert lines[4].startswith("INFO    GPU_IDLE")
