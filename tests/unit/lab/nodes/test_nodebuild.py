import os
import shutil
import subprocess
import sys

import pytest

from lab.nodes import nodebuild
from lab.pins import read_pin

K3S = "v1.36.4+k3s1"
SOURCES = "0123456789abcdef" * 4
NODE_BINARIES = {
    "traefik",
    "cert-manager-controller",
    "cert-manager-webhook",
    "cert-manager-cainjector",
    "helm-controller",
    "kubelet",
    "kube-proxy",
    "kubectl",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "etcd",
    "containerd",
    "containerd-shim-runc-v2",
    "ctr",
    "bridge",
    "host-local",
    "loopback",
    "portmap",
    "flanneld",
    "coredns",
    "pause",
    "aiinfra-lab-device-plugin",
    "aiinfra-lab-supervisor",
    "prometheus-operator",
    "prometheus-config-reloader",
    "prometheus",
    "keda",
    "keda-adapter",
}
# What a versions.json note may say of a build at the release K3s carries: only how the build or the process differs.
CARRIED_NOTES = ("built without", "K3s runs it in-process; here a separate process")


def comps(k3s=K3S, etcd="v3.6.7", sources=SOURCES):
    return nodebuild.components(k3s, etcd, sources)


def test_the_bin_directory_holds_exactly_the_contracted_binaries():
    names = nodebuild.binaries(comps())
    assert len(names) == len(set(names))
    assert set(names) == NODE_BINARIES
    assert names[-3:] == ["containerd", "containerd-shim-runc-v2", "ctr"]  # the longest build comes last


def test_versions_json_has_one_entry_of_the_same_shape_per_binary():
    versions = nodebuild.versions_json(comps())
    assert set(versions) == NODE_BINARIES
    for name, entry in versions.items():
        assert set(entry) == {"module", "version", "k3s_carries", "note"}, name
        assert entry["module"] and entry["version"], name
        if entry["k3s_carries"] != entry["version"]:
            assert entry["note"].startswith("nearest served") or entry["k3s_carries"] is None, name
        else:  # the release K3s carries: a note only says what the build leaves out
            assert entry["note"] is None or entry["note"].startswith(CARRIED_NOTES), name


def test_versions_json_names_the_k3s_forks_and_the_upstream_releases_built():
    versions = nodebuild.versions_json(comps())
    assert versions["kubelet"] == {
        "module": "k8s.io/kubernetes",
        "version": "v1.36.4",
        "k3s_carries": "v1.36.4-k3s1",
        "note": versions["kubelet"]["note"],
    }
    assert "github.com/k3s-io/kubernetes" in versions["kubelet"]["note"]
    assert versions["containerd"]["module"] == "github.com/containerd/containerd/v2"
    assert (versions["containerd"]["version"], versions["containerd"]["k3s_carries"]) == ("v2.3.4", "v2.3.4-k3s1.36")
    assert versions["coredns"]["note"] is None  # the release K3s deploys is served as is
    assert versions["flanneld"]["k3s_carries"] is None and "udp backend" in versions["flanneld"]["note"]
    local = {versions[n]["version"] for n in ("pause", "aiinfra-lab-device-plugin", "aiinfra-lab-supervisor")}
    assert local == {"local-0123456789ab"}
    assert versions["etcd"]["version"] == "v3.6.7"


def test_kubernetes_binaries_report_their_release_like_kubebuilds():
    kube = next(c for c in comps() if c.name == "kubernetes")
    flags = kube.ldflags()
    assert flags.startswith("-s -w ")
    assert "-X k8s.io/component-base/version.gitVersion=v1.36.4" in flags
    assert "-X k8s.io/client-go/pkg/version.gitMinor=36" in flags


def test_every_module_build_is_static_stripped_and_trimmed(tmp_path):
    for comp in comps():
        for name, package in comp.binaries.items():
            if not package:
                continue  # copied from kubebuild's output
            args = nodebuild.build_args(comp, tmp_path, name, package)
            assert args[:2] == ["build", "-trimpath"]
            assert args[args.index("-ldflags") + 1].startswith("-s -w")
            assert args[-2:] == [str(tmp_path / name), package]
    containerd = next(c for c in comps() if c.name == "containerd")
    args = nodebuild.build_args(containerd, tmp_path, "ctr", "x")
    assert args[args.index("-tags") + 1] == "no_btrfs"


