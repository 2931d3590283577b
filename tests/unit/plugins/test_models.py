"""plugins/module_utils/plan/models.py: per-model defaults and the model paths the store accepts."""

import pytest

from ansible_collections.aiinfra.k3s.plugins.module_utils.plan import models

# Issue 28, item 8: a model path is joined to the store on the nodes and to the seed directory on the controller.
REFUSED = [
    "",
    "  ",
    None,
    3,
    "/etc",
    "/data/model-registry/org/m",
    "~root/m",
    "..",
    "../x",
    "org/../../x",
    "org/..",
    "./org/m",
    "org/./m",
    "org/m/.",
    "org\\..\\x",
    "org/m\n",
    "org/m\x00",
    ".staging/org/m",
]
ACCEPTED = ["org/m", "Qwen/Qwen2.5-7B-Instruct", "org/m.v2", "org/..m", "m..", "...", "org/m/", "a/b/c"]


@pytest.mark.parametrize("path", REFUSED, ids=repr)
def test_paths_outside_the_store_are_refused(path):
    assert models.store_path_error(path)


@pytest.mark.parametrize("path", ACCEPTED)
def test_paths_inside_the_store_pass(path):
    assert models.store_path_error(path) is None


def test_filling_is_idempotent():
    once = models.filled("vllm", [{"served_name": "m", "path": "p"}], "img:1")
    assert models.filled("vllm", once, "other:2") == once


def test_sizes_are_filled_once_from_the_weights():
    """Issue 29, item 7: a model of known size gets resources and /dev/shm from its weights and tensor parallel."""
    once = models.filled("vllm", [{"served_name": "m", "path": "p", "tensor_parallel_size": 2}], "img:1", {"p": 30.0})
    assert once[0]["resources"] == {
        "requests": {"cpu": "6", "memory": "27Gi"},
        "limits": {"cpu": "12", "memory": "46Gi"},
    }
    assert once[0]["shm_size"] == "4Gi"
    assert models.filled("vllm", once, "img:1", {"p": 99.0}) == once


@pytest.mark.parametrize("value", [None, "lots", True, -1, float("nan")])
def test_a_size_that_is_no_size_derives_nothing(value):
    (model,) = models.filled("vllm", [{"served_name": "m", "path": "p", "weights_gib": value}], "img:1")
    assert "resources" not in model and "shm_size" not in model


def test_the_memory_share_follows_the_slices_of_a_shared_gpu():
    assert models.memory_utilization({}, 1) == 0.9
    assert models.memory_utilization({}, 2) == 0.45
    assert models.memory_utilization({}, 3) == 0.3
    assert models.memory_utilization({"gpu_memory_utilization": 0.8}, 4) == 0.8
    assert models.gpu_share(1, [1, 2, 4]) == 4
    assert models.gpu_share(2, [1, 2, 4]) == 1


SHA = "0123456789abcdef0123456789abcdef01234567"
URL_SOURCE = {"path": "org/m", "source": "url", "url": "https://mirror.example/models/org/m"}
HUB_SOURCE = {"path": "Qwen/Qwen2.5-7B-Instruct", "source": "hub", "repo": "Qwen/Qwen2.5-7B-Instruct", "revision": SHA}

# Issue 25: each model_registry_sources entry is checked before any host is touched. name: (sources, seeded, the
# words every finding of the case holds (one per finding; [] for none)).
SOURCES = {
    "a url and a hub source": ([URL_SOURCE, HUB_SOURCE], [], []),
    "every hub setting": (
        [dict(HUB_SOURCE, endpoint="http://hub.lab:8090", token="hf_x", include=["*.json"], exclude=["*.bin"])], [], [],
    ),
    "not a list": ({"path": "x"}, [], ["not a list"]),
    "an entry that is no mapping": (["org/m"], [], ["not a mapping"]),
    "a path leaving the store": ([dict(URL_SOURCE, path="../etc")], [], ["'..' segment"]),
    "the staging directory": ([dict(URL_SOURCE, path=".staging/x")], [], [".staging"]),
    "an unknown source": ([dict(URL_SOURCE, source="s3")], [], ["not one of hub, url"]),
    "a url source without url": ([{"path": "org/m", "source": "url"}], [], ["not an http:// or https:// URL"]),
    "an ftp url": ([dict(URL_SOURCE, url="ftp://mirror/org/m")], [], ["not an http:// or https:// URL"]),
    "headers that are no mapping": ([dict(URL_SOURCE, headers=["Authorization: x"])], [], ["headers is not a mapping"]),
    "a hub setting on a url source": ([dict(URL_SOURCE, repo="org/m")], [], ["a url source does not take"]),
    "a branch for a revision": ([dict(HUB_SOURCE, revision="main")], [], ["not a commit"]),
    "a short sha": ([dict(HUB_SOURCE, revision=SHA[:7])], [], ["not a commit"]),
    "a repo id with no owner": ([dict(HUB_SOURCE, repo="gpt2")], [], ["not a Hub repo id"]),
    "a bad endpoint": ([dict(HUB_SOURCE, endpoint="hub.lab")], [], ["endpoint is"]),
    "patterns that are no list": ([dict(HUB_SOURCE, include="*.json")], [], ["not a list of file patterns"]),
    "one directory twice": ([URL_SOURCE, dict(HUB_SOURCE, path="org/m")], [], ["the same directory as entry 0"]),
    "also seeded from the controller": ([URL_SOURCE], ["org/m"], ["also in model_registry_seed_models"]),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(SOURCES))
