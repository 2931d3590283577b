# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU allocation analysis of a Kubernetes cluster from its Node and Pod objects (plain dicts, as
`kubectl get -o json` or the API return them).

For every GPU node it compares what the hardware has (expected GPUs), what the device plugin advertises
(capacity), what is usable (allocatable) and what pods hold (requests), and reports every disagreement
as a finding with a stable code. One pass over the pods; no API call here.
"""

from ansible_collections.aiinfra.k3s.plugins.module_utils.plan.inventory_spec import parse_taint

GPU_RESOURCE = "nvidia.com/gpu"
MIG_PREFIX = "nvidia.com/mig-"
TERMINATED = ("Succeeded", "Failed")
SEVERITIES = ("error", "warning", "info")
DEFAULT_SYSTEM_NAMESPACES = ("kube-system", "kube-public", "kube-node-lease", "gpu-operator", "nvidia-gpu-operator")
ADMISSION_REASONS = ("UnexpectedAdmissionError", "OutOfnvidia.com/gpu", "OutOf" + GPU_RESOURCE)

CODES = {
    "GPU_NOT_ADVERTISED": "error",
    "GPU_CAPACITY_MISMATCH": "error",
    "GPU_CAPACITY_UNKNOWN": "info",
    "GPU_UNHEALTHY": "warning",
    "GPU_OVERCOMMIT": "error",
    "GPU_POD_PENDING": "error",
    "GPU_POD_ADMISSION_FAILED": "error",
    "GPU_POD_NO_TOLERATION": "error",
    "GPU_NODE_NOT_TAINTED": "warning",
    "GPU_NODE_UNLABELED": "warning",
    "NON_GPU_POD_ON_GPU_NODE": "warning",
    "GPU_NODE_NOT_READY": "error",
    "GPU_IDLE": "info",
}


def is_gpu_resource(name):
    return name == GPU_RESOURCE or name.startswith(MIG_PREFIX)


def quantity(value):
    """Integer count of an extended resource quantity ('2', 2, '1k' is not used for devices)."""
    if value is None:
        return 0
    if isinstance(value, (int, float)):
        return int(value)
    text = str(value).strip()
    try:
        return int(text)
    except ValueError:
        try:
            return int(float(text))
        except ValueError:
            raise ValueError("cannot read device quantity %r" % value) from None


def gpu_resources(resource_map):
    """{resource: count} of the GPU resources (nvidia.com/gpu, nvidia.com/mig-*) in a resource list."""
    out = {}
    for name, value in (resource_map or {}).items():
        if is_gpu_resource(name):
            count = quantity(value)
            if count:
                out[name] = count
    return out


def container_gpus(container):
    """Extended resources: requests default to limits (and must equal them when both are set)."""
    resources = container.get("resources") or {}
    merged = gpu_resources(resources.get("limits"))
    merged.update(gpu_resources(resources.get("requests")))
    return merged


def _add(total, extra):
    for name, count in extra.items():
        total[name] = total.get(name, 0) + count
    return total


def pod_gpus(pod):
    """Effective GPU request of a pod, per resource: the larger of the app containers' sum (with sidecars)
    and, for each init container, its own request plus the sidecars started before it."""
    spec = pod.get("spec") or {}
    sidecars = {}
    init_peak = {}
    for init in spec.get("initContainers") or []:
        req = container_gpus(init)
        if init.get("restartPolicy") == "Always":  # restartable init container (sidecar): runs with the app
            _add(sidecars, req)
            continue
        for name in set(req) | set(sidecars):
            init_peak[name] = max(init_peak.get(name, 0), req.get(name, 0) + sidecars.get(name, 0))
    app = dict(sidecars)
    for container in spec.get("containers") or []:
        _add(app, container_gpus(container))
    effective = {}
    for name in set(app) | set(init_peak):
        value = max(app.get(name, 0), init_peak.get(name, 0))
        if value:
            effective[name] = value
    return effective


def tolerates(pod, taint):
    """Kubernetes toleration matching for one taint."""
    for tol in (pod.get("spec") or {}).get("tolerations") or []:
        if tol.get("effect") and tol.get("effect") != taint["effect"]:
            continue
        operator = tol.get("operator", "Equal")
        key = tol.get("key", "")
        if not key and operator == "Exists":
            return True
        if key != taint["key"]:
            continue
        if operator == "Exists" or (tol.get("value", "") == taint["value"]):
            return True
    return False


def node_ready(node):
    for cond in (node.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return cond.get("status") == "True"
    return False


def has_taint(node, taint):
    for t in (node.get("spec") or {}).get("taints") or []:
        if (
            t.get("key") == taint["key"]
            and t.get("effect") == taint["effect"]
            and (t.get("value") or "") == taint["value"]
        ):
            return True
    return False


def owned_by_daemonset(pod):
    return any(ref.get("kind") == "DaemonSet" for ref in (pod.get("metadata") or {}).get("ownerReferences") or [])


def allowed(pod, rules):
    """True when a pod matches one of the operator's placement rules: {namespace, name_prefix, labels}."""
    meta = pod.get("metadata") or {}
    labels = meta.get("labels") or {}
    for rule in rules or []:
        if rule.get("namespace") and rule["namespace"] != meta.get("namespace"):
            continue
        if rule.get("name_prefix") and not meta.get("name", "").startswith(rule["name_prefix"]):
            continue
        if any(labels.get(k) != str(v) for k, v in (rule.get("labels") or {}).items()):
            continue
        return True
    return False


