"""Which Prometheus series carry each signal, per vLLM generation (docs/vllm-facts.md).

Each signal lists candidate sample names, newest first; the first one present wins. Counters
carry `_total`; `_created` series are ignored.
"""
from __future__ import annotations

SIGNALS: dict[str, tuple[str, ...]] = {
    "running": ("vllm:num_requests_running",),
    "waiting": ("vllm:num_requests_waiting",),
    # >= 0.9.2 renamed gpu_cache_usage_perc; V0 and early V1 only have the old name.
    "kv_usage": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
    "preemptions_total": ("vllm:num_preemptions_total",),
    "prompt_tokens_total": ("vllm:prompt_tokens_total",),
    "generation_tokens_total": ("vllm:generation_tokens_total",),
    "spec_drafts_total": ("vllm:spec_decode_num_drafts_total",),
    "spec_draft_tokens_total": ("vllm:spec_decode_num_draft_tokens_total",),
    "spec_accepted_total": ("vllm:spec_decode_num_accepted_tokens_total",),
    "spec_emitted_total": ("vllm:spec_decode_num_emitted_tokens_total",),
    "requests_success_total": ("vllm:request_success_total",),
}

# Signals read from an info metric's labels: the KV pool the server allocated, in tokens (a draft model
# and a larger activation peak shrink it). 0.32 labels kv_cache_size_tokens; older ones only blocks.
KV_POOL_INFO = "vllm:cache_config_info"


def kv_pool_tokens(labels: dict[str, str]) -> float | None:
    try:
        return float(labels["kv_cache_size_tokens"])
    except (KeyError, ValueError):
        pass
    try:
        return float(labels["num_gpu_blocks"]) * float(labels["block_size"])
    except (KeyError, ValueError):
        return None


# Accepted tokens per draft position (a `position` label, 0-based): P(position i accepted) = its growth /
# the growth of spec_drafts_total. The sampler keeps them apart (spec_positions.csv), one row per position.
ACCEPTED_PER_POSITION = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
POSITION_SIGNAL = "spec_accepted_pos_"   # + the position: the parsed signal's name

SERVER_SAMPLE_COLUMNS = ("t_s", *SIGNALS, "kv_pool_tokens")
