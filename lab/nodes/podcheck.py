"""Run the lab images (lab/nodes/nodeimages.py) the way the collection's rendered pods run them, under podman, and check
them: a check of the images' runtime contract, not of Kubernetes.

    .venv/bin/python -m lab.nodes.podcheck [--site full] [--bin DIR] [--keep]

The site (tests/live/sites.yml, default `full`: vLLM and NIM models, the deployed Redis, consumers) is rendered
by render.yml, as tests/gateway renders it, with the inventory variables that map the collection's images onto
the lab's (litellm_image, litellm_redis_image, vllm_image, each nim_models image). Then one replica of every
serving workload (Redis, each vLLM and NIM model, the gateway) runs in a podman container of its own network:

- the container's command/args and environment (secretKeyRef values from the rendered Secrets);
- the pod's securityContext: runAsUser/runAsGroup (a uid with no passwd entry), read-only root without podman's
  extra tmpfs mounts, all capabilities dropped, no new privileges;
- configMap and secret volumes as read-only directories of their files, emptyDir as tmpfs (/tmp; /dev/shm sized
  as the pod's), the model store as an empty read-only directory;
- the Services' cluster DNS names resolve to the containers (--add-host), so the rendered gateway config is used
  unchanged.

Checked: every httpGet/tcpSocket probe answers, the preStop command runs, chat completions (plain and streamed),
a text completion and an embedding go through the gateway to the stand-ins, the metrics paths the PodMonitors
scrape answer; then what each container wrote in its writable places and any write refused by the read-only root
are listed, and each container is stopped with SIGTERM (its exit code reported). Containers and network are
labelled io.aiinfra.imgcheck and removed at the end (unless --keep).
"""

from __future__ import annotations

import argparse
import base64
import importlib.util
import json
import os
import secrets
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import yaml

from lab import ROOT
from lab.nodes import labctl, nodeimages

NETWORK = "aiinfra-imgcheck"
LABEL = "io.aiinfra.imgcheck"
PREFIX = "imgcheck-"
DEADLINE = 240  # seconds for a container's startup probe to pass
WRITE_ERRORS = ("Read-only file system", "Permission denied", "[Errno 30]", "[Errno 13]")
_spec = importlib.util.spec_from_file_location("unit_helpers", ROOT / "tests" / "unit" / "conftest.py")
helpers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(helpers)


def log(msg):
    print("[podcheck] %s" % msg, flush=True)


def podman(*args, check=True, timeout=300):
    proc = subprocess.run(["podman", *args], capture_output=True, text=True, timeout=timeout, check=False)
    if check and proc.returncode != 0:
        raise RuntimeError("podman %s: %s" % (" ".join(args[:3]), proc.stderr.strip()[-2000:]))
    return proc


# ---------------------------------------------------------------- rendering


def render(site_id, refs, tmp):
    sites = {s["id"]: s for s in yaml.safe_load((ROOT / "tests" / "live" / "sites.yml").read_text())}
    site = json.loads(json.dumps(sites[site_id]))
    group_vars = site["group_vars"]
    for model in group_vars.get("nim_models") or []:
        model["image"] = refs["model_server"]
    mapping = {"litellm_image": refs["litellm"], "vllm_image": refs["model_server"]}
    if "redis" in refs:
        mapping["litellm_redis_image"] = refs["redis"]
    site_vars = {
        **mapping,
        "nim_models": group_vars.get("nim_models") or [],
        "litellm_master_key": "sk-" + secrets.token_hex(24),
        "monitoring_grafana_admin_password": secrets.token_urlsafe(24),
        "nim_ngc_api_key": "nvapi-" + secrets.token_hex(24),
    }
    (tmp / "site-vars.json").write_text(json.dumps(site_vars))
    docs = helpers.render_site(site, tmp, ["-e", "@%s" % (tmp / "site-vars.json"), "-e", "render_secrets=true"])
    return docs, mapping


