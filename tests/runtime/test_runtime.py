"""The model servers' runtime contract, checked with the real vLLM package: the vllm server that the pinned image
carries (vLLM 0.34.0 from PyPI, `make runtime` installs it; tests/runtime/requirements-vllm.txt names the one pin
PyPI lacks) started exactly as each rendered vLLM container starts it: the image's entrypoint (`vllm serve`) with
the rendered arguments and environment, as the pod's uid with no passwd entry, on a read-only root where only the
pod's emptyDirs (/tmp, /dev/shm) are writable, with the pod's read-only mounts (the model store, the logging
ConfigMap) at their mount paths (lab/live/runtime.py builds that from read-only bind mounts; no image can be pulled).

There is no GPU here: vLLM 0.34 stops while it builds its argument parser ("Failed to infer device type"), which
is where a passing start ends. Two more runs in the same sandbox cover what a GPU start reaches later: the rendered
arguments parsed by vLLM's own `vllm serve` parser (with VLLM_TARGET_DEVICE=cpu, the one variable added, so that
the parser can be built), and the cache paths vLLM and its kernels' libraries compute at their first kernel build
(FlashAttention-4's CuTe DSL cache, torch's quack kernels, inductor, triton, flashinfer, numba, the Hub cache),
each created and written as the pod's user. The model store holds a config.json only (no weights): nothing loads.
A fourth builds vLLM's own server app (no engine) from the rendered arguments and environment, the API key from the
model servers' Secret (as the litellm role derives it from a test master key), and calls it in process: vLLM's own
check refuses /v1 without the key and leaves /health and /metrics open.
"""

import importlib.util
import json
from pathlib import Path

import pytest
import yaml

from lab import ROOT
from lab.live import runtime

# The unit tests' helpers (running playbooks with the working tree's collection, writing a site inventory).
_spec = importlib.util.spec_from_file_location("unit_helpers", ROOT / "tests" / "unit" / "conftest.py")
helpers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(helpers)

from ansible_collections.aiinfra.k3s.plugins.module_utils.k8s import gateway  # noqa: E402

PROBES = Path(__file__).parent / "probes"
VLLM = runtime.VLLM_VENV.resolve() / "bin" / "vllm"
PYTHON = runtime.VLLM_VENV.resolve() / "bin" / "python"
LIVE_SITES = {s["id"]: s for s in yaml.safe_load((ROOT / "tests" / "live" / "sites.yml").read_text())}
# The example operators copy (one model) and the largest test site (tensor parallelism, time-slicing, NIM beside).
SITES = {"example": ROOT / "inventories" / "example", "full": LIVE_SITES["full"]}
# A model directory as vLLM reads it first (a tiny Llama config; no weights, nothing is loaded).
MODEL_CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_attention_heads": 4,
    "num_hidden_layers": 2,
    "num_key_value_heads": 4,
    "vocab_size": 1000,
    "max_position_embeddings": 16384,
    "rms_norm_eps": 1e-5,
    "torch_dtype": "float16",
}
# Signs of a start that failed before it needed a GPU (each seen in a failing run of a wrong contract).
EARLY_FAILURES = ("getpwuid", "Read-only file system", "Permission denied", "unrecognized arguments", "No such file")
NO_GPU = "RuntimeError: Failed to infer device type"
# The model servers' key, as the litellm role derives it from the master key (a test one here): the value the pods
# get from the Secret their VLLM_API_KEY names (render.yml writes no Secret without render_secrets).
MASTER_KEY = "sk-" + "0a1b2c3d4e5f6a7b8c9d" * 2
MODEL_KEY = gateway.model_api_key(MASTER_KEY)


