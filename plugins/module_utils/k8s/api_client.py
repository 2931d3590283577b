# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Read Kubernetes objects through the API with the standard library only: a kubeconfig's server, CA and
client certificate or bearer token; discovery of a kind's resource path; GET by name or paginated LIST.

Importing the kubernetes client and its dynamic discovery costs about half a second per task. This reader
costs a TLS handshake. It speaks the kubeconfigs K3s and kube-apiserver setups write (client certificate, token,
token file, CA file or data, insecure-skip-tls-verify, tls-server-name) and checks the server as the kubernetes
client does: against the kubeconfig's CA alone when it names one (the system's CAs otherwise), with Python's strict
X.509 checks. A kubeconfig that needs anything else (an exec or auth-provider plugin, basic auth, impersonation, a
proxy, from the kubeconfig or from the proxy environment variables) raises Unsupported, so that the caller can hand
the read to the kubernetes client instead.
"""

import base64
import binascii
import http.client
import json
import os
import ssl
import sys
import tempfile
from urllib.parse import quote, urlencode, urlsplit
from urllib.request import proxy_bypass_environment

from ansible_collections.aiinfra.k3s.plugins.module_utils.k8s.api_list import ListError, iter_all

# Keys of a kubeconfig's user and cluster entries that need the kubernetes client (this reader reads the client
# certificate and key, token and tokenFile of a user; server, CA, insecure-skip-tls-verify and tls-server-name of a
# cluster).
UNSUPPORTED_USER_KEYS = ("exec", "auth-provider", "username", "password", "as", "as-uid", "as-groups", "as-user-extra")
UNSUPPORTED_CLUSTER_KEYS = ("proxy-url",)

# The options of aiinfra.k3s.api_objects_info (its action and its documentation stub share them).
ARGUMENT_SPEC = dict(
    kubeconfig=dict(type="path"),
    context=dict(type="str"),
    api_version=dict(type="str", default="v1"),
    kind=dict(type="str", required=True),
    name=dict(type="str"),
    namespace=dict(type="str"),
    label_selectors=dict(type="list", elements="str", default=[]),
    field_selectors=dict(type="list", elements="str", default=[]),
    validate_certs=dict(type="bool"),
    timeout=dict(type="int", default=60),
)

# The options of aiinfra.k3s.api_objects (server-side apply; its action and its documentation stub share them).
APPLY_ARGUMENT_SPEC = dict(
    kubeconfig=dict(type="path"),
    context=dict(type="str"),
    definition=dict(type="list", elements="dict", required=True),
    field_manager=dict(type="str", required=True),
    force_conflicts=dict(type="bool", default=True),
    validate_certs=dict(type="bool"),
    timeout=dict(type="int", default=60),
)
# What an apply that changed nothing may still answer differently (the dry run of check mode keeps no version); the
# managedFields are compared without their times (a new owner of the same fields is a change, as a real apply says).
VOLATILE_METADATA = ("resourceVersion", "managedFields", "generation")


class ApiError(Exception):
    """A request failed: status is the HTTP status (None when no answer came)."""

    def __init__(self, message, status=None):
        super().__init__(message)
        self.status = status


class Unsupported(Exception):
    """The kubeconfig needs an authentication or connection method this reader does not speak."""


def _entry(config, section, name, what):
    for item in config.get(section) or []:
        if isinstance(item, dict) and item.get("name") == name:
            entry = item.get(what) or {}
            if not isinstance(entry, dict):
                raise ApiError("the kubeconfig's %s %r is not a mapping" % (what, name))
            return entry
    raise ApiError("the kubeconfig has no %s named %r" % (what, name))


def proxies(environ):
    """{scheme: proxy URL, 'no': NO_PROXY} from an environment, as urllib reads *_proxy variables (lower case wins)."""
    found = {}
    for name in sorted(environ, key=lambda n: n.islower()):  # lower-case names last, so they win
        if name.lower().endswith("_proxy") and environ[name]:
            found[name[:-6].lower()] = environ[name]
    return found


def through_proxy(environ, scheme, host):
    """Whether the kubernetes client would reach host through a proxy of this environment (its scheme's or ALL_PROXY,
    unless NO_PROXY names the host)."""
    found = proxies(environ)
    return bool(found.get(scheme) or found.get("all")) and not proxy_bypass_environment(host, found)


def _resolve(path, base_dir):
    path = os.path.expanduser(str(path))
    return path if os.path.isabs(path) else os.path.join(base_dir, path)


def load_kubeconfig(path, context=None):
    """(cluster, user, base_dir) of the kubeconfig at path for context (its current-context by default)."""
    import yaml  # the controller's Python has it (Ansible needs it); only a kubeconfig read needs it here

    path = os.path.expanduser(str(path))
    try:
        with open(path, encoding="utf-8") as handle:
            config = yaml.safe_load(handle)
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ApiError("cannot read the kubeconfig %s: %s" % (path, exc)) from exc
    if not isinstance(config, dict):
        raise ApiError("the kubeconfig %s is not a mapping" % path)
    name = context or config.get("current-context")
    if not name:
        raise ApiError("the kubeconfig %s has no current-context and no context was given" % path)
    ctx = _entry(config, "contexts", name, "context")
    cluster = _entry(config, "clusters", ctx.get("cluster"), "cluster")
    user = _entry(config, "users", ctx.get("user"), "user") if ctx.get("user") else {}
    return cluster, user, os.path.dirname(os.path.abspath(path))


class Connection:
    """One API server, reached with the kubeconfig's credentials. Requests reuse one HTTP connection."""

    def __init__(self, cluster, user, base_dir=".", timeout=60, validate_certs=True, environ=None):
        for key in UNSUPPORTED_USER_KEYS:
            if user.get(key):
                raise Unsupported("the kubeconfig's user sets %s" % key)
        for key in UNSUPPORTED_CLUSTER_KEYS:
            if cluster.get(key):
                raise Unsupported("the kubeconfig's cluster sets %s" % key)
        server = str(cluster.get("server") or "")
        try:
            url = urlsplit(server)
            port = url.port
        except ValueError as exc:
            raise ApiError("the kubeconfig's server %r is not a URL: %s" % (server, exc)) from exc
        if url.scheme not in ("https", "http") or not url.hostname:
            raise ApiError("the kubeconfig's server %r is not an http(s) URL" % server)
        port = port or (443 if url.scheme == "https" else 80)
        # The kubernetes client goes through the proxy of HTTPS_PROXY/HTTP_PROXY/ALL_PROXY unless NO_PROXY exempts the
        # host (environ: the task's environment over the controller's).
        if through_proxy(os.environ if environ is None else environ, url.scheme, url.hostname):
            raise Unsupported("the environment sets a proxy for %s" % url.hostname)
        self.server = server.rstrip("/")
        self._prefix = url.path.rstrip("/")
        self._scheme, self._host, self._port = url.scheme, url.hostname, port
        self._timeout = timeout
        self._headers = {"Accept": "application/json", "User-Agent": "aiinfra.k3s"}
        token = user.get("token")
        if not token and user.get("tokenFile"):
            try:
                with open(_resolve(user["tokenFile"], base_dir)) as handle:
                    token = handle.read().strip()
            except OSError as exc:
                raise ApiError("cannot read the kubeconfig's tokenFile: %s" % exc) from exc
        if token:
            self._headers["Authorization"] = "Bearer %s" % token
        self._context = None
        self._server_name = cluster.get("tls-server-name") or None
        if self._scheme == "https":
            self._context = self._tls_context(cluster, user, base_dir, validate_certs)
        self._conn = None
        self._resources = {}

    @staticmethod
    def _pem(entry, key, base_dir):
        if entry.get(key + "-data"):
            try:  # wrapped base64 (line breaks) is accepted, as the kubernetes client accepts it
                return base64.b64decode("".join(str(entry[key + "-data"]).split()), validate=True)
            except (binascii.Error, ValueError) as exc:
                raise ApiError("the kubeconfig's %s-data is not base64: %s" % (key, exc)) from exc
        if entry.get(key):
            try:
                with open(_resolve(entry[key], base_dir), "rb") as handle:
                    return handle.read()
            except OSError as exc:
                raise ApiError("cannot read the kubeconfig's %s: %s" % (key, exc)) from exc
        return None

    def _tls_context(self, cluster, user, base_dir, validate_certs):
        # Not create_default_context(): it trusts the system's CAs too, and the kubeconfig's CA must be the only
        # one that can vouch for the API server (the kubernetes client, urllib3, loads the system's only without).
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        # The checks urllib3 adds on Python 3.13+ (as create_default_context does there), and only there.
        if sys.version_info >= (3, 13):
            context.verify_flags |= ssl.VERIFY_X509_STRICT | ssl.VERIFY_X509_PARTIAL_CHAIN
        # validate_certs false skips the check; otherwise the kubeconfig decides.
        if cluster.get("insecure-skip-tls-verify") or validate_certs is False:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        else:
            ca = self._pem(cluster, "certificate-authority", base_dir)
            try:
                if ca:
                    context.load_verify_locations(cadata=ca.decode("ascii", "replace"))
                else:
                    context.load_default_certs()
            except ssl.SSLError as exc:
                raise ApiError("the kubeconfig's certificate-authority cannot be used: %s" % exc) from exc
        cert = self._pem(user, "client-certificate", base_dir)
        key = self._pem(user, "client-key", base_dir)
        if cert or key:
            if not (cert and key):
                raise ApiError("the kubeconfig's user has a client certificate or key without the other")
            # load_cert_chain reads files only: the pair goes to a private file that is removed at once.
            fd, pair = tempfile.mkstemp(prefix="aiinfra-k3s-client-")
            try:
                with os.fdopen(fd, "wb") as handle:
                    handle.write(cert.rstrip(b"\n") + b"\n" + key)
                context.load_cert_chain(pair)
            except ssl.SSLError as exc:
                raise ApiError("the kubeconfig's client certificate or key cannot be used: %s" % exc) from exc
            finally:
                os.unlink(pair)
        return context

    def _connect(self):
        if self._scheme == "http":
            return http.client.HTTPConnection(self._host, self._port, timeout=self._timeout)
        conn = http.client.HTTPSConnection(self._host, self._port, timeout=self._timeout, context=self._context)
        if self._server_name:
            name, wrap = self._server_name, self._context.wrap_socket

            def connect():  # the certificate is checked against tls-server-name, not the server's host
                http.client.HTTPConnection.connect(conn)
                conn.sock = wrap(conn.sock, server_hostname=name)

            conn.connect = connect
        return conn

    def request(self, path, query=None, method="GET", body=None, content_type=None):
        """The decoded JSON of METHOD path?query (body: an object sent as JSON with content_type); ApiError with the
        status on anything but 200 or 201."""
        target = self._prefix + path + ("?" + urlencode(query) if query else "")
        headers, data = self._headers, None
        if body is not None:
            data = json.dumps(body).encode()
            headers = dict(self._headers, **{"Content-Type": content_type or "application/json"})
        for attempt in (1, 2):
            if self._conn is None:
                self._conn = self._connect()
            try:
                self._conn.request(method, target, body=data, headers=headers)
                response = self._conn.getresponse()
                answer = response.read()
                break
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError) as exc:
                # a kept-alive connection the server closed: one new connection, then give up
                self.close()
                if attempt == 2:
                    raise ApiError("%s%s: %s" % (self.server, path, exc)) from exc
            except (OSError, http.client.HTTPException) as exc:
                self.close()
                raise ApiError("%s%s: %s" % (self.server, path, exc)) from exc
        if response.status not in (200, 201):
            try:
                reason = json.loads(answer).get("message") or response.reason
            except (ValueError, AttributeError):
                reason = response.reason
            raise ApiError("%s%s: %s %s" % (self.server, path, response.status, reason), response.status)
        try:
            return json.loads(answer)
        except ValueError as exc:
            raise ApiError("%s%s: the answer is not JSON: %s" % (self.server, path, exc)) from exc

    def close(self):
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def resource(self, api_version, kind):
        """(plural, namespaced) of kind in api_version from the API's discovery, or None if it is not served."""
        key = (api_version, kind)
        if key not in self._resources:
            base = "/api/v1" if api_version == "v1" else "/apis/%s" % api_version
            try:
                listing = self.request(base)
            except ApiError as exc:
                if exc.status != 404:
                    raise
                listing = {}
            found = None
            for res in listing.get("resources") or []:
                if res.get("kind") == kind and "/" not in res.get("name", ""):
                    found = (res["name"], bool(res.get("namespaced")))
                    break
            self._resources[key] = found
        return self._resources[key]


