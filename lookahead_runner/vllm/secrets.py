"""vLLM's secrets: the flags whose values are secrets, and where vLLM reads its API key without the flag."""
from __future__ import annotations

SERVER_KEY_ENV = "VLLM_API_KEY"      # `vllm serve` reads its key here when --api-key is absent
API_KEY_FLAG = "--api-key"
# vLLM 0.32 has no variable of its own for the Hugging Face token: without --hf-token its ModelConfig.hf_token is None
# (vllm/config/model.py), which huggingface_hub's get_token_to_send(None) answers with get_token(): the HF_TOKEN
# variable (then HUGGING_FACE_HUB_TOKEN, then the login file), unless HF_HUB_DISABLE_IMPLICIT_TOKEN is set
# (huggingface_hub/utils/_headers.py, utils/_auth.py)
HF_TOKEN_FLAG = "--hf-token"
HF_TOKEN_ENV = "HF_TOKEN"
HF_IMPLICIT_TOKEN_OFF = "HF_HUB_DISABLE_IMPLICIT_TOKEN"
# each secret flag: the variable a paste-ready command reads it from, and argparse's nargs
SECRET_FLAGS = {API_KEY_FLAG: (SERVER_KEY_ENV, "+"), HF_TOKEN_FLAG: (HF_TOKEN_ENV, "?")}
