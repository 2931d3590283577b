"""lab/live/crds.py: pins read from the role defaults, the SOURCES table, version fallbacks, the cert-manager template
rendering, CRD name extraction, the cache and the kubectl calls (no network, no cluster)."""

import re
import stat
import sys

import pytest
import yaml

from lab.live import crds
from lab.pins import read_pin

TRAEFIK_REFUSAL = (
    "github.com/traefik/traefik/v3@v3.3.6: reading https://proxy.golang.org/github.com/traefik/traefik/v3/@v/"
    "v3.3.6.mod: 403 Forbidden\n\tserver response: This module version is not available."
)


@pytest.mark.parametrize(
    ("derive", "pin", "expected"),
    [
        ("same", "2.17.0", "v2.17.0"),
        ("same", "v1.18.2", "v1.18.2"),
        ("k3s:traefik", "v1.33.5+k3s1", "v3.3.6"),
        ("k3s:helm-controller", "v1.33.5+k3s1", "v0.16.13"),
        ("kube-prometheus-stack", "77.1.1", "v0.85.0"),
    ],
)
def test_module_version(derive, pin, expected):
    assert crds.module_version(derive, pin) == expected


@pytest.mark.parametrize(
    ("derive", "pin", "message"),
    [
        ("k3s:traefik", "v1.99.0+k3s1", "K3S_EMBEDDED"),
        ("kube-prometheus-stack", "1.0.0", "KUBE_PROMETHEUS_STACK_OPERATOR"),
        ("chart-index", "1.0.0", "unknown derive rule"),
    ],
)
def test_module_version_refuses_what_no_table_knows(derive, pin, message):
    with pytest.raises(crds.CrdError, match=message):
        crds.module_version(derive, pin)


def test_pins_of_the_repository(root):
    """The versions the collection pins today, and what they stand for (update with the role defaults)."""
    assert crds.pins_for(root=root) == {
        "helm-controller": ("v1.36.4+k3s1", "v0.17.7"),
        "traefik": ("v1.36.4+k3s1", "v3.7.8"),
        "cert-manager": ("v1.21.2", "v1.21.2"),
        "keda": ("2.21.1", "v2.21.1"),
        "prometheus-operator": ("93.9.0", "v0.95.1"),
        "gpu-operator": ("v26.7.1", "v26.7.1"),
    }


def test_pins_name_the_file_that_lacks_one(tmp_path):
    defaults = tmp_path / "roles" / "x" / "defaults" / "main.yml"
    defaults.parent.mkdir(parents=True)
    defaults.write_text("other: 1\n")
    source = crds.Source("x", "example.test/x", "x_version", "same", ("*.yaml",), ())
    with pytest.raises(crds.CrdError, match=r"^x: roles/x/defaults/main.yml: no `x_version:` line$"):
        crds.pins_for((source,), root=tmp_path)


def test_sources_table(root):
    names = [s.name for s in crds.SOURCES]
    assert len(names) == len(set(names))
    for source in crds.SOURCES:
        assert read_pin(source.key, root)
        assert source.globs and all(not g.startswith("/") and ".." not in g for g in source.globs)
        assert all(re.fullmatch(r"[a-z0-9]+(\.[a-z0-9-]+)+", name) for name in source.required), source.required
        assert source.render in ("", "cert-manager")
        assert source.fallback in ("", "nearest-patch") or source.fallback.startswith("v")


def custom_kinds(root):
    """(group, kind) of every object with a non-built-in apiVersion that plugins/module_utils builds."""
    found = set()
    for path in sorted((root / "plugins" / "module_utils").rglob("*.py")):
        text = path.read_text()
        constants = dict(re.findall(r'^([A-Z_]+) = "([^"]+)"$', text, re.MULTILINE))
        pairs = re.findall(r'"apiVersion":\s*(?:"([^"]+)"|([A-Z_]+)),\s*"kind":\s*"(\w+)"', text)
        for literal, constant, kind in pairs:
            api_version = literal or constants[constant]
            group = api_version.rsplit("/", 1)[0] if "/" in api_version else ""
            if "." in group and not group.endswith(".k8s.io"):
                found.add((group, kind))
    return found


def test_every_custom_kind_the_collection_builds_has_its_crd_required(root):
    kinds = custom_kinds(root)
    assert ("traefik.io", "IngressRoute") in kinds and ("keda.sh", "ScaledObject") in kinds  # not vacuous
    required = {name for source in crds.SOURCES for name in source.required}
    assert {f"{kind.lower()}s.{group}" for group, kind in kinds} <= required


