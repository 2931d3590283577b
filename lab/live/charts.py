"""Check the Helm values the collection writes against the real upstream charts, with a real helm.

    python -m lab.live.charts check [--inventory inventories/example]

The charts come from the upstream Go modules, at the versions the collection pins, through the Go module
proxy (`go mod download -json MODULE@VERSION`):

  * gpu-operator: github.com/NVIDIA/gpu-operator, deployments/gpu-operator, at gpu_operator_chart_version
    (roles/gpu_operator/defaults/main.yml). Its vYY.MM.P tags sit on a module path without /vYY, so no
    semantic version names them; the tool asks the proxy the tag, the tag +incompatible and the /vYY path,
    and says so, with the proxy's answer, when none resolves. It then checks the newest commit the proxy does
    serve (`@latest`), printed as such: that is evidence about the chart, never a pass for the pin.
  * cert-manager: github.com/cert-manager/cert-manager, deploy/charts/cert-manager, at
    cert_manager_chart_version. The module holds the chart's sources, not the released chart: the chart is
    assembled as cert-manager's make/manifests.mk does for a release (Chart.yaml from Chart.template.yaml
    with version, appVersion and the two annotations set; templates/crds.yaml concatenated from deploy/crds;
    README from its template; the rest copied).

The site is rendered twice (playbooks/render.yml): as the inventory has it, and with EVERY_OPTION on top
(extra vars that switch on each optional part of a chart's values: for the GPU Operator the mirror registry,
time-slicing, MIG and the operator-built driver), so that a path only an option writes is checked even when
the inventory leaves the option off; that second result is printed with the mark `[every option]`.
For each, the exact spec.valuesContent of the HelmChart the collection renders is
  a. walked against the chart's values (unknown_value_paths): every path we set must exist in the chart's
     values.yaml, or in the properties its values.schema.json declares, or lie under a map the chart leaves
     open: a `{}` or empty (null) value in values.yaml, a schema object without declared properties or with
     additionalProperties allowed, a subchart's values under the subchart's name (walked against that
     subchart's values.yaml), and `global`, which Helm hands to every chart. Lists are leaves.
  b. checked against DEAD_VALUE_PATHS (dead_value_paths): paths known to have left the chart in a release the
     pin has reached. The chart checked may be older than the pin (the @latest stand-in): a path it still
     has can be dead in the pin, and only this list says so.
  c. checked for tolerations lists that replace the chart's own and drop one of its entries
     (dropped_tolerations): a list value replaces the chart's list, it does not add to it.
  d. rendered with `helm template` (release = HelmChart name, namespace = targetNamespace, --kube-version =
     the Kubernetes version of the pinned K3s) and linted with `helm lint`; helm from lab/live/helmbuild.py.
KEDA and kube-prometheus-stack are not in a Go module: the check says so and leaves them to the unit tests.
Exit status: 0 when every chart from a Go module passed, 1 when one did not, 2 when the check could not run.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from lab import ROOT

try:
    import yaml
except ImportError:  # the system python3 may lack PyYAML: the project's venv has it
    venv_python = ROOT / ".venv" / "bin" / "python"
    if venv_python.exists() and Path(sys.executable).resolve() != venv_python.resolve():
        main_spec = getattr(sys.modules["__main__"], "__spec__", None)  # run again as it was: -m lab.x.y or a file
        again = ["-m", main_spec.name] if main_spec else [sys.argv[0]]
        os.execv(str(venv_python), [str(venv_python), *again, *sys.argv[1:]])
    raise

from lab.live import helmbuild
from lab.pins import PinError, read_pin

NOT_IN_GO_MODULE = "not in a Go module: checked by the existing unit tests only"


@dataclass(frozen=True)
class ChartSource:
    """Where a chart the collection installs lives in an upstream Go module."""

    chart: str  # spec.chart of the HelmChart
    module: str
    subdir: str
    version_var: str  # the role variable that pins the version (lab.pins reads it)
    assemble: str = "copy"  # "copy" or "cert-manager" (see assemble_cert_manager)


SOURCES = (
    ChartSource(
        "gpu-operator",
        "github.com/NVIDIA/gpu-operator",
        "deployments/gpu-operator",
        "gpu_operator_chart_version",
    ),
    ChartSource(
        "cert-manager",
        "github.com/cert-manager/cert-manager",
        "deploy/charts/cert-manager",
        "cert_manager_chart_version",
        assemble="cert-manager",
    ),
)


# Extra vars of the second render (see the module's docstring): every optional part of a chart's values on.
# cert-manager's values have no optional part (edge.cert_manager_manifests writes constant values).
EVERY_OPTION = {
    "gpu-operator": {
        "gpu_operator_registry": "registry.example.internal:5000",  # every component's `repository`
        "gpu_operator_time_slicing_classes": {"shared": 2, "exclusive": 1},  # devicePlugin.config
        "gpu_operator_time_slicing_default": "exclusive",
        "gpu_operator_mig_strategy": "mixed",  # mig.strategy, migManager.enabled
        "gpu_operator_driver_enabled": True,
        "gpu_operator_service_monitor": True,
    },
}
# Value paths that left a chart in a release newer than the code the Go module proxy serves, by chart:
# (path parts, first release without it, where that is seen). A path we write that is here fails the check
# when the pin is at or past that release, whatever the checked chart still has.
DEAD_VALUE_PATHS = {
    "gpu-operator": (
        (
            ("operator", "initContainer"),
            "v26.3.0",
            "left the chart's values.yaml in v26.3; the block of templates/clusterpolicy.yaml that still read it "
            "was removed as dead in the changes released as v26.3.2",
        ),
    ),
}
# Taints whose toleration a list of ours may leave out of the chart's list, with the reason.
OBSOLETE_TAINTS = {
    "node-role.kubernetes.io/master": "kubeadm stopped setting this taint in Kubernetes v1.25 and K3s never set it",
}


class CheckError(Exception):
    """A step of the check could not run; the message says which."""


# ---------------------------------------------------------------- pure functions (unit-tested)


def format_path(parts: tuple | list) -> str:
    """('a', 'b.c', 'd') -> a["b.c"].d: dotted, with keys that hold a dot quoted."""
    out = ""
    for part in parts:
        key = str(part)
        if "." in key or not key:
            out += f'["{key}"]'
        else:
            out += f".{key}" if out else key
    return out


def is_open(value) -> bool:
    """A chart value that leaves its contents open: an empty map `{}` or an empty (null) value."""
    return value is None or (isinstance(value, dict) and not value)


def unknown_value_paths(ours: dict, chart_values: dict, open_paths=frozenset()) -> list[str]:
    """Every path of `ours` that the chart does not have, walked against `chart_values`, in our order.

    A path stops being walked (and is allowed) where the chart's value is open (`{}` or null) or where it is
    listed in `open_paths` (dotted, as format_path writes it). Lists and scalars of ours are leaves. Where we
    set a map and the chart has a scalar or a list, each of our keys under it is unknown. The first missing
    key of a branch is reported, not the keys below it.
    """
    opened = set(open_paths)
    found: list[str] = []

    def walk(mine: dict, theirs, prefix: tuple) -> None:
        for key, value in mine.items():
            path = (*prefix, key)
            if format_path(path) in opened:
                continue
            if not isinstance(theirs, dict) or key not in theirs:
                found.append(format_path(path))
                continue
            chart_value = theirs[key]
            if isinstance(value, dict) and value and not is_open(chart_value):
                walk(value, chart_value, path)

    if format_path(()) not in opened:
        walk(ours, chart_values, ())
    return found


def deep_merge(base: dict, over: dict) -> dict:
    """`over` merged into a copy of `base`, maps recursively (Helm's coalescing of values)."""
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def open_value_paths(values, prefix: tuple = ()) -> set[str]:
    """Dotted paths of the open maps ({} or null) of a values.yaml."""
    found = set()
    if isinstance(values, dict):
        for key, value in values.items():
            path = (*prefix, key)
            if is_open(value):
                found.add(format_path(path))
            else:
                found |= open_value_paths(value, path)
    return found


def schema_known(schema: dict) -> tuple[dict, set[str]]:
    """(declared tree, open paths) of a values.schema.json.

    The tree holds every declared property: a map for an object with properties, "" for any other value.
    Open: an object without declared properties, or one whose additionalProperties is true or a schema.
    Local $refs (#/...) are followed; allOf/anyOf/oneOf branches are merged.
    """

    def resolve(node, seen=()):
        while isinstance(node, dict) and isinstance(node.get("$ref"), str) and node["$ref"].startswith("#/"):
            ref = node["$ref"]
            if ref in seen:
                return {}
            seen = (*seen, ref)
            target = schema
            for part in ref[2:].split("/"):
                target = target.get(part.replace("~1", "/").replace("~0", "~"), {})
            node = {**{k: v for k, v in node.items() if k != "$ref"}, **target}
        return node if isinstance(node, dict) else {}

    opened: set[str] = set()

    def walk(node, prefix: tuple):
        node = resolve(node)
        properties = dict(node.get("properties") or {})
        for branch in [*node.get("allOf", []), *node.get("anyOf", []), *node.get("oneOf", [])]:
            properties.update(resolve(branch).get("properties") or {})
        kinds = node.get("type")
        kinds = kinds if isinstance(kinds, list) else [kinds]
        is_object = "object" in kinds or bool(properties)
        if not is_object:
            return ""
        extra = node.get("additionalProperties", None)
        if not properties or extra is True or isinstance(extra, dict):
            opened.add(format_path(prefix))
        return {key: walk(sub, (*prefix, key)) for key, sub in properties.items()}

    tree = walk(schema, ())
    return (tree if isinstance(tree, dict) else {}), opened


def known_values(values: dict, schema: dict | None = None, subcharts: dict | None = None) -> tuple[dict, set[str]]:
    """The tree and open paths to walk our values against, from a chart's parts (see unknown_value_paths).

    subcharts: {name or alias: (tree, open paths)} of the chart's dependencies present under charts/.
    """
    values = values or {}
    tree, opened = ({}, set()) if schema is None else schema_known(schema)
    opened.discard("")  # a root without declared properties is no reason to accept everything
    tree = deep_merge(tree, values)
    opened |= open_value_paths(values)
    for name, (sub_tree, sub_open) in (subcharts or {}).items():
        parent_part = values.get(name) if isinstance(values.get(name), dict) else {}
        tree[name] = deep_merge(sub_tree, parent_part)
        # the subchart's own values say what is open below its name, not a `{}` placeholder of the parent
        opened.discard(format_path((name,)))
        opened |= {prefix_path(name, path) for path in sub_open}
    opened.add("global")
    return tree, opened


def prefix_path(key: str, path: str) -> str:
    """A dotted path (format_path) of a subchart, seen from its parent under `key`."""
    head = format_path((key,))
    if not path:
        return head
    return head + path if path.startswith("[") else f"{head}.{path}"


def release_tuple(version: str) -> tuple[int, ...] | None:
    """v26.7.1 -> (26, 7, 1); None when the version is not dotted numbers."""
    match = re.match(r"^v?(\d+(?:\.\d+)*)$", str(version).strip())
    return tuple(int(part) for part in match.group(1).split(".")) if match else None


def dead_value_paths(ours: dict, dead, version: str) -> list[str]:
    """The paths of `dead` (DEAD_VALUE_PATHS entries) that `ours` sets and that left the chart at or before
    `version`, each with the release and the reason. A version that cannot be compared gets every entry."""
    pinned = release_tuple(version)
    found = []
    for parts, removed_in, reason in dead:
        gone = release_tuple(removed_in)
        if pinned is not None and gone is not None and pinned < gone:
            continue
        node = ours
        for part in parts:
            node = node.get(part) if isinstance(node, dict) else None
            if node is None:
                break
        if node is not None:
            found.append(f"{format_path(parts)} (gone since {removed_in}: {reason})")
    return found


def dropped_tolerations(ours: dict, chart_values: dict, obsolete=None) -> list[str]:
    """Where a `tolerations` list of ours replaces a list the chart's values hold, each of the chart's entries
    that none of ours tolerates (same key, or an empty key with Exists; same effect or ours without one), less
    the taints of `obsolete`. Helm replaces lists: a list of ours is the whole list, not an addition."""
    obsolete = OBSOLETE_TAINTS if obsolete is None else obsolete
    found: list[str] = []

    def tolerates(mine: dict, theirs: dict) -> bool:
        key_ok = mine.get("key") == theirs.get("key") or (not mine.get("key") and mine.get("operator") == "Exists")
        effect_ok = not mine.get("effect") or mine.get("effect") == theirs.get("effect")
        return key_ok and effect_ok

    def walk(mine, theirs, prefix: tuple) -> None:
        if not isinstance(mine, dict) or not isinstance(theirs, dict):
            return
        for key, value in mine.items():
            chart_value = theirs.get(key)
            if key == "tolerations" and isinstance(value, list) and isinstance(chart_value, list):
                for entry in chart_value:
                    if not isinstance(entry, dict) or entry.get("key") in obsolete:
                        continue
                    if not any(isinstance(m, dict) and tolerates(m, entry) for m in value):
                        taint = f"{entry.get('key', '')}:{entry.get('effect', '')}"
                        found.append(f"{format_path((*prefix, key))} drops the chart's toleration of {taint}")
            else:
                walk(value, chart_value, (*prefix, key))

    walk(ours, chart_values, ())
    return found


def every_option_vars(charts=None) -> dict:
    """The extra vars of the every-option render: EVERY_OPTION of the given charts (all by default) in one map."""
    out: dict = {}
    for chart, variables in EVERY_OPTION.items():
        if charts is None or chart in charts:
            out.update(variables)
    return out


def helm_charts(documents) -> dict[str, dict]:
    """{spec.chart: {name, namespace, targetNamespace, version, repo, valuesContent}} of the HelmChart objects."""
    found = {}
    for doc in documents:
        if not isinstance(doc, dict) or doc.get("kind") != "HelmChart":
            continue
        if not str(doc.get("apiVersion", "")).startswith("helm.cattle.io/"):
            continue
        spec = doc.get("spec") or {}
        found[spec.get("chart")] = {
            "name": doc["metadata"]["name"],
            "namespace": spec.get("targetNamespace") or doc["metadata"].get("namespace", "default"),
            "version": str(spec.get("version", "")),
            "repo": spec.get("repo", ""),
            "valuesContent": spec.get("valuesContent") or "",
        }
    return found


def candidate_queries(module: str, version: str) -> list[tuple[str, str]]:
    """(module path, query) pairs that could name a tag: itself, and for a tag above v1 on a module path
    without /vN, its +incompatible form and the /vN path."""
    queries = [(module, version)]
    match = re.match(r"^v(\d+)\.", version)
    if match and int(match.group(1)) >= 2 and not re.search(r"/v\d+$", module):
        queries += [(module, f"{version}+incompatible"), (f"{module}/v{match.group(1)}", version)]
    return queries


def kubernetes_version(k3s_version: str) -> str:
    """v1.33.5+k3s1 -> v1.33.5 (the version K3s embeds)."""
    match = re.match(r"^(v\d+\.\d+\.\d+)\+k3s\d+$", k3s_version.strip())
    if not match:
        raise CheckError(f"k3s_version {k3s_version!r} is not a K3s release tag")
    return match.group(1)


def chart_yaml_from_template(template_text: str, version: str, signkey: str) -> str:
    """cert-manager's Chart.yaml as make/manifests.mk writes it from Chart.template.yaml (with yq)."""
    chart = yaml.safe_load(template_text)
    annotations = chart.setdefault("annotations", {})
    annotations["artifacthub.io/signKey"] = signkey
    annotations["artifacthub.io/prerelease"] = "true" if "-" in version else "false"
    chart["version"] = version
    chart["appVersion"] = version
    return yaml.safe_dump(chart, sort_keys=False)


def concat_yaml(texts: list[str]) -> str:
    """hack/concat-yaml.sh: the files one after the other, an empty line and `---` between two."""
    return "\n---\n".join(texts)


def tail(text: str, lines: int = 12) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


# ---------------------------------------------------------------- charts on disk


def assemble_cert_manager(module_dir: Path, version: str, out: Path) -> None:
    """cert-manager's chart as its release build (make/manifests.mk, $(bin_dir)/helm/cert-manager) lays it out."""
    src = module_dir / "deploy" / "charts" / "cert-manager"
    (out / "templates").mkdir(parents=True)
    for path in sorted((src / "templates").iterdir()):
        shutil.copyfile(path, out / "templates" / path.name)
    for name in ("values.yaml", "values.schema.json"):
        if (src / name).exists():
            shutil.copyfile(src / name, out / name)
    (out / "README.md").write_text((src / "README.template.md").read_text().replace("{{RELEASE_VERSION}}", version))
    # Up to v1.18 the chart's metadata is Chart.template.yaml; from v1.21 a Chart.yaml with version v0.0.0 that
    # the release build sets, the same way.
    template = src / "Chart.template.yaml" if (src / "Chart.template.yaml").exists() else src / "Chart.yaml"
    (out / "Chart.yaml").write_text(
        chart_yaml_from_template(template.read_text(), version, (src / "signkey_annotation.txt").read_text())
    )
    # Up to v1.18 the CRD templates sit in deploy/crds and the build concatenates them into templates/crds.yaml;
    # from v1.21 they are the chart's own templates/crd-*.yaml, copied above.
    if not list((src / "templates").glob("crd-*.yaml")):
        crds = sorted((module_dir / "deploy" / "crds").glob("*.yaml"))
        (out / "templates" / "crds.yaml").write_text(concat_yaml([p.read_text() for p in crds]))


def copy_chart(module_dir: Path, subdir: str, out: Path) -> None:
    shutil.copytree(module_dir / subdir, out)
    for path in [out, *out.rglob("*")]:  # the module cache is read-only; the copy need not be
        path.chmod(path.stat().st_mode | 0o200)


def _load_chart_parts(files: dict[str, bytes]) -> tuple[dict, dict | None]:
    values = yaml.safe_load(files.get("values.yaml", b"")) or {}
    schema = json.loads(files["values.schema.json"]) if "values.schema.json" in files else None
    return values, schema


def subchart_known(chart_dir: Path) -> dict:
    """{name or alias: (tree, open paths)} of the dependencies of Chart.yaml found under charts/."""
    meta = yaml.safe_load((chart_dir / "Chart.yaml").read_text()) or {}
    found = {}
    for dep in meta.get("dependencies") or []:
        key = dep.get("alias") or dep["name"]
        directory = chart_dir / "charts" / dep["name"]
        files: dict[str, bytes] = {}
        if directory.is_dir():
            files = {
                n: (directory / n).read_bytes()
                for n in ("values.yaml", "values.schema.json")
                if (directory / n).exists()
            }
        else:
            for archive in sorted((chart_dir / "charts").glob(f"{dep['name']}-*.tgz")):
                with tarfile.open(archive) as tar:
                    for member in tar.getmembers():
                        parts = member.name.split("/")
                        if len(parts) == 2 and parts[1] in ("values.yaml", "values.schema.json"):
                            files[parts[1]] = tar.extractfile(member).read()
                break
        if files:
            found[key] = known_values(*_load_chart_parts(files))
    return found


def chart_known(chart_dir: Path) -> tuple[dict, set[str]]:
    files = {n: (chart_dir / n).read_bytes() for n in ("values.yaml", "values.schema.json") if (chart_dir / n).exists()}
    return known_values(*_load_chart_parts(files), subchart_known(chart_dir))


# ---------------------------------------------------------------- process boundary


def render_helm_charts(inventory: str, extra_vars: dict | None = None) -> dict[str, dict]:
    """Render the site's manifests with playbooks/render.yml (extra_vars on top of the inventory); its HelmChart
    objects by chart."""
    playbook = ROOT / ".venv" / "bin" / "ansible-playbook"
    if not playbook.exists():
        playbook = Path(shutil.which("ansible-playbook") or playbook)
    env = dict(
        os.environ,
        ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"),
        ANSIBLE_COLLECTIONS_PATH=str(ROOT / ".cache" / "collections"),
        ANSIBLE_NOCOLOR="1",
    )
    extra = ["-e", json.dumps(extra_vars)] if extra_vars else []
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.run(
            [str(playbook), str(ROOT / "playbooks" / "render.yml"), "-i", inventory, "-e", f"render_dir={tmp}", *extra],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        if proc.returncode != 0:
            raise CheckError(f"playbooks/render.yml failed:\n{tail(proc.stdout + proc.stderr, 20)}")
        documents = []
        for path in sorted(Path(tmp).glob("*.yaml")):
            documents += list(yaml.safe_load_all(path.read_text()))
    return helm_charts(documents)


def fetch_module(module: str, query: str) -> dict:
    """The proxy's answer for module@query; raises CheckError with its one line when it refuses."""
    try:
        return helmbuild.module_info(module, query)
    except helmbuild.BuildError as exc:
        raise CheckError(str(exc)) from None


def run_helm(helm: Path, args: list[str], home: Path) -> subprocess.CompletedProcess:
    env = dict(
        os.environ,
        HELM_CACHE_HOME=str(home / "cache"),
        HELM_CONFIG_HOME=str(home / "config"),
        HELM_DATA_HOME=str(home / "data"),
    )
    return subprocess.run([str(helm), *args], env=env, capture_output=True, text=True, timeout=300, check=False)


@dataclass
class ChartResult:
    chart: str
    version: str
    source: str
    result: str = "OK"  # OK, FAIL, UNAVAILABLE
    unknown: list[str] = field(default_factory=list)
    details: list[str] = field(default_factory=list)
    note: str = ""
    dead: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)

    def line(self) -> str:
        unknown = ", ".join(self.unknown) if self.unknown else "none"
        note = f" ({self.note})" if self.note else ""
        dead = f"; dead in the pin: {', '.join(self.dead)}" if self.dead else ""
        dropped = f"; {', '.join(self.dropped)}" if self.dropped else ""
        return (
            f"{self.chart}: version {self.version}, source {self.source}{note}, result {self.result}, "
            f"unknown paths: {unknown}{dead}{dropped}"
        )


CHART_MTIME = 1700000000  # every file of a packaged chart gets this mtime: `helm package` records them


def package_chart(chart: str, out_dir: Path, work: Path) -> Path:
    """The released archive of one of SOURCES (chart name) at its pinned version, as `helm package` makes it from
    the module's sources (assembled first where the release assembles it), for K3s's static charts; every file's
    mtime made CHART_MTIME so the same sources give the same bytes. Writes <archive>.sha256 next to it."""
    (source,) = [s for s in SOURCES if s.chart == chart]
    version = read_pin(source.version_var)
    info = fetch_module(source.module, version)
    chart_dir = work / f"{chart}-{version}" / chart
    shutil.rmtree(chart_dir.parent, ignore_errors=True)
    if source.assemble == "cert-manager":
        assemble_cert_manager(Path(info["Dir"]), info["Version"], chart_dir)
    else:
        copy_chart(Path(info["Dir"]), source.subdir, chart_dir)
    for path in [chart_dir, *chart_dir.rglob("*")]:
        os.utime(path, (CHART_MTIME, CHART_MTIME), follow_symlinks=False)
    out_dir.mkdir(parents=True, exist_ok=True)
    proc = run_helm(helmbuild.build(), ["package", str(chart_dir), "--destination", str(out_dir)], work / "helm-home")
    if proc.returncode != 0:
        raise CheckError(f"helm package {chart} failed (exit {proc.returncode}):\n{tail(proc.stderr or proc.stdout)}")
    chart_version = yaml.safe_load((chart_dir / "Chart.yaml").read_text())["version"]
    archive = out_dir / f"{chart}-{chart_version}.tgz"
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    (out_dir / (archive.name + ".sha256")).write_text(digest + "\n")
    return archive


def check_chart_dir(
    chart_dir: Path, values_text: str, release: str, namespace: str, kube: str, helm: Path, work: Path
) -> tuple[list[str], list[str], list[str], list[str]]:
    """(unknown paths, helm failures, helm lint warnings, dropped tolerations) of our values against one chart
    directory."""
    ours = yaml.safe_load(values_text) or {}
    tree, opened = chart_known(chart_dir)
    unknown = unknown_value_paths(ours, tree, opened)
    dropped = dropped_tolerations(ours, tree)
    values_file = work / f"{release}-values.yaml"
    values_file.write_text(values_text)  # exactly the valuesContent the HelmChart carries
    failures, warnings = [], []
    common = ["--namespace", namespace, "-f", str(values_file), "--kube-version", kube]
    steps = (
        ("helm template", ["template", release, str(chart_dir), *common]),
        ("helm lint", ["lint", str(chart_dir), *common]),
    )
    for name, args in steps:
        proc = run_helm(helm, args, work / "helm-home")
        if proc.returncode != 0:
            failures.append(f"{name} failed (exit {proc.returncode}):\n{tail(proc.stderr or proc.stdout)}")
        warnings += [
            f"{name}: {line.strip()} (a warning, not a failure)"
            for line in proc.stdout.splitlines()
            if line.strip().startswith("[WARNING]")
        ]
    return unknown, failures, warnings, dropped


def check_source(
    source: ChartSource, rendered: dict, kube: str, helm: Path, work: Path, every: dict | None = None
) -> list[ChartResult]:
    """The chart's results: the pin (UNAVAILABLE when the proxy does not serve it), then the values of the
    inventory and, when `every` (the every-option render's HelmChart) differs, those of every option."""
    version = rendered["version"]
    pinned = read_pin(source.version_var)
    note = "" if version == pinned else f"the inventory overrides {source.version_var}={pinned}"
    refusals = []
    info = None
    for module, query in candidate_queries(source.module, version):
        try:
            info = fetch_module(module, query)
            break
        except CheckError as exc:
            refusals.append(str(exc))
    results = []
    if info is None:
        result = ChartResult(source.chart, version, source.module, "UNAVAILABLE", note=note)
        result.details = [f"no proxy query resolves {version}:", *refusals]
        results.append(result)
        try:  # the newest commit the proxy serves: evidence about the chart, never a pass for the pin
            info = fetch_module(source.module, "latest")
        except CheckError as exc:
            result.details.append(f"nor does @latest: {exc}")
            return results
        label = f"{source.chart} (NOT the pinned {version}: the proxy's @latest)"
    else:
        label = source.chart
    module_dir = Path(info["Dir"])
    chart_dir = work / f"{source.chart}-{info['Version']}"
    if source.assemble == "cert-manager":
        assemble_cert_manager(module_dir, info["Version"], chart_dir)
    else:
        copy_chart(module_dir, source.subdir, chart_dir)
    chart_version = (yaml.safe_load((chart_dir / "Chart.yaml").read_text()) or {}).get("version", "?")
    variants = [("", rendered)]
    if every and every.get("valuesContent") != rendered["valuesContent"]:
        variants.append((" [every option]", every))
    for mark, values in variants:
        unknown, failures, warnings, dropped = check_chart_dir(
            chart_dir, values["valuesContent"], values["name"], values["namespace"], kube, helm, work
        )
        ours = yaml.safe_load(values["valuesContent"]) or {}
        dead = dead_value_paths(ours, DEAD_VALUE_PATHS.get(source.chart, ()), version)
        checked = ChartResult(
            label + mark,
            version if label == source.chart else f"{chart_version} (chart)",
            f"{info['Path']}@{info['Version']} {source.subdir}",
            "FAIL" if unknown or failures or dead or dropped else "OK",
            unknown,
            failures + warnings,
            note if label == source.chart else "",
            dead,
            dropped,
        )
        if mark:
            checked.details.insert(
                0, "every option: " + ", ".join(f"{k}={json.dumps(v)}" for k, v in EVERY_OPTION[source.chart].items())
            )
        results.append(checked)
    return results


def check(inventory: str, allow_unavailable: bool = False) -> int:
    """0 when every chart in a Go module takes our values; a pinned chart the proxy does not serve counts as a
    problem unless allow_unavailable (then the newest served snapshot must pass in its place, and the line
    still says UNAVAILABLE)."""
    rendered = render_helm_charts(inventory)
    every_vars = every_option_vars({s.chart for s in SOURCES})
    try:
        every = render_helm_charts(inventory, every_vars) if every_vars else {}
    except CheckError as exc:
        raise CheckError(f"the render with every option on ({', '.join(every_vars)}) failed: {exc}") from None
    kube = kubernetes_version(read_pin("k3s_version"))
    helm = helmbuild.build()
    print(f"[charts] helm {helm}; --kube-version {kube} (K3s pin); inventory {inventory}", flush=True)
    problems = 0
    known = {s.chart for s in SOURCES}
    with tempfile.TemporaryDirectory() as tmp:
        for source in SOURCES:
            if source.chart not in rendered:
                print(f"{source.chart}: not rendered by this inventory, result SKIPPED")
                continue
            extra = every.get(source.chart) if source.chart in EVERY_OPTION else None
            for result in check_source(source, rendered[source.chart], kube, helm, Path(tmp), extra):
                print(result.line())
                for detail in result.details:
                    print("    " + detail.replace("\n", "\n    "))
                problems += result.result == "FAIL" or (result.result == "UNAVAILABLE" and not allow_unavailable)
    for chart, spec in sorted(rendered.items()):
        if chart not in known:
            print(f"{chart}: version {spec['version']}, source {spec['repo']}, {NOT_IN_GO_MODULE}")
    return 1 if problems else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("cmd", choices=("check",))
    parser.add_argument("--inventory", default="inventories/example")
    parser.add_argument(
        "--allow-unavailable",
        action="store_true",
        help="a pinned chart the proxy does not serve is checked at the newest served snapshot instead",
    )
    args = parser.parse_args(argv)
    try:
        return check(args.inventory, args.allow_unavailable)
    except (CheckError, PinError, helmbuild.BuildError) as exc:
        print(f"[charts] ERROR: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
