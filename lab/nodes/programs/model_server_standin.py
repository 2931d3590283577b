"""STAND-IN model server for the aiinfra.k3s lab: NOT vLLM and NOT NVIDIA NIM.

An OpenAI-compatible HTTP server (standard library only) that answers with canned text, so the collection's
vLLM and NIM Deployments, the LiteLLM gateway, Prometheus rules, dashboards and KEDA triggers can run on lab
nodes without GPUs or model weights. Every answer carries the header `x-aiinfra-standin: true` and every log
line says "stand-in".

It starts the way the collection's model-server pods start their images:
- vLLM pods give only arguments (the vllm/vllm-openai image's entrypoint is `vllm serve`):
  `vllm serve [MODEL] --model PATH --served-model-name NAME --port PORT ...`. --model/MODEL, --served-model-name,
  --host, --port and --shutdown-timeout are honoured; every other flag is logged as ignored.
- NIM pods give no arguments and NIM_SERVED_MODEL_NAME / NIM_SERVER_PORT in the environment (NIM_PASSTHROUGH_ARGS
  is logged as ignored).

Endpoints: GET /health, /ping, /version, /v1/health/ready, /v1/health/live, /v1/models, /metrics and /v1/metrics
(Prometheus text with vLLM's metric names); POST /v1/chat/completions, /v1/completions (JSON or `stream: true`
server-sent events) and /v1/embeddings. It writes no file: it runs as any uid on a read-only root.

API key, as vLLM 0.34 checks it (vllm/entrypoints/serve/middleware/authenticate.py): with --api-key KEY (one or more,
or repeated) or else VLLM_API_KEY in the environment, a request whose path starts with /v1, /v2, /inference or
/cohere (OPTIONS excepted) is answered 401 {"error": "Unauthorized"} unless it carries `Authorization: Bearer KEY`
(scheme case-insensitive); every other path (/health, /ping, /metrics, /version) stays open. NIM's own paths
(/v1/health/*, /v1/metrics) are under /v1, so they are guarded too when a key is set, as vLLM's check would guard
them.

Logging: with VLLM_CONFIGURE_LOGGING=1 and VLLM_LOGGING_CONFIG_PATH (the collection's JSON dictConfig) it logs
through that configuration under the "vllm" logger, as vLLM would; otherwise plain text (or JSON lines with
NIM_JSONL_LOGGING=1) on stdout.

Stand-in knobs (environment): AIINFRA_STANDIN_TOKEN_MS (delay per generated token, default 5),
AIINFRA_STANDIN_MAX_RUNNING (requests generating at once; the rest wait and count as waiting, default 8).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import logging.config
import os
import signal
import struct
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

STANDIN_VERSION = "0.34.0+aiinfra.standin"
HEADER = ("x-aiinfra-standin", "true")
LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
VALUE_FLAGS = ("--model", "--host", "--port", "--shutdown-timeout")
# The path prefixes vLLM's API key guards (vllm/entrypoints/serve/middleware/authenticate.py, GUARDED_PREFIX).
GUARDED_PREFIX = ("/v1", "/v2", "/inference", "/cohere")
DEFAULT_PORT = 8000
EMBEDDING_DIMENSIONS = 16

log = logging.getLogger("vllm.standin")


# ---------------------------------------------------------------- arguments (pure)


def split_flag(token: str) -> tuple[str, str | None]:
    """'--a=b' -> ('--a', 'b'); '--a' -> ('--a', None)."""
    if token.startswith("--") and "=" in token:
        name, value = token.split("=", 1)
        return name, value
    return token, None


def parse_serve_args(argv: list[str]) -> dict:
    """What `vllm serve` arguments the stand-in honours: {model, served_names, host, port, shutdown_timeout,
    ignored}. argv: the words after `serve`. An unknown flag takes the next word as its value unless that word
    is a flag too (so every vLLM flag, valued or boolean, is skipped whole)."""
    parsed = {
        "model": None,
        "served_names": [],
        "host": None,
        "port": None,
        "shutdown_timeout": None,
        "api_keys": [],
        "ignored": [],
    }
    words = list(argv)
    if words and not words[0].startswith("-"):
        parsed["model"] = words.pop(0)
    i = 0
    while i < len(words):
        token = words[i]
        name, value = split_flag(token)
        i += 1
        takes_next = value is None and i < len(words) and not words[i].startswith("-")
        if name == "--served-model-name":
            names = [value] if value is not None else []
            while value is None and i < len(words) and not words[i].startswith("-"):
                names.append(words[i])
                i += 1
            parsed["served_names"] += names
        elif name == "--api-key":  # one or more keys, and repeatable (vLLM's api_key: list[str])
            keys = [value] if value is not None else []
            while value is None and i < len(words) and not words[i].startswith("-"):
                keys.append(words[i])
                i += 1
            if not keys:
                raise ValueError("--api-key needs a value")
            parsed["api_keys"] += keys
        elif name in VALUE_FLAGS:
            if value is None:
                if i >= len(words):
                    raise ValueError("%s needs a value" % name)
                value = words[i]
                i += 1
            parsed[name[2:].replace("-", "_")] = value
        else:
            parsed["ignored"].append(token if not takes_next else "%s %s" % (token, words[i]))
            i += 1 if takes_next else 0
    return parsed


def server_settings(argv: list[str], env: dict) -> dict:
    """Served names, host, port and drain time from `vllm serve` arguments, else NIM's environment."""
    args = parse_serve_args(argv)
    model = args["model"] or env.get("NIM_SERVED_MODEL_NAME") or "standin-model"
    names = args["served_names"] or [env.get("NIM_SERVED_MODEL_NAME") or model]
    ignored = list(args["ignored"])
    if env.get("NIM_PASSTHROUGH_ARGS"):
        ignored.append("NIM_PASSTHROUGH_ARGS=%s" % env["NIM_PASSTHROUGH_ARGS"])
    return {
        "model": model,
        "served_names": names,
        "host": args["host"] or "0.0.0.0",
        "port": int(args["port"] or env.get("NIM_SERVER_PORT") or DEFAULT_PORT),
        "shutdown_timeout": float(args["shutdown_timeout"] or 0),
        # --api-key takes precedence over VLLM_API_KEY (vllm/entrypoints/serve/middleware/register.py); empty keys
        # are dropped.
        "api_keys": [k for k in (args["api_keys"] or [env.get("VLLM_API_KEY")]) if k],
        "ignored": ignored,
    }