@pytest.mark.parametrize(
    ("version", "fallback", "expected"),
    [
        ("v3.3.6", "", ["v3.3.6"]),
        ("v3.3.6", "nearest-patch", ["v3.3.6", "v3.3.5", "v3.3.7", "v3.3.4", "v3.3.8", "v3.3.3", "v3.3.9"]),
        ("v0.16.1", "nearest-patch", ["v0.16.1", "v0.16.0", "v0.16.2", "v0.16.3", "v0.16.4"]),
        ("v25.10.1", "v0.0.0-20250917190837-d73a0086a6ba", ["v25.10.1", "v0.0.0-20250917190837-d73a0086a6ba"]),
        ("v1.0.0-rc.1", "nearest-patch", ["v1.0.0-rc.1"]),
    ],
)
def test_candidates(version, fallback, expected):
    assert crds.candidates(version, fallback) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (TRAEFIK_REFUSAL, "403 Forbidden: This module version is not available."),
        (
            "go: github.com/x/y@v9.9.9: verifying go.mod: reading https://proxy.golang.org/sumdb/sum.golang.org/"
            "lookup/github.com/x/y@v9.9.9: 404 Not Found",
            "go: github.com/x/y@v9.9.9: verifying go.mod: reading https://proxy.golang.org/sumdb/sum.golang.org/"
            "lookup/github.com/x/y@v9.9.9: 404 Not Found",
        ),
        ("dial tcp: lookup proxy.golang.org: no such host\n", "dial tcp: lookup proxy.golang.org: no such host"),
        ("", "no output"),
    ],
)
def test_proxy_error(text, expected):
    assert crds.proxy_error(text) == expected


def test_refusal_or_not():
    assert crds.is_refusal(crds.proxy_error(TRAEFIK_REFUSAL))
    assert not crds.is_refusal("dial tcp: lookup proxy.golang.org: no such host")


CRD_STREAM = """# leading comment
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  annotations:
    controller-gen.kubebuilder.io/version: v0.18.0
  name: servicemonitors.monitoring.coreos.com
spec:
  names:
    kind: ServiceMonitor
    name: not-this
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: not-a-crd
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
    # comment
    labels:
        name: a-label
    name: "podmonitors.monitoring.coreos.com"
"""


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (CRD_STREAM, ["servicemonitors.monitoring.coreos.com", "podmonitors.monitoring.coreos.com"]),
        ("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n", []),
        ("", []),
    ],
)
def test_crd_names(text, expected):
    assert crds.crd_names(text) == expected


def test_crd_without_name_is_an_error():
    with pytest.raises(crds.CrdError, match=r"without metadata\.name"):
        crds.crd_names("kind: CustomResourceDefinition\nmetadata:\n  labels:\n    a: b\n")


# The head and tail of cert-manager v1.18.2's deploy/crds/crd-certificaterequests.yaml, as upstream writes them.
CERT_MANAGER_TEMPLATE = """# {{- include "cert-manager.crd-check" . }}
# START crd {{- if or .Values.crds.enabled .Values.installCRDs }}
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: certificaterequests.cert-manager.io
  # START annotations {{- if .Values.crds.keep }}
  annotations:
    helm.sh/resource-policy: keep
  # END annotations {{- end }}
  labels:
    app: '{{ template "cert-manager.name" . }}'
    app.kubernetes.io/name: '{{ template "cert-manager.name" . }}'
    app.kubernetes.io/instance: '{{ .Release.Name }}'
    # Generated labels {{- include "labels" . | nindent 4 }}
spec:
  group: cert-manager.io

# END crd {{- end }}
"""

CERT_MANAGER_RENDERED = """#
# START crd
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: certificaterequests.cert-manager.io
  # START annotations
  annotations:
    helm.sh/resource-policy: keep
  # END annotations
  labels:
    app: 'cert-manager'
    app.kubernetes.io/name: 'cert-manager'
    app.kubernetes.io/instance: 'cert-manager'
    # Generated labels
    app.kubernetes.io/version: "v1.18.2"
spec:
  group: cert-manager.io

# END crd
"""


def test_render_cert_manager():
    rendered = crds.render_cert_manager(CERT_MANAGER_TEMPLATE, "v1.18.2")
    assert rendered == CERT_MANAGER_RENDERED
    assert crds.crd_names(rendered) == ["certificaterequests.cert-manager.io"]


def test_render_leaves_plain_yaml_alone():
    assert crds.render_cert_manager(CERT_MANAGER_RENDERED, "v1.18.2") == CERT_MANAGER_RENDERED


@pytest.mark.parametrize(
    "line",
    [
        "    app.kubernetes.io/part-of: '{{ .Values.partOf }}'",
        "  # START x {{- with .Values.crds }}",
        "    description: '{{ printf \"%s\" .x }}'",
    ],
)
def test_render_refuses_unknown_templating(line):
    with pytest.raises(crds.CrdError, match="unknown Helm template expression on line 2"):
        crds.render_cert_manager("metadata:\n" + line + "\n", "v1.18.2")


