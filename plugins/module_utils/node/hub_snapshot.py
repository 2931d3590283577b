# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One Hugging Face Hub model repository at a pinned commit, downloaded into a cache directory with the real
``huggingface_hub`` client, verified once and described by ``SHA256SUMS`` and a manifest.

The client (2.4) checks only the size of what it downloads; here every file is checked against the Hub's tree
listing of that commit: an LFS file by its sha256, any other file by its git blob id (sha1 of ``blob <size>\\0`` and
the content). The manifest ``.aiinfra-snapshot.json`` records size, sha256 and mtime of each verified file; a later
run with ``verify=fast`` whose manifest still matches the disk (same repository, commit, patterns, sizes and mtimes)
neither hashes nor contacts anything.

Problems are dicts ``{code, severity, host, variable, problem, fix}`` (the house shape, see
plan/inventory_spec.py), mapped from the client's exception classes, never from their text.
"""

import contextlib
import hashlib
import json
import os
import re
import socket
import tempfile
import time
import traceback

try:
    import httpx2
    from huggingface_hub import HfApi, constants, set_client_factory, snapshot_download
    from huggingface_hub.errors import (
        DisabledRepoError,
        EntryNotFoundError,
        GatedRepoError,
        HfHubHTTPError,
        LocalEntryNotFoundError,
        OfflineModeIsEnabled,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )
    from huggingface_hub.hf_api import RepoFile
    from huggingface_hub.utils import disable_progress_bars, filter_repo_objects

    HUB_IMPORT_ERROR = None
except ImportError:
    HUB_IMPORT_ERROR = traceback.format_exc()

MANIFEST = ".aiinfra-snapshot.json"
SUMS = "SHA256SUMS"
CLIENT_DIR = ".cache"  # the client's metadata in a local_dir (.cache/huggingface/): never listed nor distributed
PUBLIC_HUB = "https://huggingface.co"
FORMAT = 1
CHUNK = 4 * 1024 * 1024

# The Hub's rule for a repository id (huggingface_hub.utils.validate_repo_id): namespace/name, letters, digits, - _ .
REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")
COMMIT = re.compile(r"^[0-9a-f]{40}$")

# Problem codes.
BAD_PARAMETER = "HUB_PARAMETER"
REPO_NOT_FOUND = "HUB_REPO_NOT_FOUND"
REVISION_NOT_FOUND = "HUB_REVISION_NOT_FOUND"
REVISION_NOT_PINNED = "HUB_REVISION_NOT_PINNED"
GATED = "HUB_GATED"
ACCESS_DENIED = "HUB_ACCESS_DENIED"
UNREACHABLE = "HUB_UNREACHABLE"
HTTP_ERROR = "HUB_HTTP_ERROR"
CHECKSUM_MISMATCH = "HUB_CHECKSUM_MISMATCH"
NO_FILES = "HUB_NO_FILES"
LOCAL_ERROR = "HUB_LOCAL_ERROR"
CLIENT_ERROR = "HUB_CLIENT_ERROR"
NO_ROOM = "NO_ROOM"  # the code model_weights gives the same refusal

LISTING = "listing the files"


def problem(code, variable, what, fix, host=None, severity="error"):
    return {
        "code": code,
        "severity": severity,
        "host": host or socket.gethostname(),
        "variable": variable,
        "message": what,
        "problem": what,  # the same text, for the problem_line filter
        "fix": fix,
    }


def parameter_problems(p):
    """Problems of the parameters that need no server: repo_id, endpoint, dest, timeout (the revision's form is
    checked by run(), which resolves a branch or tag to tell the operator its commit)."""
    out = []
    repo_id = p.get("repo_id") or ""
    if not REPO_ID.match(repo_id) or ".." in repo_id or "--" in repo_id or repo_id.endswith(".git"):
        out.append(
            problem(
                BAD_PARAMETER,
                "repo_id",
                "repo_id %r is not a Hub repository id <namespace>/<name>" % repo_id,
                "letters, digits, '-', '_' and '.', at most 96 each side, no '--' or '..', as in "
                "meta-llama/Llama-3.1-8B-Instruct",
            )
        )
    endpoint = p.get("endpoint") or ""
    if endpoint and not re.match(r"^https?://[^/\s?#]+(/[^\s?#]*)?$", endpoint):
        out.append(
            problem(
                BAD_PARAMETER,
                "endpoint",
                "endpoint %r is not an http(s) URL" % endpoint,
                "the Hub or its mirror as HF_ENDPOINT names it, e.g. https://huggingface.co",
            )
        )
    dest = p.get("dest") or ""
    if not os.path.isabs(dest) or ".." in dest.split(os.sep):
        out.append(
            problem(
                BAD_PARAMETER,
                "dest",
                "dest %r is not an absolute path without '..'" % dest,
                "a directory of its own for this repo@revision, e.g. /var/cache/aiinfra/hub/<org>/<name>/<sha>",
            )
        )
    if not p.get("timeout") or p["timeout"] <= 0:
        out.append(problem(BAD_PARAMETER, "timeout", "timeout must be a positive number of seconds", "e.g. 30"))
    return out


def where(p):
    return "%s@%s from %s" % (p["repo_id"], p["revision"], p.get("endpoint") or PUBLIC_HUB)


def repo_not_found(p, stage):
    return problem(
        REPO_NOT_FOUND,
        "repo_id",
        "%s: repository not found (or private and the token has no access) (%s)" % (where(p), stage),
        "check repo_id and endpoint; for a private repository set token",
    )


def exception_problem(exc, p, stage):
    """The problem a huggingface_hub / httpx2 exception stands for, by its class (and those it was raised from)."""
    at = where(p)
    chain = []
    seen = exc
    while seen is not None and seen not in chain:
        chain.append(seen)
        seen = seen.__cause__ or seen.__context__
    for e in chain:
        if isinstance(e, GatedRepoError):
            if p.get("token"):
                return problem(
                    GATED,
                    "token",
                    "%s: gated repository, the token was refused (%s)" % (at, stage),
                    "ask for access to the model on the Hub with the token's account, or use a token that has it",
                )
            return problem(
                GATED,
                "token",
                "%s: gated repository and no token given (%s)" % (at, stage),
                "set token (from the vault) to a Hub token whose account was granted access to the model",
            )
        if isinstance(e, RevisionNotFoundError) or (isinstance(e, EntryNotFoundError) and stage == LISTING):
            return problem(
                REVISION_NOT_FOUND,
                "revision",
                "%s: the repository has no commit %s (%s)" % (at, p["revision"], stage),
                "pin a commit of the repository (its history on the Hub, or list_repo_commits)",
            )
        if isinstance(e, (RepositoryNotFoundError, DisabledRepoError)):
            return repo_not_found(p, stage)
        if isinstance(e, (httpx2.TransportError, OfflineModeIsEnabled)):
            return problem(
                UNREACHABLE,
                "endpoint",
                "%s: the endpoint cannot be reached (%s: %s, %s)" % (at, type(e).__name__, e, stage),
                "check the endpoint URL, the network and proxy settings of this host, and that HF_HUB_OFFLINE is "
                "not set",
            )
        if isinstance(e, HfHubHTTPError):
            status = getattr(getattr(e, "response", None), "status_code", None)
            if status in (401, 403):
                return problem(
                    ACCESS_DENIED,
                    "token",
                    "%s: HTTP %s, access refused (%s)" % (at, status, stage),
                    "set token to a valid Hub token with read access",
                )
            return problem(
                HTTP_ERROR,
                "endpoint",
                "%s: HTTP %s from the endpoint (%s)" % (at, status, stage),
                "retry later; if it persists check the endpoint (mirror) logs",
            )
    if isinstance(exc, LocalEntryNotFoundError):
        return problem(
            UNREACHABLE,
            "endpoint",
            "%s: the files could not be listed nor found locally (%s)" % (at, stage),
            "check the endpoint URL and the network of this host",
        )
    if isinstance(exc, OSError):
        return problem(
            LOCAL_ERROR,
            "dest",
            "%s: %s: %s (%s)" % (at, type(exc).__name__, exc, stage),
            "check dest (free space, permissions)",
        )
    return problem(
        CLIENT_ERROR,
        "repo_id",
        "%s: huggingface_hub raised %s: %s (%s)" % (at, type(exc).__name__, exc, stage),
        "see the message; report it if it is not about the repository or the endpoint",
    )


def configure_client(timeout):
    """Bound every request of the client by `timeout`: its shared httpx2 client has none, several calls pass
    timeout=None explicitly (the tree listing's pagination), and the downloads read HF_HUB_DOWNLOAD_TIMEOUT from
    its constants module at call time."""
    from huggingface_hub.utils._http import hf_request_event_hook

    disable_progress_bars()
    constants.HF_HUB_DOWNLOAD_TIMEOUT = timeout
    constants.HF_HUB_ETAG_TIMEOUT = timeout
    bound = httpx2.Timeout(timeout)

    class BoundedClient(httpx2.Client):
        def build_request(self, method, url, **kwargs):
            if kwargs.get("timeout") is None:
                kwargs["timeout"] = bound
            return super().build_request(method, url, **kwargs)

    def factory():  # huggingface_hub's default_client_factory, with the bound
        return BoundedClient(event_hooks={"request": [hf_request_event_hook]}, follow_redirects=True, timeout=bound)

    set_client_factory(factory)


def file_hashes(path):
    """(size, sha256, git blob sha1) of a file, read once."""
    size = os.path.getsize(path)
    sha256 = hashlib.sha256()
    sha1 = hashlib.sha1(b"blob %d\0" % size)
    read = 0
    with open(path, "rb") as f:
        while True:
            chunk = f.read(CHUNK)
            if not chunk:
                break
            read += len(chunk)
            sha256.update(chunk)
            sha1.update(chunk)
    if read != size:  # changed while read: the git id would be wrong, report it as such
        size = read
    return size, sha256.hexdigest(), sha1.hexdigest()


def listed(tree):
    """{path: {size, sha256 (LFS) or None, blob_id}} of the files of a tree listing."""
    out = {}
    for f in tree:
        if isinstance(f, RepoFile):
            lfs = f.lfs
            out[f.path] = {
                "size": (lfs.size if lfs is not None else f.size),
                "sha256": lfs.sha256 if lfs is not None else None,
                "blob_id": None if lfs is not None else f.blob_id,
            }
    return out


def matches(expected, size, sha256, git_sha1):
    """Whether a file's (size, sha256, git sha1) is the listed one."""
    if size != expected["size"]:
        return False
    if expected.get("sha256"):
        return sha256 == expected["sha256"]
    if expected.get("blob_id"):
        return git_sha1 == expected["blob_id"]
    return False  # nothing to check it against: never trusted


def recorded_match(entry, expected, key):
    """Whether the manifest's entry of a file vouches for it: same size and mtime on disk, verified as the listed
    LFS sha256 or git blob id."""
    if entry.get("size") != key[0] or entry.get("mtime_ns") != key[1] or entry.get("size") != expected["size"]:
        return False
    if expected["sha256"]:
        return entry.get("sha256") == expected["sha256"]
    return bool(expected["blob_id"]) and entry.get("blob_id") == expected["blob_id"]


def stat_key(path):
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return (st.st_size, st.st_mtime_ns, st.st_ino)


def read_manifest(dest):
    try:
        with open(os.path.join(dest, MANIFEST)) as f:
            data = json.load(f)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("format") == FORMAT else None


def sums_text(files):
    """SHA256SUMS (sha256sum format) of {path: {sha256, ...}}, sorted by path."""
    return "".join("%s  %s\n" % (files[path]["sha256"], path) for path in sorted(files))


def write_atomic(path, text):
    tmp = "%s.tmp.%d" % (path, os.getpid())
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


def read_text(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def manifest_current(dest, manifest, p):
    """The manifest's files when it describes this repo, commit and patterns and every file on disk still has its
    recorded size and mtime; else None. Reads nothing but stat()s and the manifest."""
    if not manifest or manifest.get("repo_id") != p["repo_id"] or manifest.get("revision") != p["revision"]:
        return None
    if manifest.get("allow_patterns") != p.get("allow_patterns") or manifest.get("ignore_patterns") != p.get(
        "ignore_patterns"
    ):
        return None
    files = manifest.get("files")
    if not isinstance(files, dict) or not files:
        return None
    for path, entry in files.items():
        key = stat_key(os.path.join(dest, path))
        if key is None or key[0] != entry.get("size") or key[1] != entry.get("mtime_ns"):
            return None
    return files


def safe_relpath(path):
    return not (os.path.isabs(path) or ".." in path.split("/") or path.startswith(CLIENT_DIR + "/"))


def remove(dest, path):
    """Remove a file of the snapshot and the client's record of it (so that it is downloaded again)."""
    for target in (
        os.path.join(dest, path),
        os.path.join(dest, CLIENT_DIR, "huggingface", "download", path + ".metadata"),
    ):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(target)


def free_room(path):
    """Bytes an unprivileged user may still write on the file system that holds (or will hold) path: that of its
    nearest existing parent."""
    probe = os.path.abspath(path)
    while not os.path.exists(probe) and os.path.dirname(probe) != probe:
        probe = os.path.dirname(probe)
    st = os.statvfs(probe)
    return st.f_bavail * st.f_frsize


def room_problem(p, dest, wanted, missing):
    """NO_ROOM when the files to download (their listed sizes, less the copies on disk they replace) do not fit in
    the free room of dest's file system; else None."""
    needed = 0
    for path in missing:
        key = stat_key(os.path.join(dest, path))
        needed += wanted[path]["size"] - (key[0] if key else 0)
    available = free_room(dest)
    if needed <= available:
        return None
    return problem(
        NO_ROOM,
        "dest",
        "%s: the %d files to download need %.2f GB more on the file system of %s, which has %.2f GB free: nothing "
        "was downloaded" % (where(p), len(missing), needed / 1e9, dest, available / 1e9),
        "free room there, or give the cache (dest) a larger disk, or narrow allow_patterns / ignore_patterns",
    )


def result_files(files, downloaded):
    return [
        {
            "path": path,
            "size": files[path]["size"],
            "sha256": files[path].get("sha256"),
            "downloaded": path in downloaded,
        }
        for path in sorted(files)
    ]


def run(p, check_mode=False):
    """Download and verify p["repo_id"] at commit p["revision"] into p["dest"].

    p: repo_id, revision, endpoint, token, allow_patterns, ignore_patterns, dest, verify ("fast" | "full"),
    timeout. Returns the module's result: changed, dest, revision, files [{path, size, sha256, downloaded}],
    bytes_total, bytes_downloaded, seconds, rate, problems (and no_op: True when the manifest alone answered).
    """
    started = time.monotonic()
    dest = p.get("dest") or ""
    result = {
        "changed": False,
        "dest": dest,
        "revision": p.get("revision"),
        "files": [],
        "bytes_total": 0,
        "bytes_downloaded": 0,
        "seconds": 0.0,
        "rate": 0.0,
        "problems": [],
        "no_op": False,
    }

    def done(problems=None):
        result["problems"] = problems or []
        result["seconds"] = round(time.monotonic() - started, 3)
        secs = time.monotonic() - started
        result["rate"] = round(result["bytes_downloaded"] / secs, 1) if secs > 0 and result["bytes_downloaded"] else 0.0
        return result

    problems = parameter_problems(p)
    if problems:
        return done(problems)
    endpoint = (p.get("endpoint") or PUBLIC_HUB).rstrip("/")
    pinned = bool(COMMIT.match(p.get("revision") or ""))
    manifest = read_manifest(dest)

    # The no-op: the manifest still describes the disk. Nothing hashed, nothing contacted.
    if pinned and p.get("verify", "fast") == "fast":
        files = manifest_current(dest, manifest, p)
        if files is not None:
            sums = os.path.join(dest, SUMS)
            if read_text(sums) != sums_text(files):
                result["changed"] = True
                if not check_mode:
                    write_atomic(sums, sums_text(files))
            result["files"] = result_files(files, ())
            result["bytes_total"] = sum(f["size"] for f in files.values())
            result["no_op"] = not result["changed"]
            return done()

    configure_client(p["timeout"])
    token = p.get("token") or False  # never a token found in the environment or ~/.cache/huggingface
    api = HfApi(endpoint=endpoint, token=token)
    if not pinned:
        try:
            info = api.model_info(p["repo_id"], revision=p["revision"], timeout=p["timeout"])
            resolved = info.sha
            now = "resolves to commit %s right now" % resolved
            found = []
        except Exception as exc:  # the problem of the resolution itself (repo not found, gated...) comes with it
            found = [exception_problem(exc, p, "resolving the revision")]
            resolved, now = None, "cannot be resolved (%s)" % found[0]["code"]
        unpinned = problem(
            REVISION_NOT_PINNED,
            "revision",
            "%s: revision %r is not a full commit sha: it %s" % (where(p), p["revision"], now),
            "pin the full 40-hex commit: revision: %s" % (resolved or "<commit sha>"),
        )
        return done([unpinned, *found])

    try:
        # The repository's refs first: one request the client does not retry (an endpoint that is down fails at
        # once, not after the listing's five retries), and a repository that has none is not there (olah answers
        # a tree listing of a missing repository at a commit with EntryNotFound, as for a missing commit).
        api.list_repo_refs(p["repo_id"])
    except Exception as exc:
        found = exception_problem(exc, p, "reading the repository's refs")
        if found["code"] in (UNREACHABLE, GATED):
            return done([found])
        if isinstance(exc, (RepositoryNotFoundError, EntryNotFoundError)):
            return done([repo_not_found(p, "reading the repository's refs")])
    try:
        tree = listed(api.list_repo_tree(p["repo_id"], revision=p["revision"], recursive=True))
    except Exception as exc:
        return done([exception_problem(exc, p, LISTING)])
    wanted = {
        path: tree[path]
        for path in filter_repo_objects(
            items=sorted(tree), allow_patterns=p.get("allow_patterns"), ignore_patterns=p.get("ignore_patterns")
        )
        if safe_relpath(path) and path not in (SUMS, MANIFEST)
    }
    if not wanted:
        return done(
            [
                problem(
                    NO_FILES,
                    "allow_patterns",
                    "%s: no file of the repository matches allow_patterns %s / ignore_patterns %s"
                    % (where(p), p.get("allow_patterns"), p.get("ignore_patterns")),
                    "check the patterns against the repository's files",
                )
            ]
        )
    result["bytes_total"] = sum(e["size"] for e in wanted.values())

    # What is on disk already: trusted by the manifest (fast) or by its hash (full, or unknown to the manifest).
    recorded = (manifest or {}).get("files") or {}
    if (manifest or {}).get("revision") != p["revision"] or (manifest or {}).get("repo_id") != p["repo_id"]:
        recorded = {}
    verified, stale = {}, []
    for path, expected in wanted.items():
        full = os.path.join(dest, path)
        key = stat_key(full)
        if key is None:
            continue
        entry = recorded.get(path) or {}
        if key[0] != expected["size"]:
            stale.append(path)
            continue
        if p.get("verify", "fast") == "fast" and recorded_match(entry, expected, key):
            verified[path] = dict(entry)
            continue
        size, sha256, git_sha1 = file_hashes(full)
        if matches(expected, size, sha256, git_sha1):
            verified[path] = {"size": size, "sha256": sha256, "blob_id": expected["blob_id"], "mtime_ns": key[1]}
        else:
            stale.append(path)
    missing = [path for path in wanted if path not in verified]
    would = set(missing)
    leftover = sorted(path for path in recorded if path not in wanted and safe_relpath(path))
    try:
        no_room = room_problem(p, dest, wanted, missing) if missing else None
    except OSError as exc:
        return done([exception_problem(exc, p, "measuring the free room")])
    if no_room:
        return done([no_room])  # before a file is removed or asked for, in check mode as well

    if check_mode:
        sizes = {path: e["size"] for path, e in wanted.items()}
        if missing:
            # The client's dry run, in an empty directory of its own: in a local_dir it writes its metadata even
            # in a dry run. It reaches every file to download (HEAD) and gives the size it would fetch.
            try:
                with tempfile.TemporaryDirectory(prefix="hub-snapshot-dry-run-") as scratch:
                    dry = snapshot_download(
                        p["repo_id"],
                        revision=p["revision"],
                        local_dir=scratch,
                        endpoint=endpoint,
                        token=token,
                        allow_patterns=p.get("allow_patterns"),
                        ignore_patterns=p.get("ignore_patterns"),
                        etag_timeout=p["timeout"],
                        dry_run=True,
                    )
            except Exception as exc:
                return done([exception_problem(exc, p, "dry run")])
            sizes.update({f.filename: f.file_size for f in dry if f.filename in would and f.file_size is not None})
        files = {
            path: {"size": sizes[path], "sha256": e["sha256"] or verified.get(path, {}).get("sha256")}
            for path, e in wanted.items()
        }
        result["files"] = result_files(files, would)
        result["bytes_downloaded"] = sum(sizes[path] for path in would)
        recorded_now = {path: e.get("mtime_ns") for path, e in recorded.items()}
        result["changed"] = bool(
            would
            or leftover
            or read_text(os.path.join(dest, SUMS)) != sums_text(verified)
            or recorded_now != {path: e["mtime_ns"] for path, e in verified.items()}
        )
        return done()

    try:
        os.makedirs(dest, exist_ok=True)
        if stale or leftover or missing:
            # SHA256SUMS lists a complete, verified snapshot only: gone until this run has verified one
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(dest, SUMS))
        for path in stale + leftover:
            remove(dest, path)
            result["changed"] = True
        before = {path: stat_key(os.path.join(dest, path)) for path in wanted}
        if missing:
            snapshot_download(
                p["repo_id"],
                revision=p["revision"],
                local_dir=dest,
                endpoint=endpoint,
                token=token,
                allow_patterns=p.get("allow_patterns"),
                ignore_patterns=p.get("ignore_patterns"),
                etag_timeout=p["timeout"],
            )
    except Exception as exc:
        return done([exception_problem(exc, p, "downloading")])

    # Verify once what the client wrote (it checks sizes only), and anything that changed under us.
    downloaded, problems = set(), []
    for path, expected in wanted.items():
        full = os.path.join(dest, path)
        key = stat_key(full)
        if path in verified and key == before.get(path):
            continue
        if key is None:
            problems.append(
                problem(
                    HTTP_ERROR,
                    "endpoint",
                    "%s: %s was not downloaded" % (where(p), path),
                    "retry; if it persists check the endpoint (mirror) logs",
                )
            )
            continue
        size, sha256, git_sha1 = file_hashes(full)
        downloaded.add(path)
        result["bytes_downloaded"] += size
        result["changed"] = True
        if not matches(expected, size, sha256, git_sha1):
            remove(dest, path)
            problems.append(
                problem(
                    CHECKSUM_MISMATCH,
                    "revision",
                    "%s: %s has %s %s, the repository lists %s (size %d, listed %d); the file was removed"
                    % (
                        where(p),
                        path,
                        "sha256" if expected["sha256"] else "git blob id",
                        sha256 if expected["sha256"] else git_sha1,
                        expected["sha256"] or expected["blob_id"],
                        size,
                        expected["size"],
                    ),
                    "run again to download it again; if it persists the endpoint (mirror) serves a corrupt copy",
                )
            )
            continue
        verified[path] = {"size": size, "sha256": sha256, "blob_id": expected["blob_id"], "mtime_ns": key[1]}

    result["files"] = result_files({path: verified[path] for path in verified}, downloaded)
    if problems:
        return done(problems)
    manifest_data = {
        "format": FORMAT,
        "repo_id": p["repo_id"],
        "revision": p["revision"],
        "endpoint": endpoint,
        "allow_patterns": p.get("allow_patterns"),
        "ignore_patterns": p.get("ignore_patterns"),
        "files": {path: verified[path] for path in sorted(verified)},
    }
    try:
        if read_text(os.path.join(dest, SUMS)) != sums_text(verified):
            write_atomic(os.path.join(dest, SUMS), sums_text(verified))
            result["changed"] = True
        if manifest != manifest_data:
            write_atomic(os.path.join(dest, MANIFEST), json.dumps(manifest_data, indent=1, sort_keys=True) + "\n")
            result["changed"] = True
    except OSError as exc:
        return done([exception_problem(exc, p, "writing SHA256SUMS")])
    return done()
