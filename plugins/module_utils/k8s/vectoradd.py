# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The CUDA vectorAdd check of gpu_verify: its namespace, its Jobs, and the namespaces it must not use.

The check creates its own namespace, runs one Job per GPU node in it and deletes it. It must never run in, nor
delete, a namespace it did not create: the name is refused when it is a system namespace or one of the site's
(``namespace_problems``), and an existing namespace without the check's labels is refused before anything is
created in it or deleted (``ownership_problems``; the role deletes only the namespace whose uid it read).
"""

from ansible_collections.aiinfra.k3s.plugins.module_utils.k8s.objects import harden, namespace
from ansible_collections.aiinfra.k3s.plugins.module_utils.plan.inventory_spec import problem

VARIABLE = "gpu_verify_vectoradd_namespace"
MANAGED_BY = "aiinfra.k3s"
PURPOSE_LABEL = "aiinfra.io/purpose"
PURPOSE = "gpu-verify"
# What marks the check's own namespace: created by the collection, for this check.
OWN_LABELS = {"app.kubernetes.io/managed-by": MANAGED_BY, PURPOSE_LABEL: PURPOSE}
# Pod Security: the Job meets "restricted" (warned on), the namespace enforces "baseline" so a GPU container
# runtime that needs more than restricted allows still runs the sample.
ENFORCE, WARN = "baseline", "restricted"
# The CUDA sample needs no root: it only opens the GPU device nodes the device plugin hands the container (world
# read-write, as the NVIDIA container toolkit creates them) and writes nothing but CUDA's JIT cache under HOME
# (/tmp, an emptyDir). The image sets no user, so one is given: nobody's uid.
RUN_AS_USER = 65534
SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
FIX = "set gpu_verify_vectoradd_namespace to a namespace of its own that nothing else uses (default aiinfra-gpu-verify)"


def namespace_manifest(name):
    """The check's namespace: its labels mark it as the check's own; Pod Security enforces baseline."""
    ns = namespace(name, ENFORCE, WARN)
    ns["metadata"]["labels"].update(OWN_LABELS)
    return ns


def job_name(node):
    """vectoradd-<node>, cut so the job-name label of its pod stays a valid label value (63 characters)."""
    return ("vectoradd-" + str(node)[:50]).rstrip("-.")


def job_manifest(node, params):
    """The vectorAdd Job pinned to one GPU node. params: namespace, image, timeout (seconds of the role's wait)."""
    container = {
        "name": "vectoradd",
        "image": params["image"],
        "imagePullPolicy": "IfNotPresent",
        "resources": {"limits": {"nvidia.com/gpu": 1}},
    }
    pod = {
        "restartPolicy": "Never",
        "nodeSelector": {"kubernetes.io/hostname": str(node)},
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "enableServiceLinks": False,
        "containers": [container],
    }
    # No service-account token, a non-root user, no privilege escalation, no capability, RuntimeDefault seccomp,
    # a read-only root file system (HOME on an emptyDir /tmp).
    harden(pod, container, RUN_AS_USER, "64Mi")
    labels = {"app.kubernetes.io/managed-by": MANAGED_BY, "app.kubernetes.io/name": "gpu-vectoradd"}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": job_name(node), "namespace": params["namespace"], "labels": labels},
        "spec": {
            "backoffLimit": 0,
            # Longer than the wait: a pod that did not finish is still there to be described before the namespace
            # goes.
            "activeDeadlineSeconds": int(params["timeout"]) + 120,
            "template": {"metadata": {"labels": {"app.kubernetes.io/name": "gpu-vectoradd"}}, "spec": pod},
        },
    }


def site_namespaces(plan):
    """{namespace: [what uses it]} from the site plan: its namespaces, each told by the variable that sets it, and,
    for a namespace none of them names, its workloads, model routes, edge and rate-limit store."""
    plan = plan or {}
    variables = {
        ("aiinfra_namespace" if component == "serving" else "%s_namespace" % component): name
        for component, name in (plan.get("namespaces") or {}).items()
    }
    out = {}
    for variable, name in sorted(variables.items()):
        if name:
            out.setdefault(str(name), []).append(variable)
    used = [(w.get("namespace"), "the site plan's %s" % w.get("name")) for w in plan.get("workloads") or []]
    used += [
        (r.get("namespace"), "the site plan's route of %s" % r.get("model")) for r in plan.get("model_routes") or []
    ]
    used += [((plan.get("edge") or {}).get("namespace"), "the site plan's edge")]
    used += [((plan.get("limits") or {}).get("namespace"), "the site plan's rate-limit store")]
    named = set(out)  # a namespace a variable names is told by its variables alone
    for name, what in used:
        if name and str(name) not in named and what not in out.get(str(name), []):
            out.setdefault(str(name), []).append(what)
    return out


def namespace_problems(name, host, plan=None):
    """Why the check may not use the namespace `name` (a system namespace or one of the site's), as problems."""
    name = str(name or "")
    why = None
    if name in SYSTEM_NAMESPACES or name.startswith("kube-"):
        why = "a system namespace"
    else:
        users = site_namespaces(plan).get(name)
        if users:
            why = "a namespace of the site (%s)" % ", ".join(users)
    if not why:
        return []
    return [
        problem(
            "GPU_VERIFY",
            host,
            VARIABLE,
            "%s is %s, %s: the vectorAdd check deletes its namespace when it is done" % (VARIABLE, name, why),
            FIX,
        )
    ]


def ownership_problems(name, existing, host):
    """Why the check may not create its Jobs in, or delete, the namespace `name`: it exists (``existing``: the
    Namespace objects read, none or one) without the labels the check gives the namespaces it creates."""
    out = []
    for ns in existing or []:
        labels = (ns.get("metadata") or {}).get("labels") or {}
        missing = sorted("%s=%s" % (k, v) for k, v in OWN_LABELS.items() if labels.get(k) != v)
        if missing:
            out.append(
                problem(
                    "GPU_VERIFY",
                    host,
                    VARIABLE,
                    "namespace %s exists and was not created by the vectorAdd check (no label %s): it is neither "
                    "used nor deleted" % (name, ", ".join(missing)),
                    FIX + ", or delete %s yourself if it is a leftover of yours" % name,
                )
            )
    return out
