# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One model directory into a node's model store from an HTTP(S) location: resumable, verified once, published
atomically. Plain functions over the Python standard library; the model_weights module is a thin wrapper.

Layout under the store (an absolute directory, e.g. /data/model-registry):

- ``<store>/<path>/``: the published model, its files plus ``SHA256SUMS`` (sha256sum format, so
  ``sha256sum --check SHA256SUMS`` works there) and ``.aiinfra-weights.json``, the manifest: source, revision and,
  per file, path, size, sha256, mtime_ns and when its content was verified.
- ``<store>/.staging/<path>/``: the next version being built, on the store's file system: files of the published
  model that are still good are hard-linked there, the others fetched there. A file being fetched is
  ``<name>.aiinfra-part`` with its validators (ETag, Last-Modified) in ``<name>.aiinfra-part.json``; after an
  interruption the next run hashes the part it has and asks for the rest (Range with If-Range). Verified staged files
  are recorded in the staging directory's own manifest, so an interrupted run's finished files are kept too.
- ``<store>/.staging/.lock``: an exclusive flock held for the whole fetch and publish.
- a progress file (``progress_file``, e.g. ``<store>/.staging/.progress-<name>.json``, the action plugin's choice):
  JSON rewritten while files are fetched, removed when the run ends (see Progress).

The published directory is replaced in one step: renameat2(RENAME_EXCHANGE) swaps the staging tree and the
published one, then the old tree is removed (a plain rename for a new model; rename-away, rename and remove where the
file system refuses the exchange). A model server sees the old model or the new one, never half of one.

Problems are data, ``{code, severity, host, variable, message, problem, fix}`` (``problem`` repeats ``message`` so
the collection's problem_line filter renders them); callers match ``code``, never the text.
"""

import contextlib
import ctypes
import errno
import fcntl
import grp
import hashlib
import json
import os
import pwd
import re
import shutil
import socket
import ssl
import stat
import time
from http import client as http_client
from urllib.error import HTTPError, URLError
from urllib.parse import quote, urlsplit, urlunsplit
from urllib.request import HTTPRedirectHandler, HTTPSHandler, Request, build_opener

MANIFEST = ".aiinfra-weights.json"
SUMS = "SHA256SUMS"
STAGING = ".staging"
LOCK = ".lock"
RETIRED = ".retired"
PART = ".aiinfra-part"
PART_META = ".aiinfra-part.json"
RESERVED_NAMES = (MANIFEST, SUMS)
CHUNK = 1024 * 1024
SUMS_LIMIT = 16 * 1024 * 1024
HEX64 = re.compile(r"^[0-9a-fA-F]{64}$")
SUMS_LINE = re.compile(r"^([0-9a-fA-F]{64}) [ *](.+)$")
VERIFY_MODES = ("fast", "full")
# renameat2(2): AT_FDCWD and RENAME_EXCHANGE from <fcntl.h> and <linux/fs.h>.
AT_FDCWD = -100
RENAME_EXCHANGE = 2
MANIFEST_VERSION = 1

PATH_FIX = "give the model's directory relative to the store, e.g. Qwen/Qwen2.5-7B-Instruct"
SUMS_FIX = "regenerate SHA256SUMS in the model directory with paths relative to it (cd <model> && sha256sum ...)"
HTTP_FIX = "check the URL, the mirror and the credentials in headers; the next run resumes what was fetched"
MISMATCH_FIX = "the mirror's file differs from its checksum: fix the mirror (or its SHA256SUMS) and run again"


class WeightsError(Exception):
    """A failure the caller reports as problems (a list of problem dicts)."""

    def __init__(self, problems):
        Exception.__init__(self, "; ".join(p["message"] for p in problems))
        self.problems = problems


def problem(code, host, variable, message, fix=None, severity="error"):
    """A problem as the collection's checks return them (``problem`` mirrors ``message`` for problem_line)."""
    return {
        "code": code,
        "severity": severity,
        "host": host,
        "variable": variable,
        "message": message,
        "problem": message,
        "fix": fix,
    }


def node_name(host=None):
    """The label problems carry: the host given, else this machine's name."""
    return host or socket.gethostname()


def shown_url(url):
    """A URL as problems and results show it: no user:password, no query (a signed URL's token)."""
    parts = urlsplit(url)
    netloc = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


# ---------------------------------------------------------------- paths and file lists


def segment_error(path, what):
    """Why a relative path (the model's, or an entry of its file list) is refused, or None."""
    if not isinstance(path, str) or not path:
        return "%s is %r, not a path" % (what, path)
    if any(ord(c) < 32 or ord(c) == 127 for c in path) or "\\" in path:
        return "%s %r has control characters or a backslash" % (what, path)
    if path.startswith("/"):
        return "%s %r is absolute where one relative to the store is meant" % (what, path)
    parts = path.split("/")
    if any(part in ("", ".", "..") for part in parts):
        return "%s %r has an empty, '.' or '..' segment" % (what, path)
    return None


def model_path_error(path):
    """Why a model path relative to the store is refused, or None; the first segment .staging is reserved."""
    why = segment_error(path, "path")
    if why is None and path.split("/")[0] == STAGING:
        why = "path %r starts with %s, which the store reserves for fetches in progress" % (path, STAGING)
    return why


def entry_error(path):
    """Why a file entry (relative to the model directory) is refused, or None."""
    why = segment_error(path, "file")
    if why is None and path in RESERVED_NAMES:
        why = "file %r is written by the module itself" % path
    if why is None and (path.endswith(PART) or path.endswith(PART_META)):
        why = "file %r ends with a suffix the module reserves for partial fetches" % path
    if why is None and (path + "/").startswith(tuple(name + "/" for name in RESERVED_NAMES)):
        why = "file %r is under a name the module writes" % path
    return why


def parse_sums(text, host, variable="url"):
    """[{path, sha256, size: None}] from SHA256SUMS text (sha256sum format, paths relative to the model directory, a
    leading './' allowed); raises WeightsError naming every refused line."""
    entries, problems, seen = [], [], set()
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        match = SUMS_LINE.match(line)
        if not match:
            problems.append(
                problem("SUMS_ENTRY", host, variable, "SHA256SUMS line %d is not '<sha256>  <path>'" % number, SUMS_FIX)
            )
            continue
        path = match.group(2)
        path = path[2:] if path.startswith("./") else path
        why = entry_error(path)
        if why is None and path in seen:
            why = "file %r is listed twice" % path
        if why:
            problems.append(problem("SUMS_ENTRY", host, variable, "SHA256SUMS line %d: %s" % (number, why), SUMS_FIX))
            continue
        seen.add(path)
        entries.append({"path": path, "sha256": match.group(1).lower(), "size": None})
    if not entries and not problems:
        problems.append(problem("SUMS_ENTRY", host, variable, "SHA256SUMS lists no file", SUMS_FIX))
    problems += nested_problems(entries, host, variable)
    if problems:
        raise WeightsError(problems)
    return sorted(entries, key=lambda e: e["path"])


def given_files(files, host):
    """[{path, sha256, size}] from the module's ``files`` list; raises WeightsError naming every refused entry."""
    entries, problems, seen = [], [], set()
    for index, item in enumerate(files or []):
        item = item if isinstance(item, dict) else {}
        path, digest, size = item.get("path"), item.get("sha256"), item.get("size")
        why = entry_error(path)
        if why is None and path in seen:
            why = "file %r is listed twice" % path
        if why is None and not (isinstance(digest, str) and HEX64.match(digest)):
            why = "sha256 of %r is %r, not 64 hexadecimal digits" % (path, digest)
        if why is None and size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 0):
            why = "size of %r is %r, not a number of bytes" % (path, size)
        if why:
            problems.append(problem("FILES", host, "files", "files[%d]: %s" % (index, why), SUMS_FIX))
            continue
        seen.add(path)
        entries.append({"path": path, "sha256": digest.lower(), "size": size})
    if not entries and not problems:
        problems.append(problem("FILES", host, "files", "files lists no file", SUMS_FIX))
    problems += nested_problems(entries, host, "files")
    if problems:
        raise WeightsError(problems)
    return sorted(entries, key=lambda e: e["path"])


def nested_problems(entries, host, variable):
    """A file listed where another entry needs a directory (a and a/b)."""
    paths = {e["path"] for e in entries}
    out = []
    for path in sorted(paths):
        parts = path.split("/")
        for depth in range(1, len(parts)):
            if "/".join(parts[:depth]) in paths:
                out.append(
                    problem(
                        "SUMS_ENTRY" if variable == "url" else "FILES",
                        host,
                        variable,
                        "file %r is listed, and also a directory of %r" % ("/".join(parts[:depth]), path),
                        SUMS_FIX,
                    )
                )
    return out


def sums_text(entries):
    """SHA256SUMS for the entries, as sha256sum writes it (sorted by path)."""
    return "".join("%s  %s\n" % (e["sha256"], e["path"]) for e in sorted(entries, key=lambda e: e["path"]))


# ---------------------------------------------------------------- files on disk


def sha256_file(path, hasher=None, limit=None):
    """The hasher after reading path (its first `limit` bytes); a new sha256 when none is given."""
    hasher = hasher or hashlib.sha256()
    left = limit
    with open(path, "rb") as handle:
        while left is None or left > 0:
            block = handle.read(CHUNK if left is None else min(CHUNK, left))
            if not block:
                break
            hasher.update(block)
            if left is not None:
                left -= len(block)
    return hasher


def regular_stat(path):
    """os.lstat of a regular file, else None (missing, a link, a directory)."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return st if stat.S_ISREG(st.st_mode) else None


def read_manifest(directory):
    """The manifest of a model directory (published or staging) as a dict, or None when missing or unreadable."""
    try:
        with open(os.path.join(directory, MANIFEST), "rb") as handle:
            data = json.loads(handle.read().decode("utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("files"), list):
        return None
    return data


def records(manifest):
    """{path: record} of a manifest's files (records without a path, size, sha256 or mtime_ns are dropped)."""
    out = {}
    for rec in (manifest or {}).get("files", []):
        if isinstance(rec, dict) and all(k in rec for k in ("path", "size", "sha256", "mtime_ns")):
            out[rec["path"]] = rec
    return out


def stat_matches(rec, st):
    return st is not None and rec is not None and st.st_size == rec["size"] and st.st_mtime_ns == rec["mtime_ns"]


def now_text():
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def record(entry, st, verified):
    return {
        "path": entry["path"],
        "size": st.st_size,
        "sha256": entry["sha256"],
        "mtime_ns": st.st_mtime_ns,
        "verified": verified,
    }


def manifest_data(entries, recs, source, revision):
    return {
        "version": MANIFEST_VERSION,
        "source": source,
        "revision": revision,
        "files": [recs[e["path"]] for e in entries if e["path"] in recs],
    }


def write_file_atomic(path, data, mode=0o644, sync=True):
    """Write bytes to a temporary file beside path, fsync it (unless sync is false), rename it over path."""
    tmp = "%s.tmp-%d" % (path, os.getpid())
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        _write_all(fd, data)
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.chmod(tmp, mode)
    os.rename(tmp, path)


def _write_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def write_json(path, data, mode=0o644):
    write_file_atomic(path, (json.dumps(data, indent=1, sort_keys=True) + "\n").encode("utf-8"), mode)


def published_extras(model_dir, entries):
    """Paths under a published model directory that its file list does not name (SHA256SUMS and the manifest aside):
    a republish removes them. A directory is named by the files under it; an unnamed one is one extra, "<dir>/"."""
    wanted = {e["path"] for e in entries} | set(RESERVED_NAMES)
    dirs = set()
    for e in entries:
        parts = e["path"].split("/")
        dirs.update("/".join(parts[:n]) for n in range(1, len(parts)))
    extras = []
    for top, subdirs, names in os.walk(model_dir):
        rel_top = os.path.relpath(top, model_dir)
        inside = []
        for name in sorted(subdirs):
            rel = name if rel_top == "." else rel_top + "/" + name
            if os.path.islink(os.path.join(top, name)):
                extras.append(rel)
            elif rel in dirs:
                inside.append(name)
            else:
                extras.append(rel + "/")
        subdirs[:] = inside
        for name in sorted(names):
            rel = name if rel_top == "." else rel_top + "/" + name
            if rel not in wanted:
                extras.append(rel)
    return sorted(extras)


def nested_models(store, model_path):
    """Published models above or below <store>/<model_path> (directories with a manifest): replacing the directory
    in one step would move them too, so the module refuses."""
    found = []
    parts = model_path.split("/")
    for depth in range(1, len(parts)):
        if os.path.exists(os.path.join(store, *parts[:depth], MANIFEST)):
            found.append("/".join(parts[:depth]))
    final = os.path.join(store, model_path)
    for top, subdirs, names in os.walk(final):
        if top != final and MANIFEST in names:
            found.append(os.path.relpath(top, store))
        subdirs[:] = [d for d in subdirs if not os.path.islink(os.path.join(top, d))]
    return sorted(found)


def assess(model_dir, entries, verify):
    """Which files of a published model directory are good, without fetching.

    Returns {"good": {path: record}, "todo": [entries to fetch], "hashed": [paths read], "manifest": the manifest or
    None, "extras": [unlisted paths]}. fast: a file whose manifest record has the wanted sha256 and whose size and
    mtime_ns are the record's is good without being read; one whose record differs or is missing from the manifest
    while the file is there (a model copied by other means) is hashed once; one the manifest knows with another
    sha256, size or mtime_ns is fetched again. full: every file present is hashed.
    """
    manifest = read_manifest(model_dir)
    recs = records(manifest)
    out = {"good": {}, "todo": [], "hashed": [], "manifest": manifest, "extras": []}
    if not os.path.isdir(model_dir) or os.path.islink(model_dir):
        out["todo"] = list(entries)
        return out
    for entry in entries:
        path = os.path.join(model_dir, entry["path"])
        st = regular_stat(path)
        rec = recs.get(entry["path"])
        if st is not None and os.path.realpath(path) != os.path.join(os.path.realpath(model_dir), entry["path"]):
            st = None  # reached through a link: not the model's own file
        if st is None or (entry["size"] is not None and st.st_size != entry["size"]):
            out["todo"].append(entry)
        elif verify == "fast" and rec is not None and rec["sha256"] == entry["sha256"] and stat_matches(rec, st):
            out["good"][entry["path"]] = rec
        elif verify == "fast" and rec is not None and (rec["sha256"] != entry["sha256"] or not stat_matches(rec, st)):
            out["todo"].append(entry)
        else:
            out["hashed"].append(entry["path"])
            if sha256_file(path).hexdigest() == entry["sha256"]:
                st = regular_stat(path) or st
                keep = rec if rec is not None and rec["sha256"] == entry["sha256"] and stat_matches(rec, st) else None
                out["good"][entry["path"]] = keep or record(entry, st, now_text())
            else:
                out["todo"].append(entry)
    out["extras"] = published_extras(model_dir, entries)
    return out


# ---------------------------------------------------------------- modes and owners


def owner_ids(owner, group, host):
    """(uid or -1, gid or -1) of names or numbers; raises WeightsError for an unknown one."""
    problems = []
    uid = gid = -1
    if owner not in (None, ""):
        try:
            uid = int(owner) if str(owner).isdigit() else pwd.getpwnam(str(owner)).pw_uid
        except KeyError:
            problems.append(problem("OWNER", host, "owner", "user %r does not exist on this node" % owner))
    if group not in (None, ""):
        try:
            gid = int(group) if str(group).isdigit() else grp.getgrnam(str(group)).gr_gid
        except KeyError:
            problems.append(problem("OWNER", host, "group", "group %r does not exist on this node" % group))
    if problems:
        raise WeightsError(problems)
    return uid, gid


def octal(mode, default):
    if mode is None or mode == "":
        return default
    value = mode if isinstance(mode, int) and not isinstance(mode, bool) else int(str(mode), 8)
    if not 0 <= value <= 0o7777:
        raise ValueError(mode)
    return value


def set_tree_attributes(root, file_mode, dir_mode, uid=-1, gid=-1, dry=False):
    """Give every directory under root (root included) dir_mode and every file file_mode, and the owner and group
    where given; links are left alone. Returns how many paths changed (would change, with dry)."""
    changed = 0
    for top, subdirs, names in os.walk(root):
        for path, mode in [(top, dir_mode)] + [(os.path.join(top, n), file_mode) for n in names]:
            st = os.lstat(path)
            if stat.S_ISLNK(st.st_mode):
                continue
            touched = False
            if (uid != -1 and st.st_uid != uid) or (gid != -1 and st.st_gid != gid):
                touched = True
                if not dry:
                    os.lchown(path, uid, gid)
            if stat.S_IMODE(st.st_mode) != mode:
                touched = True
                if not dry:
                    os.chmod(path, mode)
            changed += touched
        subdirs[:] = [d for d in subdirs if not os.path.islink(os.path.join(top, d))]
    return changed


def make_dirs(path, mode, uid=-1, gid=-1):
    """Create path and its missing parents with mode and owner (parents first); returns those created."""
    missing = []
    probe = path
    while not os.path.isdir(probe):
        missing.append(probe)
        probe = os.path.dirname(probe)
    for directory in reversed(missing):
        try:
            os.mkdir(directory, mode)
        except OSError as exc:
            if exc.errno != errno.EEXIST:
                raise
        os.chmod(directory, mode)
        if uid != -1 or gid != -1:
            os.lchown(directory, uid, gid)
    return list(reversed(missing))


# ---------------------------------------------------------------- HTTP


class HttpFailure(Exception):
    def __init__(self, url, status, reason, retryable):
        Exception.__init__(self, "%s: %s" % (url, reason))
        self.url, self.status, self.reason, self.retryable = url, status, reason, retryable


class SameHostHeaders(HTTPRedirectHandler):
    """Follows redirects, giving the caller's headers (Authorization) only to the host they were meant for; a
    redirect to another host (a CDN with a signed URL) gets none."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        new = HTTPRedirectHandler.redirect_request(self, req, fp, code, msg, headers, newurl)
        if new is not None and urlsplit(newurl).netloc == urlsplit(req.full_url).netloc:
            for key, value in req.unredirected_hdrs.items():
                if key.lower() not in ("host", "content-length", "content-type"):
                    new.add_unredirected_header(key, value)
        return new


class RunTimeout(object):
    """The run's own time limit (the module's run_timeout): once past it, the fetch stops between two reads (or
    instead of a retry) with a RUN_TIMEOUT problem; what was fetched stays in staging for the next run. None: no
    limit. The run stops itself rather than counting on being killed: async_wrapper kills only the process group it
    set, which a module started before that setpgid is not in."""

    def __init__(self, seconds, host, clock=time.monotonic):
        self.seconds = seconds
        self.host = host
        self.clock = clock
        self.until = clock() + seconds if seconds else None

    def left(self):
        """Seconds left before the limit (None: no limit)."""
        return None if self.until is None else max(0.0, self.until - self.clock())

    def check(self, doing):
        """Raise WeightsError (RUN_TIMEOUT) when the run is past its limit; doing says what it was doing."""
        if self.until is not None and self.clock() > self.until:
            raise WeightsError(
                [
                    problem(
                        "RUN_TIMEOUT",
                        self.host,
                        "run_timeout",
                        "%s: the run stopped at its time limit (%s s) while %s; nothing was published"
                        % (self.host, self.seconds, doing),
                        "run again: the next run resumes what was fetched (or allow the run more time)",
                    )
                ]
            )


class Http(object):
    """GET and HEAD with the caller's headers, timeout and CA, bounded retries with backoff for 5xx answers (but 501)
    and connection errors (never for 4xx); no retry once past the run's time limit (limit, a RunTimeout)."""

    def __init__(self, headers=None, timeout=60, retries=3, ca_path=None, backoff=1.0, limit=None):
        context = ssl.create_default_context(cafile=ca_path) if ca_path else ssl.create_default_context()
        self.opener = build_opener(HTTPSHandler(context=context), SameHostHeaders())
        self.headers = dict(headers or {})
        self.timeout = timeout
        self.retries = max(0, int(retries))
        self.backoff = backoff
        self.limit = limit or RunTimeout(None, None)

    def open(self, url, method="GET", extra=None):
        """The response (2xx) of one request; raises HttpFailure."""
        req = Request(url, method=method)
        for key, value in self.headers.items():
            req.add_unredirected_header(str(key), str(value))
        for key, value in (extra or {}).items():
            req.add_header(key, value)  # Range and If-Range follow a redirect
        left = self.limit.left()  # near the run's limit, a silent server is not waited for the whole timeout
        timeout = self.timeout if left is None else max(1.0, min(self.timeout, left + 1.0))
        try:
            return self.opener.open(req, timeout=timeout)
        except HTTPError as exc:
            status = exc.code
            exc.close()
            retry = status >= 500 and status != 501  # 501 Not Implemented (a method the server has not): for good
            raise HttpFailure(url, status, "HTTP %d %s" % (status, exc.reason), retry) from None
        except URLError as exc:  # a certificate the CA store does not vouch for is not tried again
            retry = not isinstance(exc.reason, ssl.CertificateError)
            raise HttpFailure(url, None, "connection failed (%s)" % (exc.reason,), retry) from None
        except (OSError, http_client.HTTPException) as exc:
            raise HttpFailure(url, None, "connection failed (%s)" % (exc,), True) from None

    def retrying(self, work):
        """work() with the retries: a retryable HttpFailure or connection error waits backoff * 2**n (10 s at most)
        and tries again."""
        attempt = 0
        while True:
            try:
                return work()
            except HttpFailure as exc:
                if not exc.retryable or attempt >= self.retries:
                    raise
                self.limit.check("trying %s again after: %s" % (shown_url(exc.url), exc.reason))
            attempt += 1
            wait = min(10.0, self.backoff * (2 ** (attempt - 1)))
            left = self.limit.left()
            time.sleep(wait if left is None else min(wait, left + 0.01))  # past the limit, the next check stops it

    def read_small(self, url, limit=SUMS_LIMIT):
        def work():
            response = self.open(url)
            try:
                data = response.read(limit + 1)
            except (OSError, http_client.HTTPException) as exc:
                raise HttpFailure(url, None, "connection cut (%s)" % (exc,), True) from None
            finally:
                response.close()
            if len(data) > limit:
                raise HttpFailure(url, None, "more than %d bytes" % limit, False)
            return data

        return self.retrying(work)

    def size(self, url):
        """Content-Length of a HEAD, or None."""

        def work():
            response = self.open(url, method="HEAD")
            response.close()
            length = response.headers.get("Content-Length")
            return int(length) if length and length.isdigit() else None

        return self.retrying(work)