def scheduling_reason(pod):
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            return "%s: %s" % (cond.get("reason", "Unschedulable"), cond.get("message", "no message"))
    return "not scheduled yet (no scheduler condition)"


def finding(code, node, pod, message):
    return {"code": code, "severity": CODES[code], "node": node, "pod": pod, "message": message}


def _label_int(labels, key):
    try:
        return int(labels[key]) if key in labels else None
    except (TypeError, ValueError):
        return None


def mig_strategy(labels, capacity):
    """The node's MIG strategy: GPU Feature Discovery's nvidia.com/mig.strategy label (single or mixed), else
    mixed when it advertises nvidia.com/mig-<profile> resources, else None (no MIG)."""
    strategy = labels.get("nvidia.com/mig.strategy")
    if strategy in ("single", "mixed"):
        return strategy
    return "mixed" if any(name.startswith(MIG_PREFIX) for name in capacity or {}) else None


def label_slices(labels):
    """MIG devices a mixed-strategy node advertises by GFD's labels: the sum over its profiles of
    nvidia.com/mig-<profile>.count times nvidia.com/mig-<profile>.replicas (time-slicing); None without any."""
    total = None
    for key in labels:
        if not (key.startswith(MIG_PREFIX) and key.endswith(".count")):
            continue
        count = _label_int(labels, key)
        if count is None:
            continue
        resource = key[: -len(".count")]
        total = (total or 0) + count * max(_label_int(labels, resource + ".replicas") or 1, 1)
    return total


def _whole_gpus_under_mixed(labels, physical, mig_gpus):
    """GPUs a mixed-strategy node with MIG slices advertises whole, or None when that cannot be known: the GPUs
    not in MIG mode from the facts; none when GFD labels nvidia.com/gpu.replicas 0 (it labels the GPUs in MIG mode
    without sharing, and a whole GPU's labels override theirs) or when the node has one GPU (the one with the
    slices). nvidia.com/gpu.count does not tell: under mixed it counts every GPU."""
    if mig_gpus is not None and physical is not None:
        return max(physical - mig_gpus, 0)
    if labels.get("nvidia.com/gpu.replicas") == "0" or physical == 1:
        return 0
    return None


