"""lab/nodes/nodeimages.py's pure functions: specs, tags, recipe keys, podman import changes, the pip settings carried
into the build chroot, and the inventory mapping."""

import json

import pytest

from lab.nodes import nodeimages
from lab.pins import parse_pin, read_pin


def test_image_tag_reads_the_release_of_a_reference():
    assert nodeimages.image_tag("ghcr.io/berriai/litellm:v1.110.2") == "v1.110.2"
    assert nodeimages.image_tag("localhost:5000/x/y") == "latest"
    assert nodeimages.image_tag("r/x:1.2@sha256:abc") == "1.2"


def test_the_repos_defaults_pin_a_litellm_release():
    assert nodeimages.image_tag(read_pin("litellm_image")).startswith("v")


def test_safe_tag_and_binary_version():
    assert nodeimages.safe_tag("v1.36.4+k3s1") == "v1.36.4-k3s1"
    assert nodeimages.safe_tag(".x") == "x"
    with pytest.raises(nodeimages.ImageError):
        nodeimages.safe_tag("..")
    versions = {"coredns": {"module": "github.com/coredns/coredns", "version": "v1.14.6"}, "pause": "3.10"}
    assert nodeimages.binary_version(versions, "coredns") == "v1.14.6"
    assert nodeimages.binary_version(versions, "pause") == "3.10"
    assert nodeimages.binary_version(versions, "kubelet") is None


def spec_set(tmp_path, standin_text="print()\n", requirements="litellm==1.110.2\n", coredns="v1.14.6"):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "pause").write_bytes(b"pause-binary")
    specs = [
        nodeimages.scratch_spec("pause", bin_dir / "pause", "a" * 64, None),
        nodeimages.scratch_spec("coredns", bin_dir / "coredns", "b" * 64, coredns),
        nodeimages.litellm_spec("ghcr.io/berriai/litellm:v1.110.2", requirements),
        nodeimages.standin_spec(
            "/x/model_server_standin.py",
            nodeimages.hashlib.sha256(standin_text.encode()).hexdigest(),
            "vllm/vllm-openai:v0.34.0",
        ),
        nodeimages.redis_spec(),
    ]
    return [nodeimages.with_tag(s) for s in specs]


def test_refs_follow_the_contract(tmp_path):
    refs = nodeimages.refs_of(spec_set(tmp_path))
    assert sorted(refs) == ["coredns", "litellm", "model_server", "pause", "redis"]
    assert refs["litellm"] == "localhost/aiinfra-lab/litellm:v1.110.2"
    assert refs["coredns"] == "localhost/aiinfra-lab/coredns:v1.14.6"
    assert refs["pause"] == "localhost/aiinfra-lab/pause:lab-aaaaaaaaaaaa"
    # Fixed tags the lab inventory names (inventories/lab/group_vars/all.yml); the recipe label tells builds apart.
    assert refs["model_server"] == "localhost/aiinfra-lab/model-server-standin:lab"
    assert refs["redis"] == "localhost/aiinfra-lab/redis:lab"


def test_digests_follow_contents_not_where_the_files_are(tmp_path):
    base = spec_set(tmp_path)
    (tmp_path / "elsewhere").mkdir()
    moved = spec_set(tmp_path / "elsewhere")
    assert [s["digest"] for s in base] == [s["digest"] for s in moved]
    changed = spec_set(tmp_path, standin_text="print(1)\n")
    assert nodeimages.recipe_key(base) == nodeimages.recipe_key(spec_set(tmp_path))
    assert nodeimages.recipe_key(base) != nodeimages.recipe_key(changed)
    standin = [next(s for s in specs if s["role"] == "model_server") for specs in (base, changed)]
    assert standin[0]["labels"]["io.aiinfra.image.recipe"] != standin[1]["labels"]["io.aiinfra.image.recipe"]
    assert nodeimages.recipe_key(base) != nodeimages.recipe_key(spec_set(tmp_path, requirements="litellm==1\n"))
    assert nodeimages.recipe_key(base) != nodeimages.recipe_key(base[1:])