def file_url(base, path):
    return base.rstrip("/") + "/" + quote(path, safe="/")


def sums_url(base):
    return file_url(base, SUMS)


def http_problem(exc, host, what):
    return problem(
        "HTTP",
        host,
        "url",
        "%s: %s %s: %s" % (host, what, shown_url(exc.url), exc.reason),
        HTTP_FIX,
    )


def expected_entries(params, http, host):
    """The file list: params["files"] when given, else the SHA256SUMS under params["url"]."""
    if params.get("files"):
        return given_files(params["files"], host)
    try:
        text = http.read_small(sums_url(params["url"])).decode("utf-8")
    except HttpFailure as exc:
        raise WeightsError([http_problem(exc, host, "fetching the file list")]) from None
    except UnicodeDecodeError:
        raise WeightsError([problem("SUMS_ENTRY", host, "url", "SHA256SUMS is not UTF-8 text", SUMS_FIX)]) from None
    return parse_sums(text, host)


# ---------------------------------------------------------------- one file


def part_paths(staged):
    return staged + PART, staged + PART_META


def read_part_meta(meta_path):
    try:
        with open(meta_path, "rb") as handle:
            meta = json.loads(handle.read().decode("utf-8"))
    except (OSError, ValueError):
        return None
    return meta if isinstance(meta, dict) else None