def expected_count(name, labels, expected, replicas, capacity=None):
    """(expected capacity, physical GPUs, how it was derived), or (None, physical, why) when it cannot be known.

    expected[name] is a physical GPU count, or gpu_facts' {physical, mig_slices, mig_gpus}. With the hardware's MIG
    slices (gpu_facts) those give the capacity; otherwise, on a MIG node, GPU Feature Discovery's labels do: under
    the single strategy nvidia.com/gpu.count is the MIG device count (the node advertises nvidia.com/gpu = slices),
    under mixed nvidia.com/mig-<profile>.count each profile's. A physical count alone never gives a MIG node's."""
    entry = expected.get(name)
    if isinstance(entry, dict):
        physical, mig, mig_gpus = entry.get("physical"), entry.get("mig_slices") or 0, entry.get("mig_gpus")
    else:
        physical, mig, mig_gpus = entry, 0, None
    strategy = mig_strategy(labels, capacity)
    if physical is None and strategy != "single":  # under single the label counts MIG devices, not GPUs
        physical = _label_int(labels, "nvidia.com/gpu.count")
    if mig:
        # Mixed strategy: the MIG slices of the GPUs in MIG mode, plus the other GPUs advertised whole (each
        # times its time-slicing replicas). Single strategy has every GPU in MIG mode: the slices alone.
        whole = max((physical or 0) - (physical if mig_gpus is None else mig_gpus), 0)
        if whole:
            return (
                mig + whole * replicas,
                physical,
                "%d MIG slices + %d whole GPU(s) x %d replicas" % (mig, whole, replicas),
            )
        if strategy == "single":  # the device plugin time-slices each MIG device like a GPU
            return mig * replicas, physical, "%d MIG slices x %d replicas" % (mig, replicas)
        return mig, physical, "%d MIG slices" % mig
    if isinstance(entry, dict) and physical is not None:
        # The hardware says no MIG: labels left from an earlier MIG setup must not replace what nvidia-smi saw.
        return physical * replicas, physical, "%d GPUs x %d replicas" % (physical, replicas)
    if strategy == "single":
        devices = _label_int(labels, "nvidia.com/gpu.count")
        if devices is None:
            return None, physical, "MIG single strategy without GFD's nvidia.com/gpu.count label"
        return (
            devices * replicas,
            physical,
            "%d MIG devices x %d replicas (GFD labels, single strategy)" % (devices, replicas),
        )
    if strategy == "mixed":
        slices = label_slices(labels)
        if slices is None:
            if any(name.startswith(MIG_PREFIX) for name in capacity or {}):
                return None, physical, "MIG slices advertised without GFD's nvidia.com/mig-<profile>.count labels"
            # GFD labels no MIG device: every GPU is advertised whole.
        else:
            whole = _whole_gpus_under_mixed(labels, physical, mig_gpus)
            if whole is None:
                return (
                    None,
                    physical,
                    "%d MIG slices (GFD labels) plus the GPUs not in MIG mode, which the labels do not count" % slices,
                )
            if whole:
                return (
                    slices + whole * replicas,
                    physical,
                    "%d MIG slices (GFD labels) + %d whole GPU(s) x %d replicas" % (slices, whole, replicas),
                )
            return slices, physical, "%d MIG slices (GFD labels)" % slices
    if physical is None:
        return None, None, "unknown"
    return physical * replicas, physical, "%d GPUs x %d replicas" % (physical, replicas)


def _gpu_nodes(nodes, selector, expected):
    """{name: what the checks need} for every node that is a GPU node by label, capacity or expectation."""
    info = {}
    for node in nodes:
        meta = node.get("metadata") or {}
        name = meta.get("name")
        labels = meta.get("labels") or {}
        status = node.get("status") or {}
        capacity = gpu_resources(status.get("capacity"))
        selected = bool(selector) and all(labels.get(k) == v for k, v in selector.items())
        if not (selected or name in expected or labels.get("nvidia.com/gpu.present") == "true" or capacity):
            continue
        info[name] = {
            "node": node,
            "labels": labels,
            "selected": selected,
            "capacity": capacity,
            "allocatable": gpu_resources(status.get("allocatable")),
            "requested": {},
            "replicas": _label_int(labels, "nvidia.com/gpu.replicas") or 1,
            "ready": node_ready(node),
            "schedulable": not (node.get("spec") or {}).get("unschedulable", False),
            "pods": 0,
        }
    return info


