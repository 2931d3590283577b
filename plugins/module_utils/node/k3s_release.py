# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""K3s release artifacts: names per architecture, checksum files, and their verification.

A K3s release publishes, per architecture, the binary (``k3s`` for amd64, ``k3s-arm64`` for arm64),
an image tarball (``k3s-airgap-images-<arch>.tar.zst``, ``.tar.gz`` or ``.tar``) and a checksum file
``sha256sum-<arch>.txt`` listing both. Verification reads the checksum file and hashes each file; nothing
is trusted that the checksum file does not list with a matching digest.

The checksum file of an online install comes from the same place as the binary, so it proves nothing about a
replaced release: RELEASE_SHA256 ships the sha256 of the pinned release's files, and every pin (shipped, or the
operator's ``k3s_sha256_pins``) must be listed by the checksum file with the same digest.
"""

import os
import re

from ansible_collections.aiinfra.k3s.plugins.module_utils.node import verified_files

ARCHES = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}
VERSION_RE = re.compile(r"^v1\.(\d+)\.(\d+)\+k3s(\d+)$")
IMAGE_SUFFIXES = (".tar.zst", ".tar.gz", ".tar")
SHA256_RE = re.compile(r"^[0-9a-f]{64}$")

# sha256 of the files of the K3s releases the collection pins (roles/k3s/defaults k3s_version), as the release's
# sha256sum-<arch>.txt lists them; used for online installs (an airgap bundle is checked against the operator's
# k3s_sha256_pins). Refresh with each k3s_version bump, from the release page, and cite the source here.
# v1.36.4+k3s1, amd64: the release's sha256sum-amd64.txt as quoted in EduardWitteveen/dawo-appliance
# docs/upstream/pins-vm-k3s.md (commit 30fcf0ef, checked there 2026-09-25); the k3s and .tar.zst values agree with
# several other public pins of this release. arm64: no source that could be named was found, so an arm64 node needs
# k3s_sha256_pins (or k3s_allow_unpinned).
RELEASE_SHA256 = {
    "v1.36.4+k3s1": {
        "k3s": "835873f37245fc615f547a2fe2af9402a347875f13fa64a1f136de644955ea3f",
        "k3s-airgap-images-amd64.tar.zst": "9024613e2d468c51ba0e5ba21898604c41339354449fb3338cc6a7931189eb6a",
        "k3s-airgap-images-amd64.tar.gz": "a5a6c970a992ce6ed5801b5fd090aa7edde354a786eb0e7d75b162d0b22901dd",
        "k3s-airgap-images-amd64.tar": "f94b5be3d3403ee6aa9b374d0eb9c91abce4347b7fe6422c317f93ada6da08a0",
    },
}


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


def artifact_arch(name):
    """The architecture whose release file `name` is (binary, image tarball or checksum file); None for no file of a
    K3s release."""
    for arch in sorted(set(ARCHES.values())):
        if name == binary_name(arch) or name == checksum_name(arch) or name in image_names(arch):
            return arch
    return None


def release_pins(version, operator_pins=None, shipped=True):
    """The pins that apply: the shipped table's for `version` (when `shipped`), then the operator's, lower-cased."""
    pins = dict(RELEASE_SHA256.get(version, {})) if shipped else {}
    pins.update({str(k): str(v).strip().lower() for k, v in (operator_pins or {}).items()})
    return pins


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


# One way to hash a file for the collection's node code (module_utils node/verified_files).
sha256_file = verified_files.sha256_file


def verify_file(directory, name, sums, record=None):
    """Path and digest of `name` in `directory` after checking it against `sums`.

    `record` ({path: entry} of module_utils node/verified_files, updated in place): a file whose stat still equals its
    entry for the listed sha256 was hashed by an earlier run and is not read again; a file hashed here is entered."""
    path = os.path.join(directory, name)
    if name not in sums:
        raise ArtifactError("%s is not listed in the checksum file; refusing an unverifiable artifact" % name)
    if not os.path.isfile(path):
        raise ArtifactError("%s is missing from %s" % (name, directory))
    if record is not None:
        before = os.stat(path)
        if verified_files.proven(record.get(path), {"sha256": sums[name]}, before):
            return {"path": path, "sha256": sums[name], "size": before.st_size}
        record.pop(path, None)
    actual = sha256_file(path)
    if actual != sums[name]:
        raise ArtifactError(
            "%s does not match its checksum (expected %s, got %s): the file is corrupt or was tampered with;"
            " replace it with the release asset" % (path, sums[name], actual)
        )
    after = os.stat(path)
    if record is not None and verified_files.stat_entry(after) == verified_files.stat_entry(before):
        record[path] = dict(verified_files.stat_entry(after), sha256=actual)
    return {"path": path, "sha256": actual, "size": after.st_size}


def verify_release(directory, arches, require_images=False, pins=None, record=None):
    """Verify the binary (and image tarball) of each architecture in `directory`.

    Returns {arch: {binary: {...}, images: {...} or None, checksum_file: path, pinned: [names]}}.
    `pins` maps release file names to sha256 values (shipped or the operator's): each must name a file of a K3s
    release, and the checksum file of its architecture must list it with the same digest (a pinned checksum file is
    hashed itself). A pin the checksum file does not list is an error, never skipped. Pins of an architecture not
    verified here apply when a node of it is installed. `record`: see verify_file (the checksum files are always read).
    """
    if not os.path.isdir(directory):
        raise ArtifactError("artifact directory %s does not exist" % directory)
    pins = {str(k): str(v).strip().lower() for k, v in (pins or {}).items()}
    for name, digest in sorted(pins.items()):
        if artifact_arch(name) is None:
            raise ArtifactError(
                "the pin %r names no file of a K3s release (k3s, k3s-arm64, k3s-airgap-images-<arch>.tar.zst, .tar.gz"
                " or .tar, sha256sum-<arch>.txt): correct its name in k3s_sha256_pins" % name
            )
        if not SHA256_RE.match(digest):
            raise ArtifactError("the pin of %s is %r, not a sha256 (64 hex digits)" % (name, digest))
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
        pinned = sorted(name for name in pins if artifact_arch(name) == arch)
        for name in pinned:
            digest = pins[name]
            if name == checksum_name(arch):
                actual = sha256_file(sums_path)
                if actual != digest:
                    raise ArtifactError(
                        "%s: the pinned sha256 %s differs from the file's %s: it is not the release's checksum file"
                        % (sums_path, digest, actual)
                    )
            elif name not in sums:
                raise ArtifactError(
                    "%s is pinned (sha256 %s) but %s does not list it: the checksum file is not the release's, or the"
                    " pin names another file" % (name, digest, checksum_name(arch))
                )
            elif sums[name] != digest:
                raise ArtifactError(
                    "%s: the pinned sha256 %s differs from the checksum file's %s" % (name, digest, sums[name])
                )
        entry = {
            "checksum_file": sums_path,
            "binary": verify_file(directory, binary_name(arch), sums, record),
            "images": None,
            "pinned": pinned,
        }
        present = [n for n in image_names(arch) if os.path.isfile(os.path.join(directory, n))]
        if present:
            entry["images"] = verify_file(directory, present[0], sums, record)
            entry["images"]["name"] = present[0]
        elif require_images:
            raise ArtifactError(
                "no image tarball (%s) for %s in %s: airgap nodes cannot pull the K3s system images"
                % (" or ".join(image_names(arch)), arch, directory)
            )
        result[arch] = entry
    return result


# The options of aiinfra.k3s.k3s_release_info (its module and its controller-side action share them).
RELEASE_INFO_SPEC = dict(
    path=dict(type="path", required=True),
    architectures=dict(type="list", elements="str", default=["amd64"]),
    require_images=dict(type="bool", default=False),
    pins=dict(type="dict", default={}),
    record=dict(type="path"),
)


def release_info(params, check_mode=False):
    """(artifacts, warning or None) of k3s_release_info's options: the release verified, the record of hashed files
    read and, unless check_mode, written back when it changed (a record that cannot be written is a warning: the
    files are hashed again next run). ArtifactError or OSError when the release cannot be used."""
    record = verified_files.load_record(params["record"]) if params["record"] else None
    kept = dict(record or {})
    arches = sorted(set(k3s_arch(a) for a in params["architectures"]))
    artifacts = verify_release(params["path"], arches, params["require_images"], params["pins"], record)
    warning = None
    if record is not None and record != kept and not check_mode:
        try:
            verified_files.write_record(params["record"], record)
        except OSError as exc:
            warning = "the record %s could not be written (%s): the artifacts are hashed again next run" % (
                params["record"], exc)  # fmt: skip
    return artifacts, warning
