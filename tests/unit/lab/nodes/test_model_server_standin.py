"""The lab's STAND-IN model server (lab/nodes/programs/model_server_standin.py, not vLLM or NIM): its argument handling, and
the server itself started on a free loopback port the way the collection's vLLM and NIM pods start it."""

import base64
import concurrent.futures
import contextlib
import json
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from ansible_collections.aiinfra.k3s.plugins.module_utils.k8s import json_logging
from lab.nodes import nodeimages
from lab.nodes.programs import model_server_standin as standin  # a program the images carry, imported as a module

SCRIPT = nodeimages.STANDIN

DEADLINE = 20  # seconds for the server to answer or stop


def test_parse_serve_args_honours_the_vllm_flags_the_collection_passes_and_skips_the_rest():
    args = standin.parse_serve_args(
        [
            "--model",
            "/data/models/org/m",
            "--served-model-name",
            "m1",
            "m2",
            "--tensor-parallel-size",
            "1",
            "--enable-prefix-caching",
            "--max-model-len=8192",
            "--port",
            "8001",
            "--shutdown-timeout",
            "30",
        ]
    )
    assert args["model"] == "/data/models/org/m"
    assert args["served_names"] == ["m1", "m2"]
    assert args["port"] == "8001" and args["shutdown_timeout"] == "30" and args["host"] is None
    assert args["ignored"] == ["--tensor-parallel-size 1", "--enable-prefix-caching", "--max-model-len=8192"]


def test_parse_serve_args_takes_the_positional_model_and_equals_forms():
    args = standin.parse_serve_args(["org/m", "--served-model-name=x", "--host=127.0.0.1", "--trust-remote-code"])
    assert (args["model"], args["served_names"], args["host"]) == ("org/m", ["x"], "127.0.0.1")
    assert args["ignored"] == ["--trust-remote-code"]
    with pytest.raises(ValueError, match="--port"):
        standin.parse_serve_args(["--port"])


def test_server_settings_fall_back_to_the_nim_environment():
    env = {"NIM_SERVED_MODEL_NAME": "llama-70b", "NIM_SERVER_PORT": "8010", "NIM_PASSTHROUGH_ARGS": "--x 1"}
    settings = standin.server_settings([], env)
    assert settings["served_names"] == ["llama-70b"] and settings["port"] == 8010
    assert settings["host"] == "0.0.0.0" and settings["ignored"] == ["NIM_PASSTHROUGH_ARGS=--x 1"]
    assert standin.server_settings(["--model", "/m/p"], {})["served_names"] == ["/m/p"]
    assert standin.server_settings([], {})["port"] == standin.DEFAULT_PORT


def test_reply_words_are_cut_to_max_tokens():
    words, finish = standin.reply_words("m", 3)
    assert len(words) == 3 and finish == "length"
    words, finish = standin.reply_words("m", None)
    assert finish == "stop" and "stand-in" in " ".join(words)


def test_prompt_text_reads_messages_content_parts_and_prompts():
    body = {"messages": [{"role": "user", "content": "a b"}, {"role": "user", "content": [{"text": "c"}]}]}
    assert standin.prompt_text(body) == "a b\nc"
    assert standin.prompt_text({"prompt": ["x", "y"]}) == "x y"
    assert standin.count_tokens("") == 1


def test_embeddings_are_deterministic_and_base64_decodes_to_the_floats():
    a = standin.embeddings_body("m", ["hi", "there"], 8, "float")
    assert [d["index"] for d in a["data"]] == [0, 1] and len(a["data"][0]["embedding"]) == 8
    assert a == standin.embeddings_body("m", ["hi", "there"], 8, "float")
    b = standin.embeddings_body("m", "hi", 8, "base64")
    raw = base64.b64decode(b["data"][0]["embedding"])
    assert len(raw) == 8 * 4


# ---------------------------------------------------------------- the server on loopback


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def call(method, url, body=None, timeout=10, headers=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers=dict(headers or {}))
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, dict(resp.headers), resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers), err.read().decode()


