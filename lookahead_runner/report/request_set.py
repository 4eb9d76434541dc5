"""The report's "Your requests" section: what decision.json's `request_set` says, as display strings.

Pure: the typed summary in, text out (the template escapes it).
"""
from __future__ import annotations

from ..decision.traffic.schema import MIX, RequestSetSummary
from ..decision.schema import Range
from .cells import MISSING

NOTES = ("baseline", "no baseline", "too few requests")   # a speeds row without a gain, and why


def _number(value: float | None, digits: int = 2) -> str:
    return MISSING if value is None else f"{value:,.{digits}f}"


def _range(r: Range) -> str:
    if r.low is None or r.high is None:
        return "[unbounded]"
    return f"[{r.low:.2f}, {r.high:.2f}]"


def _share(value: float | None) -> str:
    return MISSING if value is None else f"{100 * value:.1f} %"


def _relative(value: float | None, r: Range) -> str:
    if value is None:
        return MISSING
    bounds = "[unbounded]" if r.low is None or r.high is None else f"[{100 * r.low:+.1f}, {100 * r.high:+.1f}]"
    return f"{100 * value:+.1f} % {bounds}"


def _requests(answers: int, distinct: int | None) -> str:
    return f"{answers:,}" if distinct is None else f"{distinct:,} ({answers:,} answers)"


def _speed_rows(summary: RequestSetSummary) -> list[dict]:
    """The speeds table; against the baseline K: "baseline" on its own row, "no baseline" for a category without
    enough of its requests there (no figure to be against), "too few requests" where the K itself has too few."""
    based = {s.category for s in summary.speeds if s.k == summary.baseline_k and s.speed_range.low is not None}
    rows = []
    for s in summary.speeds:
        gain = ("baseline" if s.k == summary.baseline_k else "no baseline" if s.category not in based
                else "too few requests" if s.gain is None else _relative(s.gain, s.gain_range))
        vs_mix = ("" if s.category == MIX else _relative(s.vs_mix, s.vs_mix_range) if s.vs_mix is not None
                  else gain if gain in NOTES else MISSING)
        speed = MISSING if s.speed is None else f"{s.speed:.1f}"
        if s.speed_range.low is not None and s.speed_range.high is not None:
            speed += f" [{s.speed_range.low:.1f}, {s.speed_range.high:.1f}]"
        rows.append({"category": s.category, "k": s.k, "mix": s.category == MIX,
                     "requests": _requests(s.requests, s.distinct_requests), "speed": speed,
                     "gain": gain, "vs_mix": vs_mix, "tpot": _number(s.tpot_p50_ms, 1)})
    return rows


def request_set_view(summary: RequestSetSummary | None) -> dict | None:
    if summary is None:
        return None
    acceptance = [{"category": a.category, "k": a.k, "requests": _requests(a.requests, a.distinct_requests),
                   "mix": a.category == MIX,
                   "pooled": f"{a.acceptance_length:.2f} {_range(a.acceptance_length_range)}",
                   "token": f"{a.token_weighted:.2f} {_range(a.token_weighted_range)}",
                   "request": f"{a.request_weighted:.2f} {_range(a.request_weighted_range)}",
                   "direction": ("token > request" if a.token_weighted > a.request_weighted
                                 else "request > token" if a.request_weighted > a.token_weighted else "equal")}
                  for a in summary.acceptance]
    lengths = [{"category": d.category, "requests": f"{d.requests:,}",
                "prompt": " / ".join(_number(v, 0) for v in (d.prompt_p10, d.prompt_p50, d.prompt_p90, d.prompt_max)),
                "output": " / ".join(_number(v, 0) for v in (d.output_p10, d.output_p50, d.output_p90, d.output_max))}
               for d in summary.lengths]
    agreement = None
    if summary.agreement is not None:
        a = summary.agreement
        agreement = (f"{_share(a.same_length_share)} of {a.matched:,} requests answered under two K or more had the "
                     f"same output length in every K, {_share(a.same_text_share)} the same text (hashed)"
                     if a.matched else "no request was answered under two K: nothing to compare")
    categories = ", ".join(f"{name or 'no category'} {count:,}" for name, count in summary.categories.items())
    restarts = (f"each user ran through the set at most {summary.restarts + 1:,} times (it started again "
                f"{summary.restarts:,} times)" if summary.restarts else "no user reached the end of the set")
    return {
        "source": summary.source, "size": f"{summary.size:,}" if summary.size else MISSING,
        "fingerprint": summary.fingerprint or MISSING, "categories": categories or MISSING,
        "outputs": ("natural: each request ended at its end of sequence, capped by its own max_tokens"
                    if summary.natural_output else "exact: every request forced to load.output_tokens"),
        "sent": f"{summary.sent:,}", "restarts": restarts,
        "acceptance_source": summary.acceptance_source_text,
        "flag": ("the runner added --per-request-spec-decode-metrics summary to every life with K > 0"
                 if summary.spec_metrics_flag_added else "not added: this vLLM does not list "
                 "--per-request-spec-decode-metrics"),
        "acceptance": acceptance, "level": f"{100 * summary.interval_level:g} %", "speeds": _speed_rows(summary),
        "baseline_k": MISSING if summary.baseline_k is None else f"K={summary.baseline_k}",
        "tie_band": MISSING if summary.tie_band is None else f"±{100 * summary.tie_band:g} %",
        "gain_users": MISSING if summary.gain_users is None else f"{summary.gain_users:,}",
        "verdicts": [v.text for v in summary.verdicts] + ([summary.mix_verdict] if summary.mix_verdict else []),
        "lengths": lengths, "agreement": agreement,
    }
