"""plugins/module_utils/k8s/gateway.py: the LiteLLM gateway on the rendered test sites (tests/unit/rendered_sites.py):
routes to exactly the deployed models, high availability, the model servers' key only it and vLLM read; and as
functions: weak master keys refused, the key's HMAC, the rollouts on the Secrets' resourceVersions."""

from pathlib import Path

import pytest
import rendered_sites
import yaml
from conftest import ROOT
from rendered_sites import GATEWAY_KEY, NAMESPACE, of_kind, workloads

from ansible_collections.aiinfra.k3s.plugins.module_utils.k8s import gateway as gw
from ansible_collections.aiinfra.k3s.plugins.module_utils.k8s import model_servers as wl

IMAGE = "vllm/vllm-openai:v0.34.0"
rendered = rendered_sites.site_fixture()


def test_gateway_routes_exactly_the_deployed_models_and_services(rendered):
    _site, docs, _out, _proc = rendered
    (cm,) = [d for d in of_kind(docs, "ConfigMap") if d["metadata"]["name"] == "litellm-ha-config"]
    config = yaml.safe_load(cm["data"]["config.yaml"])
    routes = {m["model_name"]: m["litellm_params"] for m in config["model_list"]}
    services = {
        s["metadata"]["name"]: s
        for s in of_kind(docs, "Service")
        if s["metadata"]["labels"]["app.kubernetes.io/component"] in ("vllm", "nim")
    }
    deployed = {}
    for dep in workloads(docs):
        container = dep["spec"]["template"]["spec"]["containers"][0]
        if "--served-model-name" in container.get("args", []):
            deployed[container["args"][container["args"].index("--served-model-name") + 1]] = dep
        for e in container["env"]:
            if e["name"] == "NIM_SERVED_MODEL_NAME":
                deployed[e["value"]] = dep
    assert set(routes) == set(deployed) and routes
    for model, params in routes.items():
        assert params["model"] == f"hosted_vllm/{model}"
        dep = deployed[model]
        (svc,) = [s for s in services.values() if s["spec"]["selector"] == dep["spec"]["selector"]["matchLabels"]]
        ns, port = svc["metadata"]["namespace"], svc["spec"]["ports"][0]["port"]
        assert params["api_base"] == f"http://{svc['metadata']['name']}.{ns}.svc.cluster.local:{port}/v1"
        pod_port = dep["spec"]["template"]["spec"]["containers"][0]["ports"][0]
        assert pod_port["name"] == svc["spec"]["ports"][0]["targetPort"]
    assert config["general_settings"]["master_key"] == "os.environ/LITELLM_MASTER_KEY"
    assert set(config["litellm_settings"]["model_group_settings"]["forward_client_headers_to_llm_api"]) == set(routes)


def min_replicas(dep, docs):
    """The Deployment's replicas, or its autoscaler's minimum when one owns the count."""
    if "replicas" in dep["spec"]:
        return dep["spec"]["replicas"]
    key = (dep["metadata"]["namespace"], dep["metadata"]["name"])
    (scaler,) = [
        o
        for o in of_kind(docs, "ScaledObject") + of_kind(docs, "HorizontalPodAutoscaler")
        if (o["metadata"]["namespace"], o["spec"]["scaleTargetRef"]["name"]) == key
    ]
    return scaler["spec"].get("minReplicaCount", scaler["spec"].get("minReplicas"))