def authorized(method: str, path: str, authorization: str | None, keys: list[str]) -> bool:
    """Whether vLLM's API key check lets a request through: no key set, an OPTIONS request, a path outside
    GUARDED_PREFIX, or `Bearer <one of the keys>` (compared as SHA-256 digests in constant time, as vLLM does)."""
    if not keys or method == "OPTIONS" or not path.startswith(GUARDED_PREFIX):
        return True
    scheme, _sep, param = (authorization or "").partition(" ")
    if not authorization or scheme.lower() != "bearer":
        return False
    given = hashlib.sha256(param.encode("utf-8")).digest()
    match = False
    for key in keys:
        match |= hmac.compare_digest(given, hashlib.sha256(key.encode("utf-8")).digest())
    return match


# ---------------------------------------------------------------- answers (pure)


def prompt_text(body: dict) -> str:
    """The text of a chat (messages, string or content parts) or completion (prompt) request."""
    if "messages" in body:
        parts = []
        for message in body.get("messages") or []:
            content = message.get("content")
            if isinstance(content, list):
                content = " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
            parts.append(str(content or ""))
        return "\n".join(parts)
    prompt = body.get("prompt", "")
    return " ".join(map(str, prompt)) if isinstance(prompt, list) else str(prompt)


def count_tokens(text: str) -> int:
    """A stand-in tokenizer: one token per whitespace-separated word (at least one)."""
    return max(1, len(text.split()))


def reply_words(model: str, max_tokens) -> tuple[list[str], str]:
    """The canned answer's words, cut to max_tokens, and the finish reason ('stop' or 'length')."""
    words = ("This is the aiinfra lab stand-in model server answering for %s, not a real model." % model).split()
    limit = int(max_tokens) if max_tokens else len(words)
    if limit < len(words):
        return words[: max(limit, 0)], "length"
    return words, "stop"


