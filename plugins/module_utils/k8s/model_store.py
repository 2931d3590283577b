# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The model store as Kubernetes sees it: the StorageClass and each GPU node's local PersistentVolumes of its
store (model_registry role), and the volume through which a model server pod claims one of them."""

from ansible_collections.aiinfra.k3s.plugins.module_utils.k8s.objects import dns_name, labels_for, namespace

# Local volumes of the model store per GPU unit of a node (model_registry_manifests).
VOLUMES_PER_UNIT = 2


def store_volume(store, labels=None):
    """The volume named "models" through which a model server pod mounts its GPU node's local model store.

    store: {"storage_class", "size"}. A generic ephemeral volume: the pod gets a claim of its own, made with the
    pod and deleted with it (it is the claim's owner). Every GPU node offers several local PersistentVolumes of its
    store (model_registry_manifests), all on the same read-only weights, so the claim binds, at first scheduling,
    to a volume on whatever node the scheduler picks (WaitForFirstConsumer). A replacement pod, after a rollout,
    an eviction or the loss of its node, therefore binds a volume on the node it lands on instead of waiting for
    the old node's. The volume the old claim held becomes Released and is made Available again by the store's
    recycler (model_registry).
    """
    return {
        "name": "models",
        "ephemeral": {
            "volumeClaimTemplate": {
                "metadata": {"labels": dict(labels or {})},
                "spec": {
                    "accessModes": ["ReadWriteOnce"],
                    "storageClassName": store["storage_class"],
                    "resources": {"requests": {"storage": store["size"]}},
                },
            }
        },
    }


def model_registry_manifests(nodes, params):
    """The serving namespace, the StorageClass and, on every GPU node, local PersistentVolumes of its model store:
    VOLUMES_PER_UNIT per GPU unit (physical GPUs times time-slicing replicas). All of a node's volumes are the same
    read-only directory; a pod's claim (store_volume) binds one of them on the node it runs on. There are twice as
    many as the node can run model servers, so a replacement pod (rollout, eviction, node loss) finds a free one at
    once while the volume its predecessor held waits, Released, for the recycler.

    nodes: {node: {"gpus", "replicas"}} (the site plan's nodes) or a list of node names (one GPU each).
    params: storage_class, path, size, namespace, pv_prefix.
    """
    if not isinstance(nodes, dict):
        nodes = {node: {"gpus": 1, "replicas": 1} for node in nodes}
    out = [
        # Every pod of the serving namespace meets "restricted" (serving.harden): enforce it.
        namespace(params["namespace"], "restricted"),
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": params["storage_class"], "labels": labels_for("model-registry", "storage")},
            "provisioner": "kubernetes.io/no-provisioner",
            "volumeBindingMode": "WaitForFirstConsumer",
            "reclaimPolicy": "Retain",
        },
    ]
    for node in sorted(nodes):  # stable file content whatever order the groups came in
        units = max(int(nodes[node].get("gpus", 1)) * int(nodes[node].get("replicas", 1)), 1)
        for slot in range(1, VOLUMES_PER_UNIT * units + 1):
            out.append(
                {
                    "apiVersion": "v1",
                    "kind": "PersistentVolume",
                    "metadata": {
                        "name": dns_name("%s-%s-%d" % (params["pv_prefix"], node, slot)),
                        "labels": dict(labels_for("model-registry", "storage"), **{"aiinfra.io/node": dns_name(node)}),
                    },
                    "spec": {
                        "capacity": {"storage": params["size"]},
                        "accessModes": ["ReadWriteOnce"],
                        "persistentVolumeReclaimPolicy": "Retain",
                        "storageClassName": params["storage_class"],
                        "local": {"path": params["path"]},
                        "nodeAffinity": {
                            "required": {
                                "nodeSelectorTerms": [
                                    {
                                        "matchExpressions": [
                                            {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}
                                        ]
                                    }
                                ]
                            }
                        },
                    },
                }
            )
    return out