def test_recipe_key_is_stable_and_follows_every_input():
    recipe = nodebuild.recipe(comps(), "go1.26.8", "v1.36.4-e6fcb6ea904f")
    key = nodebuild.recipe_key("v1.36.4", recipe)
    assert key.startswith("v1.36.4-") and len(key) == len("v1.36.4-") + 12
    assert key == nodebuild.recipe_key("v1.36.4", nodebuild.recipe(comps(), "go1.26.8", "v1.36.4-e6fcb6ea904f"))
    changed = [
        nodebuild.recipe(comps(), "go1.26.9", "v1.36.4-e6fcb6ea904f"),
        nodebuild.recipe(comps(), "go1.26.8", "v1.36.4-000000000000"),
        nodebuild.recipe(comps(etcd="v3.6.8"), "go1.26.8", "v1.36.4-e6fcb6ea904f"),
        nodebuild.recipe(comps(sources="f" * 64), "go1.26.8", "v1.36.4-e6fcb6ea904f"),
        nodebuild.recipe(comps(k3s="v1.33.5+k3s1"), "go1.26.8", "v1.36.4-e6fcb6ea904f"),
    ]
    assert len({key, *(nodebuild.recipe_key("v1.36.4", r) for r in changed)}) == 1 + len(changed)


def test_sources_digest_follows_names_and_contents_not_order():
    a = {"pause/main.go": b"package main", "pause/go.mod": b"module x"}
    assert nodebuild.sources_digest(a) == nodebuild.sources_digest(dict(reversed(list(a.items()))))
    assert nodebuild.sources_digest(a) != nodebuild.sources_digest({**a, "pause/main.go": b"package main\n"})
    assert nodebuild.sources_digest(a) != nodebuild.sources_digest({"pause/main2.go": b"package main", **a})


def test_the_lab_sources_are_read_for_the_digest():
    files = nodebuild.read_sources()
    for rel in (
        "pause/main.go",
        "pause/go.mod",
        "deviceplugin/main.go",
        "deviceplugin/go.mod",
        "deviceplugin/go.sum",
        "supervisor/main.go",
        "supervisor/main_test.go",
        "supervisor/go.mod",
    ):
        assert rel in files


@pytest.mark.parametrize(("k3s", "fork"), [("v1.36.4+k3s1", "v1.36.4-k3s1"), ("v1.33.5+k3s2", "v1.33.5-k3s2")])
def test_the_k3s_fork_tag_of_a_release(k3s, fork):
    assert nodebuild.k3s_fork_version(k3s) == fork


def test_a_non_k3s_tag_is_refused():
    with pytest.raises(nodebuild.BuildError, match="not a K3s release tag"):
        nodebuild.k3s_fork_version("v1.36.4")


