"""Where vLLM and the libraries it loads put their caches under the environment this process was given, each one
created and written to (one line: CACHES <json>, a path or an ERROR per cache). Run inside the runtime sandbox by
tests/runtime, as the pod's uid with only /tmp writable.

The FlashAttention-4 (CuTe DSL) cache modules live in a package whose __init__ needs vLLM's CUDA extensions, so
they are loaded from their files with that package's logger stubbed; the functions called are vLLM's own."""

import getpass
import importlib.util
import json
import sys
import types
from pathlib import Path

import vllm

out = {}


def probe(name, where):
    try:
        path = Path(where())
        path.mkdir(parents=True, exist_ok=True)
        (path / ".probe").write_text("written by tests/runtime\n")
        out[name] = str(path)
    except Exception as err:
        out[name] = "ERROR %s: %s" % (type(err).__name__, err)


def load(name, relative):
    package = name.rsplit(".", 1)[0]
    for parent in (package.rsplit(".", 1)[0], package):
        if parent not in sys.modules:
            module = types.ModuleType(parent)
            module.__path__ = []
            sys.modules[parent] = module
    logging_module = types.ModuleType(package + ".fa_logging")
    logging_module.fa_log = lambda *args, **kwargs: None
    sys.modules[logging_module.__name__] = logging_module
    spec = importlib.util.spec_from_file_location(name, Path(vllm.__file__).parent / relative)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


flash = load("vllm.vllm_flash_attn.cute.cache_utils", "vllm_flash_attn/cute/cache_utils.py")
probe("flash_attention_cute_dsl", flash.get_cache_path)
tml = load("vllm.third_party.tml_fa4.cache_utils", "third_party/tml_fa4/cache_utils.py")
probe("tml_fa4", tml.get_cache_path)

from torch._inductor.runtime.cache_dir_utils import cache_dir  # noqa: E402
from torch._vendor.quack.cache import jit as quack  # noqa: E402

probe("torch_quack", quack.get_cache_path)
probe("torchinductor", cache_dir)

import huggingface_hub.constants as hub  # noqa: E402
from flashinfer.jit import env as flashinfer  # noqa: E402
from numba.core import config as numba  # noqa: E402
from triton import knobs  # noqa: E402
from vllm import envs  # noqa: E402

probe("triton", lambda: knobs.cache.dir)
probe("vllm_cache_root", lambda: envs.VLLM_CACHE_ROOT)
probe("vllm_config_root", lambda: envs.VLLM_CONFIG_ROOT)
probe("flashinfer", lambda: flashinfer.FLASHINFER_CACHE_DIR)
probe("numba", lambda: numba.CACHE_DIR or ".")  # unset: next to the code, i.e. the image's read-only root
probe("huggingface", lambda: hub.HF_HOME)
probe("getuser", lambda: "/tmp/" + getpass.getuser())
print("CACHES " + json.dumps(out), flush=True)