def test_every_image_is_labelled_a_lab_build_and_the_standin_a_standin(tmp_path):
    for spec in spec_set(tmp_path):
        labels = spec["labels"]
        assert labels["io.aiinfra.image.lab-build"] == "true"
        assert labels["io.aiinfra.image.recipe"] == spec["digest"]
        assert labels["org.opencontainers.image.version"] == spec["tag"]
        assert labels["io.aiinfra.image.standin"] == ("true" if spec["role"] == "model_server" else "false")
        assert not any(k == "io.aiinfra.lab" or k.startswith("io.aiinfra.lab.") for k in labels)
    standin = next(s for s in spec_set(tmp_path) if s["role"] == "model_server")
    assert "STAND-IN" in standin["labels"]["org.opencontainers.image.description"]
    assert "standin" in standin["name"]
    assert standin["labels"]["io.aiinfra.image.stands-in-for"].startswith("vllm/vllm-openai:v0.34.0 and")


def test_entrypoints_match_how_the_collections_pods_start_them(tmp_path):
    specs = {s["role"]: s for s in spec_set(tmp_path)}
    # The gateway pod gives only args (--config, --port, --num_workers): the entrypoint is litellm.
    assert specs["litellm"]["entrypoint"][-1].endswith("/litellm")
    assert specs["litellm"]["env"]["PATH"].startswith(nodeimages.LITELLM_VENV + "/bin:")
    assert "HOME" not in specs["litellm"]["env"]  # the pod sets HOME=/tmp
    # vLLM pods give args only (vllm/vllm-openai's entrypoint is `vllm serve`); NIM pods none.
    assert specs["model_server"]["entrypoint"] == ["vllm", "serve"]
    # The Redis pod sets command: redis-server /etc/redis/redis.conf.
    assert specs["redis"]["entrypoint"] == [] and specs["redis"]["cmd"] == ["redis-server"]
    assert specs["pause"]["entrypoint"] == ["/pause"] and specs["coredns"]["entrypoint"] == ["/coredns"]


def test_changes_are_one_key_per_line_for_podman_import(tmp_path):
    spec = next(s for s in spec_set(tmp_path) if s["role"] == "litellm")
    lines = nodeimages.changes(spec)
    assert lines[0] == 'ENTRYPOINT ["/opt/litellm/bin/litellm"]'
    assert 'CMD ["--port", "4000"]' in lines and "EXPOSE 4000" in lines
    assert "ENV PYTHONDONTWRITEBYTECODE=1" in lines
    assert all(len(line.split("=")) >= 2 for line in lines if line.startswith(("ENV ", "LABEL ")))
    assert json.loads(lines[0][len("ENTRYPOINT ") :]) == spec["entrypoint"]


PIP_CONFIG = """\
:env:.cert='/etc/ssl/certs/ca-certificates.crt'
:env:.default-timeout='180'
:env:.find-links='/opt/wheels /nowhere'
global.cert='/etc/global.crt'
global.index-url='https://pypi.example/simple'
"""


def test_pip_config_prefers_the_environment():
    config = nodeimages.pip_config(PIP_CONFIG)
    assert config["cert"] == "/etc/ssl/certs/ca-certificates.crt"
    assert config["index-url"] == "https://pypi.example/simple"
    assert config["find-links"] == "/opt/wheels /nowhere"


def test_pip_build_env_binds_the_host_paths_that_exist():
    config = nodeimages.pip_config(PIP_CONFIG)
    env, binds = nodeimages.pip_build_env(config, lambda p: p != "/nowhere")
    build = nodeimages.BUILD_DIR
    assert env["PIP_CERT"] == build + "/pip/0-ca-certificates.crt"
    assert env["PIP_FIND_LINKS"] == build + "/pip/1-wheels"
    assert env["PIP_DEFAULT_TIMEOUT"] == "180"
    assert env["PIP_INDEX_URL"] == "https://pypi.example/simple"
    assert binds == [
        ("/etc/ssl/certs/ca-certificates.crt", build + "/pip/0-ca-certificates.crt"),
        ("/opt/wheels", build + "/pip/1-wheels"),
    ]
    env, binds = nodeimages.pip_build_env({"find-links": "/nowhere"}, lambda p: False)
    assert env == {} and binds == []


