"""vLLM's secrets: the flags whose values are secrets, and where vLLM reads its API key without the flag."""
from __future__ import annotations

SERVER_KEY_ENV = "VLLM_API_KEY"      # `vllm serve` reads its key here when --api-key is absent
API_KEY_FLAG = "--api-key"
# each secret flag: the variable a paste-ready command reads it from, and argparse's nargs
SECRET_FLAGS = {API_KEY_FLAG: (SERVER_KEY_ENV, "+"), "--hf-token": ("HF_TOKEN", "?")}
