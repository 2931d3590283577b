import io
import json
import re
import subprocess
import sys
import tarfile

import pytest
import yaml

from lab.live import charts
from lab.pins import read_pin

GPU_OPERATOR_LIKE = {
    "operator": {"repository": "nvcr.io/nvidia", "annotations": {}, "resources": None, "tolerations": []},
    "daemonsets": {"tolerations": [{"key": "x"}], "labels": {}},
    "toolkit": {"enabled": True, "env": [], "version": "v1"},
}


@pytest.mark.parametrize(
    ("ours", "chart", "open_paths", "expected"),
    [
        pytest.param({}, GPU_OPERATOR_LIKE, (), [], id="nothing set"),
        pytest.param({"toolkit": {"enabled": False}}, GPU_OPERATOR_LIKE, (), [], id="known leaf"),
        pytest.param(
            {"operator": {"defaultRuntime": "containerd", "repository": "r"}},
            GPU_OPERATOR_LIKE,
            (),
            ["operator.defaultRuntime"],
            id="key the chart dropped",
        ),
        pytest.param({"nfd": {"enabled": True}}, GPU_OPERATOR_LIKE, (), ["nfd"], id="unknown top-level key"),
        pytest.param(
            {"ghost": {"a": {"b": 1}}, "toolkit": {"envs": [], "enabled": True, "x": 1}},
            GPU_OPERATOR_LIKE,
            (),
            ["ghost", "toolkit.envs", "toolkit.x"],
            id="first missing key of each branch, in our order",
        ),
        pytest.param(
            {"operator": {"annotations": {"a": "b", "c": {"d": 1}}}}, GPU_OPERATOR_LIKE, (), [], id="empty map is open"
        ),
        pytest.param(
            {"operator": {"resources": {"limits": {"cpu": 1}}}}, GPU_OPERATOR_LIKE, (), [], id="null value is open"
        ),
        pytest.param(
            {"toolkit": {"env": [{"name": "A", "value": "1"}]}, "daemonsets": {"tolerations": []}},
            GPU_OPERATOR_LIKE,
            (),
            [],
            id="lists are leaves",
        ),
        pytest.param(
            {"toolkit": {"version": {"tag": "v2"}}}, GPU_OPERATOR_LIKE, (), ["toolkit.version.tag"], id="map on scalar"
        ),
        pytest.param({"toolkit": {"env": {"A": "1"}}}, GPU_OPERATOR_LIKE, (), ["toolkit.env.A"], id="map on list"),
        pytest.param(
            {"toolkit": {"extra": {"x": 1}}, "free": {"y": 2}},
            GPU_OPERATOR_LIKE,
            ("toolkit.extra", "free"),
            [],
            id="open paths allow what lies below",
        ),
        pytest.param(
            {"daemonsets": {"labels": {"a": 1}, "annotations": {"helm.sh/x": "1"}}},
            {"daemonsets": {"labels": {}, "annotations": {"a": 1}}},
            (),
            ['daemonsets.annotations["helm.sh/x"]'],
            id="keys with dots are quoted",
        ),
    ],
)
def test_unknown_value_paths(ours, chart, open_paths, expected):
    assert charts.unknown_value_paths(ours, chart, frozenset(open_paths)) == expected


@pytest.mark.parametrize(
    ("parts", "expected"),
    [(("a",), "a"), (("a", "b"), "a.b"), (("a", "b.c", "d"), 'a["b.c"].d'), (("x.y",), '["x.y"]'), ((), "")],
)
def test_format_path(parts, expected):
    assert charts.format_path(parts) == expected


SCHEMA = {
    "$ref": "#/$defs/values",
    "$defs": {
        "values": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "crds": {"$ref": "#/$defs/values.crds"},
                "podLabels": {"type": "object", "default": {}},
                "config": {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": True},
                "nodeSelector": {"type": "object", "additionalProperties": {"type": "string"}},
                "replicaCount": {"type": ["integer", "string"]},
            },
        },
        "values.crds": {
            "type": "object",
            "additionalProperties": False,
            "properties": {"enabled": {"type": "boolean"}, "keep": {"type": "boolean"}},
        },
    },
}


def test_schema_known_follows_refs_and_finds_free_form_maps():
    tree, opened = charts.schema_known(SCHEMA)
    assert tree == {
        "crds": {"enabled": "", "keep": ""},
        "podLabels": {},
        "config": {"a": ""},
        "nodeSelector": {},
        "replicaCount": "",
    }
    assert opened == {"podLabels", "config", "nodeSelector"}


