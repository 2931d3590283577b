"""The size of the house and the time of one render: lines of YAML and Python by part, and the wall time of
playbooks/render.yml on inventories/example, for the working tree and for any git revision (issue 24's
before/after, one run).

    python benchmarks/house.py [--rev 5c3ffdb] [--repeat 3]

A revision is exported with `git archive` into a temporary collection tree (ansible_collections/aiinfra/k3s) and
rendered from there with this venv's ansible-playbook, so both sides run on the same machine in the same run.
Lines are non-blank lines; tests/golden (rendered files) and changelogs are not counted. The render is the best
of --repeat runs without secrets (render.yml's default). The lab's converge (tasks per run, no-op re-run) is
benchmarks/lab_converge.py's.
"""

import argparse
import subprocess
import tarfile
import tempfile
from pathlib import Path

import render_manifests  # benchmarks/, beside this script

ROOT = Path(__file__).resolve().parent.parent
PARTS = (
    ("roles (YAML)", "roles", (".yml", ".yaml", ".j2")),
    ("playbooks (YAML)", "playbooks", (".yml", ".yaml")),
    ("plugins (Python)", "plugins", (".py",)),
    ("lab (Python)", "lab", (".py",)),
    ("tests (Python)", "tests", (".py",)),
    ("tests (YAML data)", "tests", (".yml", ".yaml")),
)
SKIP = ("tests/golden/",)


def export(rev, into):
    """The tree of `rev` under into/ansible_collections/aiinfra/k3s."""
    tree = into / "ansible_collections" / "aiinfra" / "k3s"
    tree.mkdir(parents=True)
    archive = into / "tree.tar"
    subprocess.run(["git", "archive", "-o", str(archive), rev], cwd=ROOT, check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(tree, filter="data")
    return tree


def files_of(tree):
    """The files git tracks (an exported revision holds nothing else; a working tree also holds ignored caches)."""
    if tree == ROOT:
        listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
        return [ROOT / name for name in listed.splitlines() if (ROOT / name).is_file()]
    return [p for p in tree.rglob("*") if p.is_file()]


def lines(tree):
    out = {}
    every = files_of(tree)
    for label, top, suffixes in PARTS:
        total = files = 0
        for path in every:
            rel = path.relative_to(tree).as_posix()
            if rel.startswith(top + "/") and path.suffix in suffixes and not rel.startswith(SKIP):
                total += sum(1 for line in path.read_text(errors="replace").splitlines() if line.strip())
                files += 1
        out[label] = (total, files)
    module_utils = [p for p in every if p.relative_to(tree).as_posix().startswith("plugins/module_utils/")]
    out["module_utils files"] = (sum(1 for p in module_utils if p.suffix == ".py"), 0)
    out["tasks in roles"] = (tasks(tree), 0)
    return out


def tasks(tree):
    """Task entries in the roles' task and handler files (a block counts as its tasks)."""
    import yaml

    def count(items):
        n = 0
        for item in items if isinstance(items, list) else []:
            if isinstance(item, dict) and "block" in item:
                n += sum(count(item.get(k)) for k in ("block", "rescue", "always"))
            elif isinstance(item, dict):
                n += 1
        return n

    return sum(
        count(yaml.safe_load(p.read_text()))
        for p in (tree / "roles").glob("*/*/*.yml")
        if p.parent.name in ("tasks", "handlers")
    )


def measure(rev, repeat):
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        if rev:
            tree, collections = export(rev, tmp / "c"), tmp / "c"
        else:
            tree, collections = ROOT, ROOT / ".cache" / "collections"
        counted = lines(tree)
        times = [
            render_manifests.run(tree / "inventories" / "example", tmp / f"out{r}", tree, collections)
            for r in range(repeat)
        ]
    return counted, times


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rev", action="append", default=[], help="git revision to compare (repeatable)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    names = [*args.rev, "working tree"]
    results = [measure(rev, args.repeat) for rev in args.rev] + [measure(None, args.repeat)]
    print(f"{'':<22}" + "".join(f"{name:>16}" for name in names))
    for label in results[0][0]:
        cells = []
        for result in results:
            total, files = result[0][label]
            cells.append(f"{total} ({files})" if files else str(total))
        print(f"{label:<22}" + "".join(f"{c:>16}" for c in cells))
    print(f"{'render.yml example, s':<22}" + "".join(f"{min(result[1]):>16.2f}" for result in results))
    runs = [", ".join(f"{x:.1f}" for x in result[1]) for result in results]
    print(f"{'  runs':<22}" + "".join(f"{r:>16}" for r in runs))


if __name__ == "__main__":
    main()