def test_build_script_mounts_read_only_and_runs_the_script_with_exactly_the_env(tmp_path):
    spec = next(s for s in spec_set(tmp_path) if s["role"] == "litellm")
    script = nodeimages.build_script(
        spec, [("/etc/ca.crt", "/run/aiinfra-build/pip/0-ca.crt", False)], "/r", {"PATH": "/usr/bin", "A": "b c"}
    )
    lines = script.splitlines()
    assert lines[:3] == ["set -eu", "mount --make-rprivate /", "mount -t proc proc /r/proc"]
    assert "mount --bind /etc/ca.crt /r/run/aiinfra-build/pip/0-ca.crt" in lines
    assert "mount -o remount,bind,ro /r/run/aiinfra-build/pip/0-ca.crt" in lines
    (chroot,) = [line for line in lines if line.startswith("chroot ")]
    assert chroot.startswith("chroot /r /usr/bin/env -i 'A=b c' PATH=/usr/bin /bin/sh -c ")
    assert "pip install" in script


def test_inventory_lines_map_the_collections_variables(tmp_path):
    refs = nodeimages.refs_of(spec_set(tmp_path))
    lines = nodeimages.inventory_lines(refs)
    assert "litellm_image: localhost/aiinfra-lab/litellm:v1.110.2" in lines
    assert "vllm_image: %s" % refs["model_server"] in lines
    assert "litellm_redis_image: %s" % refs["redis"] in lines
    assert any(line.startswith("# nim_models") and refs["model_server"] in line for line in lines)
    assert nodeimages.inventory_lines({"litellm": "x"}) == ["litellm_image: x"]


def test_specs_for_leaves_out_missing_binaries_and_reads_versions(tmp_path):
    (tmp_path / "pause").write_bytes(b"p")
    (tmp_path / "versions.json").write_text(json.dumps({"coredns": {"version": "v1.14.6"}}))
    no_helm = tmp_path / "no-helm"
    specs, missing = nodeimages.specs_for(tmp_path, no_helm)
    cert_manager = ["cert-manager-controller", "cert-manager-webhook", "cert-manager-cainjector"]
    observed = ["prometheus-operator", "prometheus-config-reloader", "prometheus", "keda", "keda-adapter"]
    assert missing == [
        "coredns",
        "traefik",
        *cert_manager,
        *observed,
        "klipper-helm (no helm: run `python -m lab.live.helmbuild build`)",
    ]
    assert [s["role"] for s in specs] == ["pause", "litellm", "model_server", "redis"]
    (tmp_path / "coredns").write_bytes(b"c")
    specs, missing = nodeimages.specs_for(tmp_path, no_helm)
    assert (
        missing[:-1] == ["traefik", *cert_manager, *observed]
        and nodeimages.refs_of(specs)["coredns"] == "localhost/aiinfra-lab/coredns:v1.14.6"
    )


def test_the_traefik_image_is_named_for_what_its_build_leaves_out(tmp_path):
    (tmp_path / "traefik").write_bytes(b"t")
    note = "built without the ACME DNS-challenge providers (refused)"
    (tmp_path / "versions.json").write_text(json.dumps({"traefik": {"version": "v3.7.8", "note": note}}))
    spec = next(s for s in nodeimages.specs_for(tmp_path)[0] if s["role"] == "traefik")
    assert nodeimages.refs_of([spec])["traefik"] == "localhost/aiinfra-lab/traefik-no-acme-dns-no-webui:v3.7.8"
    assert spec["entrypoint"] == ["/traefik"]
    assert note in spec["labels"]["org.opencontainers.image.description"]


def test_the_lab_inventory_names_the_images_this_recipe_builds(tmp_path):
    text = (nodeimages.ROOT / "inventories" / "lab" / "group_vars" / "all.yml").read_text()
    wanted = {
        line.split(": ", 1)[0]: line.split(": ", 1)[1]
        for line in nodeimages.inventory_lines(nodeimages.refs_of(nodeimages.specs_for(tmp_path, tmp_path / "h")[0]))
        if not line.startswith("#")
    }
    assert sorted(wanted) == ["litellm_image", "litellm_redis_image", "vllm_image"]
    for variable, ref in wanted.items():
        assert parse_pin(text, variable) == ref, variable