def fetch_file(http, url, staged, entry, host, stats, progress=None):
    """Fetch url into staged (a path in the staging tree) and verify it against entry's sha256.

    A part left by an interrupted run (staged + .aiinfra-part, its validators in .aiinfra-part.json) for the same
    sha256 is hashed and continued with Range and If-Range; a 200 answer instead of 206 starts over. stats gets
    bytes_fetched and bytes_resumed added; progress (a Progress) learns the part's length as it grows. On a wrong
    sha256 the part is deleted and WeightsError raised."""
    progress = progress or Progress(None, None, stats)
    part, meta_path = part_paths(staged)
    hasher = hashlib.sha256()
    offset = 0
    meta = read_part_meta(meta_path)
    part_st = regular_stat(part)
    if part_st is not None and meta and meta.get("sha256") == entry["sha256"] and part_st.st_size > 0:
        sha256_file(part, hasher, part_st.st_size)
        offset = part_st.st_size
    else:
        for leftover in (part, meta_path):
            if os.path.lexists(leftover):
                os.unlink(leftover)
        meta = {}
    state = {"hasher": hasher, "offset": offset, "meta": meta, "resumed": offset}  # kept unless a 200 starts over
    progress.at(offset)

    def attempt():
        extra = {}
        validator = state["meta"].get("etag") or state["meta"].get("last_modified")
        if state["offset"] > 0 and state["meta"].get("etag", "").startswith("W/"):
            validator = state["meta"].get("last_modified")
        if state["offset"] > 0:
            extra["Range"] = "bytes=%d-" % state["offset"]
            if validator:
                extra["If-Range"] = validator
        try:
            response = http.open(url, extra=extra)
        except HttpFailure as exc:
            if exc.status != 416 or state["offset"] == 0:
                raise
            restart(state, part)  # the part is as long as the file, or longer: ask for all of it
            response = http.open(url)
        try:
            stream(response, state, part, meta_path, entry, url, host, stats, progress, http.limit)
        finally:
            response.close()

    http.retrying(attempt)
    stats["bytes_resumed"] += state["resumed"]
    digest = state["hasher"].hexdigest()
    if digest != entry["sha256"]:
        for leftover in (part, meta_path):
            if os.path.lexists(leftover):
                os.unlink(leftover)
        raise WeightsError(
            [
                problem(
                    "SHA256_MISMATCH",
                    host,
                    "url",
                    "%s: %s fetched from %s has sha256 %s, not %s as the file list says; nothing was published"
                    % (host, entry["path"], shown_url(url), digest, entry["sha256"]),
                    MISMATCH_FIX,
                )
            ]
        )
    os.rename(part, staged)
    os.unlink(meta_path)


