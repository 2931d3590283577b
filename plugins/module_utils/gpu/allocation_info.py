# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the gpu_allocation_info module and its controller-side action share: the options, the Nodes and Pods read
from bundle files or through module_utils k8s/api_client in pages, and the report with its failure message. The
analysis itself is allocation.py's."""

from ansible_collections.aiinfra.k3s.plugins.module_utils.gpu.allocation import (
    DEFAULT_SYSTEM_NAMESPACES,
    analyze,
    failing,
)
from ansible_collections.aiinfra.k3s.plugins.module_utils.k8s import api_client
from ansible_collections.aiinfra.k3s.plugins.module_utils.k8s.api_list import iter_all, iter_list_file, list_all

ARGUMENT_SPEC = dict(
    kubeconfig=dict(type="path"),
    context=dict(type="str"),
    validate_certs=dict(type="bool", default=True),
    nodes_file=dict(type="path"),
    pods_file=dict(type="path"),
    page_size=dict(type="int", default=500),
    expected_gpus=dict(type="dict", default={}),
    gpu_node_selector=dict(type="dict", default={"ai-workload": "true"}),
    gpu_taint=dict(type="str", default="nvidia.com/gpu=present:NoSchedule"),
    allowed_pods=dict(type="list", elements="dict", default=[]),
    system_namespaces=dict(type="list", elements="str", default=list(DEFAULT_SYSTEM_NAMESPACES)),
    fail_on=dict(type="list", elements="str", choices=["error", "warning", "info"], default=["error"]),
)
REQUIRED_TOGETHER = [("nodes_file", "pods_file")]


def file_lists(params):
    """Nodes and pods from `kubectl get -o json` files; the pods are decoded one at a time while analysed."""
    nodes = list(iter_list_file(params["nodes_file"]))
    source = {"type": "files", "nodes_file": params["nodes_file"], "pods_file": params["pods_file"]}
    return nodes, iter_list_file(params["pods_file"]), source


def connect(params, environ=None):
    """An api_client Connection from the options (api_client.Unsupported for a kubeconfig it does not speak). environ:
    the environment the module would run in (KUBECONFIG, the proxy variables), the process's by default."""
    return api_client.connect(
        params["kubeconfig"] or api_client.default_kubeconfig(environ), params["context"],
        validate_certs=params["validate_certs"], environ=environ,
    )  # fmt: skip


def connection_pager(conn):
    """pager(path) for api_lists, through an api_client Connection."""

    def pager(path):
        return lambda limit, token: conn.request(path, [("limit", limit)] + ([("continue", token)] if token else []))

    return pager


def api_lists(pager, page_size):
    """Nodes and pods through the API, one paginated LIST per kind, as raw JSON (no model objects). pager(path) gives
    fetch(limit, continue token) for a collection path. The pods are analysed as their pages arrive: only one page is
    held at a time."""
    nodes, node_pages = list_all(pager("/api/v1/nodes"), page_size)
    pod_stats = {}
    pods = iter_all(pager("/api/v1/pods"), page_size, pod_stats)
    return nodes, pods, {"type": "api", "pages": {"nodes": node_pages, "pods": pod_stats}}


def unreadable(params, exc):
    """The one error of a read or analysis that failed: what could not be read, and why."""
    return "GPU allocation could not be analysed (%s): %s" % (
        "files" if params["nodes_file"] else "Kubernetes API",
        exc,
    )


def report(params, nodes, pods, source):
    """(result, failure message or None): the analysis with its source, and the findings at a fail_on severity."""
    result = analyze(
        nodes, pods, params["expected_gpus"], params["gpu_node_selector"], params["gpu_taint"],
        params["allowed_pods"], params["system_namespaces"],
    )  # fmt: skip
    if source["type"] == "api":
        source["pages"]["pods"] = source["pages"]["pods"].get("pages", 0)
    result["source"] = source
    bad = failing(result["findings"], params["fail_on"])
    if not bad:
        return result, None
    return result, "%d GPU finding(s) at severity %s: %s" % (
        len(bad), "/".join(params["fail_on"]), "; ".join("%s %s" % (f["code"], f["node"] or f["pod"]) for f in bad[:10])
    )  # fmt: skip
