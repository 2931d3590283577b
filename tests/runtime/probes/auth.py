"""Build vLLM's own OpenAI server app (vllm.entrypoints.launchers.app.build_app, no engine) from a model server's
rendered arguments and environment (VLLM_API_KEY from the model servers' Secret) and call it in process: what its
API key check answers on the paths the gateway, the probes and Prometheus use, and on paths it leaves open. Prints
one line: AUTH <json> ({"METHOD path who": status}; who: none, wrong, key). argv: the key, then the arguments."""

import json
import sys

from starlette.testclient import TestClient
from vllm.entrypoints.common.cli_args import make_arg_parser, validate_parsed_serve_args
from vllm.entrypoints.launchers.app import build_app
from vllm.utils.argparse_utils import FlexibleArgumentParser

PATHS = (
    ("POST", "/v1/chat/completions"),
    ("POST", "/v1/completions"),
    ("GET", "/v1/models"),
    ("GET", "/health"),
    ("GET", "/metrics"),
    ("POST", "/invocations"),
    ("POST", "/tokenize"),
)

parser = make_arg_parser(FlexibleArgumentParser(prog="vllm serve"))
args = parser.parse_args(sys.argv[2:])
validate_parsed_serve_args(args)
client = TestClient(build_app(args, supported_tasks=("generate",)), raise_server_exceptions=False)
key = sys.argv[1]
out = {}
for method, path in PATHS:
    for who, headers in (
        ("none", {}),
        ("wrong", {"Authorization": "Bearer wrong"}),
        ("key", {"Authorization": "Bearer " + key}),
    ):
        answer = client.request(method, path, headers=headers, json={} if method == "POST" else None)
        out["%s %s %s" % (method, path, who)] = answer.status_code
print("AUTH " + json.dumps(out), flush=True)
