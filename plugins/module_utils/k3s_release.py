# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""K3s release artifacts: names per architecture, checksum files, and their verification.

A K3s release publishes, per architecture, the binary (``k3s`` for amd64, ``k3s-arm64`` for arm64),
an image tarball (``k3s-airgap-images-<arch>.tar.zst``, ``.tar.gz`` or ``.tar``) and a checksum file
``sha256sum-<arch>.txt`` listing both. Verification reads the checksum file and hashes each file; nothing
is trusted that the checksum file does not list with a matching digest.
"""

import hashlib
import os
import re

ARCHES = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}
VERSION_RE = re.compile(r"^v1\.(\d+)\.(\d+)\+k3s(\d+)$")
IMAGE_SUFFIXES = (".tar.zst", ".tar.gz", ".tar")
SHA256_RE = re.compile(r"^[0-9a-f]{64}$")


class ArtifactError(Exception):
    """An artifact is missing, unlisted or does not match its checksum."""


def k3s_arch(machine):
    """K3s architecture name for a machine name as facts report it (x86_64 -> amd64)."""
    try:
        return ARCHES[machine]
    except KeyError:
        msg = "unsupported architecture %r: K3s artifacts are handled for amd64 and arm64" % machine
        raise ArtifactError(msg) from None


def is_k3s_version(version):
    return bool(VERSION_RE.match(version or ""))


def binary_name(arch):
    return "k3s" if arch == "amd64" else "k3s-%s" % arch


def checksum_name(arch):
    return "sha256sum-%s.txt" % arch


def image_names(arch):
    return ["k3s-airgap-images-%s%s" % (arch, suffix) for suffix in IMAGE_SUFFIXES]


def release_url(base, version, name):
    """Download URL of one release asset; '+' in the version is escaped as GitHub expects."""
    return "%s/%s/%s" % (base.rstrip("/"), version.replace("+", "%2B"), name)


def parse_sha256sum(text):
    """{file name: sha256} from `sha256sum` output (text or '*binary' mode). Raises on malformed lines."""
    sums = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split(None, 1)
        if len(parts) != 2 or not SHA256_RE.match(parts[0].lower()):
            raise ArtifactError("checksum file line %d is not '<sha256>  <file>': %r" % (number, line))
        name = os.path.basename(parts[1].strip().lstrip("*"))
        sums[name] = parts[0].lower()
    return sums


def sha256_file(path, chunk=1024 * 1024):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(chunk), b""):
            digest.update(block)
    return digest.hexdigest()


def verify_file(directory, name, sums):
    """Path and digest of `name` in `directory` after checking it against `sums`."""
    path = os.path.join(directory, name)
    if name not in sums:
        raise ArtifactError("%s is not listed in the checksum file; refusing an unverifiable artifact" % name)
    if not os.path.isfile(path):
        raise ArtifactError("%s is missing from %s" % (name, directory))
    actual = sha256_file(path)
    if actual != sums[name]:
        raise ArtifactError(
            "%s does not match its checksum (expected %s, got %s): the file is corrupt or was tampered with;"
            " replace it with the release asset" % (path, sums[name], actual)
        )
    return {"path": path, "sha256": actual, "size": os.path.getsize(path)}


def verify_release(directory, arches, require_images=False, pins=None):
    """Verify the binary (and image tarball) of each architecture in `directory`.

    Returns {arch: {binary: {...}, images: {...} or None, checksum_file: path}}.
    `pins` optionally maps artifact names to sha256 values the operator pinned in the inventory;
    they must agree with the checksum file.
    """
    if not os.path.isdir(directory):
        raise ArtifactError("artifact directory %s does not exist" % directory)
    result = {}
    for arch in arches:
        sums_path = os.path.join(directory, checksum_name(arch))
        if not os.path.isfile(sums_path):
            raise ArtifactError(
                "%s is missing from %s: it is needed to verify the %s artifacts"
                % (checksum_name(arch), directory, arch)
            )
        with open(sums_path) as handle:
            sums = parse_sha256sum(handle.read())
        for name, digest in (pins or {}).items():
            if name in sums and sums[name] != digest.lower():
                raise ArtifactError(
                    "%s: the pinned sha256 %s differs from the checksum file's %s" % (name, digest, sums[name])
                )
        entry = {"checksum_file": sums_path, "binary": verify_file(directory, binary_name(arch), sums), "images": None}
        present = [n for n in image_names(arch) if os.path.isfile(os.path.join(directory, n))]
        if present:
            entry["images"] = verify_file(directory, present[0], sums)
            entry["images"]["name"] = present[0]
        elif require_images:
            raise ArtifactError(
                "no image tarball (%s) for %s in %s: airgap nodes cannot pull the K3s system images"
                % (" or ".join(image_names(arch)), arch, directory)
            )
        result[arch] = entry
    return result