def default_kubeconfig(environ=None):
    """The kubeconfig the kubernetes client reads when none is named: KUBECONFIG's first path, or ~/.kube/config."""
    environ = os.environ if environ is None else environ
    first = (environ.get("KUBECONFIG") or "").split(os.pathsep)[0]
    return first or "~/.kube/config"


def connect(kubeconfig, context=None, timeout=60, validate_certs=True, environ=None, base_dir=None):
    """A Connection from the kubeconfig file (Unsupported when it needs the kubernetes client). environ: the
    environment whose proxy variables count (the controller's by default); base_dir: where the kubeconfig's relative
    paths start (its own directory by default; the original file's for a decrypted copy)."""
    cluster, user, own_dir = load_kubeconfig(kubeconfig, context)
    return Connection(
        cluster, user, base_dir or own_dir, timeout=timeout, validate_certs=validate_certs, environ=environ
    )


def collection_path(api_version, plural, namespace=None):
    base = "/api/v1" if api_version == "v1" else "/apis/%s" % api_version
    if namespace:
        base += "/namespaces/%s" % quote(namespace, safe="")
    return "%s/%s" % (base, plural)


def read_objects(conn, api_version, kind, name=None, namespace=None, label_selectors=(), field_selectors=(), limit=500):
    """(api_found, objects) of kind: the one named (none when it does not exist) or every one that matches the
    selectors, in the namespace or across all of them. Each object carries its apiVersion and kind, as a
    single GET returns them (a LIST's items do not)."""
    found = conn.resource(api_version, kind)
    if found is None:
        return False, []
    plural, namespaced = found
    path = collection_path(api_version, plural, namespace if namespaced else None)
    if name:
        try:
            obj = conn.request("%s/%s" % (path, quote(name, safe="")))
        except ApiError as exc:
            if exc.status == 404:
                return True, []
            raise
        return True, [obj]
    query = []
    if label_selectors:
        query.append(("labelSelector", ",".join(label_selectors)))
    if field_selectors:
        query.append(("fieldSelector", ",".join(field_selectors)))

    def page(size, token):
        return conn.request(path, query + [("limit", size)] + ([("continue", token)] if token else []))

    objects = []
    try:
        for item in iter_all(page, limit):
            item.setdefault("apiVersion", api_version)
            item.setdefault("kind", kind)
            objects.append(item)
    except ListError as exc:
        raise ApiError("%s: %s" % (path, exc)) from exc
    return True, objects


