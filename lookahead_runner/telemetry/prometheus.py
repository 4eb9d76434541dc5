"""vLLM's /metrics: a pure parser into the signals the analysis needs, and a scraper."""
from __future__ import annotations

import math
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from ..contracts.auth import keyed_request
from ..vllm.metrics import ACCEPTED_PER_POSITION, KV_POOL_INFO, POSITION_SIGNAL, SIGNALS, kv_pool_tokens

AVERAGED = frozenset({"kv_usage"})


def parse(text: str) -> dict[str, float]:
    """Prometheus text -> {signal: value}, summed over labels; missing signals are absent.

    KV usage is a 0..1 fraction per engine, so several engines (data parallel) are averaged. Accepted
    tokens per draft position come back as POSITION_SIGNAL + position, summed over engines.
    """
    sums: dict[str, float] = {}
    counts: dict[str, int] = {}
    pool = 0.0
    positions: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        if family.name in (KV_POOL_INFO, KV_POOL_INFO.removesuffix("_info")):  # the parser may drop "_info"
            for sample in family.samples:
                pool += kv_pool_tokens(sample.labels) or 0.0
            continue
        for sample in family.samples:
            if sample.name == ACCEPTED_PER_POSITION and sample.labels.get("position", "").isdigit():
                name = POSITION_SIGNAL + sample.labels["position"]
                positions[name] = positions.get(name, 0.0) + float(sample.value)
                continue
            if sample.name.endswith("_created") or "position" in sample.labels:
                continue
            sums[sample.name] = sums.get(sample.name, 0.0) + float(sample.value)
            counts[sample.name] = counts.get(sample.name, 0) + 1
    values: dict[str, float] = {}
    for signal, names in SIGNALS.items():
        name = next((n for n in names if n in sums and not math.isnan(sums[n])), None)
        if name is not None:
            values[signal] = sums[name] / counts[name] if signal in AVERAGED else sums[name]
    if pool:
        values["kv_pool_tokens"] = pool
    return values | positions


def scrape(url: str, timeout_s: float = 2.0, headers: dict[str, str] | None = None) -> str:
    """/metrics as text; the key (in `headers`) goes to `url` only, never on to where a redirect points."""
    request = keyed_request(url, headers)
    with urllib.request.urlopen(request, timeout=timeout_s) as response:
        return response.read().decode("utf-8", "replace")
