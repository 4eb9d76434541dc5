"""The API key's one path: from the runner to the server and to every request of the load.

The load (Locust, its workers and its live tabs) reads the key from one environment variable, never
from an option, a form or a file, and every client sends it as the same bearer header. Where vLLM reads
its own key: vllm/secrets.py.
"""
from __future__ import annotations

import os
from collections.abc import Mapping

LOAD_KEY_ENV = "LOOKAHEAD_API_KEY"


def bearer_header(key: str) -> dict[str, str]:
    """The Authorization header for `key`; none without a key."""
    return {"Authorization": f"Bearer {key}"} if key else {}


def key_from_environment(environ: Mapping[str, str] = os.environ) -> str:
    """The key the load sends, as the runner handed it over."""
    return environ.get(LOAD_KEY_ENV, "")
