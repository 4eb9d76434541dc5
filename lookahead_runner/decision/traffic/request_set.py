"""What a request set measured beside the verdict (decision.json `request_set`, issue 28). Pure: frames in.

- Acceptance per category and K from each response's own metrics (the requests.csv spec_* columns, vLLM 0.32's
  --per-request-spec-decode-metrics): the acceptance length = 1 + sum(accepted) / sum(draft steps) over the
  category's requests (every draft step once, as the server's counters pool them); request-weighted = the mean of
  each request's own acceptance length (every request once, its answers averaged); token-weighted = the answers'
  own acceptance lengths weighted by their output tokens (every token once: long completions weigh more).
  Intervals: the set's requests resampled, each with every answer it got (by_request.py), at the decision's
  interval level: answering the same requests again does not narrow them (issue 36).
- Per category, its own per-request speed per K and a verdict (category_speed.py): in a closed loop a category's
  throughput only repeats the mix's.
- Natural outputs across K: request indices answered under two K or more; the same length / text (hashed) in all.
- The set's prompt and output length distributions (usage counts), and how often a user ran through the set.
"""
from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .by_request import categories_of, column, ok_rows, per_request, ratio, request_keys, resampled_sums
from .category_speed import judge_categories, life_noise
from .schema import (MIX, SUMMARY_VERSION, CategoryAcceptance, LengthDistribution, OutputAgreement,
                     RequestSetSummary)
from ..cells.evidence import Cell
from ..cells.stats import interval
from ..schema import Range
from ...config import DecisionConfig

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


def _range(draws: np.ndarray, level: float) -> Range:
    bounds = interval(draws, level)
    return Range(low=bounds.low, high=bounds.high)


def _acceptance_values(frame: pd.DataFrame) -> tuple[pd.DataFrame, np.ndarray]:
    """The rows that carry per-request metrics, and per row: draft steps, accepted tokens, its own acceptance
    length, that times its output tokens, its output tokens, 1 (what the three figures sum, by request)."""
    steps, accepted = column(frame, "spec_steps"), column(frame, "spec_accepted_tokens")
    own, tokens = column(frame, "spec_acceptance_length"), column(frame, "output_tokens")
    keep = np.isfinite(steps) & np.isfinite(accepted) & np.isfinite(own) & np.isfinite(tokens) & (steps > 0)
    values = np.column_stack([steps, accepted, own, own * tokens, tokens, np.ones(len(frame))])[keep]
    return frame[keep], values


def _by_request(keys: np.ndarray, values: np.ndarray) -> np.ndarray:
    """_acceptance_values' columns summed per request, its own acceptance length there the mean over its answers
    (request-weighted counts every request once, however often it was answered), then 1 per request."""
    block = per_request(keys, values, np.unique(keys))
    block[:, 2] /= block[:, 5]
    return np.column_stack([block, np.ones(len(block))])


