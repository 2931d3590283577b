"""plugins/module_utils/k8s/model_store.py: the model store's StorageClass and local volumes on the rendered sites,
and a file that does not depend on the order of the GPU nodes."""

import rendered_sites
from rendered_sites import ALLOCATABLE, NAMESPACE, NODES, of_kind

from ansible_collections.aiinfra.k3s.plugins.module_utils.k8s import model_store

rendered = rendered_sites.site_fixture()


def test_storage_follows_the_notes(rendered):
    site, docs, _out, _proc = rendered
    (sc,) = of_kind(docs, "StorageClass")
    assert sc["metadata"]["name"] == "nvidia-ai-store"
    assert (sc["provisioner"], sc["volumeBindingMode"], sc["reclaimPolicy"]) == (
        "kubernetes.io/no-provisioner",
        "WaitForFirstConsumer",
        "Retain",
    )
    pvs = of_kind(docs, "PersistentVolume")
    pinned = [
        pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] for pv in pvs
    ]
    # Two volumes of the node's store per GPU unit (time-slicing replicas count): one per model server pod, and
    # one free for its replacement while the volume it held waits for the recycler.
    per_node = {node: [v[0] for v in pinned].count(node) for node in NODES[site]}
    assert per_node == {node: model_store.VOLUMES_PER_UNIT * units for node, units in ALLOCATABLE[site].items()}
    assert all(pv["spec"]["local"]["path"] == "/data/model-registry" for pv in pvs)
    (ns,) = [d for d in of_kind(docs, "Namespace") if d["metadata"]["name"] == NAMESPACE[site]]
    assert ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"


def test_manifests_do_not_depend_on_node_order():
    """Group order can vary between runs; the written file must not, or every run reports a change."""
    params = {
        "storage_class": "nvidia-ai-store",
        "path": "/data/model-registry",
        "size": "500Gi",
        "namespace": "ia-services-payed",
        "pv_prefix": "model-registry",
    }
    b_first = {"gpu-b": {"gpus": 2, "replicas": 1}, "gpu-a": {"gpus": 1, "replicas": 4}}
    a_first = dict(sorted(b_first.items()))
    assert model_store.model_registry_manifests(b_first, params) == model_store.model_registry_manifests(
        a_first, params
    )