def workloads(docs):
    """{component: [workload]} of the serving workloads (Deployments and StatefulSets)."""
    out = {}
    for doc in docs:
        if doc["kind"] in ("Deployment", "StatefulSet"):
            component = doc["metadata"]["labels"].get("app.kubernetes.io/component")
            if component in ("gateway", "rate-limit-store", "vllm", "nim"):
                out.setdefault(component, []).append(doc)
    return out


def secret_value(docs, namespace, name, key):
    for doc in docs:
        meta = doc["metadata"]
        if doc["kind"] == "Secret" and meta["name"] == name and meta.get("namespace") == namespace:
            if key in (doc.get("stringData") or {}):
                return doc["stringData"][key]
            if key in (doc.get("data") or {}):
                return base64.b64decode(doc["data"][key]).decode()
    return None


def volume_files(docs, namespace, volume):
    """{file: text} of a configMap or secret volume (None: an optional Secret that was not rendered)."""
    kind, name = ("ConfigMap", volume["configMap"]["name"]) if "configMap" in volume else ("Secret", None)
    if kind == "Secret":
        name = volume["secret"]["secretName"]
    for doc in docs:
        meta = doc["metadata"]
        if doc["kind"] == kind and meta["name"] == name and meta.get("namespace") == namespace:
            if kind == "ConfigMap":
                return dict(doc.get("data") or {})
            files = dict(doc.get("stringData") or {})
            files.update({k: base64.b64decode(v).decode() for k, v in (doc.get("data") or {}).items()})
            return files
    return None


# ---------------------------------------------------------------- podman run


def run_args(workload, docs, tmp, hosts):
    """podman run arguments for one replica of the workload's pod (see the module docstring)."""
    pod = workload["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    ns, name = workload["metadata"]["namespace"], workload["metadata"]["name"]
    ctx, cctx = pod.get("securityContext") or {}, container.get("securityContext") or {}
    args = ["run", "-d", "--name", PREFIX + name, "--network", NETWORK, "--label", LABEL + "=1"]
    args += ["--user", "%s:%s" % (ctx["runAsUser"], ctx.get("runAsGroup", ctx["runAsUser"]))]
    if cctx.get("readOnlyRootFilesystem"):
        args += ["--read-only", "--read-only-tmpfs=false"]
    if "ALL" in (cctx.get("capabilities") or {}).get("drop", []):
        args += ["--cap-drop", "ALL"]
    if cctx.get("allowPrivilegeEscalation") is False:
        args += ["--security-opt", "no-new-privileges"]
    volumes = {v["name"]: v for v in pod.get("volumes") or []}
    for claim in workload["spec"].get("volumeClaimTemplates") or []:
        volumes[claim["metadata"]["name"]] = {"name": claim["metadata"]["name"], "claim": True}
    for mount in container.get("volumeMounts") or []:
        args += mount_args(volumes[mount["name"]], mount, docs, ns, tmp / name)
    for env in container.get("env") or []:
        value = env.get("value")
        if "valueFrom" in env:
            ref = env["valueFrom"]["secretKeyRef"]
            value = secret_value(docs, ns, ref["name"], ref["key"])
        if value is not None:
            args += ["-e", "%s=%s" % (env["name"], value)]
    for host, ip in sorted(hosts.items()):
        args += ["--add-host", "%s:%s" % (host, ip)]
    if container.get("command"):
        args += ["--entrypoint", json.dumps(container["command"])]
    return [*args, container["image"], *container.get("args", [])]


def mount_args(volume, mount, docs, ns, base):
    path = mount["mountPath"]
    if "emptyDir" in volume:
        if path == "/dev/shm":
            return ["--shm-size", volume["emptyDir"].get("sizeLimit", "64Mi").replace("i", "").lower()]
        return ["--tmpfs", "%s:rw,mode=1777" % path]
    host = base / mount["name"]
    host.mkdir(parents=True, exist_ok=True)
    host.chmod(0o755)
    if "configMap" in volume or "secret" in volume:
        for file_name, text in (volume_files(docs, ns, volume) or {}).items():
            (host / file_name).write_text(text)
            (host / file_name).chmod(0o644)
        return ["-v", "%s:%s:ro" % (host, path)]
    return ["-v", "%s:%s%s" % (host, path, ":ro" if mount.get("readOnly") else "")]


def service_hosts(docs, ips):
    """Cluster DNS names of the Services -> the IP of the container of the workload they select."""
    hosts = {}
    for doc in docs:
        if doc["kind"] != "Service":
            continue
        target = (doc["spec"].get("selector") or {}).get("app.kubernetes.io/name")
        if target in ips:
            name, ns = doc["metadata"]["name"], doc["metadata"]["namespace"]
            for host in (name, "%s.%s" % (name, ns), "%s.%s.svc" % (name, ns), "%s.%s.svc.cluster.local" % (name, ns)):
                hosts[host] = ips[target]
    return hosts


def container_ip(name):
    inspected = json.loads(podman("inspect", "--format", "json", PREFIX + name).stdout)[0]
    return inspected["NetworkSettings"]["Networks"][NETWORK]["IPAddress"]


# ---------------------------------------------------------------- checks


def http(method, url, body=None, key=None, timeout=30):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    if key:
        req.add_header("Authorization", "Bearer " + key)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, dict(resp.headers), resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers), err.read().decode()
    except OSError as err:
        return 0, {}, str(err)