def test_the_cert_manager_controller_image_runs_as_a_non_root_id(tmp_path):
    (tmp_path / "cert-manager-controller").write_bytes(b"c")
    note = "not ACME, Vault"
    versions = {"cert-manager-controller": {"version": "v1.21.2", "note": note}}
    (tmp_path / "versions.json").write_text(json.dumps(versions))
    spec = next(
        s for s in nodeimages.specs_for(tmp_path, tmp_path / "h")[0] if s["role"] == nodeimages.CERT_MANAGER_ROLE
    )
    assert nodeimages.refs_of([spec])[nodeimages.CERT_MANAGER_ROLE] == (
        "localhost/aiinfra-lab/cert-manager-controller-only-ca-selfsigned-labmain:v1.21.2"
    )
    assert spec["base"] == "scratch" and spec["entrypoint"] == ["/cert-manager-controller"]
    assert "USER 65532:65532" in nodeimages.changes(spec)
    assert note in spec["labels"]["org.opencontainers.image.description"]
    # The other scratch images keep their specs (and so their recipe digests): no user of their own.
    (tmp_path / "traefik").write_bytes(b"t")
    traefik = next(s for s in nodeimages.specs_for(tmp_path)[0] if s["role"] == "traefik")
    assert "user" not in traefik and not any(c.startswith("USER") for c in nodeimages.changes(traefik))


# The cert-manager images: role, image name, tagged with the cert-manager version (the chart's appVersion).
CERT_MANAGER_IMAGES = [
    ("cert-manager-controller", "cert-manager-controller-only-ca-selfsigned-labmain"),
    ("cert-manager-webhook", "cert-manager-webhook-labmain"),
    ("cert-manager-cainjector", "cert-manager-cainjector-labmain"),
]


@pytest.mark.parametrize(("role", "name"), CERT_MANAGER_IMAGES)
def test_each_cert_manager_image_is_a_scratch_labmain_image_as_a_non_root_id(tmp_path, role, name):
    (tmp_path / role).write_bytes(role.encode())
    note = "cert-manager's own code started by the LAB'S OWN main packages"
    (tmp_path / "versions.json").write_text(json.dumps({role: {"version": "v1.21.2", "note": note}}))
    spec = next(s for s in nodeimages.specs_for(tmp_path, tmp_path / "h")[0] if s["role"] == role)
    ref = f"localhost/aiinfra-lab/{name}:v1.21.2"
    assert spec["ref"] == ref and nodeimages.refs_of([spec]) == {role: ref}
    assert spec["base"] == "scratch" and spec["entrypoint"] == [f"/{role}"] and spec["cmd"] == []
    assert "USER 65532:65532" in nodeimages.changes(spec)
    assert note in spec["labels"]["org.opencontainers.image.description"]
    assert spec["labels"]["io.aiinfra.image.standin"] == "false"
    assert nodeimages.images({role: ref, "redis": "r"}) == {role: ref}
    assert f"{nodeimages.CERT_MANAGER_REPOSITORIES[nodeimages.CERT_MANAGER_VALUES[role]]}:v1.21.2" == ref


def test_the_cert_manager_repositories_are_the_charts_image_values():
    assert nodeimages.CERT_MANAGER_REPOSITORIES == {
        "image": "localhost/aiinfra-lab/cert-manager-controller-only-ca-selfsigned-labmain",
        "webhook.image": "localhost/aiinfra-lab/cert-manager-webhook-labmain",
        "cainjector.image": "localhost/aiinfra-lab/cert-manager-cainjector-labmain",
    }


def klipper_spec(entry="#!/bin/bash\n", helm=b"helm"):
    sha = nodeimages.hashlib.sha256
    return nodeimages.with_tag(
        nodeimages.klipper_helm_spec(
            "/x/entry", sha(entry.encode()).hexdigest(), "/y/helm", sha(helm).hexdigest(), "v4.3.2"
        )
    )