def _comparable(obj):
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in VOLATILE_METADATA}
    owners = [{k: v for k, v in entry.items() if k != "time"} for entry in (obj.get("metadata") or {}).get(
        "managedFields") or [] if isinstance(entry, dict)]  # fmt: skip
    meta["managedFields"] = sorted(owners, key=lambda entry: json.dumps(entry, sort_keys=True))
    return dict(obj, metadata=meta)


def apply_objects(conn, objects, field_manager, force=True, dry_run=False):
    """Server-side apply of each object in order, as `kubectl apply --server-side` does: a GET of the object as it is,
    then a PATCH with the apply content type. Returns [(before or None, after)]; an object changed when it is new or
    its resourceVersion moved (with dry_run, nothing is stored: when its content, less what only a write changes,
    differs). ApiError names the object; a kind the API does not serve is an error too."""
    out = []
    for obj in objects:
        api_version, kind = obj.get("apiVersion"), obj.get("kind")
        meta = obj.get("metadata") or {}
        name = meta.get("name")
        if not (api_version and kind and name):
            raise ApiError("an object to apply needs apiVersion, kind and metadata.name: %s" % _label(obj))
        found = conn.resource(api_version, kind)
        if found is None:
            raise ApiError("%s: the API serves no %s in %s" % (_label(obj), kind, api_version))
        plural, namespaced = found
        path = "%s/%s" % (collection_path(api_version, plural, (meta.get("namespace") or "default") if namespaced
                                          else None), quote(name, safe=""))  # fmt: skip
        try:
            before = conn.request(path)
        except ApiError as exc:
            if exc.status != 404:
                raise ApiError("%s: %s" % (_label(obj), exc), exc.status) from exc
            before = None
        query = [("fieldManager", field_manager)] + ([("force", "true")] if force else [])
        query += [("dryRun", "All")] if dry_run else []
        try:
            after = conn.request(path, query, method="PATCH", body=obj, content_type="application/apply-patch+yaml")
        except ApiError as exc:
            raise ApiError("%s: %s" % (_label(obj), exc), exc.status) from exc
        out.append((before, after))
    return out


def applied_changed(before, after, dry_run=False):
    """Whether one apply of apply_objects changed the object (or would, with dry_run)."""
    if before is None:
        return True
    if dry_run:
        return _comparable(before) != _comparable(after)
    return (before.get("metadata") or {}).get("resourceVersion") != (after.get("metadata") or {}).get("resourceVersion")


def _label(obj):
    meta = obj.get("metadata") or {}
    where = (meta.get("namespace") + "/") if meta.get("namespace") else ""
    return "%s %s%s" % (obj.get("kind"), where, meta.get("name"))