def test_render_dispatch():
    cert_manager = next(s for s in crds.SOURCES if s.name == "cert-manager")
    keda = next(s for s in crds.SOURCES if s.name == "keda")
    assert crds.render(cert_manager, CERT_MANAGER_TEMPLATE, "v1.18.2") == CERT_MANAGER_RENDERED
    assert crds.render(keda, CERT_MANAGER_TEMPLATE, "v2.17.0") == CERT_MANAGER_TEMPLATE


def test_cache_key_follows_the_table_and_the_versions():
    versions = {s.name: "v1.0.0" for s in crds.SOURCES}
    key = crds.cache_key(crds.SOURCES, versions)
    assert re.fullmatch(r"[0-9a-f]{16}", key)
    assert key == crds.cache_key(crds.SOURCES, dict(reversed(list(versions.items()))))
    assert key != crds.cache_key(crds.SOURCES, {**versions, "keda": "v1.0.1"})
    assert key != crds.cache_key(crds.SOURCES[:-1], versions)


def test_label_says_when_a_fallback_was_used():
    traefik = next(s for s in crds.SOURCES if s.name == "traefik")
    assert crds.label(traefik, "v3.3.6", "v3.3.6", "a/b.yaml") == "traefik v3.3.6: a/b.yaml"
    assert crds.label(traefik, "v3.3.5", "v3.3.6", "a/b.yaml") == (
        "traefik v3.3.5 (in place of v3.3.6, not served): a/b.yaml"
    )


# ---------------------------------------------------------------- process boundary, faked

SOURCE = crds.Source(
    "demo",
    "example.test/demo",
    "demo_version",
    "same",
    ("crds/*.yaml",),
    ("widgets.example.test",),
    fallback="nearest-patch",
)
WIDGET = (
    "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: widgets.example.test\n"
)


def fake_download(served, calls):
    def download(module, version):
        calls.append(version)
        if version in served:
            return {"Version": version, "Dir": str(served[version])}, ""
        return None, "403 Forbidden: This module version is not available."

    return download


def test_resolve_takes_the_nearest_served_patch(monkeypatch, tmp_path, capsys):
    calls = []
    monkeypatch.setattr(crds, "download", fake_download({"v1.2.4": tmp_path}, calls))
    assert crds.resolve(SOURCE, "v1.2.3") == ("v1.2.4", tmp_path)
    assert calls == ["v1.2.3", "v1.2.2", "v1.2.4"]
    assert "example.test/demo@v1.2.3 cannot be fetched here (403 Forbidden" in capsys.readouterr().err


def test_resolve_failure_is_one_line_with_module_version_and_answer(monkeypatch):
    monkeypatch.setattr(crds, "download", fake_download({}, []))
    with pytest.raises(crds.CrdError) as err:
        crds.resolve(SOURCE, "v1.2.3")
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith(
        "example.test/demo@v1.2.3 (demo_version) cannot be fetched: "  # no role of this repository claims it
        "403 Forbidden: This module version is not available."
    )
    assert "@v1.2.2: 403" in message


def test_resolve_stops_on_a_network_error(monkeypatch):
    calls = []
    monkeypatch.setattr(crds, "download", lambda m, v: (calls.append(v), (None, "dial tcp: i/o timeout"))[1])
    with pytest.raises(crds.CrdError, match=r"cannot be fetched: dial tcp: i/o timeout$"):
        crds.resolve(SOURCE, "v1.2.3")
    assert calls == ["v1.2.3"]


@pytest.fixture
def demo_repo(tmp_path, monkeypatch):
    """A repository with one role pin and a module directory holding one CRD file."""
    defaults = tmp_path / "repo" / "roles" / "demo" / "defaults" / "main.yml"
    defaults.parent.mkdir(parents=True)
    defaults.write_text("demo_version: 1.2.3\n")
    moddir = tmp_path / "mod"
    (moddir / "crds").mkdir(parents=True)
    (moddir / "crds" / "widgets.yaml").write_text(WIDGET)
    (moddir / "crds" / "README.md").write_text("not matched")
    calls = []
    monkeypatch.setattr(crds, "ROOT", tmp_path / "repo")
    monkeypatch.setattr(crds, "download", fake_download({"v1.2.3": moddir}, calls))
    monkeypatch.setattr(crds, "SOURCES", (SOURCE,))
    monkeypatch.setattr(crds, "CACHE", tmp_path / "cache")
    return tmp_path / "cache", calls


