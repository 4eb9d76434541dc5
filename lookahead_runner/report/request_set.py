"""The report's "Your requests" section: what decision.json's `request_set` says, as display strings.

Pure: the typed summary in, text out (the template escapes it).
"""
from __future__ import annotations

from ..decision.traffic.schema import MIX, RequestSetSummary
from ..decision.schema import Range
from .cells import MISSING


def _number(value: float | None, digits: int = 2) -> str:
    return MISSING if value is None else f"{value:,.{digits}f}"


def _range(r: Range) -> str:
    if r.low is None or r.high is None:
        return "[unbounded]"
    return f"[{r.low:.2f}, {r.high:.2f}]"


def _share(value: float | None) -> str:
    return MISSING if value is None else f"{100 * value:.1f} %"


def request_set_view(summary: RequestSetSummary | None) -> dict | None:
    if summary is None:
        return None
    acceptance = [{"category": a.category, "k": a.k, "requests": f"{a.requests:,}", "mix": a.category == MIX,
                   "pooled": f"{a.acceptance_length:.2f} {_range(a.acceptance_length_range)}",
                   "token": f"{a.token_weighted:.2f} {_range(a.token_weighted_range)}",
                   "request": f"{a.request_weighted:.2f} {_range(a.request_weighted_range)}",
                   "direction": ("token > request" if a.token_weighted > a.request_weighted
                                 else "request > token" if a.request_weighted > a.token_weighted else "equal")}
                  for a in summary.acceptance]
    gains = [{"category": g.category, "k": g.k, "requests": f"{g.requests:,}", "objective": _number(g.objective),
              "gain": "baseline" if g.gain_pct is None else f"{g.gain_pct:+.1f} %"} for g in summary.gains]
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
        "acceptance": acceptance, "gains": gains, "gain_users": MISSING if summary.gain_users is None
        else f"{summary.gain_users:,}", "best_line": summary.best_line, "lengths": lengths, "agreement": agreement,
    }
