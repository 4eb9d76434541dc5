"""How a per-batch-size schedule (`num_speculative_tokens_per_batch_size`) is written into `vllm serve`."""
from __future__ import annotations

import json


SPEC_CONFIG_FLAG = "--speculative-config"
SPEC_TOKENS_FLAG = "--spec-tokens"


def per_batch_size_argv(ranges: list[list[int]], argv_by_k: dict[int, list[str]]) -> list[str] | None:
    """The serve argv carrying the ranges: the largest K's argv, its speculative config extended.

    num_speculative_tokens must be the largest K of the ranges (vLLM sizes buffers by it). With the
    `--spec-*` shorthands, `--spec-tokens` is set and the ranges go in a `--speculative-config` beside
    it (vLLM merges different keys); dotted `--speculative-config.KEY V` pairs are folded into that
    JSON, because vLLM would let them replace it. None when no range speculates or the argv has
    neither form to extend.
    """
    top_k = max((r[2] for r in ranges), default=0)
    argv = list(argv_by_k.get(top_k, []))
    if top_k <= 0:
        return None
    if SPEC_TOKENS_FLAG in argv[:-1]:
        argv[argv.index(SPEC_TOKENS_FLAG) + 1] = str(top_k)
        argv, dotted = _without_dotted_spec(argv)
        spec = dotted | {"num_speculative_tokens_per_batch_size": ranges}
        return argv + [SPEC_CONFIG_FLAG, json.dumps(spec, separators=(",", ":"))]
    if SPEC_CONFIG_FLAG not in argv[:-1]:
        return None
    at = argv.index(SPEC_CONFIG_FLAG) + 1
    try:
        spec = json.loads(argv[at])
    except ValueError:
        return None
    if not isinstance(spec, dict):
        return None
    spec |= {"num_speculative_tokens": top_k, "num_speculative_tokens_per_batch_size": ranges}
    argv[at] = json.dumps(spec, separators=(",", ":"))
    return argv


def _without_dotted_spec(argv: list[str]) -> tuple[list[str], dict]:
    """argv minus its `--speculative-config.KEY VALUE` pairs, and those pairs as a dict (values
    parsed as JSON where they parse: `4` -> 4)."""
    kept, dotted, i = [], {}, 0
    while i < len(argv):
        if argv[i].startswith(SPEC_CONFIG_FLAG + ".") and i + 1 < len(argv):
            try:
                dotted[argv[i].split(".", 1)[1]] = json.loads(argv[i + 1])
            except ValueError:
                dotted[argv[i].split(".", 1)[1]] = argv[i + 1]
            i += 2
            continue
        kept.append(argv[i])
        i += 1
    return kept, dotted