def test_weight_sources_are_checked(case):
    sources, seeded, words = SOURCES[case]
    found = models.weight_source_findings(sources, seeded)
    assert len(found) == len(words), found
    for (text, fix), word in zip(found, words):
        assert word in text and fix


def test_each_node_fetches_only_the_models_it_may_serve_and_from_where():
    snapshots = {
        HUB_SOURCE["path"]: {
            "dest": "/cache/Qwen/x/" + SHA,
            "files": [{"path": "a", "sha256": "f" * 64, "size": 3, "x": 1}],
        }
    }
    fetches = models.weight_fetches(
        [dict(URL_SOURCE, url=URL_SOURCE["url"] + "/", headers={"Authorization": "Bearer s"}), HUB_SOURCE],
        ["seeded/m", "elsewhere/m"],
        "/srv/models/",
        snapshots,
        elsewhere=["elsewhere/m"],
    )
    assert [(f["path"], f["mirror"]) for f in fetches] == [
        ("org/m", False),
        (HUB_SOURCE["path"], True),
        ("seeded/m", True),
    ]
    url, hub, seed = fetches
    assert url["url"] == URL_SOURCE["url"] and url["files"] is None
    assert "Bearer s" not in str(fetches)  # credentials never travel in the entries (shown as loop items)
    assert hub["dir"] == "/cache/Qwen/x/" + SHA and hub["files"] == [{"path": "a", "sha256": "f" * 64, "size": 3}]
    assert hub["source"] == "hub Qwen/Qwen2.5-7B-Instruct@" + SHA and hub["revision"] == SHA
    assert (
        seed["dir"] == "/srv/models/seeded/m"
        and seed["files"] is None
        and seed["source"] == "controller /srv/models/seeded/m"
    )
    assert all(set(f) == {"path", "mirror", "url", "dir", "files", "source", "revision"} for f in fetches)
    # Check mode: a snapshot not verified yet lists files without sha256; the node is then given no list.
    unverified = {HUB_SOURCE["path"]: {"dest": "/c", "files": [{"path": "a", "sha256": None, "size": 3}]}}
    assert models.weight_fetches([HUB_SOURCE], [], "", unverified)[0]["files"] is None


def test_a_seed_directorys_list_is_read_on_the_controller_with_sizes(tmp_path):
    from ansible_collections.aiinfra.k3s.plugins.filter.weight_fetches import weight_fetches

    model = tmp_path / "org" / "m"
    (model / "sub").mkdir(parents=True)
    (model / "a.bin").write_bytes(b"abc")
    (model / "sub" / "b.json").write_text("{}\n")
    (model / "SHA256SUMS").write_text("%s  a.bin\n%s *sub/b.json\n" % ("A" * 64, "b" * 64))
    (tmp_path / "bad" / "m").mkdir(parents=True)
    (tmp_path / "bad" / "m" / "SHA256SUMS").write_text("not a line\n")
    fetches = weight_fetches([], ["org/m", "bad/m", "missing/m"], str(tmp_path), {})
    assert [f["files"] for f in fetches] == [
        [{"path": "a.bin", "sha256": "a" * 64, "size": 3}, {"path": "sub/b.json", "sha256": "b" * 64, "size": 3}],
        None,
        None,
    ]


# ---------------------------------------------------------------- handing the controller's models on between nodes

ADDRESSES = {"n1": "10.0.0.1", "n2": "10.0.0.2", "n3": "10.0.0.3", "n4": "fd00::4", "x": None}


def rounds(needs, held=None, peers=True, addresses=None):
    """Every round weight_round gives until nothing is pending, each as sorted 'fetcher<-server:path' (server c: the
    controller), every fetch taken as done."""
    hosts = sorted(set(needs) | set(held or {}))
    pending = {h: [{"path": p, "mirror": True} for p in paths] for h, paths in needs.items()}
    held = {h: list(paths) for h, paths in (held or {}).items()}
    plan = {"peers": peers, "port": 8491, "addresses": ADDRESSES if addresses is None else addresses}
    out = []
    for _round in range(12):
        step = models.weight_round(hosts, pending, held, plan)
        if not step["fetches"]:
            assert not any(pending.values()), "stuck with %r pending" % pending
            return out
        out.append(
            sorted("%s<-%s:%s" % (h, e["peer"] or "c", e["path"]) for h, es in step["fetches"].items() for e in es)
        )
        # each server serves one fetch a round; the servers list says what each one serves
        served = [e["peer"] for es in step["fetches"].values() for e in es if e["peer"]]
        assert len(served) == len(set(served)) and sorted(served) == sorted(step["servers"])
        for host, entries in step["fetches"].items():
            for entry in entries:
                pending[host] = [e for e in pending[host] if e["path"] != entry["path"]]
                held.setdefault(host, []).append(entry["path"])
    raise AssertionError("no end after 12 rounds")


