"""Parse a model server's rendered arguments with vLLM's own `vllm serve` parser and engine arguments, and print
what they became (one line: PARSED <json>). Run inside the runtime sandbox by tests/runtime."""

import json
import sys

from vllm.engine.arg_utils import AsyncEngineArgs
from vllm.entrypoints.common.cli_args import make_arg_parser, validate_parsed_serve_args
from vllm.utils.argparse_utils import FlexibleArgumentParser

FIELDS = (
    "model",
    "served_model_name",
    "tensor_parallel_size",
    "max_model_len",
    "gpu_memory_utilization",
    "shutdown_timeout",
    "enable_prefix_caching",
)

parser = make_arg_parser(FlexibleArgumentParser(prog="vllm serve"))
args = parser.parse_args(sys.argv[1:])
validate_parsed_serve_args(args)
engine = AsyncEngineArgs.from_cli_args(args)
parsed = {name: getattr(engine, name) for name in FIELDS}
parsed["port"] = args.port
print("PARSED " + json.dumps(parsed, default=str), flush=True)