def test_gateway_is_highly_available(rendered):
    site, docs, _out, _proc = rendered
    (dep,) = [d for d in workloads(docs) if d["metadata"]["name"] == "litellm-ha"]
    spec = dep["spec"]
    assert min_replicas(dep, docs) == 3  # inventories/lab: litellm_replicas 3 too
    assert spec["strategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}
    pod = spec["template"]["spec"]
    container = pod["containers"][0]
    assert container["readinessProbe"]["httpGet"]["path"] == "/health/readiness"
    assert container["livenessProbe"]["httpGet"]["path"] == "/health/liveliness"
    assert {"name": "JSON_LOGS", "value": "True"} in container["env"]
    key_ref = next(e for e in container["env"] if e["name"] == "LITELLM_MASTER_KEY")
    assert key_ref["valueFrom"]["secretKeyRef"]["name"] == "litellm-master-key"
    assert pod["topologySpreadConstraints"][0]["topologyKey"] == "kubernetes.io/hostname"
    (pdb,) = [p for p in of_kind(docs, "PodDisruptionBudget") if p["metadata"]["name"] == "litellm-ha"]
    assert pdb["spec"]["selector"]["matchLabels"] == spec["selector"]["matchLabels"]
    (svc,) = [s for s in of_kind(docs, "Service") if s["metadata"]["name"] == "litellm"]
    assert svc["spec"]["ports"][0]["port"] == 4000  # litellm.ia-services-payed.svc.cluster.local:4000
    if site == "full":  # the notes' placement: on the GPU nodes, tolerating the taint
        assert pod["nodeSelector"] == {"ai-workload": "true"}
        assert pod["tolerations"][0]["key"] == "nvidia.com/gpu"
    else:  # default: off the GPU nodes
        term = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        assert term["nodeSelectorTerms"][0]["matchExpressions"] == [
            {"key": "ai-workload", "operator": "NotIn", "values": ["true"]}
        ]
        assert "tolerations" not in pod


@pytest.mark.parametrize(
    ("key", "fragments"),
    [
        ("", ["is not set"]),
        ("sk-1234", ["fewer than 32", "placeholder"]),
        ("0f3a9c7e1b5d2f8a4c6e0b9d3f7a5c1e9b2d", ["does not start with sk-"]),
        ("sk-" + "ab" * 20, ["too few distinct characters"]),
        ("sk-changeme-0f3a9c7e1b5d2f8a4c6e0b9d3f7a", ["placeholder"]),
        ("sk-5f0c9a1e7b3d48c2a6e9f1b7d3c5a8e0f2b4d6c8", []),
    ],
)
def test_weak_master_keys_are_refused(key, fragments):
    problems = gw.master_key_problems(key)
    assert len(problems) == len(fragments), problems
    for fragment in fragments:
        assert any(fragment in p for p in problems), (fragment, problems)
    assert all(not key or key not in p for p in problems)  # the key is never quoted


def gateway_params(**params):
    base = yaml.safe_load((ROOT / "roles" / "litellm" / "defaults" / "main.yml").read_text())
    settings = {k.removeprefix("litellm_"): v for k, v in base.items() if k.startswith("litellm_")}
    limits = {"store": "redis", "deploy": True, "name": "litellm-ha-redis", "host": "h", "port": 6379}
    settings.update(namespace="ai", consumers=[], limits=limits, prices={}, edge_namespace="", autoscaled=False)
    settings.update(params)
    return settings


def gateway_objects(**params):
    routes = [{"model": "m1", "service": "vllm-m1", "namespace": "ai", "port": 8000, "component": "vllm"}]
    return gw.gateway_manifests(routes, gateway_params(**params))


def applied_secrets(master, redis, consumers="7"):
    return [
        {"name": "litellm-master-key", "namespace": "ai", "resourceVersion": master},
        {"name": "litellm-redis", "namespace": "ai", "resourceVersion": redis},
        {"name": "litellm-consumers", "namespace": "ai", "resourceVersion": consumers},
        {"name": "litellm-redis", "namespace": "edge", "resourceVersion": "99"},
    ]


def test_a_new_key_rolls_the_gateway_and_its_redis():
    """Issue 28, item 9: the pods roll on the resourceVersions of the Secrets they read at start, which the API
    server changes when a Secret is written with new content (a new master key or Redis password) and only then."""
    from ansible_collections.aiinfra.k3s.plugins.filter.secret_rollout_patches import secret_rollout_patches

    objects = gateway_objects()
    patches = {p["metadata"]["name"]: p for p in secret_rollout_patches(objects, applied_secrets("10", "11"))}
    assert sorted(patches) == ["litellm-ha", "litellm-ha-redis"]

    def value(patches, name):
        assert patches[name]["kind"] == "Deployment" and patches[name]["metadata"]["namespace"] == "ai"
        return patches[name]["spec"]["template"]["metadata"]["annotations"]["aiinfra.io/secret-versions"]

    # The gateway reads the master key and the Redis password at start; the Redis its config (a Secret volume).
    # The consumers' file (an optional volume, swapped in place and read at each request) rolls nothing.
    assert value(patches, "litellm-ha") == "litellm-master-key=10,litellm-redis=11"
    assert value(patches, "litellm-ha-redis") == "litellm-redis=11"
    same = {p["metadata"]["name"]: p for p in secret_rollout_patches(objects, applied_secrets("10", "11", "8"))}
    assert same == patches  # nothing the pods read at start changed: the same patch, no rollout
    rotated = {p["metadata"]["name"]: p for p in secret_rollout_patches(objects, applied_secrets("12", "13"))}
    assert value(rotated, "litellm-ha") != value(patches, "litellm-ha")
    assert value(rotated, "litellm-ha-redis") != value(patches, "litellm-ha-redis")
    # Nothing applied through the API (render.yml, K3s not answering): no patch.
    assert secret_rollout_patches(objects, []) == []


def test_an_external_redis_rolls_the_gateway_only():
    limits = {"store": "redis", "deploy": False, "name": "", "host": "redis.example.org", "port": 6379}
    patches = gw.rollout_patches(gateway_objects(limits=limits), applied_secrets("10", "11"))
    assert [(p["metadata"]["name"], p["spec"]["template"]["metadata"]["annotations"]) for p in patches] == [
        ("litellm-ha", {"aiinfra.io/secret-versions": "litellm-master-key=10,litellm-redis=11"})
    ]


# Issue 28, item 5: the model servers require an API key that only the gateway holds.
MODEL_KEY_SECRET = "litellm-ha-model-api-key"


MODEL_AUTH = {
    "enabled": True,
    "secret": MODEL_KEY_SECRET,
    "key": "api-key",
    "env": "MODEL_SERVER_API_KEY",
    "namespaces": ["ai"],
}


def test_the_model_servers_key_is_an_hmac_of_the_master_key():
    """HMAC-SHA256("aiinfra.k3s model servers") under the master key, hex: a known answer (the context is part of
    the contract: a changed one would give every site a new key), a new master key gives a new key, and it is
    neither the master key nor the Redis password derived from it."""
    key = gw.model_api_key(GATEWAY_KEY)
    assert key == "fad17779ec40f604e1e34b17252a996521a29fa886fec7fd90bddf43edfb8486"
    assert gw.model_api_key("sk-" + "9" * 40) != key and GATEWAY_KEY not in key
    assert key != gw.redis_password({"limits": {"deploy": True}}, GATEWAY_KEY)
    with pytest.raises(ValueError, match="litellm_master_key"):
        gw.model_api_key("")


def test_only_the_gateway_and_the_vllm_servers_read_the_model_servers_key(rendered):
    """The plan names the key's Secret once; every vLLM server reads it as VLLM_API_KEY, the gateway as the plan's
    variable, which every vLLM route of its config sends (litellm_params.api_key: os.environ/...); NIM, which has no
    API key, reads nothing. With the secrets rendered, the Secret holds the HMAC of the master key in each namespace
    that reads it, and the key is in no other file and never printed."""
    site, docs, out, proc = rendered
    auth = rendered.plan()["model_auth"]
    namespace = NAMESPACE[site]
    assert auth == {
        "enabled": True,
        "secret": MODEL_KEY_SECRET,
        "key": "api-key",
        "env": "MODEL_SERVER_API_KEY",
        "namespaces": [namespace],
    }
    ref = {"secretKeyRef": {"name": MODEL_KEY_SECRET, "key": "api-key"}}
    servers = {}
    for dep in workloads(docs):
        component = dep["metadata"]["labels"]["app.kubernetes.io/component"]
        (container,) = dep["spec"]["template"]["spec"]["containers"]
        from_secrets = {e["name"]: e["valueFrom"] for e in container["env"] if "valueFrom" in e}
        if component == "vllm":
            assert from_secrets == {"VLLM_API_KEY": ref}, dep["metadata"]["name"]
            assert "--api-key" not in container["args"]  # never on the command line (ps, the pod spec)
            servers[dep["metadata"]["name"]] = dep
        elif component == "nim":
            assert "VLLM_API_KEY" not in from_secrets and "MODEL_SERVER_API_KEY" not in from_secrets
        elif component == "gateway":
            assert from_secrets["MODEL_SERVER_API_KEY"] == ref
    assert servers
    (cm,) = [d for d in of_kind(docs, "ConfigMap") if d["metadata"]["name"] == "litellm-ha-config"]
    config = yaml.safe_load(cm["data"]["config.yaml"])
    for entry in config["model_list"]:
        params = entry["litellm_params"]
        if params["api_base"].startswith("http://vllm-"):
            assert params["api_key"] == "os.environ/MODEL_SERVER_API_KEY", entry["model_name"]
        else:
            assert "api_key" not in params, entry["model_name"]
    if site != "full":
        assert not [s for s in of_kind(docs, "Secret") if s["metadata"]["name"] == MODEL_KEY_SECRET]
        return
    key = gw.model_api_key(GATEWAY_KEY)
    (secret,) = [s for s in of_kind(docs, "Secret") if s["metadata"]["name"] == MODEL_KEY_SECRET]
    assert secret["metadata"]["namespace"] == namespace and secret["stringData"] == {"api-key": key}
    assert key not in proc.stdout + proc.stderr
    for path in out.glob("*.yaml"):
        if path.name != "secrets.yaml":
            assert key not in path.read_text(), path.name
    assert key not in Path(f"{out}.plan").read_text()


def test_the_key_secret_goes_to_each_namespace_that_reads_it():
    auth = dict(MODEL_AUTH, namespaces=["ai", "gateway"])
    params = dict(gateway_params(), model_auth=auth)
    secrets = [s for s in gw.gateway_secret(params, GATEWAY_KEY) if s["metadata"]["name"] == MODEL_KEY_SECRET]
    assert [s["metadata"]["namespace"] for s in secrets] == ["ai", "gateway"]
    assert all(s["stringData"] == {"api-key": gw.model_api_key(GATEWAY_KEY)} for s in secrets)
    off = dict(gateway_params(), model_auth={"enabled": False})
    assert not [s for s in gw.gateway_secret(off, GATEWAY_KEY) if s["metadata"]["name"] == MODEL_KEY_SECRET]
    config = gw.gateway_config([{"model": "m", "service": "vllm-m", "namespace": "ai", "port": 8000}], off)
    assert "api_key" not in config["model_list"][0]["litellm_params"]


def vllm_objects(model_auth):
    site = {"namespace": "ai", "gpu_node_selector": {"ai-workload": "true"}, "gpu_toleration_key": "nvidia.com/gpu"}
    defaults = {
        "image": IMAGE,
        "store_mount": "/data/models",
        "store": {"storage_class": "nvidia-ai-store", "size": "500Gi"},
        "shm_size": "8Gi",
        "resources": {"requests": {"cpu": "4"}},
        "model_auth": model_auth,
    }
    return wl.vllm_manifests([{"served_name": "m1", "path": "org/m1", "memory_utilization": 0.9}], defaults, site)


def test_a_new_master_key_rolls_the_vllm_servers_with_the_gateway():
    """The vLLM servers read the key at start (VLLM_API_KEY from its Secret): a new master key writes a new key,
    whose Secret's new resourceVersion rolls them as it rolls the gateway (rollout_patches); without model_auth
    (no gateway) they read no Secret and never roll on one."""
    from ansible_collections.aiinfra.k3s.plugins.filter.secret_rollout_patches import secret_rollout_patches

    objects = vllm_objects(MODEL_AUTH) + gateway_objects(model_auth=MODEL_AUTH)
    (server,) = [o for o in objects if o["kind"] == "Deployment" and o["metadata"]["name"] == "vllm-m1"]
    assert gw.start_secrets(server["spec"]["template"]["spec"]) == {MODEL_KEY_SECRET}

    def patches(model_key):
        model_key_secret = {"name": MODEL_KEY_SECRET, "namespace": "ai", "resourceVersion": model_key}
        applied = [*applied_secrets("10", "11"), model_key_secret]
        return {
            p["metadata"]["name"]: p["spec"]["template"]["metadata"]["annotations"]["aiinfra.io/secret-versions"]
            for p in secret_rollout_patches(objects, applied)
        }

    first = patches("20")
    assert first["vllm-m1"] == MODEL_KEY_SECRET + "=20"
    assert first["litellm-ha"] == "%s=20,litellm-master-key=10,litellm-redis=11" % MODEL_KEY_SECRET
    assert patches("20") == first  # the same Secrets: the same patches, no rollout
    assert patches("21")["vllm-m1"] != first["vllm-m1"]
    unkeyed = vllm_objects({"enabled": False})
    assert gw.rollout_patches(unkeyed, applied_secrets("10", "11")) == []


@pytest.mark.parametrize("playbook", ["serving.yml", "apply.yml"])
def test_the_playbooks_roll_the_vllm_servers_on_their_secrets(playbook):
    """serving.yml and apply.yml hand the rollout (manifests role, tasks_from: rollout) the vLLM servers' objects
    with the gateway's, so a new key rolls both."""
    plays = yaml.safe_load((ROOT / "playbooks" / playbook).read_text())
    tasks = [t for play in plays for t in play.get("tasks") or []]
    (task,) = [t for t in tasks if (t.get("ansible.builtin.include_role") or {}).get("tasks_from") == "rollout"]
    expression = task["vars"]["manifests_objects"]
    assert "'vllm'" in expression and "'litellm'" in expression, expression