def restart(state, part):
    state["hasher"] = hashlib.sha256()
    state["offset"] = 0
    state["resumed"] = 0
    with open(part, "wb"):
        pass


def stream(response, state, part, meta_path, entry, url, host, stats, progress=None, limit=None):
    """Write one response's body to the part (appending after a 206), hashing as it goes; limit (a RunTimeout) is
    checked before each block is written, so that a stopped run's part holds whole blocks it hashed."""
    progress = progress or Progress(None, None, stats)
    limit = limit or RunTimeout(None, host)
    status = response.status if hasattr(response, "status") else response.getcode()
    headers = response.headers
    if state["offset"] > 0 and status == 206:
        first = re.match(r"^bytes (\d+)-(\d+)/(\d+|\*)$", headers.get("Content-Range", "").strip())
        if not first or int(first.group(1)) != state["offset"]:
            restart(state, part)  # a range we did not ask for: start over (the next attempt asks for it all)
            raise HttpFailure(url, 206, "answered another range than asked", True)
        total = int(first.group(3)) if first.group(3).isdigit() else None
    elif status == 200:
        if state["offset"] > 0:
            restart(state, part)  # If-Range did not match: the file changed, the part is worthless
        length = headers.get("Content-Length")
        total = int(length) if length and length.isdigit() else None
    else:
        raise HttpFailure(url, status, "HTTP %d where 200 or 206 was expected" % status, False)
    if entry["size"] is not None and total is not None and total != entry["size"]:
        by_head = entry.get("size_from") == "HEAD"
        raise WeightsError(
            [
                problem(
                    "SIZE_MISMATCH",
                    host,
                    "url" if by_head else "files",
                    "%s: %s at %s is %d bytes, not %d as %s; nothing was published"
                    % (
                        host,
                        entry["path"],
                        shown_url(url),
                        total,
                        entry["size"],
                        "the server's HEAD answer said earlier in this run" if by_head else "the file list says",
                    ),
                    "the file changed on the mirror during the run, or the server gives HEAD and GET other "
                    "lengths: run again, or fix the mirror"
                    if by_head
                    else MISMATCH_FIX,
                )
            ]
        )
    state["meta"] = {
        "sha256": entry["sha256"],
        "url": shown_url(url),
        "etag": headers.get("ETag") or "",
        "last_modified": headers.get("Last-Modified") or "",
    }
    write_json(meta_path, state["meta"], 0o600)
    flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if state["offset"] else os.O_TRUNC)
    fd = os.open(part, flags, 0o600)
    try:
        while True:
            try:
                block = response.read(CHUNK)
            except (OSError, http_client.HTTPException) as exc:
                raise HttpFailure(
                    url, None, "connection cut after %d bytes (%s)" % (state["offset"], exc), True
                ) from None
            if not block:
                break
            limit.check("fetching %s (%d bytes of it in staging)" % (entry["path"], state["offset"]))
            _write_all(fd, block)
            state["hasher"].update(block)
            state["offset"] += len(block)
            stats["bytes_fetched"] += len(block)
            progress.at(state["offset"])
        os.fsync(fd)
    finally:
        os.close(fd)
    if total is not None and state["offset"] != total:
        raise HttpFailure(url, None, "connection cut at %d of %d bytes" % (state["offset"], total), True)