def test_the_klipper_helm_standin_runs_as_helm_controllers_jobs_need():
    spec = klipper_spec()
    assert spec["ref"] == nodeimages.KLIPPER_HELM_IMAGE == "localhost/aiinfra-lab/klipper-helm-standin:lab"
    assert spec["base"] == "debian" and spec["entrypoint"] == ["entry"] and spec["cmd"] == []  # Jobs give args only
    assert set(spec["packages"]) >= {"bash", "jq", "coreutils", "gzip", "ca-certificates"}
    assert {f["target"]: f["mode"] for f in spec["files"]} == {"/usr/bin/helm": 0o755, "/usr/bin/entry": 0o755}
    assert spec["local"] == {"/usr/bin/helm": "/y/helm", "/usr/bin/entry": "/x/entry"}
    # runAsNonRoot needs a numeric user; the Jobs mount emptyDirs under HOME and a read-only root file system.
    changes = nodeimages.changes(spec)
    assert "USER 1000:1000" in changes and "ENV HOME=/home/klipper-helm" in changes
    assert "chown -R 1000:1000 /home/klipper-helm" in spec["script"]
    for sub in (".helm", ".cache", ".config"):
        assert f"/home/klipper-helm/{sub}" in spec["script"]


def test_the_klipper_helm_standin_says_it_is_one():
    labels = klipper_spec()["labels"]
    assert labels["io.aiinfra.image.standin"] == "true"
    assert labels["io.aiinfra.image.stands-in-for"] == "rancher/klipper-helm"
    assert labels["org.opencontainers.image.description"].startswith("STAND-IN for rancher/klipper-helm, NOT")
    assert "standin" in klipper_spec()["name"]


def test_the_klipper_helm_standin_digest_follows_the_entry_and_helm():
    base = klipper_spec()["digest"]
    assert base == klipper_spec()["digest"]
    assert base != klipper_spec(entry="#!/bin/bash\n# edited\n")["digest"]
    assert base != klipper_spec(helm=b"other helm")["digest"]


def test_specs_for_adds_the_klipper_helm_standin_when_helm_is_built(tmp_path):
    helm = tmp_path / "helm"
    helm.write_bytes(b"helm")
    specs, missing = nodeimages.specs_for(tmp_path, helm)
    (spec,) = [s for s in specs if s["role"] == nodeimages.KLIPPER_HELM_ROLE]
    assert spec["local"]["/usr/bin/entry"] == str(nodeimages.KLIPPER_HELM_ENTRY)
    assert not any(m.startswith("klipper-helm") for m in missing)
    assert nodeimages.images(nodeimages.refs_of(specs)) == {"klipper-helm": nodeimages.KLIPPER_HELM_IMAGE}
    assert any(nodeimages.KLIPPER_HELM_IMAGE in line for line in nodeimages.inventory_lines(nodeimages.refs_of(specs)))


def test_the_entry_script_is_executable_bash():
    entry = nodeimages.KLIPPER_HELM_ENTRY
    assert entry.stat().st_mode & 0o111 == 0o111
    assert entry.read_text().startswith("#!/usr/bin/env bash\n")
    assert "STAND-IN" in entry.read_text().splitlines()[1]


def test_the_prometheus_images_hold_their_binary_where_the_operator_and_upstream_run_it(tmp_path):
    # The operator starts the config reloader as /bin/prometheus-config-reloader; the other scratch images hold
    # their binary at /<name>. Each runs as a numeric non-root user, as upstream's images do.
    for name in ("prometheus-config-reloader", "prometheus", "keda"):
        (tmp_path / name).write_bytes(name.encode())
    specs = {s["role"]: s for s in nodeimages.specs_for(tmp_path, tmp_path / "no-helm")[0]}
    assert specs["prometheus-config-reloader"]["entrypoint"] == ["/bin/prometheus-config-reloader"]
    assert specs["prometheus"]["entrypoint"] == ["/bin/prometheus"]
    assert specs["keda"]["entrypoint"] == ["/keda"] and "dir" not in specs["keda"]["binary"]
    assert specs["prometheus"]["user"] == "65534:65534" and specs["keda"]["user"] == "65532:65532"
    assert specs["keda"]["name"] == "keda-only-cpu-cron-memory-prometheus-scalers"
    assert specs["prometheus"]["name"] == "prometheus-kubernetes-sd-only-no-webui"