def usage(prompt_tokens: int, completion_tokens: int) -> dict:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


def completion_body(kind: str, model: str, words: list[str], finish: str, prompt_tokens: int) -> dict:
    """A non-streamed answer. kind: 'chat' or 'text'."""
    text = " ".join(words)
    if kind == "chat":
        choice = {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}
        obj, prefix = "chat.completion", "chatcmpl-"
    else:
        choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish}
        obj, prefix = "text_completion", "cmpl-"
    return {
        "id": prefix + "standin-" + uuid.uuid4().hex,
        "object": obj,
        "created": int(time.time()),
        "model": model,
        "choices": [choice],
        "usage": usage(prompt_tokens, len(words)),
        "system_fingerprint": "aiinfra-standin",
    }


def stream_chunk(kind: str, ident: str, model: str, piece: str | None, finish: str | None, first: bool) -> dict:
    """One server-sent chunk of a streamed answer (piece None: the closing chunk with the finish reason)."""
    if kind == "chat":
        delta = {"role": "assistant", "content": ""} if first and piece is None else {}
        if piece is not None:
            delta = {"content": piece, **({"role": "assistant"} if first else {})}
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        obj = "chat.completion.chunk"
    else:
        choice = {"index": 0, "text": piece or "", "logprobs": None, "finish_reason": finish}
        obj = "text_completion"
    return {"id": ident, "object": obj, "created": int(time.time()), "model": model, "choices": [choice]}


def embedding(text: str, dimensions: int) -> list[float]:
    """A deterministic unit-free vector for text (sha256-seeded), values in [-1, 1]."""
    out, counter = [], 0
    while len(out) < dimensions:
        digest = hashlib.sha256(("%d:%s" % (counter, text)).encode()).digest()
        out += [(b - 127.5) / 127.5 for b in digest]
        counter += 1
    return [round(v, 6) for v in out[:dimensions]]