# ---------------------------------------------------------------- staging and publishing


def lock_store(store, timeout):
    """An exclusive flock on <store>/.staging/.lock, waiting up to timeout seconds; returns its fd or None."""
    root = os.path.join(store, STAGING)
    make_dirs(root, 0o700)
    fd = os.open(os.path.join(root, LOCK), os.O_RDWR | os.O_CREAT, 0o600)
    deadline = time.time() + timeout
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES):
                os.close(fd)
                raise
        if time.time() >= deadline:
            os.close(fd)
            return None
        time.sleep(0.1)


def unlock_store(fd):
    fcntl.flock(fd, fcntl.LOCK_UN)
    os.close(fd)


def clean_staging(staging, entries):
    """Keep what an interrupted run left that is still of use: files its manifest records with the wanted sha256,
    size and mtime_ns, and parts (with their validators) of wanted files; remove everything else. Returns the
    staging manifest's records of the files kept."""
    wanted = {e["path"]: e for e in entries}
    recs = records(read_manifest(staging))
    kept = {}
    if not os.path.isdir(staging) or os.path.islink(staging):
        if os.path.lexists(staging):
            os.unlink(staging)
        return kept
    for top, subdirs, names in os.walk(staging, topdown=False):
        rel_top = os.path.relpath(top, staging)
        for name in names + [d for d in subdirs if os.path.islink(os.path.join(top, d))]:
            full = os.path.join(top, name)
            rel = name if rel_top == "." else rel_top + "/" + name
            st = os.lstat(full)
            keep = False
            if stat.S_ISREG(st.st_mode):
                if rel in wanted and stat_matches(recs.get(rel), st) and recs[rel]["sha256"] == wanted[rel]["sha256"]:
                    keep = True
                    kept[rel] = recs[rel]
                elif rel.endswith(PART) and rel[: -len(PART)] in wanted:
                    meta = read_part_meta(full[: -len(PART)] + PART_META)
                    keep = bool(meta) and meta.get("sha256") == wanted[rel[: -len(PART)]]["sha256"]
                elif rel.endswith(PART_META) and rel[: -len(PART_META)] in wanted:
                    keep = os.path.exists(full[: -len(PART_META)] + PART)
            if not keep:
                os.unlink(full)
        if top != staging and not os.listdir(top):
            os.rmdir(top)
    return kept


def remove_tree(path):
    if os.path.islink(path) or os.path.isfile(path):
        os.unlink(path)
    elif os.path.isdir(path):
        shutil.rmtree(path)


def prune_empty(path, stop):
    """Remove path and its parents up to (not including) stop while they are empty."""
    while path != stop and path.startswith(stop + os.sep):
        try:
            os.rmdir(path)
        except OSError:
            return
        path = os.path.dirname(path)


