"""Write a K3s-shaped airgap bundle for tests: NOT K3s, but real files with a real checksum file.

    python tests/unit/make_test_airgap.py DIR [--arch amd64] [--tamper binary|images|sums] [--drop NAME]
                                       [--chart NAME:VERSION ...]

The "binary" is a shell script that says it is a test artifact and exits 1, so a test that forgot
k3s_start=false fails loudly instead of pretending a cluster runs. --tamper changes a file after the
checksum file is written (or corrupts the checksum file); --drop removes one file. --chart writes a
Helm-shaped chart archive NAME-VERSION.tgz (a real gzip tar with NAME/Chart.yaml, no templates) and its
sha256 in NAME-VERSION.tgz.sha256, as the airgap GPU Operator chart is expected. --model writes a small
model directory models/PATH (config.json, tokenizer.json, model.safetensors: test bytes, not weights) with its
SHA256SUMS, as model_registry seeds it.
"""

import argparse
import hashlib
import io
import sys
import tarfile
from pathlib import Path

FAKE_BINARY = """#!/bin/sh
# aiinfra.k3s test artifact: this is not K3s.
echo "test artifact, not K3s: refusing '$*'" >&2
exit 1
"""


def make_bundle(directory, arch="amd64", tamper=None, drop=None):
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    binary = directory / ("k3s" if arch == "amd64" else f"k3s-{arch}")
    images = directory / f"k3s-airgap-images-{arch}.tar.zst"
    sums = directory / f"sha256sum-{arch}.txt"
    binary.write_text(FAKE_BINARY)
    binary.chmod(0o755)
    images.write_bytes(b"aiinfra.k3s test image tarball for " + arch.encode() + b"\n")
    lines = [f"{hashlib.sha256(p.read_bytes()).hexdigest()}  {p.name}" for p in (binary, images)]
    sums.write_text("\n".join(lines) + "\n")
    if tamper == "binary":
        binary.write_text(FAKE_BINARY + "# tampered\n")
    elif tamper == "images":
        images.write_bytes(images.read_bytes() + b"tampered")
    elif tamper == "sums":
        sums.write_text("not a checksum line\n")
    if drop:
        (directory / drop).unlink()
    return {"binary": binary, "images": images, "sums": sums}


def make_chart(directory, name, version):
    """A chart archive with only Chart.yaml (reproducible: fixed mtime), and its .sha256 file."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    archive = directory / f"{name}-{version}.tgz"
    chart = f"apiVersion: v2\nname: {name}\nversion: {version}\ndescription: aiinfra.k3s test artifact\n"
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", format=tarfile.PAX_FORMAT) as tar:
        info = tarfile.TarInfo(f"{name}/Chart.yaml")
        info.size, info.mtime, info.mode = len(chart), 0, 0o644
        tar.addfile(info, io.BytesIO(chart.encode()))
    archive.write_bytes(buf.getvalue())
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    (directory / f"{archive.name}.sha256").write_text(digest + "\n")
    return archive


def make_model(directory, path, tamper=False):
    """A model-shaped directory with a SHA256SUMS file (sha256sum format); tamper alters a file afterwards."""
    model = Path(directory) / "models" / path
    model.mkdir(parents=True, exist_ok=True)
    files = {
        "config.json": '{"architectures": ["aiinfra.k3s test artifact, not a model"]}\n',
        "tokenizer.json": '{"version": "test"}\n',
        "model.safetensors": "".join(f"{i:08x}" for i in range(4096)),
    }
    for name, content in files.items():
        (model / name).write_text(content)
    sums = [f"{hashlib.sha256((model / n).read_bytes()).hexdigest()}  {n}" for n in sorted(files)]
    (model / "SHA256SUMS").write_text("\n".join(sums) + "\n")
    if tamper:
        (model / "model.safetensors").write_text("tampered")
    return model


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("directory")
    parser.add_argument("--arch", default="amd64", choices=["amd64", "arm64"])
    parser.add_argument("--tamper", choices=["binary", "images", "sums"])
    parser.add_argument("--drop")
    parser.add_argument("--chart", action="append", default=[], metavar="NAME:VERSION")
    parser.add_argument("--model", action="append", default=[], metavar="PATH")
    args = parser.parse_args(argv)
    made = list(make_bundle(args.directory, args.arch, args.tamper, args.drop).values())
    for spec in args.chart:
        name, _sep, version = spec.partition(":")
        if not name or not version:
            parser.error("--chart takes NAME:VERSION, e.g. gpu-operator:v25.10.1")
        made.append(make_chart(args.directory, name, version))
    made.extend(make_model(args.directory, path) for path in args.model)
    print(" ".join(str(p) for p in made))
    return 0


if __name__ == "__main__":
    sys.exit(main())