def _non_gpu_pod_findings(pod, ref, node_name, info, system, allowed_pods):
    meta, phase = pod.get("metadata") or {}, (pod.get("status") or {}).get("phase", "Unknown")
    if (
        node_name in info
        and phase == "Running"
        and meta.get("namespace", "") not in system
        and not owned_by_daemonset(pod)
        and not allowed(pod, allowed_pods)
    ):
        return [
            finding(
                "NON_GPU_POD_ON_GPU_NODE",
                node_name,
                ref,
                "%s requests no GPU but runs on GPU node %s, taking CPU and memory from GPU work: add a "
                "nodeSelector/affinity keeping it off GPU nodes, or list it in allowed_pods if it belongs there"
                % (ref, node_name),
            )
        ]
    return []


def _gpu_pod_findings(pod, ref, node_name, gpus, taint, gpu_taint):
    """Findings of one GPU pod: rejected at admission, missing toleration, not scheduled."""
    status = pod.get("status") or {}
    phase, total = status.get("phase", "Unknown"), sum(gpus.values())
    if phase in TERMINATED:
        reason = status.get("reason", "")
        if phase == "Failed" and any(reason.startswith(r) for r in ADMISSION_REASONS):
            return [
                finding(
                    "GPU_POD_ADMISSION_FAILED",
                    node_name,
                    ref,
                    "%s was rejected by the kubelet on %s (%s: %s): the device plugin could not hand out its GPUs; "
                    "check the device plugin pod and node GPU health, then delete the pod so it is recreated"
                    % (ref, node_name, reason, status.get("message", "")),
                )
            ]
        return []
    out = []
    if not tolerates(pod, taint):
        out.append(
            finding(
                "GPU_POD_NO_TOLERATION",
                node_name,
                ref,
                "%s requests %d GPU(s) but does not tolerate the GPU taint %s, so it cannot run on GPU nodes: "
                "add the toleration" % (ref, total, gpu_taint),
            )
        )
    if not node_name:
        out.append(
            finding(
                "GPU_POD_PENDING",
                None,
                ref,
                "%s requests %s and is not scheduled: %s" % (ref, _fmt(gpus), scheduling_reason(pod)),
            )
        )
    return out


def _capacity_findings(name, n, cap, alloc, exp, basis):
    """Advertised against expected, allocatable against advertised, requested against allocatable."""
    out = []
    if cap and exp is None and mig_strategy(n["labels"], n["capacity"]):
        out.append(
            finding(
                "GPU_CAPACITY_UNKNOWN",
                name,
                None,
                "%s uses MIG and advertises %d GPU device(s), but how many it should cannot be known (%s), so it is "
                "not compared: give expected_gpus its gpu_facts counts {physical, mig_slices, mig_gpus} (the gpu_verify "
                "role does) or let GPU Feature Discovery label the node" % (name, cap, basis),
            )
        )
    if not cap:
        out.append(
            finding(
                "GPU_NOT_ADVERTISED",
                name,
                None,
                "%s is a GPU node (%s) but advertises no %s capacity: the device plugin or GPU Operator is not working "
                "there; check the nvidia-device-plugin and driver pods on that node"
                % (name, basis if exp is not None else "by label", GPU_RESOURCE),
            )
        )
    elif exp is not None and cap != exp:
        out.append(
            finding(
                "GPU_CAPACITY_MISMATCH",
                name,
                None,
                "%s advertises %d GPU device(s) but %d are expected (%s): a GPU is missing, or the time-slicing/MIG "
                "configuration differs from the hardware; compare nvidia-smi with the device plugin config"
                % (name, cap, exp, basis),
            )
        )
    if alloc < cap:
        out.append(
            finding(
                "GPU_UNHEALTHY",
                name,
                None,
                "%s has %d allocatable of %d GPU device(s): the device plugin marked %d unhealthy; check XID errors "
                "in dmesg and DCGM health" % (name, alloc, cap, cap - alloc),
            )
        )
    for resource, count in sorted(n["requested"].items()):
        have = n["allocatable"].get(resource, 0)
        if count > have:
            out.append(
                finding(
                    "GPU_OVERCOMMIT",
                    name,
                    None,
                    "pods bound to %s request %d %s but only %d are allocatable: some of them cannot really have "
                    "their GPUs; find pods stuck or failing there and reduce requests" % (name, count, resource, have),
                )
            )
    return out