def exchange_paths(a, b):
    """Swap two paths atomically with renameat2(RENAME_EXCHANGE); False where the C library or the file system has
    no such call (ENOSYS, EINVAL, ENOTSUP), any other failure raises OSError."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        call = libc.renameat2
    except (OSError, AttributeError):
        return False
    call.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    call.restype = ctypes.c_int
    if call(AT_FDCWD, os.fsencode(a), AT_FDCWD, os.fsencode(b), RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.ENOSYS, errno.EINVAL, getattr(errno, "ENOTSUP", errno.EOPNOTSUPP), errno.EOPNOTSUPP):
        return False
    raise OSError(code, os.strerror(code), a)


def publish(staging, final, store, dir_mode, uid, gid, exchange=None):
    """Put the staging tree at final in one step; returns how: "new", "exchange" or "fallback"."""
    exchange = exchange or exchange_paths
    if not os.path.lexists(final):
        make_dirs(os.path.dirname(final), dir_mode, uid, gid)
        os.rename(staging, final)
        return "new"
    if exchange(staging, final):
        remove_tree(staging)  # now the old tree
        return "exchange"
    retired = os.path.join(store, STAGING, RETIRED)
    make_dirs(retired, 0o700)
    away = os.path.join(retired, "%d-%d" % (os.getpid(), int(time.time() * 1000)))
    os.rename(final, away)
    os.rename(staging, final)
    remove_tree(away)
    prune_empty(retired, os.path.join(store, STAGING))
    return "fallback"


# ---------------------------------------------------------------- progress


class Progress(object):
    """The progress file of one run (the module's progress_file; no path, no file): JSON

    ``{"path", "file", "bytes_done", "bytes_total", "bytes_fetched", "started", "updated", "rate"}`` - the model's
    path, the file being fetched, the bytes of the model in place (files kept, linked and fetched, and the current
    file's part), the model's size (null while a size is unknown), the bytes received in this run, when the fetch
    started and when the file was written (epoch seconds), and bytes_fetched per second since started.

    It is written (temporary file and rename, mode 0600) when the fetch starts, at most once per `every` seconds
    while it runs, and at the end of each file; removed when the run ends. It is taken under the store's lock (a
    file left by a killed run is removed then), and removed only by the run that took it. A progress file that
    cannot be written never fails the fetch."""

    def __init__(self, path, model_path, stats, every=1.0, clock=time.time):
        self.path = path or None
        self.model_path = model_path
        self.stats = stats
        self.every = every
        self.clock = clock
        self.owned = False
        self.started = None
        self.total = None
        self.done = 0
        self.offset = 0
        self.file = None
        self.last = None

    def take(self):
        """Under the store's lock: this run's from now on; what an earlier run left there is gone."""
        if self.path:
            self.owned = True
            self.remove()

    def start(self, total):
        self.started = self.clock()
        self.total = total
        self.write(force=True)

    def add(self, size):
        """A file in place without fetching it (kept from an interrupted run, or linked from the published model)."""
        self.done += size

    def begin_file(self, path):
        self.file, self.offset = path, 0

    def at(self, offset):
        """The current file's part holds offset bytes now."""
        self.offset = offset
        self.write()

    def end_file(self, size):
        self.done += size
        self.offset = 0
        self.write(force=True)

    def data(self, now):
        fetched = self.stats.get("bytes_fetched", 0)
        elapsed = now - self.started
        return {
            "path": self.model_path,
            "file": self.file,
            "bytes_done": self.done + self.offset,
            "bytes_total": self.total,
            "bytes_fetched": fetched,
            "started": round(self.started, 3),
            "updated": round(now, 3),
            "rate": round(fetched / elapsed, 1) if elapsed > 0 else 0.0,
        }

    def write(self, force=False):
        if not self.owned or self.started is None:
            return
        now = self.clock()
        if not force and self.last is not None and now - self.last < self.every:
            return
        self.last = now
        try:
            text = json.dumps(self.data(now), sort_keys=True) + "\n"
            write_file_atomic(self.path, text.encode("utf-8"), 0o600, sync=False)
        except OSError:
            pass  # progress is for the eyes: a full or read-only directory fails the fetch elsewhere, if at all

    def remove(self):
        if not self.owned:
            return
        for leftover in (self.path, "%s.tmp-%d" % (self.path, os.getpid())):
            with contextlib.suppress(OSError):
                os.unlink(leftover)


# ---------------------------------------------------------------- the whole model


def result_base(store, path):
    return {
        "changed": False,
        "fetched": [],
        "reused": 0,
        "bytes_fetched": 0,
        "bytes_resumed": 0,
        "bytes_total": 0,
        "seconds": 0.0,
        "rate": 0.0,
        "hashed": [],
        "sizes_unknown": [],
        "swapped": "none",
        "manifest": os.path.join(store, path, MANIFEST) if store and path else None,
        "problems": [],
    }


def check_params(params, host):
    """Problems of the parameters themselves (store, path, url, verify), as a list."""
    out = []
    store = params.get("store")
    if not isinstance(store, str) or not os.path.isabs(store):
        out.append(problem("STORE", host, "store", "store is %r, not an absolute path" % (store,)))
    why = model_path_error(params.get("path"))
    if why:
        out.append(problem("MODEL_PATH", host, "path", why, PATH_FIX))
    url = params.get("url")
    if not isinstance(url, str) or urlsplit(url).scheme not in ("http", "https") or not urlsplit(url).netloc:
        out.append(problem("URL", host, "url", "url is %r, not an http:// or https:// URL" % (url,)))
    for name, default in (("mode", 0o644), ("directory_mode", 0o755)):
        try:
            octal(params.get(name), default)
        except ValueError:
            out.append(
                problem("MODE", host, name, "%s is %r, not an octal mode such as 0644" % (name, params.get(name)))
            )
    if params.get("verify", "fast") not in VERIFY_MODES:
        out.append(problem("VERIFY", host, "verify", "verify is %r, not fast or full" % (params.get("verify"),)))
    limit = params.get("run_timeout")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit <= 0):
        out.append(
            problem(
                "RUN_TIMEOUT_VALUE",
                host,
                "run_timeout",
                "run_timeout is %r, not a positive number of seconds" % (limit,),
                "give run_timeout in seconds, or leave it out for no limit",
            )
        )
    why = progress_file_error(params.get("progress_file"), store, params.get("path"))
    if why:
        out.append(
            problem(
                "PROGRESS_FILE",
                host,
                "progress_file",
                why,
                "give an absolute path outside the model's directory, e.g. <store>/.staging/.progress-<name>.json",
            )
        )
    return out


