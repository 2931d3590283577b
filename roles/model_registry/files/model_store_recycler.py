# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Makes the model store's Released local PersistentVolumes Available again (installed by the model_registry role
on every K3s server, run by the aiinfra-model-store-recycler systemd unit).

Each model server pod mounts its GPU node's store through a claim of its own, deleted with the pod. The local
volume it held then stays Released: Kubernetes never binds a Released volume again, and has no recycler for local
volumes. All of a node's store volumes are the same read-only weights directory, so nothing is left to scrub:
removing the volume's claimRef is enough, and the PersistentVolume controller marks it Available.

Only volumes of the store's StorageClass that carry the store's label and are Released are touched; each patch
first tests the resourceVersion it read, so a volume that changed since (bound again, edited) is left alone, and
several servers running this at once do each volume once.
"""

import argparse
import json
import subprocess
import sys
import time

SELECTOR = "app.kubernetes.io/name=model-registry,app.kubernetes.io/part-of=aiinfra-serving"


def to_recycle(volumes, storage_class):
    """[(name, resourceVersion)] of the Released volumes of storage_class in a PersistentVolumeList's items."""
    out = []
    for pv in volumes:
        spec, meta = pv.get("spec") or {}, pv.get("metadata") or {}
        if (
            (pv.get("status") or {}).get("phase") == "Released"
            and spec.get("storageClassName") == storage_class
            and spec.get("claimRef")
            and not meta.get("deletionTimestamp")
        ):
            out.append((meta["name"], meta["resourceVersion"]))
    return sorted(out)


def release_patch(resource_version):
    """JSON patch removing the claimRef, only if the volume is still at resource_version."""
    return [
        {"op": "test", "path": "/metadata/resourceVersion", "value": resource_version},
        {"op": "remove", "path": "/spec/claimRef"},
    ]


def run(kubectl, *args, timeout=30):
    return subprocess.run([*kubectl, *args], capture_output=True, text=True, timeout=timeout, check=False)


def sweep(kubectl, storage_class, selector=SELECTOR):
    """One pass: returns (recycled names, error or ""). A refused patch of a volume that changed since it was read
    (another server freed it, it was deleted) is not an error; one refused although the volume is unchanged is."""
    proc = run(kubectl, "get", "persistentvolumes", "-l", selector, "-o", "json")
    if proc.returncode != 0:
        return [], (proc.stderr.strip().splitlines() or ["kubectl rc %d" % proc.returncode])[-1]
    done, errors = [], []
    for name, version in to_recycle(json.loads(proc.stdout).get("items") or [], storage_class):
        patch = run(
            kubectl, "patch", "persistentvolume", name, "--type", "json", "-p", json.dumps(release_patch(version))
        )
        if patch.returncode == 0:
            done.append(name)
            continue
        now = run(kubectl, "get", "persistentvolume", name, "-o", "jsonpath={.metadata.resourceVersion}")
        if now.returncode == 0 and now.stdout.strip() == version:  # unchanged, yet refused: a real error
            errors.append("%s: %s" % (name, (patch.stderr.strip().splitlines() or ["rc %d" % patch.returncode])[-1]))
    return done, "; ".join(errors)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kubectl", nargs="+", default=["/usr/local/bin/k3s", "kubectl"])
    parser.add_argument("--storage-class", required=True)
    parser.add_argument("--interval", type=float, default=5.0)
    parser.add_argument("--once", action="store_true", help="one pass, then exit")
    args = parser.parse_args(argv)
    last_error = None
    while True:
        try:
            done, error = sweep(args.kubectl, args.storage_class)
        except FileNotFoundError:
            # K3s was removed from this node (playbooks/reset.yml): nothing left to recycle for.
            print("%s not found: stopping" % args.kubectl[0], flush=True)
            return 0
        except (subprocess.SubprocessError, ValueError) as exc:
            done, error = [], str(exc)
        for name in done:
            print("made %s Available again (its claim was deleted)" % name, flush=True)
        if error and error != last_error:  # each new error once, not every pass
            print("cannot recycle the store's volumes yet: %s" % error, file=sys.stderr, flush=True)
        last_error = error
        if args.once:
            return 1 if error else 0
        time.sleep(max(args.interval, 1.0))


if __name__ == "__main__":
    sys.exit(main())