def _placement_findings(name, n, cap, taint, gpu_taint, selector):
    """The GPU taint and the GPU node labels."""
    out = []
    if not has_taint(n["node"], taint):
        out.append(
            finding(
                "GPU_NODE_NOT_TAINTED",
                name,
                None,
                "%s lacks the GPU taint %s, so pods that need no GPU can be scheduled there: re-run the k3s stage "
                "(labels and taints are reconciled through the API)" % (name, gpu_taint),
            )
        )
    if cap and selector and not n["selected"]:
        out.append(
            finding(
                "GPU_NODE_UNLABELED",
                name,
                None,
                "%s has GPUs but lacks the GPU node labels %s, so GPU workloads selecting them will not land there: "
                "put the node in the GPU group and re-run the k3s stage"
                % (name, ", ".join("%s=%s" % kv for kv in sorted(selector.items()))),
            )
        )
    return out


def _availability_findings(name, n, alloc, free):
    """Stranded GPUs (node not ready or cordoned), or idle ones."""
    if not n["ready"] or not n["schedulable"]:
        state, fix = (
            ("NotReady", "check the kubelet/k3s-agent on the node")
            if not n["ready"]
            else ("cordoned", "uncordon it when maintenance ends")
        )
        return [
            finding(
                "GPU_NODE_NOT_READY",
                name,
                None,
                "%s is %s, so its %d GPU(s) are stranded: %s" % (name, state, alloc, fix),
            )
        ]
    if free:
        return [
            finding("GPU_IDLE", name, None, "%s has %d allocatable GPU device(s) that no pod requests" % (name, free))
        ]
    return []


def analyze(
    nodes,
    pods,
    expected_gpus=None,
    gpu_node_selector=None,
    gpu_taint="nvidia.com/gpu=present:NoSchedule",
    allowed_pods=None,
    system_namespaces=DEFAULT_SYSTEM_NAMESPACES,
):
    """Nodes and pods -> {nodes, gpu_pods, summary, findings}."""
    expected = expected_gpus or {}
    selector = {
        k: str(v) for k, v in (gpu_node_selector if gpu_node_selector is not None else {"ai-workload": "true"}).items()
    }
    # The GPU taint as the API writes it (K3s's own parser: key[=value]:Effect), its value "" when it has none.
    taint = dict({"value": ""}, **parse_taint(gpu_taint))
    system = set(system_namespaces or ())
    info = _gpu_nodes(nodes, selector, expected)
    findings, gpu_pods = [], []
    for pod in pods:
        meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
        node_name = spec.get("nodeName")
        ns, pname = meta.get("namespace", ""), meta.get("name", "")
        ref = "%s/%s" % (ns, pname)
        gpus = pod_gpus(pod)
        if not sum(gpus.values()):
            findings += _non_gpu_pod_findings(pod, ref, node_name, info, system, allowed_pods)
            continue
        phase = (pod.get("status") or {}).get("phase", "Unknown")
        gpu_pods.append(
            {
                "namespace": ns,
                "name": pname,
                "node": node_name,
                "phase": phase,
                "gpus": sum(gpus.values()),
                "resources": gpus,
            }
        )
        findings += _gpu_pod_findings(pod, ref, node_name, gpus, taint, gpu_taint)
        if phase not in TERMINATED and node_name in info:
            _add(info[node_name]["requested"], gpus)
            info[node_name]["pods"] += 1

    node_rows = []
    totals = {"nodes": 0, "physical": 0, "capacity": 0, "allocatable": 0, "requested": 0, "free": 0}
    for name in sorted(info):
        n = info[name]
        cap, alloc, req = (sum(n[k].values()) for k in ("capacity", "allocatable", "requested"))
        exp, physical, basis = expected_count(name, n["labels"], expected, n["replicas"], n["capacity"])
        free = max(alloc - req, 0)
        node_rows.append(
            {
                "name": name,
                "ready": n["ready"],
                "schedulable": n["schedulable"],
                "physical": physical,
                "expected": exp,
                "capacity": cap,
                "allocatable": alloc,
                "requested": req,
                "free": free,
                "replicas": n["replicas"],
                "gpu_pods": n["pods"],
                "resources": {"capacity": n["capacity"], "allocatable": n["allocatable"], "requested": n["requested"]},
            }
        )
        totals["nodes"] += 1
        totals["physical"] += physical or 0
        for key, value in (("capacity", cap), ("allocatable", alloc), ("requested", req), ("free", free)):
            totals[key] += value
        findings += _capacity_findings(name, n, cap, alloc, exp, basis)
        findings += _placement_findings(name, n, cap, taint, gpu_taint, selector)
        findings += _availability_findings(name, n, alloc, free)

    counts = {s: 0 for s in SEVERITIES}
    for f in findings:
        counts[f["severity"]] += 1
    summary = dict(
        totals,
        gpu_pods=len(gpu_pods),
        pending=sum(1 for p in gpu_pods if not p["node"] and p["phase"] not in TERMINATED),
        findings=counts,
    )
    order = {s: i for i, s in enumerate(SEVERITIES)}
    findings.sort(key=lambda f: (order[f["severity"]], f["code"], f["node"] or "", f["pod"] or ""))
    return {"nodes": node_rows, "gpu_pods": gpu_pods, "summary": summary, "findings": findings}


