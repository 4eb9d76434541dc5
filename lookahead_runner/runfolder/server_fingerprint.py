"""A server's fingerprint: what makes two sweeps the same server for the restart spread ledger (spread_ledger.py).

Claim: two configs fingerprint alike only where nothing that changes speed differs: the vLLM version, the command
that starts it, the model and the draft (names, and a local model's config.json), the hardware (spread_ledger.py
`hardware`), the server's flags and environment less those that change no speed (address, key, logging, seed) with
exactly the values each of those takes as vLLM's parser reads them; secrets are masked before it is made, so no key
reaches the ledger or its hash, and a new key is the same server. `workload_key` is what a K's level and the spread
depend on besides the server.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any

from ..config import SweepConfig
from ..config.masking import PLACEHOLDER_RE, looks_secret, mask_server

# flags that change no speed: where the server listens, its key, what it logs, its sampling seed; as vLLM's parser
# reads them (vllm/engine/arg_utils.py, entrypoints/launchers/cli_args.py): switches that take no value (a bool
# field is a BooleanOptionalAction: --no-NAME too), flags taking one value, one or none (a bare --hf-token is true), or
# a list (--api-key k1 k2). A secret flag (server.secret_flags) is taken for a list: none of its values is kept.
NEUTRAL_SWITCHES = frozenset({"--disable-log-stats", "--disable-log-requests", "--enable-log-requests",
                              "--disable-uvicorn-access-log"})
NEUTRAL_ONE = frozenset({"--host", "--port", "--seed", "--uvicorn-log-level", "--root-path", "--ssl-keyfile",
                         "--ssl-certfile"})
NEUTRAL_OPTIONAL = frozenset({"--hf-token"})
NEUTRAL_LIST = frozenset({"--api-key", "--served-model-name"})
NEUTRAL_FLAGS = NEUTRAL_SWITCHES | NEUTRAL_ONE | NEUTRAL_OPTIONAL | NEUTRAL_LIST
_NEGATIVE_NUMBER = re.compile(r"-\d+(\.\d*)?$")


def speed_flags(args: list[str], secret_flags: list[str] = ()) -> list[str]:
    """The server's flags less those that change no speed, with the values each of those takes (a switch none:
    the flag after it is kept, whatever it is)."""
    lists = NEUTRAL_LIST | set(secret_flags)
    out, values = [], 0   # values: how many of the next arguments, if they are values, belong to a neutral flag
    for arg in args:
        if values and not _is_option(arg):
            values -= 1
            continue
        values = 0
        name, eq, _ = arg.partition("=")
        switch = name in NEUTRAL_SWITCHES or (name.startswith("--no-") and f"--{name[5:]}" in NEUTRAL_SWITCHES)
        if switch or name in NEUTRAL_FLAGS or name in lists:
            values = 0 if switch or eq else len(args) if name in lists else 1
            continue
        out.append(arg)
    return out


def _is_option(arg: str) -> bool:
    """As argparse tells a flag from a value: it starts with "-" and is not a negative number."""
    return arg.startswith("-") and not _NEGATIVE_NUMBER.match(arg)


def _content(model: str) -> str:
    """A local model's identity beyond its path: a hash of its config.json ("" for a hub name or none)."""
    config = Path(os.path.expanduser(model)) / "config.json"
    try:
        return hashlib.sha256(config.read_bytes()).hexdigest()[:16]
    except OSError:
        return ""


def fingerprint(config: SweepConfig, vllm_version: str, gear: str) -> dict[str, Any]:
    """What makes two sweeps the same server (`gear`: `hardware(config)`). Secrets are masked first (a secret flag
    or variable is left out; a NAME=VALUE inside an argv element is NAME=${NAME}): no key reaches the ledger or
    its hash, and a new key is the same server."""
    server, spec = mask_server(config.server, {})[0], config.speculation
    draft = spec.draft_model if spec.method in ("draft_model", "eagle", "eagle3") else ""
    return {"vllm": vllm_version + (" (simulated)" if server.is_simulator else ""),
            "command": server.argv_template or server.command,
            "model": server.model, "model_content": _content(server.model),
            "draft": f"{spec.method} {draft}".strip(), "draft_content": _content(draft) if draft else "",
            "hardware": gear, "flags": speed_flags(server.extra_args, server.secret_flags),
            "env": {name: value for name, value in sorted(server.env.items())
                    if name not in server.secret_env and not looks_secret(name, value)
                    and not PLACEHOLDER_RE.search(value)}}


def key_of(print_: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(print_, sort_keys=True).encode()).hexdigest()[:20]


def workload_key(config: SweepConfig) -> str:
    """What a K's level (its objective at the target) depends on besides the server: the requests and the
    objective (a spread and a level are pooled only within one)."""
    load = config.load
    return key_of({"prompt": load.prompt_tokens, "output": load.output_tokens, "temperature": load.temperature,
                   "endpoint": load.endpoint, "requests": load.requests, "objective": config.decision.objective})
