"""The API key's one path: from the runner to the server and to every request of the load.

The load (Locust, its workers and its live tabs) reads the key from one environment variable, never
from an option, a form or a file, and every client sends it as the same bearer header, to the address it was
given only: never on to where a redirect points (`keyed_request`). Where vLLM reads its own key: vllm/secrets.py.
`sweep --web`'s live view takes the sweep's token from another variable (LIVE_TOKEN_ENV), never an option either.
"""
from __future__ import annotations

import os
import urllib.request
from collections.abc import Mapping

LOAD_KEY_ENV = "LOOKAHEAD_API_KEY"
LIVE_TOKEN_ENV = "LOOKAHEAD_LIVE_TOKEN"  # the live view's token, which the runner prints in the view's address
AUTHORIZATION = "Authorization"


def bearer_header(key: str) -> dict[str, str]:
    """The Authorization header for `key`; none without a key."""
    return {"Authorization": f"Bearer {key}"} if key else {}


def key_from_environment(environ: Mapping[str, str] = os.environ) -> str:
    """The key the load sends, as the runner handed it over."""
    return environ.get(LOAD_KEY_ENV, "")


def keyed_request(url: str, headers: Mapping[str, str] | None = None, data: bytes | None = None) -> urllib.request.Request:
    """A urllib request with `headers`, the Authorization one for `url` alone: urllib copies a request's headers
    onto the request a redirect makes (to any host) but not its unredirected ones."""
    request = urllib.request.Request(url, data=data)
    for name, value in (headers or {}).items():
        if name.lower() == AUTHORIZATION.lower():
            request.add_unredirected_header(AUTHORIZATION, value)
        else:
            request.add_header(name, value)
    return request