def _acceptance(category: str, k: int, total: np.ndarray, draws: np.ndarray, distinct: int,
                level: float) -> CategoryAcceptance:
    """The three figures from summed columns (as measured: `total`; resampled: `draws`, resamples x columns)."""
    def figures(sums: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        sums = np.atleast_2d(sums)
        return (1.0 + ratio(sums[:, 1], sums[:, 0]), ratio(sums[:, 2], sums[:, 6]),
                ratio(sums[:, 3], np.maximum(sums[:, 4], 1.0)))

    point, drawn = figures(total), figures(draws)
    return CategoryAcceptance(category=category, k=k, requests=int(total[5]), distinct_requests=distinct,
                              acceptance_length=float(point[0][0]), acceptance_length_range=_range(drawn[0], level),
                              request_weighted=float(point[1][0]), request_weighted_range=_range(drawn[1], level),
                              token_weighted=float(point[2][0]), token_weighted_range=_range(drawn[2], level))


def acceptance_table(lives: Sequence[LifeRequests], p: DecisionConfig | None = None) -> list[CategoryAcceptance]:
    """Per category and K (categories in the set's order of appearance), then the whole mix per K. Each category
    resamples its own requests; the mix sums its categories' draws (a category's share is the file's)."""
    p = p or DecisionConfig()
    rng = np.random.default_rng(p.seed)
    by_k: dict[int, list[pd.DataFrame]] = {}
    for life in lives:
        if life.k > 0:
            by_k.setdefault(life.k, []).append(ok_rows(life.requests))
    out: list[CategoryAcceptance] = []
    mixes: list[CategoryAcceptance] = []
    for k in sorted(by_k):
        frame, values = _acceptance_values(pd.concat(by_k[k], ignore_index=True))
        if not len(frame):
            continue
        keys, categories = request_keys(frame), categories_of(frame).to_numpy()
        mix, mix_total = np.zeros((p.resamples, values.shape[1] + 1)), np.zeros(values.shape[1] + 1)
        for category in dict.fromkeys(categories):      # "" (no category) is a stratum of the mix
            mine = categories == category
            block = _by_request(keys[mine], values[mine])
            draws = resampled_sums([block], p.resamples, rng)[0]
            mix, mix_total = mix + draws, mix_total + block.sum(axis=0)
            if category:
                out.append(_acceptance(category, k, block.sum(axis=0), draws, len(block), p.interval_level))
        mixes.append(_acceptance(MIX, k, mix_total, mix, len(np.unique(keys)), p.interval_level))
    return out + mixes


def _quantiles(values: np.ndarray) -> list[float | None]:
    values = values[np.isfinite(values)]
    if not len(values):
        return [None] * 4
    return [float(v) for v in np.quantile(values, [0.1, 0.5, 0.9])] + [float(values.max())]


def length_distributions(lives: Sequence[LifeRequests]) -> list[LengthDistribution]:
    frames = [ok_rows(life.requests) for life in lives]
    frame = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    if frame.empty:
        return []
    categories = categories_of(frame)
    out = []
    for category in [c for c in dict.fromkeys(categories) if c] + [MIX]:
        mine = frame if category == MIX else frame[categories == category]
        prompt, output = _quantiles(column(mine, "prompt_tokens")), _quantiles(column(mine, "output_tokens"))
        out.append(LengthDistribution(category=category, requests=len(mine),
                                      prompt_p10=prompt[0], prompt_p50=prompt[1], prompt_p90=prompt[2],
                                      prompt_max=prompt[3], output_p10=output[0], output_p50=output[1],
                                      output_p90=output[2], output_max=output[3]))
    return out


def output_agreement(lives: Sequence[LifeRequests]) -> OutputAgreement | None:
    """Request indices answered under two K or more, and in how many every answer had one length / one text."""
    rows = []
    for life in lives:
        ok = ok_rows(life.requests)
        if ok.empty or "request_index" not in ok:
            continue
        rows.append(pd.DataFrame({"k": life.k, "index": column(ok, "request_index"),
                                  "tokens": column(ok, "output_tokens"),
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
    has = any(np.isfinite(column(ok_rows(life.requests), "spec_steps")).any() for life in speculating)
    return "per-request" if has else "counters"


def summarise(lives: Sequence[LifeRequests], *, source: str, size: int, fingerprint: str = "",
              categories: dict[str, int] | None = None, natural_output: bool = False, flag_added: bool = False,
              users: int | None = None, decision: DecisionConfig | None = None, mix_k: int | None = None,
              baseline_k: int | None = None, eligible: Collection[int] | None = None,
              cells: Mapping[int, Cell] | None = None) -> RequestSetSummary:
    """`decision`: its interval level, resamples, seed, tie band and noise model; `cells`: the decision's cells at
    `users` (each K's server-life noise); `mix_k`: the verdict's K; `eligible`: the K no gate blocks there."""
    p = decision or DecisionConfig()
    how = acceptance_source(lives)
    acceptance = acceptance_table(lives, p) if how == "per-request" else []
    by_category = judge_categories(lives, users, p, acceptance, baseline_k=baseline_k, verdict_k=mix_k,
                                   eligible=eligible, noise=life_noise(cells or {}, p))
    restarts = 0
    sent = 0
    for life in lives:
        rounds = column(life.requests, "set_round")
        rounds = rounds[np.isfinite(rounds)]
        restarts = max(restarts, int(rounds.max()) if len(rounds) else 0)
        sent += len(ok_rows(life.requests))
    return RequestSetSummary(
        summary_version=SUMMARY_VERSION, source=source, size=size, fingerprint=fingerprint,
        categories=dict(categories or {}), natural_output=natural_output, acceptance_source=how,
        acceptance_source_text=SOURCE_TEXT[how], spec_metrics_flag_added=flag_added, acceptance=acceptance,
        interval_level=p.interval_level, speeds=by_category.speeds, verdicts=by_category.verdicts,
        baseline_k=by_category.baseline_k, tie_band=p.tie_tolerance_frac, mix_verdict=by_category.mix,
        best_line=by_category.line, gain_users=users, lengths=length_distributions(lives),
        agreement=output_agreement(lives) if natural_output else None, restarts=restarts, sent=sent)