def test_bad_versions_give_one_clear_error_and_no_stack(root):
    proc = subprocess.run(
        [sys.executable, "-m", "lab.nodes.nodebuild", "path", "--k3s-version", "latest"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 1
    assert proc.stderr.startswith("[nodebuild] ERROR:") and proc.stderr.count("\n") == 1, proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.skipif(shutil.which("go") is None, reason="the go command is not installed")
@pytest.mark.parametrize("program", ["pause", "deviceplugin", "supervisor"])
def test_the_lab_go_programs_pass_vet_and_their_tests(root, program):
    env = dict(os.environ, CGO_ENABLED="0", GOFLAGS="-mod=readonly", GOWORK="off", GOTOOLCHAIN="local")
    for args in (["go", "vet", "./..."], ["go", "test", "./..."]):
        proc = subprocess.run(
            args,
            cwd=nodebuild.NODE_SOURCES / program,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr


MAIN_GO = """package main

import (
\t"fmt"

\t_ "github.com/flannel-io/flannel/pkg/backend/tencentvpc"
\t_ "github.com/flannel-io/flannel/pkg/backend/udp"
\t_ "github.com/flannel-io/flannel/pkg/backend/vxlan"
)
"""


def test_flanneld_is_flannels_main_without_the_cgo_and_refused_backends():
    out = nodebuild.without_imports(MAIN_GO, nodebuild.FLANNEL[0], nodebuild.FLANNEL_DROPPED)
    assert "udp" not in out and "tencentvpc" not in out
    assert '_ "github.com/flannel-io/flannel/pkg/backend/vxlan"' in out and '"fmt"' in out
    flannel = next(c for c in comps() if c.name == "flannel")
    assert (flannel.main_file, flannel.drop_imports, flannel.binaries) == (
        "main.go",
        ("pkg/backend/udp", "pkg/backend/tencentvpc"),
        {"flanneld": "."},
    )


def test_an_upstream_main_that_changed_is_refused_by_name():
    with pytest.raises(nodebuild.BuildError, match="pkg/backend/udp"):
        nodebuild.without_imports(MAIN_GO.replace("udp", "udp2"), nodebuild.FLANNEL[0], nodebuild.FLANNEL_DROPPED)


def test_a_changed_versions_note_changes_the_key():
    base = comps()
    edited = [c if c.name != "coredns" else nodebuild.Component(**{**c.__dict__, "note": "x"}) for c in base]
    keys = {nodebuild.recipe_key("v1.36.4", nodebuild.recipe(cs, "go1.26.8", "k")) for cs in (base, edited)}
    assert len(keys) == 2


# The two places of Traefik v3.7.8's pkg/provider/acme/provider.go the build edits (excerpt).
ACME_PROVIDER = """import (
\t"fmt"
\t"github.com/go-acme/lego/v5/challenge/dns01"
\t"github.com/go-acme/lego/v5/providers/dns"
)

\t\tvar provider challenge.Provider
\t\tprovider, err = dns.NewDNSChallengeProviderByName(p.DNSChallenge.Provider)
\t\tif err != nil {
"""


def test_traefik_is_built_without_the_acme_dns_providers_and_says_so():
    traefik = next(c for c in comps() if c.name == "traefik")
    out = nodebuild.edited(ACME_PROVIDER, "pkg/provider/acme/provider.go", traefik.edits)
    assert "providers/dns" not in out and "NewDNSChallengeProviderByName" not in out
    assert "has no ACME DNS providers" in out and '"github.com/go-acme/lego/v5/challenge/dns01"' in out
    assert nodebuild.edited("other", "pkg/other.go", traefik.edits) == "other"
    assert traefik.in_module and traefik.nested[0] == "pkg/config/dynamic/ext"
    assert (traefik.nested[1] / "go.mod").read_text().startswith("module github.com/traefik/traefik/dynamic/ext")
    assert "ACME DNS" in traefik.note


def test_a_changed_upstream_acme_provider_is_refused_by_name():
    traefik = next(c for c in comps() if c.name == "traefik")
    with pytest.raises(nodebuild.BuildError, match="providers/dns"):
        nodebuild.edited(ACME_PROVIDER.replace("lego/v5", "lego/v6"), "pkg/provider/acme/provider.go", traefik.edits)


def test_the_traefik_built_is_the_one_the_k3s_release_installs():
    traefik = next(c for c in comps() if c.name == "traefik")
    assert (traefik.version, traefik.k3s_carries) == ("v3.7.8", "v3.7.8")
    assert traefik.xflags == {"github.com/traefik/traefik/v3/pkg/version.Version": "v3.7.8"}
    with pytest.raises(nodebuild.BuildError, match="K3S_EMBEDDED"):
        nodebuild.traefik_version("v1.30.0+k3s1")


def test_the_cert_manager_built_is_the_release_the_collection_pins():
    cm = next(c for c in comps() if c.name == "cert-manager")
    assert cm.version == read_pin("cert_manager_chart_version")  # the proxy serves it: no nearest patch needed
    assert (cm.module, cm.k3s_carries) == ("github.com/cert-manager/cert-manager", None)
    assert cm.xflags == {"main.Version": cm.version}
    assert nodebuild.versions_json([cm])["cert-manager-controller"]["version"] == cm.version
    assert nodebuild.cert_manager_version("v1.21.2") == "v1.21.2"
    with pytest.raises(nodebuild.BuildError, match="cert_manager_chart_version"):
        nodebuild.cert_manager_version("1.21.2")


CERT_MANAGER_MAINS = [
    # binary, package in the module copy, lab directory, what the main's header says
    ("cert-manager-controller", "./cmd/aiinfra-lab/controller", "controller", "cert-manager's controller (NOT"),
    ("cert-manager-webhook", "./cmd/aiinfra-lab/webhook", "webhook", "cert-manager's webhook (NOT"),
    ("cert-manager-cainjector", "./cmd/aiinfra-lab/cainjector", "cainjector", "cert-manager's cainjector (NOT"),
]


@pytest.mark.parametrize(("binary", "package", "directory", "header"), CERT_MANAGER_MAINS)
def test_each_cert_manager_binary_is_a_labs_main_in_a_copy_of_the_module(binary, package, directory, header):
    cm = next(c for c in comps() if c.name == "cert-manager")
    assert cm.in_module and cm.nested == ("cmd/aiinfra-lab", nodebuild.HERE / "certmanager")
    assert cm.binaries[binary] == package
    source = cm.nested[1] / directory
    main = (source / "main.go").read_text()
    assert main.startswith(f"// The aiinfra.k3s lab's main package for {header}"), main[:120]
    assert "package main" in main
    assert not (source / "go.mod").exists()  # a package of the main module: its go.mod and go.sum apply


def test_cert_manager_builds_exactly_its_three_mains():
    cm = next(c for c in comps() if c.name == "cert-manager")
    assert cm.binaries == {binary: package for binary, package, _d, _h in CERT_MANAGER_MAINS}
    assert {p.name for p in cm.nested[1].iterdir()} == {d for _b, _p, d, _h in CERT_MANAGER_MAINS}


def test_the_cert_manager_controller_main_takes_the_charts_flags_and_serves_livez():
    main = (nodebuild.HERE / "certmanager" / "controller" / "main.go").read_text()
    for flag in ("acme-http01-solver-image", "max-concurrent-challenges", "healthz-listen-address"):
        assert f'"{flag}"' in main, flag
    assert "klog.InitFlags(fs)" in main  # --v
    assert '"/livez"' in main and '":9403"' in main


def test_a_changed_cert_manager_main_changes_the_key(tmp_path):
    cm = next(c for c in comps() if c.name == "cert-manager")
    copy = tmp_path / "certmanager"
    shutil.copytree(cm.nested[1], copy)
    keys = {nodebuild.part_key(cm, "go1.26.8")}
    for directory in ("controller", "webhook", "cainjector"):
        main = copy / directory / "main.go"
        main.write_text(main.read_text() + "\n// edited\n")
        edited = nodebuild.Component(**{**cm.__dict__, "nested": (cm.nested[0], copy)})
        keys.add(nodebuild.part_key(edited, "go1.26.8"))
    assert len(keys) == 4


def test_the_cert_manager_controller_is_the_labs_main_in_a_copy_of_the_module_and_says_so():
    cm = next(c for c in comps() if c.name == "cert-manager")
    main = (cm.nested[1] / "controller" / "main.go").read_text()
    # The controllers the lab's issuers need, and none whose modules or roles the lab leaves out.
    for pkg in ("certificates/issuing", "certificaterequests/ca", "certificaterequests/selfsigned", "issuers"):
        assert f'"github.com/cert-manager/cert-manager/pkg/controller/{pkg}"' in main, pkg
    for left_out in ("acmeorders", "acmechallenges", "/vault", "/venafi", "certificate-shim", "cainjector", "webhook"):
        assert f"pkg/controller/{left_out.strip('/')}" not in main, left_out
    assert "lab's own main package" in cm.note.replace("LAB'S OWN", "lab's own")
    # the note keeps the directory's former name (lab/nodes/certmanager): it is part of the parts' cache key
    for said in ("not ACME", "webhook", "cainjector", "lab/certmanager/{controller,webhook,cainjector}"):
        assert said in cm.note, said
    changed = comps()
    key = nodebuild.recipe_key("v1.36.4", nodebuild.recipe(changed, "go1.26.8", "k"))
    assert key != nodebuild.recipe_key(
        "v1.36.4", nodebuild.recipe(nodebuild.components(K3S, "v3.6.7", SOURCES, "v1.21.1"), "go1.26.8", "k")
    )


@pytest.mark.skipif(shutil.which("gofmt") is None, reason="the go command is not installed")
def test_the_labs_cert_manager_main_is_gofmt_clean(root):
    proc = subprocess.run(
        ["gofmt", "-l", str(nodebuild.HERE / "certmanager")], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0 and proc.stdout == "", proc.stdout + proc.stderr


def test_helm_controller_is_the_release_the_k3s_release_embeds_in_a_separate_process():
    hc = next(c for c in comps() if c.name == "helm-controller")
    assert (hc.module, hc.version, hc.k3s_carries) == ("github.com/k3s-io/helm-controller", "v0.17.7", "v0.17.7")
    assert hc.binaries == {"helm-controller": "."}
    assert hc.in_module and not hc.edits and not hc.nested and not hc.local
    assert hc.xflags == {"github.com/k3s-io/helm-controller/pkg/version.Version": "v0.17.7"}
    assert hc.note.startswith("K3s runs it in-process; here a separate process")
    older = next(c for c in comps(k3s="v1.33.5+k3s1") if c.name == "helm-controller")
    assert older.version == "v0.16.13"  # lab/live/crds.py's K3S_EMBEDDED decides
    with pytest.raises(nodebuild.BuildError, match=r"no helm-controller version known for K3s v1\.30\.0"):
        nodebuild.helm_controller_version("v1.30.0+k3s1")


def test_the_supervisor_is_a_local_standin_program():
    sup = next(c for c in comps() if c.name == "supervisor")
    assert (sup.local, sup.binaries, sup.k3s_carries) == ("supervisor", {"aiinfra-lab-supervisor": "."}, None)
    assert sup.note.startswith("STAND-IN for K3s's supervisor")
    assert "supervisor" in nodebuild.LOCAL_PROGRAMS
    main = (nodebuild.NODE_SOURCES / "supervisor" / "main.go").read_text()
    assert "STAND-IN for K3s's supervisor" in main.replace("\n// ", " ")
    assert "module aiinfra.k3s/lab/supervisor" in (nodebuild.NODE_SOURCES / "supervisor" / "go.mod").read_text()


def test_a_changed_supervisor_changes_the_local_programs_version():
    files = nodebuild.read_sources()
    edited = {**files, "supervisor/main.go": files["supervisor/main.go"] + b"\n"}
    assert nodebuild.sources_digest(files) != nodebuild.sources_digest(edited)


def test_the_traefik_part_key_does_not_follow_the_other_components():
    # adding components (helm-controller, the supervisor) must not rebuild Traefik's cached part
    traefik = next(c for c in comps() if c.name == "traefik")
    other = next(c for c in comps(sources="f" * 64) if c.name == "traefik")
    assert nodebuild.part_key(traefik, "go1.26.8") == nodebuild.part_key(other, "go1.26.8")


REGISTRY = """func buildScaler(triggerType string) (scalers.Scaler, error) {
    // TRIGGERS-START
    switch triggerType {
    case "activemq":
        return scalers.NewActiveMQScaler(config)
    case "cpu":
        return scalers.NewCPUMemoryScaler(corev1.ResourceCPU, config)
    // TODO: use other way for test.
    case "external-mock":
        return scalers.NewExternalMockScaler(config)
    case "prometheus":
        return scalers.NewPrometheusScaler(config)
    default:
        return nil, fmt.Errorf("no scaler found for type: %s", triggerType)
    }
    // TRIGGERS-END
}
""".replace("    ", "\t")  # Go indents with tabs


def test_keda_keeps_only_the_scaler_cases_asked_for_and_its_error_names_them():
    out = nodebuild.with_cases_only(REGISTRY, ("cpu", "prometheus"))
    assert 'case "cpu":' in out and 'case "prometheus":' in out
    assert "activemq" not in out and "external-mock" not in out and "ExternalMock" not in out
    assert "has only cpu, prometheus" in out and out.count("default:") == 1
    assert out.startswith("func buildScaler") and out.rstrip().endswith("// TRIGGERS-END\n}")
    with pytest.raises(nodebuild.BuildError, match='no case "redis"'):
        nodebuild.with_cases_only(REGISTRY, ("cpu", "redis"))
    with pytest.raises(nodebuild.BuildError, match="TRIGGERS-START"):
        nodebuild.with_cases_only(REGISTRY.replace("// TRIGGERS-START", ""), ("cpu",))


def test_keda_keeps_the_kept_scaler_files_and_the_tests_and_removes_the_rest():
    names = ["scaler.go", "cpu_memory_scaler.go", "kafka_scaler.go", "kafka_scaler_test.go", "README.md"]
    assert nodebuild.pruned_files(names, ("scaler.go", "cpu_memory_scaler.go")) == ["kafka_scaler.go"]
    with pytest.raises(nodebuild.BuildError, match=r"prometheus_scaler\.go"):
        nodebuild.pruned_files(names, ("scaler.go", "prometheus_scaler.go"))


def test_the_observability_builds_follow_the_collections_chart_pins_and_name_what_they_leave_out():
    by_name = {c.name: c for c in comps()}
    keda, prom, operator = by_name["keda"], by_name["prometheus"], by_name["prometheus-operator"]
    assert keda.version == "v" + read_pin("autoscaling_chart_version").lstrip("v")
    assert keda.toolchain.startswith("go1.27") and keda.pruned[1][0] == "scaler.go"
    assert set(keda.kept_cases[1]) == {"cpu", "cron", "memory", "prometheus"}  # the collection's trigger among them
    assert "only the scalers cpu, cron, memory, prometheus" in keda.note
    assert prom.tags == ("remove_all_sd", "enable_kubernetes_sd") and "no web UI" in prom.note
    wanted = nodebuild.prometheus_operator_wanted(read_pin("monitoring_chart_version"))
    assert operator.note.startswith(f"nearest served: {operator.version}") and wanted in operator.note
    assert operator.served_nested[0][0] == "pkg/apis/monitoring" and operator.client_gen[0] == "pkg/client"
    assert set(operator.binaries) == {"prometheus-operator", "prometheus-config-reloader"}


def test_the_operators_client_is_generated_as_upstreams_make_target_does(tmp_path):
    mod = "github.com/prometheus-operator/prometheus-operator"
    cmds = nodebuild.client_gen_commands(mod, tmp_path, "pkg/client", ("monitoring/v1", "monitoring/v1beta1"))
    assert [c[0] for c in cmds] == [str(tmp_path / n) for n in nodebuild.CODE_GENERATORS]
    apply_gen, client_gen, lister_gen, informer_gen = cmds
    assert apply_gen[-2:] == [f"{mod}/pkg/apis/monitoring/v1", f"{mod}/pkg/apis/monitoring/v1beta1"]
    assert client_gen[client_gen.index("--clientset-name") + 1] == "versioned"
    assert client_gen[-4:] == ["--input", "monitoring/v1", "--input", "monitoring/v1beta1"]
    assert lister_gen[lister_gen.index("--output-dir") + 1] == "pkg/client/listers"
    assert informer_gen[informer_gen.index("--versioned-clientset-package") + 1] == f"{mod}/pkg/client/versioned"
    assert all(c[c.index("--go-header-file") + 1] == ".header" for c in cmds)


def test_components_without_the_further_steps_keep_their_recipe_entry():
    # The steps came after the other components were cached: an entry without steps has the earlier shape (9 items),
    # so adding the steps rebuilt nothing that was built.
    recipe = nodebuild.recipe(comps(), "go1.26.8", "")
    assert len(recipe["components"]["traefik"]) == 9
    assert len(recipe["components"]["keda"]) == 10 and recipe["components"]["keda"][-1]["toolchain"]