def probe_ok(probe, ip, ports):
    if "httpGet" in probe:
        get = probe["httpGet"]
        port = ports.get(get["port"], get["port"])
        return http("GET", "http://%s:%s%s" % (ip, port, get["path"]), timeout=probe.get("timeoutSeconds", 5))[0] == 200
    port = ports.get(probe["tcpSocket"]["port"], probe["tcpSocket"]["port"])
    try:
        socket.create_connection((ip, int(port)), timeout=probe.get("timeoutSeconds", 5)).close()
        return True
    except OSError:
        return False


def wait_started(workload, ip):
    (container,) = workload["spec"]["template"]["spec"]["containers"]
    ports = {p["name"]: p["containerPort"] for p in container.get("ports") or []}
    name = workload["metadata"]["name"]
    deadline = time.monotonic() + DEADLINE
    startup = container.get("startupProbe") or container.get("readinessProbe")
    while not probe_ok(startup, ip, ports):
        state = podman("inspect", "--format", "{{.State.Status}}", PREFIX + name).stdout.strip()
        if state != "running" or time.monotonic() > deadline:
            raise RuntimeError("%s: startup probe never passed (state %s)\n%s" % (name, state, logs(name)[-3000:]))
        time.sleep(1)
    results = {}
    for kind in ("startupProbe", "readinessProbe", "livenessProbe"):
        if container.get(kind):
            results[kind] = probe_ok(container[kind], ip, ports)
    return results


def logs(name):
    proc = podman("logs", PREFIX + name, check=False)
    return proc.stdout + proc.stderr


def gateway_checks(gateway, ip, docs, models):
    (container,) = gateway["spec"]["template"]["spec"]["containers"]
    port = container["ports"][0]["containerPort"]
    base = "http://%s:%d" % (ip, port)
    env = {e["name"]: e for e in container["env"]}
    ref = env["LITELLM_MASTER_KEY"]["valueFrom"]["secretKeyRef"]
    key = secret_value(docs, gateway["metadata"]["namespace"], ref["name"], ref["key"])
    out = {}
    for model in models:
        body = {"model": model, "messages": [{"role": "user", "content": "ping"}], "max_tokens": 6}
        status, _headers, text = http("POST", base + "/v1/chat/completions", body, key, timeout=120)
        out["chat %s" % model] = (status, text[:160])
        status, _headers, text = http("POST", base + "/v1/chat/completions", dict(body, stream=True), key, timeout=120)
        out["stream %s" % model] = (status, "[DONE]" in text, text[-80:])
    model = models[0]
    status, _headers, text = http("POST", base + "/v1/completions", {"model": model, "prompt": "hi"}, key, timeout=120)
    out["completion %s" % model] = (status, text[:160])
    status, _headers, text = http("POST", base + "/v1/embeddings", {"model": model, "input": "hi"}, key, timeout=120)
    out["embedding %s" % model] = (status, text[:160])
    status, _headers, text = http("GET", base + "/metrics/")
    out["gateway /metrics/"] = (status, "litellm_proxy_total_requests_metric_total" in text)
    return out