def _fmt(resources):
    return ", ".join("%d %s" % (v, k) for k, v in sorted(resources.items()))


def failing(findings, fail_on):
    return [f for f in findings if f["severity"] in (fail_on or [])]


def table(result, hardware=None):
    """Lines of a per-node table a person reads at a glance, then the findings, errors first."""
    hardware = hardware or {}
    header = ("NODE", "READY", "HW", "EXPECTED", "CAPACITY", "ALLOCATABLE", "REQUESTED", "FREE", "PODS", "STATUS")
    worst = {}
    for f in result["findings"]:
        if f["node"] and f["severity"] != "info":
            worst.setdefault(f["node"], []).append(f["code"])
    rows = [header]
    for n in result["nodes"]:
        ready = "yes" if n["ready"] and n["schedulable"] else ("cordoned" if n["ready"] else "NO")
        hw = hardware.get(n["name"], n["physical"])
        if isinstance(hw, dict):  # gpu_expected entries: {physical, mig_slices}
            hw = hw.get("physical")
        rows.append(
            (
                n["name"],
                ready,
                "-" if hw is None else str(hw),
                "-" if n["expected"] is None else str(n["expected"]),
                str(n["capacity"]),
                str(n["allocatable"]),
                str(n["requested"]),
                str(n["free"]),
                str(n["gpu_pods"]),
                ",".join(worst.get(n["name"], [])) or "OK",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(r)).rstrip() for r in rows]
    s = result["summary"]
    lines.append(
        "TOTAL: %d GPU node(s), %d expected device(s) on %d physical GPU(s), %d allocatable, %d requested, "
        "%d free; %d GPU pod(s), %d pending; findings: %d error, %d warning, %d info"
        % (
            s["nodes"],
            sum(n["expected"] or 0 for n in result["nodes"]),
            s["physical"],
            s["allocatable"],
            s["requested"],
            s["free"],
            s["gpu_pods"],
            s["pending"],
            s["findings"]["error"],
            s["findings"]["warning"],
            s["findings"]["info"],
        )
    )
    for f in result["findings"]:
        lines.append("%-7s %s %s" % (f["severity"].upper(), f["code"], f["message"]))
    return lines