def test_crd_texts_are_cached(demo_repo):
    cache, calls = demo_repo
    assert crds.crd_texts() == [("demo v1.2.3: crds/widgets.yaml", WIDGET)]
    assert calls == ["v1.2.3"]
    assert crds.crd_texts() == [("demo v1.2.3: crds/widgets.yaml", WIDGET)]
    assert calls == ["v1.2.3"]  # the second call downloads nothing
    assert [p.name for p in cache.iterdir()] == [crds.cache_key((SOURCE,), {"demo": "v1.2.3"})]


def test_a_missing_required_crd_is_an_error(demo_repo):
    cache, _repo = demo_repo
    source = crds.Source(**{**SOURCE.__dict__, "required": ("widgets.example.test", "gadgets.example.test")})
    with pytest.raises(crds.CrdError, match=r"example.test/demo@v1.2.3: no CRD gadgets.example.test in crds/\*"):
        crds.crd_texts((source,), cache)
    assert not cache.exists() or not any(cache.iterdir())


@pytest.mark.usefixtures("demo_repo")
def test_install_applies_every_file_server_side_then_waits(tmp_path):
    log = tmp_path / "kubectl.log"
    fake = tmp_path / "kubectl"
    fake.write_text(f'#!{sys.executable}\nimport sys\nopen("{log}", "a").write(" ".join(sys.argv[1:]) + "\\n")\n')
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    assert crds.install([str(fake), "--kubeconfig", "kc"]) == ["widgets.example.test"]
    apply, wait = log.read_text().splitlines()
    assert re.fullmatch(r"--kubeconfig kc apply --server-side --force-conflicts -f \S+/000-crds-widgets\.yaml", apply)
    assert wait == "--kubeconfig kc wait --for condition=established --timeout=60s crd/widgets.example.test"


def test_kubectl_failure_is_reported(tmp_path):
    fake = tmp_path / "kubectl"
    fake.write_text(f'#!{sys.executable}\nimport sys\nsys.stderr.write("error: the server is down\\n")\nsys.exit(1)\n')
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    with pytest.raises(crds.CrdError, match="kubectl apply -f x failed: error: the server is down"):
        crds.kubectl_run([str(fake)], "apply", "-f", "x")


def test_cli_error_is_one_line_per_failure(monkeypatch, capsys):
    def fail(*a, **k):
        raise crds.CrdError("a@v1: 403 Forbidden: no\nb@v2: 403 Forbidden: no")

    monkeypatch.setattr(crds, "crd_texts", fail)
    assert crds.main(["list"]) == 1
    assert capsys.readouterr().err.splitlines() == [
        "[crds] ERROR: a@v1: 403 Forbidden: no",
        "[crds] ERROR: b@v2: 403 Forbidden: no",
    ]


def test_cli_list(monkeypatch, capsys):
    monkeypatch.setattr(crds, "crd_texts", lambda: [("demo v1: crds/widgets.yaml", WIDGET)])
    assert crds.main(["list"]) == 0
    assert capsys.readouterr().out == "demo v1: crds/widgets.yaml\n    widgets.example.test\n"


# The head of cert-manager v1.21.2's deploy/charts/cert-manager/templates/crd-cert-manager.io_issuers.yaml.
CERT_MANAGER_121_TEMPLATE = """{{- if or .Values.crds.enabled .Values.installCRDs }}
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: "issuers.cert-manager.io"
  {{- if .Values.crds.keep }}
  annotations:
    helm.sh/resource-policy: keep
  {{- end }}
  labels:
    {{- include "cert-manager.crd-labels" . | nindent 4 }}
spec:
  group: cert-manager.io
{{- end }}
"""


def test_cert_manager_121_chart_crd_templates_render_as_the_chart_does():
    rendered = yaml.safe_load(crds.render_cert_manager(CERT_MANAGER_121_TEMPLATE, "v1.21.2"))
    assert rendered["metadata"]["name"] == "issuers.cert-manager.io"
    assert rendered["metadata"]["annotations"] == {"helm.sh/resource-policy": "keep"}
    assert rendered["metadata"]["labels"] == {
        "app": "cert-manager",
        "app.kubernetes.io/name": "cert-manager",
        "app.kubernetes.io/instance": "cert-manager",
        "app.kubernetes.io/component": "crds",
        "app.kubernetes.io/version": "v1.21.2",
    }
    assert rendered["spec"] == {"group": "cert-manager.io"}


def test_a_version_that_needs_a_newer_go_counts_as_refused():
    """The go command refuses a module whose go.mod needs a newer Go than GOTOOLCHAIN=local has (KEDA v2.21.1):
    the row's fallback then applies, as for a proxy refusal."""
    answer = "github.com/kedacore/keda/v2@v2.21.1 requires go >= 1.27.4 (running go 1.26.8; GOTOOLCHAIN=local)"
    assert crds.is_refusal(crds.proxy_error(answer))