def progress_file_error(path, store, model_path):
    """Why a progress_file is refused, or None (none given is fine): it must be absolute and outside the model's
    published and staging directories (it would be published, or removed as a leftover)."""
    if path in (None, ""):
        return None
    if not isinstance(path, str) or not os.path.isabs(path):
        return "progress_file is %r, not an absolute path" % (path,)
    if isinstance(store, str) and os.path.isabs(store) and model_path_error(model_path) is None:
        norm = os.path.normpath(path)
        for inside in (os.path.join(store, model_path), os.path.join(store, STAGING, model_path)):
            inside = os.path.normpath(inside)
            if norm == inside or norm.startswith(inside + os.sep):
                return "progress_file %s is inside %s, where the model's own files go" % (path, inside)
        retired = os.path.normpath(os.path.join(store, STAGING, RETIRED))
        if norm == os.path.normpath(os.path.join(store, STAGING, LOCK)) or (norm + os.sep).startswith(retired + os.sep):
            return "progress_file %s is a path the store's lock or its retired models use" % path
    return None


def converge(params, check_mode=False, exchange=None, backoff=1.0):
    """Bring <store>/<path> to the file list of params (the module's parameters, defaults filled in).

    Returns the result dict (see the module's RETURN); on failure its ``problems`` is not empty and nothing was
    published (a fetch's parts stay in staging for the next run)."""
    started = time.time()
    host = node_name(params.get("host"))
    result = result_base(params.get("store"), params.get("path"))
    progress = Progress(params.get("progress_file"), params.get("path"), result)
    try:
        problems = check_params(params, host)
        if problems:
            raise WeightsError(problems)
        store = os.path.normpath(params["store"])
        model_path = params["path"]
        result["manifest"] = os.path.join(store, model_path, MANIFEST)
        uid, gid = owner_ids(params.get("owner"), params.get("group"), host)
        http = Http(
            params.get("headers"),
            params.get("timeout", 60),
            params.get("retries", 3),
            params.get("ca_path"),
            backoff,
            RunTimeout(params.get("run_timeout"), host),
        )
        entries = expected_entries(params, http, host)
        if check_mode:
            plan_only(store, model_path, entries, params, http, host, result)
        else:
            make_dirs(store, octal(params.get("directory_mode"), 0o755), uid, gid)
            fd = lock_store(store, float(params.get("lock_timeout", 1800)))
            if fd is None:
                raise WeightsError(
                    [
                        problem(
                            "LOCK_TIMEOUT",
                            host,
                            "lock_timeout",
                            "%s: another run held %s for more than %s seconds"
                            % (host, os.path.join(store, STAGING, LOCK), params.get("lock_timeout", 1800)),
                            "let the other run finish, or raise lock_timeout",
                        )
                    ]
                )
            try:
                progress.take()
                apply(store, model_path, entries, params, http, host, result, uid, gid, exchange, progress)
            finally:
                unlock_store(fd)
    except WeightsError as exc:
        result["problems"] = exc.problems
    except OSError as exc:  # the store's disk: full, read-only, permissions
        result["problems"] = [
            problem("STORE_IO", host, "store", "%s: %s" % (host, exc), "check the model store's file system")
        ]
    finally:
        progress.remove()
    elapsed = time.time() - started
    result["seconds"] = round(elapsed, 3)
    result["rate"] = round(result["bytes_fetched"] / elapsed, 1) if elapsed > 0 else 0.0
    return result


def plan_only(store, model_path, entries, params, http, host, result):
    """Check mode: what would be fetched (sizes from the list, else a HEAD), touching nothing."""
    refuse_nested(store, model_path, host)
    current, found = model_current(store, model_path, entries, params, host)
    result["hashed"] = found["hashed"]
    result["sizes_unknown"] = learn_sizes(found["todo"], {}, params["url"], http, host)
    for entry in found["todo"]:
        result["fetched"].append({"path": entry["path"], "size": entry["size"]})
    result["reused"] = len(found["good"])
    result["bytes_total"] = sum(r["size"] for r in found["good"].values()) + sum(
        f["size"] or 0 for f in result["fetched"]
    )
    result["changed"] = not current


def model_current(store, model_path, entries, params, host):
    """Whether the published <store>/<model_path> is what converging it to entries would leave (every file good, no
    extra one, the manifest and SHA256SUMS as written, modes and owner as asked), reading no more than assess() does
    and writing nothing. Returns (current, assess()'s result). params: verify, source, revision, mode,
    directory_mode, owner, group (the module's names)."""
    final = os.path.join(store, model_path)
    found = assess(final, entries, params.get("verify", "fast"))
    if found["todo"] or found["extras"]:
        return False, found
    wanted = manifest_data(entries, found["good"], params.get("source"), params.get("revision"))
    if not same_manifest(found["manifest"], wanted) or sums_differ(final, entries):
        return False, found
    uid, gid = owner_ids(params.get("owner"), params.get("group"), host)
    dry = set_tree_attributes(
        final, octal(params.get("mode"), 0o644), octal(params.get("directory_mode"), 0o755), uid, gid, dry=True
    )
    return not dry, found


def refuse_nested(store, model_path, host):
    nested = nested_models(store, model_path)
    if nested:
        raise WeightsError(
            [
                problem(
                    "NESTED_MODEL",
                    host,
                    "path",
                    "%s: %s holds or is inside other published models (%s): a model directory is replaced as one"
                    % (host, model_path, ", ".join(nested)),
                    "keep each model in its own directory, none inside another",
                )
            ]
        )


def same_manifest(old, new):
    """Whether a manifest on disk says what new says (the verified times aside)."""
    if not old:
        return False

    def core(data):
        return (
            data.get("source"),
            data.get("revision"),
            [(r.get("path"), r.get("size"), r.get("sha256"), r.get("mtime_ns")) for r in data.get("files", [])],
        )

    return core(old) == core(new)


def sums_differ(model_dir, entries):
    try:
        with open(os.path.join(model_dir, SUMS), "rb") as handle:
            return handle.read().decode("utf-8", "replace") != sums_text(entries)
    except OSError:
        return True