def test_known_values_joins_values_schema_subcharts_and_global():
    values = {"crds": {"enabled": False}, "replicaCount": 1, "extra": {}, "nfd": {"worker": {"x": 1}}, "sub": {}}
    subcharts = {"sub": ({"worker": {"tolerations": []}, "labels": {}}, {"labels"})}
    tree, opened = charts.known_values(values, SCHEMA, subcharts)
    assert tree["crds"] == {"enabled": False, "keep": ""}  # keep: declared by the schema, absent from values.yaml
    assert tree["sub"] == {"worker": {"tolerations": []}, "labels": {}}
    assert {"podLabels", "extra", "sub.labels", "global"} <= opened
    assert "sub" not in opened  # the parent's `sub: {}` placeholder does not open the subchart
    ours = {
        "crds": {"enabled": True, "keep": True},
        "config": {"anything": 1},
        "global": {"imageRegistry": "r"},
        "sub": {"worker": {"tolerations": [1]}, "labels": {"a": "b"}, "master": {"x": 1}},
        "nfd": {"worker": {"y": 1}},
    }
    assert charts.unknown_value_paths(ours, tree, opened) == ["sub.master", "nfd.worker.y"]


def _chart_yaml(deps=()):
    return yaml.safe_dump({"apiVersion": "v2", "name": "top", "version": "1.0.0", "dependencies": list(deps)})


def test_chart_known_reads_subcharts_from_directories_and_archives(tmp_path):
    chart = tmp_path / "top"
    (chart / "charts" / "dir-sub").mkdir(parents=True)
    (chart / "Chart.yaml").write_text(
        _chart_yaml([{"name": "dir-sub", "version": "1"}, {"name": "tgz-sub", "version": "2", "alias": "aliased"}])
    )
    (chart / "values.yaml").write_text("image: {tag: v1}\ndir-sub: {}\n")
    (chart / "charts" / "dir-sub" / "values.yaml").write_text("worker: {tolerations: []}\n")
    data = b"master: {replicas: 1}\n"
    with tarfile.open(chart / "charts" / "tgz-sub-2.tgz", "w:gz") as tar:
        info = tarfile.TarInfo("tgz-sub/values.yaml")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    tree, opened = charts.chart_known(chart)
    assert tree == {
        "image": {"tag": "v1"},
        "dir-sub": {"worker": {"tolerations": []}},
        "aliased": {"master": {"replicas": 1}},
    }
    ours = {"dir-sub": {"worker": {"tolerations": [], "nodeSelector": {}}}, "aliased": {"master": {"replicas": 2}}}
    assert charts.unknown_value_paths(ours, tree, opened) == ["dir-sub.worker.nodeSelector"]


def test_dead_value_paths_follow_the_pinned_release():
    dead = [
        (("operator", "initContainer"), "v26.3.0", "left the chart"),
        (("driver", "gone"), "v27.1.0", "later"),
    ]
    ours = {"operator": {"repository": "r", "initContainer": {"repository": "r"}}, "driver": {"gone": False}}
    assert charts.dead_value_paths(ours, dead, "v26.7.1") == [
        "operator.initContainer (gone since v26.3.0: left the chart)"
    ]
    assert charts.dead_value_paths(ours, dead, "v25.3.4") == []  # the pin has not reached either release
    assert len(charts.dead_value_paths(ours, dead, "main")) == 2  # an unknown pin gets every entry
    assert charts.dead_value_paths({"operator": {"repository": "r"}}, dead, "v26.7.1") == []
    assert charts.release_tuple("v26.3.0") < charts.release_tuple("v26.7.1") < charts.release_tuple("v26.10.0")


CP = {"key": "node-role.kubernetes.io/control-plane", "operator": "Equal", "value": "", "effect": "NoSchedule"}
MASTER = {"key": "node-role.kubernetes.io/master", "operator": "Equal", "value": "", "effect": "NoSchedule"}
GPU = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


