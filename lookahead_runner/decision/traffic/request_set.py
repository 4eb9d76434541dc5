"""What a request set measured beside the verdict (decision.json `request_set`, issue 28). Pure: frames in.

- Acceptance per category and K from each response's own metrics (the requests.csv spec_* columns, vLLM 0.32's
  --per-request-spec-decode-metrics): the acceptance length = 1 + sum(accepted) / sum(draft steps) over the
  category's requests (every draft step once, as the server's counters pool them); request-weighted = the mean of
  each request's own acceptance length (every request once); token-weighted = that mean weighted by each request's
  output tokens (every token once: long completions weigh more). Intervals: requests resampled (bootstrap).
- The best K per category: the decision's objective over one category's requests in the valid windows at the
  decision's users, per K, against the baseline K; only categories with enough requests in every such K.
- Natural outputs across K: request indices answered under two K or more; the same length / text (hashed) in all.
- The set's prompt and output length distributions (usage counts), and how often a user ran through the set.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .schema import (MIX, BestByCategory, CategoryAcceptance, CategoryGain, LengthDistribution, OutputAgreement,
                     RequestSetSummary)
from ..schema import Range
from ..cells.stats import interval

RESAMPLES = 400
LEVEL = 0.9
MIN_CATEGORY_REQUESTS = 20     # in the windows at the decision's users, per K, for a category's own best K
SOURCE_TEXT = {
    "per-request": "each response's own metrics (--per-request-spec-decode-metrics summary)",
    "counters": "the server's counters (spec_decode accepted / drafts over each window): no acceptance per request "
                "or category without --per-request-spec-decode-metrics (vLLM 0.32+)",
    "none": "no speculation measured",
}


@dataclass(frozen=True)
class LifeRequests:
    """One server life of the sweep: every request row it wrote, and its valid windows (users, seconds, the
    successful requests that finished in it)."""

    k: int
    repeat: int
    requests: pd.DataFrame
    windows: Sequence[tuple[int, float, pd.DataFrame]] = ()


def _ok(frame: pd.DataFrame) -> pd.DataFrame:
    if frame.empty or "ok" not in frame:
        return frame.iloc[0:0]
    return frame[pd.to_numeric(frame["ok"], errors="coerce") == 1]


def _column(frame: pd.DataFrame, name: str) -> np.ndarray:
    if name not in frame:
        return np.full(len(frame), np.nan)
    return pd.to_numeric(frame[name], errors="coerce").to_numpy(dtype=float)


def _categories(frame: pd.DataFrame) -> pd.Series:
    return frame["category"].fillna("").astype(str) if "category" in frame else pd.Series("", index=frame.index)


def _range(draws: np.ndarray) -> Range:
    bounds = interval(draws, LEVEL)
    return Range(low=bounds.low, high=bounds.high)


def acceptance_of(category: str, k: int, frame: pd.DataFrame, rng: np.random.Generator) -> CategoryAcceptance | None:
    """The acceptance lengths of these requests (pooled over draft steps, per request, per output token), with
    their bootstrap intervals; None without per-request metrics."""
    steps, accepted = _column(frame, "spec_steps"), _column(frame, "spec_accepted_tokens")
    own, tokens = _column(frame, "spec_acceptance_length"), _column(frame, "output_tokens")
    keep = np.isfinite(steps) & np.isfinite(accepted) & np.isfinite(own) & np.isfinite(tokens) & (steps > 0)
    steps, accepted, own, tokens = steps[keep], accepted[keep], own[keep], tokens[keep]
    if not len(steps):
        return None
    draws = rng.integers(0, len(steps), size=(RESAMPLES, len(steps)))
    pooled = 1.0 + accepted[draws].sum(axis=1) / steps[draws].sum(axis=1)
    weighted = (own[draws] * tokens[draws]).sum(axis=1) / np.maximum(tokens[draws].sum(axis=1), 1.0)
    return CategoryAcceptance(category=category, k=k, requests=int(len(steps)),
                              acceptance_length=float(1.0 + accepted.sum() / steps.sum()),
                              acceptance_length_range=_range(pooled),
                              request_weighted=float(own.mean()), request_weighted_range=_range(own[draws].mean(axis=1)),
                              token_weighted=float((own * tokens).sum() / max(tokens.sum(), 1.0)),
                              token_weighted_range=_range(weighted))


def acceptance_table(lives: Sequence[LifeRequests], seed: int = 0) -> list[CategoryAcceptance]:
    """Per category and K (categories in the set's order of appearance), then the whole mix per K."""
    rng = np.random.default_rng(seed)
    by_k: dict[int, list[pd.DataFrame]] = {}
    for life in lives:
        if life.k > 0:
            by_k.setdefault(life.k, []).append(_ok(life.requests))
    out: list[CategoryAcceptance] = []
    mixes: list[CategoryAcceptance] = []
    for k in sorted(by_k):
        frame = pd.concat(by_k[k], ignore_index=True)
        categories = _categories(frame)
        for category in [c for c in dict.fromkeys(categories) if c]:
            row = acceptance_of(category, k, frame[categories == category], rng)
            if row is not None:
                out.append(row)
        mix = acceptance_of(MIX, k, frame, rng)
        if mix is not None:
            mixes.append(mix)
    return out + mixes


def _objective(ok: pd.DataFrame, duration_s: float, objective: str) -> float:
    if objective == "output_tok_per_s":
        return float(np.nansum(_column(ok, "output_tokens"))) / duration_s
    return len(ok) / duration_s


def category_gains(lives: Sequence[LifeRequests], users: int | None, objective: str,
                   least: int = MIN_CATEGORY_REQUESTS) -> tuple[list[CategoryGain], list[BestByCategory]]:
    """Each category's objective per K at `users` (mean over repeats), its gain against the lowest K, and its
    best K where every K had `least` requests of it there."""
    if users is None:
        return [], []
    values: dict[tuple[str, int], list[float]] = {}
    counts: dict[tuple[str, int], int] = {}
    for life in lives:
        for window_users, duration_s, ok in life.windows:
            if window_users != users or duration_s <= 0:
                continue
            categories = _categories(ok)
            for category in [c for c in dict.fromkeys(categories) if c]:
                mine = ok[categories == category]
                values.setdefault((category, life.k), []).append(_objective(mine, duration_s, objective))
                counts[(category, life.k)] = counts.get((category, life.k), 0) + len(mine)
    if not values:
        return [], []
    ks = sorted({k for _, k in values})
    baseline = ks[0]
    gains, best = [], []
    for category in dict.fromkeys(c for c, _ in values):
        means = {k: float(np.mean(values[(category, k)])) for k in ks if (category, k) in values}
        base = means.get(baseline)
        for k, value in means.items():
            gain = None if k == baseline or not base else 100.0 * (value / base - 1.0)
            gains.append(CategoryGain(category=category, k=k, requests=counts[(category, k)], objective=value,
                                      gain_pct=gain))
        if len(means) == len(ks) and base and all(counts[(category, k)] >= least for k in ks):
            top = max(means, key=lambda k: means[k])
            best.append(BestByCategory(category=category, k=top,
                                       gain_pct=None if top == baseline else 100.0 * (means[top] / base - 1.0)))
    return gains, best


def best_line(best: Sequence[BestByCategory], mix_k: int | None) -> str:
    """"code: K=4 +38 %; chat: K=2 +6 %; the mix: K=4" (no gain figure for the baseline K)."""
    def one(b: BestByCategory) -> str:
        gain = f" {b.gain_pct:+.0f} %" if b.gain_pct is not None else ""
        return f"{b.category}: K={b.k}{gain}"

    parts = [one(b) for b in best]
    if parts:
        parts.append(f"{MIX}: K={mix_k}" if mix_k is not None else f"{MIX}: not decided")
    return "; ".join(parts)


def _quantiles(values: np.ndarray) -> list[float | None]:
    values = values[np.isfinite(values)]
    if not len(values):
        return [None] * 4
    return [float(v) for v in np.quantile(values, [0.1, 0.5, 0.9])] + [float(values.max())]


def length_distributions(lives: Sequence[LifeRequests]) -> list[LengthDistribution]:
    frames = [_ok(life.requests) for life in lives]
    frame = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    if frame.empty:
        return []
    categories = _categories(frame)
    out = []
    for category in [c for c in dict.fromkeys(categories) if c] + [MIX]:
        mine = frame if category == MIX else frame[categories == category]
        prompt, output = _quantiles(_column(mine, "prompt_tokens")), _quantiles(_column(mine, "output_tokens"))
        out.append(LengthDistribution(category=category, requests=len(mine),
                                      prompt_p10=prompt[0], prompt_p50=prompt[1], prompt_p90=prompt[2],
                                      prompt_max=prompt[3], output_p10=output[0], output_p50=output[1],
                                      output_p90=output[2], output_max=output[3]))
    return out


def output_agreement(lives: Sequence[LifeRequests]) -> OutputAgreement | None:
    """Request indices answered under two K or more, and in how many every answer had one length / one text."""
    rows = []
    for life in lives:
        ok = _ok(life.requests)
        if ok.empty or "request_index" not in ok:
            continue
        rows.append(pd.DataFrame({"k": life.k, "index": _column(ok, "request_index"),
                                  "tokens": _column(ok, "output_tokens"),
                                  "hash": ok["output_hash"].fillna("").astype(str) if "output_hash" in ok else ""}))
    if not rows:
        return None
    frame = pd.concat(rows, ignore_index=True)
    frame = frame[np.isfinite(frame["index"])]
    grouped = frame.groupby("index").agg(ks=("k", "nunique"), lengths=("tokens", "nunique"), texts=("hash", "nunique"))
    matched = grouped[grouped["ks"] >= 2]
    return OutputAgreement(matched=int(len(matched)), same_length=int((matched["lengths"] == 1).sum()),
                           same_text=int((matched["texts"] == 1).sum()))


def acceptance_source(lives: Sequence[LifeRequests]) -> str:
    speculating = [life for life in lives if life.k > 0]
    if not speculating:
        return "none"
    has = any(np.isfinite(_column(_ok(life.requests), "spec_steps")).any() for life in speculating)
    return "per-request" if has else "counters"


def summarise(lives: Sequence[LifeRequests], *, source: str, size: int, fingerprint: str = "",
              categories: dict[str, int] | None = None, natural_output: bool = False, flag_added: bool = False,
              users: int | None = None, objective: str = "req_per_s", mix_k: int | None = None) -> RequestSetSummary:
    how = acceptance_source(lives)
    gains, best = category_gains(lives, users, objective)
    restarts = 0
    sent = 0
    for life in lives:
        rounds = _column(life.requests, "set_round")
        rounds = rounds[np.isfinite(rounds)]
        restarts = max(restarts, int(rounds.max()) if len(rounds) else 0)
        sent += len(_ok(life.requests))
    return RequestSetSummary(
        source=source, size=size, fingerprint=fingerprint, categories=dict(categories or {}),
        natural_output=natural_output, acceptance_source=how, acceptance_source_text=SOURCE_TEXT[how],
        spec_metrics_flag_added=flag_added, acceptance=acceptance_table(lives) if how == "per-request" else [],
        gains=gains, best_by_category=best, best_line=best_line(best, mix_k), gain_users=users,
        lengths=length_distributions(lives), agreement=output_agreement(lives) if natural_output else None,
        restarts=restarts, sent=sent)