ROUND_CASES = {
    "two nodes: the controller's link carries the model once": (
        {"needs": {"n1": ["A"], "n2": ["A"]}},
        [["n1<-c:A"], ["n2<-n1:A"]],
    ),
    "four nodes: one more round, not twice the controller's load": (
        {"needs": {"n1": ["A"], "n2": ["A"], "n3": ["A"], "n4": ["A"]}},
        [["n1<-c:A"], ["n2<-n1:A"], ["n3<-n1:A", "n4<-n2:A"]],
    ),
    "without peers every node takes it from the controller at once (the earlier way)": (
        {"needs": {"n1": ["A"], "n2": ["A"], "n3": ["A"]}, "peers": False},
        [["n1<-c:A", "n2<-c:A", "n3<-c:A"]],
    ),
    "no node can be reached by the others: all from the controller at once": (
        {"needs": {"n1": ["A"], "n2": ["A"]}, "addresses": {}},
        [["n1<-c:A", "n2<-c:A"]],
    ),
    "nodes added to a site take the model from the nodes that hold it, not the controller": (
        {"needs": {"n3": ["A"], "n4": ["A"]}, "held": {"n1": ["A"], "n2": ["A"]}},
        [["n3<-n1:A", "n4<-n2:A"]],
    ),
    "two models go to two relays in the first round": (
        {"needs": {"n1": ["A", "B"], "n2": ["A", "B"], "n3": ["A", "B"]}},
        [["n1<-c:A", "n2<-c:B"], ["n1<-n2:B", "n2<-n1:A"], ["n3<-n1:A", "n3<-n2:B"]],
    ),
    "a node the others cannot reach still takes from a peer, but never relays": (
        {"needs": {"x": ["A"], "n1": ["A"]}},
        [["n1<-c:A"], ["x<-n1:A"]],
    ),
    "only unreachable nodes need it: from the controller": (
        {"needs": {"x": ["A"]}, "held": {"n1": ["B"]}},
        [["x<-c:A"]],
    ),
}


@pytest.mark.parametrize("case", sorted(ROUND_CASES))
def test_the_controllers_models_spread_over_the_nodes_in_rounds(case):
    given, expected = ROUND_CASES[case]
    assert rounds(**given) == expected


def test_a_peer_fetch_names_the_peer_and_its_url():
    step = models.weight_round(
        ["n1", "n4"],
        {"n1": [{"path": "org/m", "mirror": True}]},
        {"n4": ["org/m"]},
        {"peers": True, "port": 9000, "addresses": ADDRESSES},
    )
    assert step == {
        "fetches": {"n1": [{"path": "org/m", "mirror": True, "peer": "n4", "url": "http://[fd00::4]:9000/org/m"}]},
        "servers": {"n4": ["org/m"]},
    }


DISTRIBUTION_CASES = {
    "defaults: peers on port 8491, addresses from k3s_node_ip or an IP ansible_host": (
        {},
        {
            "g1": {"k3s_node_ip": "192.0.2.1", "ansible_host": "198.51.100.1"},
            "g2": {"ansible_host": "192.0.2.2"},
            "g3": {"ansible_host": "gpu-3.example"},
        },
        {"peers": True, "port": 8491, "addresses": {"g1": "192.0.2.1", "g2": "192.0.2.2", "g3": None}},
        [],
    ),
    "peers off, another port": (
        {"model_registry_peers": False, "model_registry_peer_port": "9000"},
        {},
        {"peers": False, "port": 9000, "addresses": {}},
        [],
    ),
    "a port that is not one, peers that are not a bool": (
        {"model_registry_peers": "yes", "model_registry_peer_port": 70000},
        {},
        {"peers": False, "port": 8491, "addresses": {}},
        ["model_registry_peers", "model_registry_peer_port"],
    ),
}


@pytest.mark.parametrize("case", sorted(DISTRIBUTION_CASES))
def test_the_plan_decides_how_the_nodes_hand_weights_on(case):
    values, gpu_nodes, expected, variables = DISTRIBUTION_CASES[case]
    plan, findings = models.weights_distribution(values, gpu_nodes)
    assert plan == expected
    assert [variable for variable, _what, _fix in findings] == variables
