# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A short-lived HTTP server that hands model directories to the GPU nodes: what the controller holds (a Hub
snapshot, a seed directory) or what a node already verified, fetched by the others with model_weights.

Only GET and HEAD of the regular files below the served directories, with the secret token as a bearer credential
(`Authorization: Bearer <token>`: kept out of URLs, which errors and logs show);
single byte ranges (206, If-Range on the ETag or Last-Modified, 416 past the end), so an interrupted fetch resumes.
The server stops when the stop file appears or its lifetime ends, whichever comes first. Standard library only."""

import email.utils
import hmac
import json
import os
import re
import threading
import time

try:
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
except ImportError:  # pragma: no cover - Python 2 is not supported by the collection's modules
    BaseHTTPRequestHandler = object
    ThreadingHTTPServer = None

RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")
CHUNK = 1024 * 1024
HIDDEN = (".cache", ".staging")


def etag(st):
    """A strong validator of one version of a file: its size and mtime (a file rewritten in place changes both or its
    mtime)."""
    return '"%x-%x"' % (st.st_size, st.st_mtime_ns)


def authorized(header, token):
    """Whether an Authorization header carries the token (compared in constant time)."""
    scheme, sep, value = (header or "").strip().partition(" ")
    return bool(sep) and scheme.lower() == "bearer" and hmac.compare_digest(value.strip().encode(), token.encode())


def resolve(directories, url_path):
    """The file a request path names, or None. url_path is '/<name>/<relative path>', where <name> is a key of
    `directories` ({name: directory}); a path leaving its directory, a hidden HIDDEN segment, a link or anything but a
    regular file is None."""
    parts = url_path.split("?", 1)[0].split("/")
    if len(parts) < 3 or parts[0] != "":
        return None
    rest = parts[1:]
    if any(p in ("", ".", "..") or p in HIDDEN for p in rest):
        return None
    for cut in range(len(rest) - 1, 0, -1):
        name = "/".join(rest[:cut])
        if name in directories:
            root = os.path.realpath(directories[name])
            path = os.path.join(root, *rest[cut:])
            if os.path.realpath(path) != path or not os.path.isfile(path) or os.path.islink(path):
                return None
            return path
    return None


def byte_range(header, size):
    """(start, end) inclusive of one 'bytes=a-b' / 'bytes=a-' / 'bytes=-n' header for a file of `size` bytes; None for
    no (or an unsupported, e.g. multi-range) header, which gets the whole file; 'unsatisfiable' past the end."""
    if not header:
        return None
    match = RANGE.match(header.strip())
    if not match or match.groups() == ("", ""):
        return None
    first, last = match.groups()
    if first == "":
        length = int(last)
        if length == 0:
            return "unsatisfiable"
        return (max(size - length, 0), size - 1)
    start = int(first)
    end = min(int(last), size - 1) if last else size - 1
    if start >= size or end < start:
        return "unsatisfiable"
    return (start, end)


class Stats(object):
    def __init__(self):
        self.lock = threading.Lock()
        self.requests = 0
        self.bytes_sent = 0
        self.refused = 0

    def add(self, sent=0, refused=False):
        with self.lock:
            self.requests += 1
            self.bytes_sent += sent
            self.refused += 1 if refused else 0


def handler_class(directories, token, stats):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "aiinfra-model-mirror"

        def log_message(self, *args):  # no access log on the module's stderr
            return

        def refuse(self, code):
            stats.add(refused=True)
            self.send_response(code)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_HEAD(self):
            self.answer(body=False)

        def do_GET(self):
            self.answer(body=True)

        def answer(self, body):
            if not authorized(self.headers.get("Authorization"), token):
                return self.refuse(401)
            path = resolve(directories, self.path)
            if path is None:
                return self.refuse(404)
            try:
                fd = os.open(path, os.O_RDONLY)
            except OSError:
                return self.refuse(404)
            with os.fdopen(fd, "rb") as handle:
                st = os.fstat(handle.fileno())
                tag = etag(st)
                modified = email.utils.formatdate(st.st_mtime, usegmt=True)
                wanted = byte_range(self.headers.get("Range"), st.st_size)
                if_range = self.headers.get("If-Range")
                if wanted is not None and if_range and if_range not in (tag, modified):
                    wanted = None  # the part the client holds is of another version: the whole file
                if wanted == "unsatisfiable":
                    stats.add(refused=True)
                    self.send_response(416)
                    self.send_header("Content-Range", "bytes */%d" % st.st_size)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return None
                start, end = wanted if wanted else (0, st.st_size - 1)
                length = max(end - start + 1, 0)
                self.send_response(206 if wanted else 200)
                if wanted:
                    self.send_header("Content-Range", "bytes %d-%d/%d" % (start, end, st.st_size))
                self.send_header("Content-Length", str(length))
                self.send_header("Content-Type", "application/octet-stream")
                self.send_header("Accept-Ranges", "bytes")
                self.send_header("ETag", tag)
                self.send_header("Last-Modified", modified)
                self.end_headers()
                sent = 0
                if body and length:
                    sent = self.send_body(handle, start, length)
                stats.add(sent=sent)
            return None

        def send_body(self, handle, start, length):
            self.wfile.flush()
            sent, offset = 0, start
            try:
                while sent < length:
                    n = os.sendfile(self.connection.fileno(), handle.fileno(), offset, min(CHUNK * 8, length - sent))
                    if n == 0:
                        break
                    sent += n
                    offset += n
            except (AttributeError, OSError):
                handle.seek(offset)
                while sent < length:
                    block = handle.read(min(CHUNK, length - sent))
                    if not block:
                        break
                    try:
                        self.wfile.write(block)
                    except OSError:
                        break
                    sent += len(block)
            return sent

    return Handler


def make_server(address, port, directories, token, stats):
    server = ThreadingHTTPServer((address, port), handler_class(directories, token, stats))
    server.daemon_threads = True
    return server


def serve(address, port, directories, token, lifetime, stop_file, port_file=None, clock=time.monotonic):
    """Serve until `stop_file` exists or `lifetime` seconds passed. Writes the bound port to `port_file` (mode 0600)
    once listening. Returns {"port", "requests", "bytes_sent", "refused", "seconds", "stopped_by"}."""
    stats = Stats()
    server = make_server(address, port, directories, token, stats)
    bound = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2})
    thread.daemon = True
    thread.start()
    started = clock()
    if port_file:
        fd = os.open(port_file + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            json.dump({"port": bound, "pid": os.getpid()}, out)
        os.replace(port_file + ".tmp", port_file)
    stopped_by = "lifetime"
    try:
        while clock() - started < lifetime:
            if os.path.exists(stop_file):
                stopped_by = "stop_file"
                break
            time.sleep(0.2)
    finally:
        server.shutdown()
        server.server_close()
    return {
        "port": bound,
        "requests": stats.requests,
        "bytes_sent": stats.bytes_sent,
        "refused": stats.refused,
        "seconds": round(clock() - started, 3),
        "stopped_by": stopped_by,
    }