@pytest.mark.parametrize(
    ("ours", "expected"),
    [
        pytest.param(
            {"nfd": {"worker": {"tolerations": [GPU]}}},
            ["nfd.worker.tolerations drops the chart's toleration of node-role.kubernetes.io/control-plane:NoSchedule"],
            id="replacing the list drops the chart's control-plane toleration",
        ),
        pytest.param({"nfd": {"worker": {"tolerations": [CP, GPU]}}}, [], id="kept; master is obsolete"),
        pytest.param(
            {
                "nfd": {
                    "worker": {
                        "tolerations": [{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists"}, GPU]
                    }
                }
            },
            [],
            id="Exists without an effect covers it",
        ),
        pytest.param({"nfd": {"worker": {"tolerations": [{"operator": "Exists"}]}}}, [], id="tolerate everything"),
        pytest.param({"nfd": {"worker": {"nodeSelector": {"a": "b"}}}}, [], id="chart's list left alone"),
        pytest.param({"daemonsets": {"tolerations": []}}, [], id="chart has no list there"),
    ],
)
def test_dropped_tolerations(ours, expected):
    chart = {"nfd": {"worker": {"tolerations": [MASTER, CP, GPU]}}, "daemonsets": {"labels": {}}}
    assert charts.dropped_tolerations(ours, chart) == expected


def test_every_option_switches_on_each_optional_part_of_the_gpu_operator_values(root):
    """The second render must reach every branch of gpu_operator.chart_values that a default leaves out."""
    every = charts.every_option_vars()
    assert every == charts.EVERY_OPTION["gpu-operator"]  # cert-manager's values have no optional part
    assert every["gpu_operator_registry"]  # mirror_values: every component's repository
    assert every["gpu_operator_time_slicing_classes"]  # devicePlugin.config and the time-slicing ConfigMap
    assert every["gpu_operator_time_slicing_default"] in every["gpu_operator_time_slicing_classes"]
    assert every["gpu_operator_mig_strategy"] != "none"  # mig.strategy and migManager for MIG
    assert every["gpu_operator_driver_enabled"] is True
    specs = yaml.safe_load((root / "roles" / "gpu_operator" / "meta" / "argument_specs.yml").read_text())
    options = specs["argument_specs"]["main"]["options"]
    assert set(every) <= set(options)
    for name, value in every.items():  # each is a change from the role's default
        assert value != options[name].get("default"), name


def fake_gpu_operator_module(tmp_path, values):
    """A GPU Operator module whose chart holds `values` (its values.yaml): accepts exactly those paths."""
    chart = tmp_path / "module" / "deployments" / "gpu-operator"
    chart.mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: gpu-operator\nversion: v26.7.1\n")
    (chart / "values.yaml").write_text(yaml.safe_dump(values))
    return tmp_path / "module"


@pytest.fixture(scope="module")
def cached_render():
    """charts.render_helm_charts, each (inventory, extra vars) rendered once for the module's tests."""
    real, cache = charts.render_helm_charts, {}

    def render(inventory, extra_vars=None):
        key = (inventory, json.dumps(extra_vars, sort_keys=True))
        if key not in cache:
            cache[key] = real(inventory, extra_vars) if extra_vars else real(inventory)
        return cache[key]

    return render


def run_check(monkeypatch, capsys, cached_render, module):
    """check() of the example inventory against the chart of `module`, helm a no-op: (exit status, output)."""
    (source,) = [s for s in charts.SOURCES if s.chart == "gpu-operator"]
    info = {"Dir": str(module), "Version": "v26.7.1", "Path": source.module}
    monkeypatch.setattr(charts, "SOURCES", (source,))
    monkeypatch.setattr(charts, "render_helm_charts", cached_render)
    monkeypatch.setattr(charts, "fetch_module", lambda module, query: info)
    monkeypatch.setattr(charts.helmbuild, "build", lambda *a, **k: "helm")
    monkeypatch.setattr(charts, "run_helm", lambda helm, args, home: subprocess.CompletedProcess(args, 0, "", ""))
    status = charts.check("inventories/example")
    return status, capsys.readouterr().out


def test_a_path_only_an_option_writes_is_checked(monkeypatch, capsys, tmp_path, cached_render):
    """The example inventory sets no mirror registry and no time-slicing: a chart that lacks the paths those write
    passes the inventory's render, and the every-option render fails on them."""
    plain = yaml.safe_load(cached_render("inventories/example")["gpu-operator"]["valuesContent"])
    status, out = run_check(monkeypatch, capsys, cached_render, fake_gpu_operator_module(tmp_path, plain))
    assert re.search(r"^gpu-operator: version v26.7.1, .*result OK, unknown paths: none$", out, re.M), out
    every = re.search(r"^gpu-operator \[every option\]: .*result FAIL, unknown paths: (.*)$", out, re.M)
    assert every, out
    assert "devicePlugin.config" in every.group(1) and "operator.repository" in every.group(1)
    assert "every option: gpu_operator_registry=" in out
    assert status == 1


def test_a_path_dead_in_the_pin_fails_even_where_the_checked_chart_has_it(monkeypatch, capsys, tmp_path, cached_render):
    """The chart checked here accepts every path we write (as the proxy's older stand-in still has
    operator.initContainer); a path DEAD_VALUE_PATHS lists for the pin fails the render that writes it."""
    every = charts.every_option_vars()
    values = yaml.safe_load(cached_render("inventories/example", every)["gpu-operator"]["valuesContent"])
    module = fake_gpu_operator_module(tmp_path, values)
    dead = {"gpu-operator": ((("devicePlugin", "config"), "v26.3.0", "a test's entry"),)}
    monkeypatch.setattr(charts, "DEAD_VALUE_PATHS", dead, raising=False)
    status, out = run_check(monkeypatch, capsys, cached_render, module)
    assert re.search(r"^gpu-operator: .*result OK, unknown paths: none$", out, re.M), out
    line = re.search(
        r"^gpu-operator \[every option\]: .*result FAIL, unknown paths: none; dead in the pin: (.*)$", out, re.M
    )
    assert line and line.group(1) == "devicePlugin.config (gone since v26.3.0: a test's entry)", out
    assert status == 1
    # With the collection's own list, nothing the roles write is dead in the pin.
    monkeypatch.undo()
    status, out = run_check(monkeypatch, capsys, cached_render, module)
    assert status == 0 and "dead in the pin" not in out, out


def test_helm_charts_takes_the_helmchart_objects_by_chart():
    docs = [
        None,
        {"kind": "Namespace", "apiVersion": "v1", "metadata": {"name": "x"}},
        {"kind": "HelmChartConfig", "apiVersion": "helm.cattle.io/v1", "metadata": {"name": "traefik"}, "spec": {}},
        {
            "kind": "HelmChart",
            "apiVersion": "helm.cattle.io/v1",
            "metadata": {"name": "gpu-operator", "namespace": "kube-system"},
            "spec": {
                "chart": "gpu-operator",
                "version": "v25.10.1",
                "repo": "https://r",
                "targetNamespace": "gpu-operator",
                "valuesContent": "operator:\n  defaultRuntime: containerd\n",
            },
        },
        {"kind": "HelmChart", "apiVersion": "other/v1", "metadata": {"name": "no"}, "spec": {"chart": "no"}},
    ]
    assert charts.helm_charts(docs) == {
        "gpu-operator": {
            "name": "gpu-operator",
            "namespace": "gpu-operator",
            "version": "v25.10.1",
            "repo": "https://r",
            "valuesContent": "operator:\n  defaultRuntime: containerd\n",
        }
    }


@pytest.mark.parametrize(
    ("module", "version", "expected"),
    [
        (
            "github.com/NVIDIA/gpu-operator",
            "v25.10.1",
            [
                ("github.com/NVIDIA/gpu-operator", "v25.10.1"),
                ("github.com/NVIDIA/gpu-operator", "v25.10.1+incompatible"),
                ("github.com/NVIDIA/gpu-operator/v25", "v25.10.1"),
            ],
        ),
        ("github.com/cert-manager/cert-manager", "v1.18.2", [("github.com/cert-manager/cert-manager", "v1.18.2")]),
        ("helm.sh/helm/v4", "v4.3.2", [("helm.sh/helm/v4", "v4.3.2")]),
    ],
)
def test_candidate_queries(module, version, expected):
    assert charts.candidate_queries(module, version) == expected


def test_pinned_versions_and_kubernetes_version(root):
    assert charts.kubernetes_version("v1.33.5+k3s1") == "v1.33.5"
    with pytest.raises(charts.CheckError):
        charts.kubernetes_version("v1.33.5")
    for source in charts.SOURCES:  # each pin the tool reads exists in its role
        assert read_pin(source.version_var, root).startswith("v")


def test_cert_manager_chart_yaml_and_crds_as_its_release_build_writes_them():
    template = (
        "apiVersion: v2\nname: cert-manager\nannotations:\n  artifacthub.io/prerelease: '{{IS_PRERELEASE}}'\n"
        "version: v0.0.0\nappVersion: v0.0.0\n"
    )
    chart = yaml.safe_load(charts.chart_yaml_from_template(template, "v1.18.2", "fingerprint: ABC\nurl: u\n"))
    assert chart["version"] == chart["appVersion"] == "v1.18.2"
    assert chart["annotations"] == {
        "artifacthub.io/prerelease": "false",
        "artifacthub.io/signKey": "fingerprint: ABC\nurl: u\n",
    }
    pre = yaml.safe_load(charts.chart_yaml_from_template(template, "v1.19.0-alpha.1", ""))
    assert pre["annotations"]["artifacthub.io/prerelease"] == "true"
    assert charts.concat_yaml(["a: 1\n", "b: 2\n", "c: 3\n"]) == "a: 1\n\n---\nb: 2\n\n---\nc: 3\n"
    assert list(yaml.safe_load_all(charts.concat_yaml(["a: 1\n", "b: 2\n"]))) == [{"a": 1}, {"b": 2}]


def test_assemble_cert_manager_lays_out_a_complete_chart(tmp_path):
    module = tmp_path / "module"
    src = module / "deploy" / "charts" / "cert-manager"
    (src / "templates").mkdir(parents=True)
    (module / "deploy" / "crds").mkdir(parents=True)
    (src / "Chart.template.yaml").write_text(
        "apiVersion: v2\nname: cert-manager\nversion: v0.0.0\nappVersion: v0.0.0\n"
    )
    (src / "README.template.md").write_text("cert-manager {{RELEASE_VERSION}}\n")
    (src / "signkey_annotation.txt").write_text("fingerprint: X\n")
    (src / "values.yaml").write_text("crds: {enabled: false}\n")
    (src / "values.schema.json").write_text(json.dumps({"type": "object"}))
    (src / "templates" / "deployment.yaml").write_text("kind: Deployment\n")
    (src / "templates" / "_helpers.tpl").write_text("{{/* */}}\n")
    (module / "deploy" / "crds" / "crd-b.yaml").write_text("kind: B\n")
    (module / "deploy" / "crds" / "crd-a.yaml").write_text("kind: A\n")
    (module / "deploy" / "crds" / "README.md").write_text("not a CRD\n")
    out = tmp_path / "chart"
    charts.assemble_cert_manager(module, "v1.18.2", out)
    assert sorted(p.name for p in (out / "templates").iterdir()) == ["_helpers.tpl", "crds.yaml", "deployment.yaml"]
    assert (out / "templates" / "crds.yaml").read_text() == "kind: A\n\n---\nkind: B\n"
    assert (out / "README.md").read_text() == "cert-manager v1.18.2\n"
    assert yaml.safe_load((out / "Chart.yaml").read_text())["version"] == "v1.18.2"
    assert (out / "values.yaml").exists() and (out / "values.schema.json").exists()
    assert not (out / "Chart.template.yaml").exists()


@pytest.mark.slow
def test_check_the_collection_against_the_real_charts(root):
    # The pinned GPU Operator release is not served by the module proxy: its newest served snapshot stands in,
    # and the line still says UNAVAILABLE for the pin.
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "lab.live.charts",
            "check",
            "--inventory",
            "inventories/example",
            "--allow-unavailable",
        ],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=3600,
        check=False,
    )
    out = proc.stdout
    assert f"keda: version 2.21.1, source https://kedacore.github.io/charts, {charts.NOT_IN_GO_MODULE}" in out, out
    assert "kube-prometheus-stack: version" in out and charts.NOT_IN_GO_MODULE in out, out
    assert "cert-manager: version v1.21.2, source github.com/cert-manager/cert-manager@v1.21.2" in out, out
    assert re.search(r"^gpu-operator \(NOT the pinned [^)]*\): .*result OK, unknown paths: none$", out, re.M), out
    # The values of every option (mirror registry, time-slicing, MIG, driver) pass too, with no path dead in the
    # pin and none of the chart's tolerations dropped.
    assert re.search(
        r"^gpu-operator \(NOT the pinned [^)]*\) \[every option\]: .*result OK, unknown paths: none$", out, re.M
    ), out
    assert proc.returncode == 0, out + proc.stderr