def writes(name):
    """What the container wrote in its writable places (as its own user), and refused writes in its log."""
    proc = podman(
        "exec", PREFIX + name, "/bin/sh", "-c", "find /tmp /dev/shm -mindepth 1 -maxdepth 3 2>/dev/null", check=False
    )
    refused = [line for line in logs(name).splitlines() if any(e in line for e in WRITE_ERRORS)]
    return proc.stdout.split(), refused


def stop(name):
    prestop = podman("exec", PREFIX + name, "/bin/sh", "-c", "sleep 0 && id -u", check=False)
    podman("stop", "-t", "60", PREFIX + name, check=False, timeout=120)
    code = podman("inspect", "--format", "{{.State.ExitCode}}", PREFIX + name).stdout.strip()
    return prestop.returncode, prestop.stdout.strip(), code


def cleanup():
    names = podman("ps", "-a", "--filter", "label=%s" % LABEL, "--format", "{{.Names}}", check=False).stdout.split()
    for name in names:
        podman("rm", "-f", "-t", "5", name, check=False)
    if podman("network", "exists", NETWORK, check=False).returncode == 0:
        podman("network", "rm", NETWORK, check=False)


def start_all(work, docs, tmp):
    """Backends first, then the gateway (its --add-host entries need their IPs); {name: ip}."""
    ips = {}
    order = [*work.get("rate-limit-store", []), *work.get("vllm", []), *work.get("nim", []), *work.get("gateway", [])]
    for workload in order:
        name = workload["metadata"]["name"]
        hosts = service_hosts(docs, ips) if workload in work.get("gateway", []) else {}
        podman(*run_args(workload, docs, tmp, hosts))
        ips[name] = container_ip(name)
        log("started %s (%s) at %s" % (name, workload["spec"]["template"]["spec"]["containers"][0]["image"], ips[name]))
    return order, ips


def check(site_id, bin_dir, keep):
    os.environ.setdefault("CONTAINERS_CONF", str(labctl.LAB_DIR / "containers.conf"))
    refs = nodeimages.refs(bin_dir)
    cleanup()
    report = {"refs": refs}
    with tempfile.TemporaryDirectory(prefix="podcheck-") as tmp:
        tmp = Path(tmp)
        docs, report["inventory"] = render(site_id, refs, tmp)
        work = workloads(docs)
        podman("network", "create", "--label", LABEL + "=1", NETWORK)
        try:
            order, ips = start_all(work, docs, tmp)
            for workload in order:
                name = workload["metadata"]["name"]
                started = time.monotonic()
                report["probes " + name] = wait_started(workload, ips[name])
                log("%s: probes %s (%.0fs)" % (name, report["probes " + name], time.monotonic() - started))
            served = sorted(m["model_name"] for m in json.loads(gateway_config(docs))["model_list"])
            report["gateway"] = gateway_checks(
                work["gateway"][0], ips[work["gateway"][0]["metadata"]["name"]], docs, served
            )
            for workload in order:
                name = workload["metadata"]["name"]
                report["writes " + name] = writes(name)
                report["stop " + name] = stop(name)
        finally:
            if not keep:
                cleanup()
    return report


def gateway_config(docs):
    for doc in docs:
        if doc["kind"] == "ConfigMap" and "config.yaml" in (doc.get("data") or {}):
            return json.dumps(yaml.safe_load(doc["data"]["config.yaml"]))
    raise RuntimeError("no gateway config rendered")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--site", default="full")
    parser.add_argument(
        "--bin", help="the --bin of `python -m lab.nodes.nodeimages build` (default: the last build's images.json)"
    )
    parser.add_argument("--keep", action="store_true", help="leave the containers and network for inspection")
    args = parser.parse_args(argv)
    report = check(args.site, Path(args.bin) if args.bin else None, args.keep)
    print(json.dumps(report, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