def apply(store, model_path, entries, params, http, host, result, uid, gid, exchange, progress=None):
    """Under the store's lock: nothing when the published model is current; else build the staging tree (links to
    good files, fetches for the rest) and publish it. Files whose size the list does not give are asked for it
    (HEAD) first, so that the room check and the size check of the fetch know it."""
    progress = progress or Progress(None, model_path, result)
    file_mode = octal(params.get("mode"), 0o644)
    dir_mode = octal(params.get("directory_mode"), 0o755)
    final = os.path.join(store, model_path)
    staging = os.path.join(store, STAGING, model_path)
    remove_tree(os.path.join(store, STAGING, RETIRED))  # what a fallback publish left when interrupted
    refuse_nested(store, model_path, host)
    found = assess(final, entries, params.get("verify", "fast"))
    result["hashed"] = found["hashed"]
    source, revision = params.get("source"), params.get("revision")
    result["bytes_total"] = sum(r["size"] for r in found["good"].values())
    if not found["todo"] and not found["extras"]:
        # Every file is good where it is: at most the manifest, SHA256SUMS and the attributes to fix, in place.
        result["reused"] = len(found["good"])
        wanted = manifest_data(entries, found["good"], source, revision)
        if sums_differ(final, entries):
            write_file_atomic(os.path.join(final, SUMS), sums_text(entries).encode("utf-8"), file_mode)
            result["changed"] = True
        if not same_manifest(found["manifest"], wanted):
            write_json(os.path.join(final, MANIFEST), wanted, file_mode)
            result["changed"] = True
        if set_tree_attributes(final, file_mode, dir_mode, uid, gid):
            result["changed"] = True
        remove_tree(staging)  # an interrupted run's leftovers: the published model is current
        prune_empty(os.path.dirname(staging), os.path.join(store, STAGING))
        return

    http.limit.check("waiting for the store's lock and reading the published model")
    make_dirs(os.path.dirname(staging), 0o700)
    kept = clean_staging(staging, entries)
    result["sizes_unknown"] = learn_sizes(found["todo"], kept, params["url"], http, host)
    refuse_without_room(store, staging, model_path, found["todo"], kept, host)
    make_dirs(staging, 0o700)
    recs = dict(kept)
    stats = result  # bytes_fetched and bytes_resumed, counted as they come (a failure still reports them)
    todo = {e["path"] for e in found["todo"]}
    progress.start(model_size(entries, found, kept))
    for entry in entries:
        target = os.path.join(staging, entry["path"])
        if entry["path"] in kept:
            stats["bytes_resumed"] += kept[entry["path"]]["size"]  # finished by an interrupted run
            result["fetched"].append({"path": entry["path"], "size": kept[entry["path"]]["size"]})
            progress.add(kept[entry["path"]]["size"])
            continue
        make_dirs(os.path.dirname(target), 0o700)
        if entry["path"] not in todo:
            good = os.path.join(final, entry["path"])
            try:
                os.link(good, target)
            except OSError:
                shutil.copy2(good, target)  # a file system without hard links
            rec = found["good"][entry["path"]]
            st = regular_stat(target)
            recs[entry["path"]] = rec if stat_matches(rec, st) else record(entry, st, rec["verified"])
            result["reused"] += 1
            progress.add(st.st_size)
        else:
            url = file_url(params["url"], entry["path"])
            progress.begin_file(entry["path"])
            try:
                fetch_file(http, url, target, entry, host, stats, progress)
            except HttpFailure as exc:
                raise WeightsError([http_problem(exc, host, "fetching %s from" % entry["path"])]) from None
            st = regular_stat(target)
            recs[entry["path"]] = record(entry, st, now_text())
            result["fetched"].append({"path": entry["path"], "size": st.st_size})
            progress.end_file(st.st_size)
        write_json(os.path.join(staging, MANIFEST), manifest_data(entries, recs, source, revision), 0o600)
    write_file_atomic(os.path.join(staging, SUMS), sums_text(entries).encode("utf-8"), file_mode)
    recs = {e["path"]: refreshed(recs[e["path"]], regular_stat(os.path.join(staging, e["path"]))) for e in entries}
    write_json(os.path.join(staging, MANIFEST), manifest_data(entries, recs, source, revision), file_mode)
    set_tree_attributes(staging, file_mode, dir_mode, uid, gid)
    result["bytes_total"] = sum(r["size"] for r in recs.values())
    http.limit.check("about to publish %s (every file is in staging)" % model_path)
    result["swapped"] = publish(staging, final, store, dir_mode, uid, gid, exchange)
    result["changed"] = True
    prune_empty(os.path.dirname(staging), os.path.join(store, STAGING))


def learn_sizes(todo, kept, base_url, http, host):
    """Ask the server (one HEAD each) the size of every file still to fetch whose size the file list does not give
    (a SHA256SUMS carries none); the size answered goes into the entry, with ``size_from: HEAD``. Returns the paths
    whose size stays unknown (no Content-Length, or a server refusing HEAD with 405 or 501)."""
    unknown = []
    for entry in todo:
        if entry["path"] in kept or entry.get("size") is not None:
            continue
        try:
            size = http.size(file_url(base_url, entry["path"]))
        except HttpFailure as exc:
            if exc.status not in (405, 501):
                raise WeightsError([http_problem(exc, host, "asking the size of %s at" % entry["path"])]) from None
            size = None
        if size is None:
            unknown.append(entry["path"])
        else:
            entry["size"], entry["size_from"] = size, "HEAD"
    return unknown


def model_size(entries, found, kept):
    """Bytes of the whole model once fetched (files kept, good and to fetch), or None when a size is unknown."""
    total = 0
    for entry in entries:
        if entry["path"] in kept:
            total += kept[entry["path"]]["size"]
        elif entry["path"] in found["good"]:
            total += found["good"][entry["path"]]["size"]
        elif entry.get("size") is None:
            return None
        else:
            total += entry["size"]
    return total


def room_needed(staging, todo, kept):
    """Bytes the files still to fetch will add to the store's file system: their sizes (from the list, else from a
    HEAD; a file of unknown size counts for nothing) less what their parts in staging already hold. Good files are
    hard-linked and take no room."""
    needed = 0
    for entry in todo:
        if entry["path"] in kept or entry.get("size") is None:
            continue
        try:
            have = os.path.getsize(os.path.join(staging, entry["path"]) + PART)
        except OSError:
            have = 0
        needed += max(int(entry["size"]) - have, 0)
    return needed


def refuse_without_room(store, staging, model_path, todo, kept, host):
    """A fetch that cannot fit is refused before a byte moves (the store's file system, as an unprivileged user may
    still write it)."""
    needed = room_needed(staging, todo, kept)
    st = os.statvfs(store)
    available = st.f_bavail * st.f_frsize
    if needed > available:
        raise WeightsError(
            [
                problem(
                    "NO_ROOM",
                    host,
                    "store",
                    "%s: %s needs %.2f GB more on the file system of %s, which has %.2f GB free: nothing was fetched"
                    % (host, model_path, needed / 1e9, store, available / 1e9),
                    "free room on the store's file system (or give the store a larger disk), then run again",
                )
            ]
        )


def refreshed(rec, st):
    """A record with the size and mtime_ns the file has now (chmod and chown leave them, a copy may not)."""
    out = dict(rec)
    out["size"], out["mtime_ns"] = st.st_size, st.st_mtime_ns
    return out
