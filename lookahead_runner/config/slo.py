"""Service-level objectives: `ttft_p99_ms = 500` means 99 % of requests get their first token within
500 ms. Metrics are per request: ttft (time to first token), tpot (mean time per output token after
the first), itl (the request's own p99 inter-token gap: its slowest stalls), e2e (the whole request).
A failed request meets no SLO. Attainment (the share meeting one) is a proportion, judged with its
Wilson interval against the percentile; goodput counts requests meeting every SLO, per second.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass

# SLO metric -> the per-request column of evidence.LATENCY_COLUMNS
SLO_COLUMNS = {"ttft": "ttft_ms", "tpot": "tpot_ms", "itl": "itl_p99_ms", "e2e": "e2e_ms"}
SLO_KEY_RE = re.compile(r"^(ttft|tpot|itl|e2e)_p(\d{1,2}(?:\.\d+)?)_ms$")


@dataclass(frozen=True)
class Slo:
    key: str          # as configured, e.g. "ttft_p99_ms"
    metric: str       # ttft | tpot | itl | e2e
    share: float      # 0.99 for p99
    max_ms: float

    @property
    def column(self) -> str:
        return SLO_COLUMNS[self.metric]

    def text(self) -> str:
        return f"{self.metric.upper()} p{self.share * 100:g} <= {self.max_ms:g} ms"


def parse_slo_key(key: str) -> tuple[str, float]:
    """`ttft_p99_ms` -> ("ttft", 0.99); ValueError with the fix for anything else."""
    match = SLO_KEY_RE.match(key)
    if not match or not 0 < float(match.group(2)) < 100:
        raise ValueError(f"SLO key {key!r}: write METRIC_pNN_ms with METRIC one of "
                         f"{', '.join(SLO_COLUMNS)} and 0 < NN < 100, e.g. ttft_p99_ms = 500")
    return match.group(1), float(match.group(2)) / 100


@functools.lru_cache(maxsize=64)
def parse_slos(items: tuple[tuple[str, float], ...]) -> tuple[Slo, ...]:
    """`decision.slo`'s (key, limit) pairs -> SLOs."""
    slos = []
    for key, max_ms in sorted(items):
        metric, share = parse_slo_key(key)
        slos.append(Slo(key, metric, share, float(max_ms)))
    return tuple(slos)