@contextlib.contextmanager
def running(args, env=None, log_path=None):
    """The stand-in as `vllm serve ARGS` (a process of its own), yielding (base URL, Popen)."""
    port = free_port()
    full_env = {"PATH": "/usr/bin:/bin", "AIINFRA_STANDIN_TOKEN_MS": "1", **(env or {})}
    full_env.setdefault("NIM_SERVER_PORT", str(port))
    argv = [sys.executable, str(SCRIPT), "serve", *args]
    if "--port" in args:
        argv[argv.index("--port") + 1] = str(port)
    out = open(log_path, "w") if log_path else subprocess.DEVNULL  # noqa: SIM115 (closed below)
    proc = subprocess.Popen(argv, env=full_env, stdout=out, stderr=subprocess.STDOUT)
    base = "http://127.0.0.1:%d" % port
    try:
        deadline = time.monotonic() + DEADLINE
        while True:
            assert proc.poll() is None, "the stand-in exited with %s" % proc.returncode
            with contextlib.suppress(OSError):
                urllib.request.urlopen(base + "/ping", timeout=2).close()
                break
            assert time.monotonic() < deadline, "the stand-in did not answer within %ds" % DEADLINE
            time.sleep(0.1)
        yield base, proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=DEADLINE)
        if log_path:
            out.close()


VLLM_ARGS = [
    "--model",
    "/data/models/org/qwen",
    "--served-model-name",
    "qwen-7b",
    "--tensor-parallel-size",
    "1",
    "--gpu-memory-utilization",
    "0.9",
    "--host",
    "127.0.0.1",
    "--port",
    "PORT",
    "--shutdown-timeout",
    "5",
    "--enable-prefix-caching",
]