def pods(site_id, tmp):
    """Each rendered vLLM server as the sandbox runs it: name, argv, env, uid, volumes, and the pod spec."""
    docs = helpers.render_site(SITES[site_id], tmp)
    (gateway_pod,) = [
        d["spec"]["template"]["spec"]
        for d in docs
        if d["kind"] == "Deployment" and d["metadata"]["labels"]["app.kubernetes.io/component"] == "gateway"
    ]
    (secret,) = [
        e["valueFrom"]["secretKeyRef"]["name"]
        for e in gateway_pod["containers"][0]["env"]
        if e["name"] == "MODEL_SERVER_API_KEY"
    ]
    config_maps = {d["metadata"]["name"]: d for d in docs if d["kind"] == "ConfigMap"}
    out = []
    for sts in docs:
        if sts["kind"] != "Deployment" or sts["metadata"]["labels"]["app.kubernetes.io/component"] != "vllm":
            continue
        name = sts["metadata"]["name"]
        pod = sts["spec"]["template"]["spec"]
        (container,) = pod["containers"]
        assert "command" not in container  # the image's entrypoint runs: `vllm serve`
        volumes = {v["name"]: v for v in pod["volumes"]}
        mounts = []
        for mount in container["volumeMounts"]:
            read_only = bool(mount.get("readOnly"))
            if mount["name"] in ("tmp", "dshm"):
                # The pod's emptyDirs: the sandbox's own writable /tmp and /dev/shm.
                assert "emptyDir" in volumes[mount["name"]] and mount["mountPath"] in ("/tmp", "/dev/shm")
                continue
            host = tmp / name / mount["name"]
            host.mkdir(parents=True)
            if mount["name"] == "models":  # the pod's store claim: the node's model store
                args = container["args"]
                model_dir = Path(args[args.index("--model") + 1]).relative_to(mount["mountPath"])
                (host / model_dir).mkdir(parents=True)
                (host / model_dir / "config.json").write_text(json.dumps(MODEL_CONFIG))
            elif "configMap" in volumes[mount["name"]]:
                for key, text in config_maps[volumes[mount["name"]]["configMap"]["name"]]["data"].items():
                    (host / key).write_text(text)
            else:
                pytest.fail("%s mounts %s, which the sandbox cannot provide yet" % (name, mount["name"]))
            mounts.append((host, mount["mountPath"], read_only))
        # The one Secret a vLLM server reads: the model servers' key (issue 28, item 5), as VLLM_API_KEY.
        refs = [e for e in container["env"] if "value" not in e]
        assert refs == [{"name": "VLLM_API_KEY", "valueFrom": {"secretKeyRef": {"name": secret, "key": "api-key"}}}]
        env = {e["name"]: e["value"] for e in container["env"] if "value" in e}
        env["VLLM_API_KEY"] = MODEL_KEY
        out.append(
            {
                "name": name,
                "argv": [str(VLLM), "serve", *container["args"]],
                "args": container["args"],
                "env": env,
                "uid": pod["securityContext"]["runAsUser"],
                "volumes": mounts,
                "pod": pod,
            }
        )
    assert out, "no vLLM server rendered for %s" % site_id
    return out


@pytest.fixture(scope="module", params=sorted(SITES))
def servers(request, tmp_path_factory):
    if not VLLM.exists():
        pytest.fail("vLLM is not installed: run `make runtime` (it installs .cache/vllm-venv)")
    return pods(request.param, tmp_path_factory.mktemp(request.param))


def run(server, argv, env, volumes=()):
    status, output = runtime.sandboxed(
        argv, env, server["uid"], runtime.VLLM_VENV, [*server["volumes"], *volumes], timeout=300
    )
    return status, output


def test_the_pod_runs_as_a_uid_without_a_passwd_entry_on_a_read_only_root(servers):
    for server in servers:
        pod, (container,) = server["pod"], server["pod"]["containers"]
        assert pod["securityContext"]["runAsNonRoot"] is True and server["uid"] > 0
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
        status, output = run(server, ["/usr/bin/id"], server["env"])
        assert status == 0, output
        assert output.startswith("uid=%d gid=%d groups=%d" % ((server["uid"],) * 3)), output
        assert "(" not in output.split()[0], "uid %d has a name in the sandbox: %s" % (server["uid"], output)
        status, output = run(server, ["/bin/sh", "-c", "touch /tmp/ok && touch /etc/aiinfra-probe"], server["env"])
        assert status != 0 and "Read-only file system" in output, output


