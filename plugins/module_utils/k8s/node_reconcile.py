# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What reconciling one registered Node's labels and taints takes. K3s applies node-label and node-taint only when a
node first registers; the k3s role then owns the labels and taints it sets, records their names in two annotations,
and removes on a later run those the inventory dropped. Plain functions on the Node object the API returned, so a
node already right costs no API write."""

import json

from ansible_collections.aiinfra.k3s.plugins.module_utils.plan.inventory_spec import parse_taint


def _json(text, default):
    """An annotation's JSON, or `default` when it is missing or not JSON (an annotation edited by hand)."""
    try:
        return json.loads(text) if text else default
    except ValueError:
        return default


def _same_taint(a, b):
    return (
        a["key"] == b.get("key") and a["effect"] == b.get("effect") and (a.get("value") or "") == (b.get("value") or "")
    )


def reconcile(node, labels, taints, labels_annotation, taints_annotation):
    """The entry the k3s role's labels tasks loop over for one Node object.

    labels: {name: value} the inventory sets; taints: 'key[=value]:Effect' strings. Returns {name, labels (with each
    dropped label set to None, as a merge patch removes it), annotations (the two records), patch (whether the labels
    or annotations differ from the node's), taints (API objects the node must carry), add_taints (whether one of them
    is missing), remove_taints (API objects of dropped taints the node still carries)}.
    """
    metadata = node.get("metadata") or {}
    current_labels = metadata.get("labels") or {}
    annotations = metadata.get("annotations") or {}
    current_taints = (node.get("spec") or {}).get("taints") or []
    old_labels = _json(annotations.get(labels_annotation), [])
    old_taints = _json(annotations.get(taints_annotation), [])
    wanted = {str(k): str(v) for k, v in labels.items()}
    dropped = sorted(k for k in old_labels if k not in wanted)
    records = {labels_annotation: json.dumps(sorted(wanted)), taints_annotation: json.dumps(sorted(taints))}
    patch = (
        any(current_labels.get(k) != v for k, v in wanted.items())
        or any(k in current_labels for k in dropped)
        or any(_json(annotations.get(k), None) != json.loads(v) for k, v in records.items())  # whatever the spacing
    )
    taint_objects = [parse_taint(t) for t in taints]
    dropped_taints = [parse_taint(t) for t in old_taints if t not in taints]
    return {
        "name": metadata.get("name"),
        "labels": dict(wanted, **{k: None for k in dropped}),
        "annotations": records,
        "patch": patch,
        "taints": taint_objects,
        "add_taints": any(not any(_same_taint(t, c) for c in current_taints) for t in taint_objects),
        "remove_taints": [t for t in dropped_taints if any(_same_taint(t, c) for c in current_taints)],
    }