@pytest.fixture(scope="module")
def vllm_pod(tmp_path_factory):
    """The stand-in started as a vLLM pod starts: its arguments and the collection's JSON logging ConfigMap."""
    tmp = tmp_path_factory.mktemp("standin")
    logging_dir = tmp / "logging"
    logging_dir.mkdir()
    for name, text in json_logging.logging_files(["vllm", "uvicorn", "uvicorn.access"]).items():
        (logging_dir / name).write_text(text)
    env = {
        "VLLM_CONFIGURE_LOGGING": "1",
        "VLLM_LOGGING_CONFIG_PATH": str(logging_dir / "logging.json"),
        "PYTHONPATH": str(logging_dir),
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    with running(VLLM_ARGS, env, tmp / "standin.log") as (base, proc):
        yield {"base": base, "proc": proc, "log": tmp / "standin.log"}


def metric(text, name, **labels):
    """The value of one sample of the Prometheus text (labels: the ones that must match)."""
    for line in text.splitlines():
        match = re.match(r"^([^{\s]+)(?:\{([^}]*)\})? (\S+)$", line)
        if not match or match.group(1) != name:
            continue
        found = dict(re.findall(r'(\w+)="([^"]*)"', match.group(2) or ""))
        if all(found.get(k) == v for k, v in labels.items()):
            return float(match.group(3))
    raise AssertionError("no sample %s %s" % (name, labels))


def test_health_models_and_the_standin_header(vllm_pod):
    base = vllm_pod["base"]
    for path in ("/health", "/v1/health/ready", "/v1/health/live"):
        status, headers, _body = call("GET", base + path)
        assert status == 200 and headers["x-aiinfra-standin"] == "true", path
    status, headers, text = call("GET", base + "/v1/models")
    assert status == 200 and headers["x-aiinfra-standin"] == "true"
    assert [m["id"] for m in json.loads(text)["data"]] == ["qwen-7b"]


def test_chat_and_completions_answer_json_and_count_in_the_metrics(vllm_pod):
    base = vllm_pod["base"]
    before = call("GET", base + "/metrics")[2]
    body = {"model": "qwen-7b", "messages": [{"role": "user", "content": "one two three"}], "max_tokens": 4}
    status, headers, text = call("POST", base + "/v1/chat/completions", body, headers={"X-Request-ID": "r-1"})
    answer = json.loads(text)
    assert status == 200 and headers["x-aiinfra-standin"] == "true" and headers["X-Request-ID"] == "r-1"
    # the access log names the request ID, so a test can see which server a request reached
    deadline = time.monotonic() + 5
    while "x-request-id=r-1" not in vllm_pod["log"].read_text() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert "x-request-id=r-1" in vllm_pod["log"].read_text()
    assert answer["object"] == "chat.completion" and answer["choices"][0]["finish_reason"] == "length"
    assert answer["usage"] == {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}
    status, _headers, text = call("POST", base + "/v1/completions", {"model": "qwen-7b", "prompt": "hello"})
    assert status == 200 and json.loads(text)["choices"][0]["text"]
    after = call("GET", base + "/v1/metrics")[2]
    label = {"model_name": "qwen-7b"}
    assert metric(after, "vllm:prompt_tokens_total", **label) - metric(before, "vllm:prompt_tokens_total", **label) == 4
    assert metric(after, "vllm:generation_tokens_total", **label) > metric(before, "vllm:generation_tokens_total")
    assert metric(after, "vllm:request_success_total", finished_reason="length") >= 1
    count = "vllm:e2e_request_latency_seconds_count"
    assert metric(after, count, **label) - metric(before, count, **label) == 2
    assert metric(after, "vllm:e2e_request_latency_seconds_bucket", le="+Inf") == metric(after, count)
    for name in ("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc"):
        assert metric(after, name, **label) == 0
    assert metric(after, "aiinfra_standin_info") == 1


@pytest.mark.parametrize(("path", "kind"), [("/v1/chat/completions", "chat"), ("/v1/completions", "text")])
def test_streams_are_server_sent_events_ending_with_done(vllm_pod, path, kind):
    body = {"model": "qwen-7b", "stream": True, "stream_options": {"include_usage": True}}
    body.update({"messages": [{"role": "user", "content": "hi"}]} if kind == "chat" else {"prompt": "hi"})
    status, headers, text = call("POST", vllm_pod["base"] + path, body)
    assert status == 200 and headers["Content-Type"] == "text/event-stream"
    events = [line[len("data: ") :] for line in text.split("\n\n") if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    pieces = [
        c["choices"][0]["delta"].get("content", "") if kind == "chat" else c["choices"][0]["text"]
        for c in chunks
        if c["choices"]
    ]
    assert "stand-in" in "".join(pieces)
    assert chunks[-1]["usage"]["completion_tokens"] > 0
    assert [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]][-1] == "stop"


def test_embeddings_and_unknown_models(vllm_pod):
    base = vllm_pod["base"]
    status, _headers, text = call("POST", base + "/v1/embeddings", {"model": "qwen-7b", "input": ["a", "b"]})
    assert status == 200 and len(json.loads(text)["data"]) == 2
    status, headers, text = call("POST", base + "/v1/chat/completions", {"model": "nope", "messages": []})
    assert status == 404 and json.loads(text)["error"]["code"] == 404 and headers["x-aiinfra-standin"] == "true"


def test_logs_go_through_the_collections_json_formatter_and_name_the_standin(vllm_pod):
    deadline = time.monotonic() + DEADLINE
    while "ignores" not in vllm_pod["log"].read_text() and time.monotonic() < deadline:
        time.sleep(0.1)
    records = [json.loads(line) for line in vllm_pod["log"].read_text().splitlines() if line.startswith("{")]
    messages = [r["message"] for r in records]
    assert any("STAND-IN" in m and "qwen-7b" in m for m in messages)
    assert any("ignores --tensor-parallel-size 1" in m for m in messages)
    assert {r["logger"] for r in records} >= {"vllm.standin"}


def test_waiting_and_running_move_while_requests_queue(tmp_path):
    env = {"AIINFRA_STANDIN_TOKEN_MS": "150", "AIINFRA_STANDIN_MAX_RUNNING": "1"}
    with running(["--served-model-name", "m", "--host", "127.0.0.1", "--port", "PORT"], env) as (base, _proc):
        body = {"model": "m", "prompt": "x", "max_tokens": 4}
        with concurrent.futures.ThreadPoolExecutor(3) as pool:
            futures = [pool.submit(call, "POST", base + "/v1/completions", body) for _i in range(3)]
            deadline, seen = time.monotonic() + DEADLINE, (0, 0)
            while time.monotonic() < deadline and seen != (1, 2):
                text = call("GET", base + "/metrics")[2]
                seen = (metric(text, "vllm:num_requests_running"), metric(text, "vllm:num_requests_waiting"))
                time.sleep(0.05)
            assert seen == (1, 2)
            assert metric(text, "vllm:kv_cache_usage_perc") == 1
            assert [f.result()[0] for f in futures] == [200, 200, 200]


def test_nim_pods_start_it_with_no_arguments_and_nim_environment(tmp_path):
    env = {"NIM_SERVED_MODEL_NAME": "llama-3-8b", "NIM_JSONL_LOGGING": "1", "NIM_PASSTHROUGH_ARGS": "--x 1"}
    with running([], env, tmp_path / "nim.log") as (base, _proc):
        assert call("GET", base + "/v1/health/ready")[0] == 200
        text = call("GET", base + "/v1/models")[2]
        assert [m["id"] for m in json.loads(text)["data"]] == ["llama-3-8b"]
        text = call("GET", base + "/v1/metrics")[2]
        assert metric(text, "vllm:num_requests_running", model_name="llama-3-8b") == 0
    records = [json.loads(line) for line in (tmp_path / "nim.log").read_text().splitlines()]
    assert any("STAND-IN" in r["message"] for r in records)
    assert any(r["message"] == "stand-in ignores NIM_PASSTHROUGH_ARGS=--x 1" for r in records)
    assert any('"GET /v1/health/ready' in r["message"] for r in records)  # quotes inside stay valid JSON


def test_sigterm_finishes_the_request_in_flight_then_exits_zero():
    env = {"AIINFRA_STANDIN_TOKEN_MS": "200"}
    with running(
        ["--served-model-name", "m", "--host", "127.0.0.1", "--port", "PORT", "--shutdown-timeout", "10"], env
    ) as (
        base,
        proc,
    ):
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            future = pool.submit(call, "POST", base + "/v1/completions", {"model": "m", "prompt": "x", "max_tokens": 5})
            deadline = time.monotonic() + DEADLINE
            while metric(call("GET", base + "/metrics")[2], "vllm:num_requests_running") < 1:
                assert time.monotonic() < deadline
                time.sleep(0.02)
            proc.terminate()
            assert future.result(timeout=DEADLINE)[0] == 200
        assert proc.wait(timeout=DEADLINE) == 0


def test_vllm_version_and_unknown_subcommands():
    out = subprocess.run(
        [sys.executable, str(SCRIPT), "--version"], capture_output=True, text=True, timeout=DEADLINE, check=False
    )
    assert out.returncode == 0 and "standin" in out.stdout


def test_authorized_is_vllms_api_key_check():
    """As vllm/entrypoints/serve/middleware/authenticate.py (0.34): only /v1, /v2, /inference and /cohere are
    guarded, OPTIONS passes, the scheme is case-insensitive, any of the keys is accepted."""
    keys = ["k1", "k2"]
    assert standin.GUARDED_PREFIX == ("/v1", "/v2", "/inference", "/cohere")
    for path in ("/v1/chat/completions", "/v1/models", "/v1/health/ready", "/v2/rerank", "/inference/x", "/cohere/y"):
        assert not standin.authorized("POST", path, None, keys), path
        assert not standin.authorized("POST", path, "Bearer nope", keys), path
        assert not standin.authorized("POST", path, "Basic k1", keys), path
        assert standin.authorized("POST", path, "Bearer k1", keys) and standin.authorized(
            "GET", path, "bearer k2", keys
        )
        assert standin.authorized("OPTIONS", path, None, keys)
        assert standin.authorized("POST", path, None, [])  # no key set: nothing guarded
    for path in ("/health", "/ping", "/metrics", "/version"):
        assert standin.authorized("GET", path, None, keys), path


def test_the_key_comes_from_api_key_flags_before_vllm_api_key():
    env = {"VLLM_API_KEY": "from-env"}
    assert standin.server_settings(["--model", "m"], env)["api_keys"] == ["from-env"]
    settings = standin.server_settings(["--model", "m", "--api-key", "a", "b", "--api-key=c", "--port", "1"], env)
    assert settings["api_keys"] == ["a", "b", "c"] and settings["port"] == 1
    assert not [flag for flag in settings["ignored"] if "--api-key" in flag]  # never logged as an ignored flag
    assert standin.server_settings(["--model", "m"], {"VLLM_API_KEY": ""})["api_keys"] == []
    with pytest.raises(ValueError, match="--api-key"):
        standin.parse_serve_args(["--api-key"])


def test_with_vllm_api_key_the_standin_refuses_v1_without_the_bearer_and_keeps_health_and_metrics_open(tmp_path):
    key = "k-" + "5" * 30
    with running(VLLM_ARGS, {"VLLM_API_KEY": key}, tmp_path / "standin.log") as (base, _proc):
        chat = {"model": "qwen-7b", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": key}):
            status, _h, text = call("POST", base + "/v1/chat/completions", chat, headers=headers)
            assert (status, json.loads(text)) == (401, {"error": "Unauthorized"}), headers
            assert call("GET", base + "/v1/models", headers=headers)[0] == 401
        # The connection that carried a refused body still serves the next request.
        status, _h, text = call("POST", base + "/v1/chat/completions", chat, headers={"Authorization": "Bearer " + key})
        assert status == 200 and json.loads(text)["model"] == "qwen-7b"
        for path in ("/health", "/ping", "/metrics", "/version"):
            assert call("GET", base + path)[0] == 200, path
    assert key not in (tmp_path / "standin.log").read_text()