def embeddings_body(model: str, inputs, dimensions: int, encoding: str) -> dict:
    if isinstance(inputs, str) or (inputs and isinstance(inputs[0], int)):
        inputs = [inputs]
    data = []
    for index, item in enumerate(inputs or []):
        vector = embedding(json.dumps(item), dimensions)
        value = (
            base64.b64encode(struct.pack("<%df" % len(vector), *vector)).decode() if encoding == "base64" else vector
        )
        data.append({"object": "embedding", "index": index, "embedding": value})
    tokens = sum(count_tokens(json.dumps(i)) for i in inputs or [])
    return {"object": "list", "model": model, "data": data, "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}


def models_body(names: list[str], root: str) -> dict:
    created = int(time.time())
    return {
        "object": "list",
        "data": [
            {"id": n, "object": "model", "created": created, "owned_by": "aiinfra-standin", "root": root} for n in names
        ],
    }


def error_body(message: str, kind: str, code: int) -> dict:
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


# ---------------------------------------------------------------- metrics


class Metrics:
    """vLLM's metric names (the ones the collection's rules, dashboards and KEDA triggers query, and a few more),
    labelled model_name and engine as vLLM labels them. Thread-safe."""

    def __init__(self, model_name: str):
        self.labels = 'engine="0",model_name="%s"' % model_name
        self.lock = threading.Lock()
        self.running = 0
        self.waiting = 0
        self.max_running = 1
        self.prompt_tokens = 0
        self.generation_tokens = 0
        self.success = {"stop": 0, "length": 0, "abort": 0}
        self.latency = [0] * len(LATENCY_BUCKETS)
        self.latency_sum = 0.0
        self.latency_count = 0

    def add(self, field: str, delta: int) -> None:
        with self.lock:
            setattr(self, field, getattr(self, field) + delta)

    def finished(self, prompt_tokens: int, generation_tokens: int, reason: str, seconds: float) -> None:
        with self.lock:
            self.prompt_tokens += prompt_tokens
            self.generation_tokens += generation_tokens
            self.success[reason] = self.success.get(reason, 0) + 1
            for i, bound in enumerate(LATENCY_BUCKETS):
                if seconds <= bound:
                    self.latency[i] += 1
            self.latency_sum += seconds
            self.latency_count += 1

    def render(self) -> str:
        with self.lock:
            return "".join(self._lines())

    def _lines(self):
        lab = self.labels
        yield "# HELP aiinfra_standin_info The model server is the aiinfra lab STAND-IN, not vLLM or NIM.\n"
        yield "# TYPE aiinfra_standin_info gauge\n"
        yield 'aiinfra_standin_info{%s,version="%s"} 1\n' % (lab, STANDIN_VERSION)
        gauges = (
            ("vllm:num_requests_running", "Number of requests in model execution batches.", self.running),
            ("vllm:num_requests_waiting", "Number of requests waiting to be processed.", self.waiting),
            ("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", self.kv_usage()),
        )
        for name, help_text, value in gauges:
            yield "# HELP %s %s\n# TYPE %s gauge\n%s{%s} %s\n" % (name, help_text, name, name, lab, value)
        counters = (
            ("vllm:prompt_tokens", "Number of prefill tokens processed.", self.prompt_tokens),
            ("vllm:generation_tokens", "Number of generation tokens processed.", self.generation_tokens),
        )
        for name, help_text, value in counters:
            yield "# HELP %s %s\n# TYPE %s counter\n%s_total{%s} %d\n" % (name, help_text, name, name, lab, value)
        yield "# HELP vllm:request_success Count of successfully processed requests.\n"
        yield "# TYPE vllm:request_success counter\n"
        for reason, value in sorted(self.success.items()):
            yield 'vllm:request_success_total{%s,finished_reason="%s"} %d\n' % (lab, reason, value)
        yield from self._histogram("vllm:e2e_request_latency_seconds", "End to end request latency in seconds.")

    def _histogram(self, name, help_text):
        yield "# HELP %s %s\n# TYPE %s histogram\n" % (name, help_text, name)
        for bound, count in zip(LATENCY_BUCKETS, self.latency):
            yield '%s_bucket{%s,le="%s"} %d\n' % (name, self.labels, bound, count)
        yield '%s_bucket{%s,le="+Inf"} %d\n' % (name, self.labels, self.latency_count)
        yield "%s_sum{%s} %s\n%s_count{%s} %d\n" % (
            name,
            self.labels,
            self.latency_sum,
            name,
            self.labels,
            self.latency_count,
        )

    def kv_usage(self) -> float:
        return round(min(1.0, self.running / max(1, self.max_running)), 4)


# ---------------------------------------------------------------- HTTP


class StandIn(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, settings: dict, token_seconds: float, max_running: int):
        self.settings = settings
        self.token_seconds = token_seconds
        self.slots = threading.Semaphore(max(1, max_running))
        self.metrics = Metrics(settings["served_names"][0])
        self.metrics.max_running = max(1, max_running)
        self.draining = threading.Event()
        self.in_flight = 0
        self.in_flight_lock = threading.Condition()
        super().__init__((settings["host"], settings["port"]), Handler)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "aiinfra-model-server-standin/" + STANDIN_VERSION
    server: StandIn

    # -- plumbing

    def log_message(self, fmt, *args):  # access log through the "uvicorn.access" logger, as vLLM's server logs
        rid = self.headers.get("X-Request-ID") if getattr(self, "headers", None) else None
        line = fmt % args + (" x-request-id=%s" % rid if rid else "")
        logging.getLogger("uvicorn.access").info("stand-in %s - %s", self.address_string(), line)

    def send_json(self, status: int, obj: dict) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.common_headers("application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def send_text(self, status: int, text: str, content_type: str = "text/plain; charset=utf-8") -> None:
        data = text.encode()
        self.send_response(status)
        self.common_headers(content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def common_headers(self, content_type: str) -> None:
        self.send_header(*HEADER)
        self.send_header("Content-Type", content_type)
        if self.headers.get("X-Request-ID"):
            self.send_header("X-Request-ID", self.headers["X-Request-ID"])

    def read_body(self):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b"{}"
        body = json.loads(raw or b"{}")
        if not isinstance(body, dict):
            raise ValueError("the request body must be a JSON object")
        return body

    # -- routes

    def refused(self) -> bool:
        """Answer 401 as vLLM does when its API key is set and the request lacks it; True when refused."""
        path = self.path.split("?", 1)[0]
        if authorized(self.command, path, self.headers.get("Authorization"), self.server.settings["api_keys"]):
            return False
        length = int(self.headers.get("Content-Length") or 0)
        if length:  # read past the body, so that the connection can carry the next request
            self.rfile.read(length)
        self.send_json(401, {"error": "Unauthorized"})
        return True

    def do_GET(self):
        if self.refused():
            return None
        path = self.path.split("?", 1)[0].rstrip("/") or "/"
        settings = self.server.settings
        if path in ("/health", "/ping", "/v1/health/ready", "/v1/health/live"):
            if self.server.draining.is_set() and path != "/v1/health/live":
                return self.send_json(503, error_body("stand-in is shutting down", "ServiceUnavailable", 503))
            if path.startswith("/v1/health"):
                return self.send_json(200, {"object": "health.response", "message": "Service is ready (stand-in)."})
            return self.send_text(200, "")
        if path == "/version":
            return self.send_json(200, {"version": STANDIN_VERSION, "standin": True})
        if path == "/v1/models":
            return self.send_json(200, models_body(settings["served_names"], settings["model"]))
        if path in ("/metrics", "/v1/metrics"):
            return self.send_text(200, self.server.metrics.render(), "text/plain; version=0.0.4; charset=utf-8")
        return self.send_json(404, error_body("no route %s on the stand-in" % path, "NotFoundError", 404))

    def do_POST(self):
        if self.refused():
            return None
        path = self.path.split("?", 1)[0].rstrip("/")
        routes = {"/v1/chat/completions": "chat", "/v1/completions": "text", "/v1/embeddings": "embeddings"}
        if path not in routes:
            return self.send_json(404, error_body("no route %s on the stand-in" % path, "NotFoundError", 404))
        try:
            body = self.read_body()
        except ValueError as exc:
            return self.send_json(400, error_body("invalid JSON body: %s" % exc, "BadRequestError", 400))
        model = body.get("model") or self.server.settings["served_names"][0]
        if model not in self.server.settings["served_names"]:
            return self.send_json(404, error_body("The model `%s` does not exist." % model, "NotFoundError", 404))
        with self.server.in_flight_lock:
            self.server.in_flight += 1
        try:
            if routes[path] == "embeddings":
                return self.embeddings(model, body)
            return self.generate(routes[path], model, body)
        finally:
            with self.server.in_flight_lock:
                self.server.in_flight -= 1
                self.server.in_flight_lock.notify_all()

    def embeddings(self, model, body):
        dims = int(body.get("dimensions") or EMBEDDING_DIMENSIONS)
        encoding = body.get("encoding_format") or "float"
        self.send_json(200, embeddings_body(model, body.get("input"), dims, encoding))

    def generate(self, kind, model, body):
        metrics, started = self.server.metrics, time.monotonic()
        prompt_tokens = count_tokens(prompt_text(body))
        words, finish = reply_words(model, body.get("max_tokens") or body.get("max_completion_tokens"))
        metrics.add("waiting", 1)
        with self.server.slots:
            metrics.add("waiting", -1)
            metrics.add("running", 1)
            try:
                if body.get("stream"):
                    self.stream(kind, model, words, finish, prompt_tokens, body)
                else:
                    time.sleep(self.server.token_seconds * len(words))
                    self.send_json(200, completion_body(kind, model, words, finish, prompt_tokens))
            finally:
                metrics.add("running", -1)
        metrics.finished(prompt_tokens, len(words), finish, time.monotonic() - started)

    def stream(self, kind, model, words, finish, prompt_tokens, body):
        self.send_response(200)
        self.common_headers("text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        ident = ("chatcmpl-" if kind == "chat" else "cmpl-") + "standin-" + uuid.uuid4().hex
        if kind == "chat":
            self.event(stream_chunk(kind, ident, model, None, None, True))
        for i, word in enumerate(words):
            time.sleep(self.server.token_seconds)
            self.event(stream_chunk(kind, ident, model, word if i == 0 else " " + word, None, False))
        self.event(stream_chunk(kind, ident, model, None, finish, False))
        if (body.get("stream_options") or {}).get("include_usage"):
            last = {"id": ident, "object": "chat.completion.chunk", "created": int(time.time()), "model": model}
            self.event(dict(last, choices=[], usage=usage(prompt_tokens, len(words))))
        self.chunk(b"data: [DONE]\n\n")
        self.chunk(b"")

    def event(self, obj: dict) -> None:
        self.chunk(b"data: " + json.dumps(obj).encode() + b"\n\n")

    def chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()


# ---------------------------------------------------------------- process


def setup_logging(env: dict) -> None:
    """The collection's dictConfig when vLLM would read it (VLLM_CONFIGURE_LOGGING=1 and the path set), else text
    (or JSON lines for NIM_JSONL_LOGGING=1) on stdout."""
    path = env.get("VLLM_LOGGING_CONFIG_PATH")
    if env.get("VLLM_CONFIGURE_LOGGING", "1") == "1" and path:
        with open(path) as handle:
            logging.config.dictConfig(json.load(handle))
        return
    handler = logging.StreamHandler(sys.stdout)
    if env.get("NIM_JSONL_LOGGING") == "1":
        handler.setFormatter(JsonLines())
    else:
        handler.setFormatter(
            logging.Formatter("%(levelname)s %(asctime)s [model-server-standin] %(name)s: %(message)s")
        )
    logging.basicConfig(level=logging.INFO, handlers=[handler])


class JsonLines(logging.Formatter):
    """One JSON object per record (NIM_JSONL_LOGGING=1), naming the stand-in."""

    def format(self, record):
        entry = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + ".%03dZ" % record.msecs,
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "standin": True,
        }
        return json.dumps(entry, ensure_ascii=False)


def drain_and_stop(server: StandIn, timeout: float) -> None:
    """SIGTERM: health turns 503, the requests in flight finish (up to timeout seconds), then the server stops."""
    server.draining.set()
    log.info("stand-in: SIGTERM, finishing %d request(s) in flight (up to %ss)", server.in_flight, timeout)
    deadline = time.monotonic() + timeout
    with server.in_flight_lock:
        while server.in_flight and time.monotonic() < deadline:
            server.in_flight_lock.wait(max(0.0, min(0.5, deadline - time.monotonic())))
    server.shutdown()


def serve(argv: list[str], env: dict) -> int:
    setup_logging(env)
    settings = server_settings(argv, env)
    token_seconds = float(env.get("AIINFRA_STANDIN_TOKEN_MS", "5")) / 1000
    max_running = int(env.get("AIINFRA_STANDIN_MAX_RUNNING", "8"))
    server = StandIn(settings, token_seconds, max_running)
    log.warning(
        "aiinfra lab STAND-IN model server (not vLLM, not NIM) %s: serving %s (model %s) on http://%s:%d",
        STANDIN_VERSION,
        ",".join(settings["served_names"]),
        settings["model"],
        settings["host"],
        server.server_address[1],
    )
    for flag in settings["ignored"]:
        log.info("stand-in ignores %s", flag)
    if settings["api_keys"]:
        log.info("stand-in requires an API key on %s (as vLLM's --api-key / VLLM_API_KEY)", ", ".join(GUARDED_PREFIX))

    def on_term(signum, frame):
        threading.Thread(target=drain_and_stop, args=(server, settings["shutdown_timeout"]), daemon=True).start()

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    server.serve_forever(poll_interval=0.2)
    server.server_close()
    log.info("stand-in stopped")
    return 0


def main(argv: list[str] | None = None) -> int:
    """`vllm serve ...`, `vllm --version`, or `model_server_standin.py [serve] ...`."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] in (["--version"], ["-v"]):
        print(STANDIN_VERSION)
        return 0
    if argv[:1] == ["serve"]:
        argv = argv[1:]
    elif "vllm" in (os.path.basename(sys.argv[0]), os.environ.get("AIINFRA_STANDIN_ENTRY")) and argv:
        print("stand-in vllm: only `vllm serve` and `vllm --version` exist here", file=sys.stderr)
        return 2
    return serve(argv, dict(os.environ))


if __name__ == "__main__":
    sys.exit(main())
