"""The project's lab: real components, built from their upstream sources, to test the collection against.

Three parts, by job (each runs from the repository root as ``python -m lab.<part>.<module> ...``):

- ``lab.nodes``: the podman node lab. Containers that behave like bare-metal Debian hosts (labctl), the K3s
  node components and images built from Go modules for their real kubelets (nodebuild, nodeimages), the K3s
  stand-in bundle the collection installs on them (k3sbundle), and a podman check of the images (podcheck).
  The lab's own programs (stand-ins, pause), the node image recipe, and the Traefik and cert-manager sources
  the builds add lie beside them (programs/, image/, traefik/, certmanager/, containers.conf).
- ``lab.live``: what the live, gateway and runtime tests run against without podman: a real Kubernetes control
  plane on loopback with kwok nodes (cluster, built by kubebuild), the upstream CRDs (crds), the charts checked
  with a real helm (charts, helmbuild), and the sandbox that runs a rendered pod's server as the pod would
  (runtime).
- ``lab.pins``: the collection's pins. The one reader of the version pins in the role defaults
  (``lab.pins.read_pins``), their audit against the newest releases (versions), and the Python lock files
  (locks).

``lab.diskuse`` (what `make test` leaves on disk) belongs to no part: it prunes the caches of all three.
Only the standard library is imported here and by the modules the lab runs before the project venv exists.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
COLLECTIONS = ROOT / ".cache" / "collections"
MODULE_UTILS = ROOT / "plugins" / "module_utils"


def collection_module(name: str) -> ModuleType:
    """The collection's module_utils module `name`, imported from this working tree.

    The collection's modules import each other as ``ansible_collections.aiinfra.k3s.plugins.module_utils...``, so
    the working tree is linked as .cache/collections/ansible_collections/aiinfra/k3s (as tests/unit/conftest.py
    links it) and .cache/collections is put on sys.path once. The module is found by its file name anywhere
    under plugins/module_utils/ (a flat file or one in a sub-package), so moving it between sub-packages does not
    touch the lab. A name found twice or not at all is an ImportError.
    """
    found = sorted(MODULE_UTILS.rglob(f"{name}.py"))
    if len(found) != 1:
        where = ", ".join(str(p.relative_to(ROOT)) for p in found) or "nowhere"
        raise ImportError(
            f"module_utils {name}: expected one {name}.py under {MODULE_UTILS.relative_to(ROOT)}, found {where}"
        )
    link = COLLECTIONS / "ansible_collections" / "aiinfra" / "k3s"
    if not link.exists():
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(Path("../../../.."))
    if str(COLLECTIONS) not in sys.path:
        sys.path.append(str(COLLECTIONS))
    dotted = ".".join(found[0].relative_to(ROOT).with_suffix("").parts)
    return importlib.import_module(f"ansible_collections.aiinfra.k3s.{dotted}")


@contextlib.contextmanager
def build_lock(cache: Path, log: Callable[[str], None], what: str) -> Iterator[None]:
    """One build of a cache at a time on this machine (e.g. `make builds` run beside a part that asks for the same
    build): a second caller waits, then finds it cached."""
    cache.mkdir(parents=True, exist_ok=True)
    with (cache / ".lock").open("w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log(f"waiting for another {what} build to finish")
            fcntl.flock(handle, fcntl.LOCK_EX)
        yield