def test_vllm_starts_as_rendered_until_it_needs_a_gpu(servers):
    for server in servers:
        status, output = run(server, server["argv"], server["env"])
        assert status != 0, output[-3000:]
        assert NO_GPU in output, output[-3000:]
        early = [sign for sign in EARLY_FAILURES if sign in output]
        assert not early, (server["name"], early, output[-3000:])
        assert output.count("Traceback (most recent call last)") == 1, output[-5000:]


def test_vllm_parses_every_rendered_argument_as_meant(servers):
    for server in servers:
        argv = [str(PYTHON), "/opt/aiinfra-probes/parse_args.py", *server["args"]]
        env = dict(server["env"], VLLM_TARGET_DEVICE="cpu")
        status, output = run(server, argv, env, [(PROBES, "/opt/aiinfra-probes", True)])
        lines = [line for line in output.splitlines() if line.startswith("PARSED ")]
        assert status == 0 and lines, output[-3000:]
        parsed = json.loads(lines[0][len("PARSED ") :])
        args = server["args"]
        assert parsed["model"] == args[args.index("--model") + 1]
        assert parsed["served_model_name"] == [args[args.index("--served-model-name") + 1]]
        assert parsed["tensor_parallel_size"] == int(args[args.index("--tensor-parallel-size") + 1])
        assert parsed["port"] == server["pod"]["containers"][0]["ports"][0]["containerPort"]
        # A stopping server finishes its requests (vLLM's default, 0, aborts them) within the pod's grace period,
        # after the preStop sleep.
        grace = server["pod"]["terminationGracePeriodSeconds"]
        sleep = int(server["pod"]["containers"][0]["lifecycle"]["preStop"]["exec"]["command"][-1].split()[-1])
        assert parsed["shutdown_timeout"] > 0 and sleep + parsed["shutdown_timeout"] < grace, (parsed, grace)


def test_every_cache_is_written_under_tmp_as_the_pod_user(servers):
    for server in servers:
        argv = [str(PYTHON), "/opt/aiinfra-probes/caches.py"]
        status, output = run(server, argv, server["env"], [(PROBES, "/opt/aiinfra-probes", True)])
        lines = [line for line in output.splitlines() if line.startswith("CACHES ")]
        assert status == 0 and lines, output[-3000:]
        caches = json.loads(lines[0][len("CACHES ") :])
        wrong = {name: path for name, path in caches.items() if not path.startswith("/tmp/")}
        assert not wrong, (server["name"], wrong)


def test_vllm_refuses_v1_without_the_model_servers_key_and_leaves_probes_open(servers):
    """vLLM's own app, built from each server's rendered arguments and environment (VLLM_API_KEY from the Secret):
    401 on /v1 without the key or with another (a client's key included), through with it; /health and /metrics,
    which the probes and Prometheus call without a key, are not refused. vLLM's check guards only /v1, /v2,
    /inference and /cohere: /invocations and /tokenize are not refused either (docs/security.md: only the network
    policy keeps callers other than the gateway and Prometheus from them)."""
    for server in servers:
        argv = [str(PYTHON), "/opt/aiinfra-probes/auth.py", MODEL_KEY, *server["args"]]
        env = dict(server["env"], VLLM_TARGET_DEVICE="cpu")
        status, output = run(server, argv, env, [(PROBES, "/opt/aiinfra-probes", True)])
        lines = [line for line in output.splitlines() if line.startswith("AUTH ")]
        assert status == 0 and lines, output[-3000:]
        answers = json.loads(lines[0][len("AUTH ") :])
        assert MODEL_KEY not in output
        for path in ("POST /v1/chat/completions", "POST /v1/completions", "GET /v1/models"):
            assert answers[path + " none"] == 401 and answers[path + " wrong"] == 401, (server["name"], answers)
            assert answers[path + " key"] != 401, (server["name"], answers)
        for path in ("GET /health", "GET /metrics", "POST /invocations", "POST /tokenize"):
            assert answers[path + " none"] != 401, (server["name"], path, answers)
        assert answers["GET /metrics none"] == 200
