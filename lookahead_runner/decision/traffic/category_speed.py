"""What K does for each category of a request set (decision.json `request_set.speeds` / `verdicts`, issue 36).

Users walk the set in a fixed order (a closed loop), so a category's completions per window are the mix's rate
times its share of the set: its throughput gets the mix's gain in expectation, and a category's "best K" by
throughput is the mix's plus window-composition noise. What differs between categories under one K is how fast
each of their requests is served, and their acceptance: every request shares the batch and its steps, and a step
advances a request by its own accepted drafts + 1. So a category is judged by its own per-request speed: output
tokens per second of a request (1 / its e2e per token) in the valid windows at the decision's users, every request
once (SpeedDraws). TPOT p50 is shown beside it.

- Against the baseline K: requests resampled, the same requests under every K (by_request.py), times each K's
  server-life factor as the decision draws it for a cell's latencies (decision/cells/measure.py: Student's t with
  the cell's relative throughput SE, plus the restart spread where one server life stands behind a cell).
- Beside the mix at the same K: (1 + its gain) / (1 + the mix's gain) - 1; the life factor is common to both
  and cancels.
- The verdict per category, at the verdict's K: more or less than the mix beyond the tie band
  (decision.tie_tolerance_frac) with its interval, within the tie band (its interval inside it), or not told apart;
  and its own best K (the decision's rule: the smallest K within the tie band of the best speed, among the K no
  gate blocks at the target) where that K beats the verdict's beyond the tie band with its interval. Where the
  verdict's K is the baseline (or none), the category's K are judged against the baseline alone.
Pure: frames in.
"""
from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .by_request import categories_of, column, per_request, ratio, request_keys, resampled_sums
from .schema import MIX, CategoryAcceptance, CategorySpeed, CategoryVerdict
from ..cells.evidence import Cell
from ..cells.measure import PreparedCell, throughput_noises
from ..cells.stats import Bounds, interval
from ..explanation.text import pct
from ..schema_base import Range
from ...config import DecisionConfig

MIN_DISTINCT = 10   # a category's requests at a K below which its figures there are not judged (nor resampled)
LIFE_STREAM = 36    # the life factors' generator, apart from the requests' draws


@dataclass(frozen=True)
class LifeNoise:
    """How far one K's server life may land from its measured speed: the relative SE of its cell's throughput
    (df: its Student's t) and the restart spread per server life where one life stands behind the cell."""

    se: float = math.nan
    df: int = 0
    restart_se: float = 0.0

    def draw(self, rng: np.random.Generator, count: int) -> np.ndarray:
        """Factors of the speed, as PreparedCell.draws draws a cell's throughput (its latencies are divided by it)."""
        if math.isnan(self.se) or not self.df:
            return np.ones(count)
        factor = 1 + self.se * rng.standard_t(self.df, count)
        if self.restart_se:
            factor = factor + self.restart_se * rng.standard_normal(count)
        return np.maximum(factor, 0.01)


def life_noise(cells: Mapping[int, Cell], p: DecisionConfig) -> dict[int, LifeNoise]:
    """Each K's LifeNoise from the decision's own cells at the target users (its noise model, pooled over K)."""
    prepared = {k: PreparedCell(cell, p.slos, p.bin_min_s) for k, cell in cells.items()}
    if not prepared:
        return {}
    _, by_k = throughput_noises(prepared, p.restart_prior(), p.one_life_per_k)
    return {k: LifeNoise(cell.relative_se(by_k[k]), by_k[k].df, cell.restart_se(by_k[k]))
            for k, cell in prepared.items()}


def _answers(lives: Sequence, users: int) -> pd.DataFrame:
    """Every successful answer in the valid windows at `users`: its K, request, category, speed and TPOT."""
    parts = []
    for life in lives:
        for window_users, duration_s, ok in life.windows:
            if window_users != users or duration_s <= 0 or not len(ok):
                continue
            tokens, e2e_s = column(ok, "output_tokens"), column(ok, "e2e_ms") / 1000.0
            with np.errstate(all="ignore"):
                speed = np.where((tokens > 0) & (e2e_s > 0), tokens / e2e_s, np.nan)
            parts.append(pd.DataFrame({"k": life.k, "request_index": column(ok, "request_index"),
                                       "category": categories_of(ok).to_numpy(), "speed": speed,
                                       "tpot": column(ok, "tpot_ms")}))
    if not parts:
        return pd.DataFrame(columns=["k", "key", "category", "speed", "tpot"])
    frame = pd.concat(parts, ignore_index=True)
    frame["key"] = request_keys(frame)   # over every window at once: a row without an index stays its own request
    return frame[np.isfinite(frame["speed"].to_numpy(dtype=float))]


class SpeedDraws:
    """Per category and K: the speed as measured, its resampled values (requests drawn within each category, the
    same draws under every K) and its answers. A category's speed is the mean over its requests of each request's
    mean over its answers (every request once: a request answered twice in one window and once in another does not
    move it). The mix (MIX) is the categories' speeds weighted by their shares of the requests answered: the same
    weights under every K, so a window that happened to complete more of a fast category does not make the mix
    faster (a mean over the answers would). Two K's mixes are compared over the categories both answered (`pair`):
    a category one K's windows missed (users walk the set in order) must not change the mix's composition."""

    def __init__(self, answers: pd.DataFrame, resamples: int, rng: np.random.Generator) -> None:
        self.ks = sorted(int(k) for k in answers["k"].unique())
        self.strata = list(dict.fromkeys(answers["category"]))      # "" (no category) is a stratum of the mix
        self.categories = [c for c in self.strata if c]
        self.resamples = resamples
        self.point: dict[tuple[str, int], float] = {}
        self.draws: dict[tuple[str, int], np.ndarray] = {}
        self.answers: dict[tuple[str, int], int] = {}
        self.distinct: dict[tuple[str, int], int] = {}
        self.tpot: dict[tuple[str, int], float | None] = {}
        for category in self.strata:
            mine = answers[answers["category"] == category]
            requests = np.unique(mine["key"].to_numpy(dtype=float))
            blocks = []
            for k in self.ks:
                at = mine[mine["k"] == k]
                values = np.column_stack([at["speed"].to_numpy(dtype=float), np.ones(len(at))])
                sums = per_request(at["key"].to_numpy(dtype=float), values, requests)
                answered = sums[:, 1] > 0      # per request: its mean speed here, and 1 where it was answered
                blocks.append(np.column_stack([ratio(sums[:, 0], sums[:, 1]), answered]).astype(float))
                blocks[-1][~answered, 0] = 0.0
                self._count(category, k, at)
            for k, block, sums in zip(self.ks, blocks, resampled_sums(blocks, resamples, rng)):
                self._keep(category, k, block.sum(axis=0), sums)
        self.weight = {c: float(answers.loc[answers["category"] == c, "key"].nunique()) for c in self.strata}
        for k in self.ks:
            self._count(MIX, k, answers[answers["k"] == k])
            self.point[(MIX, k)], self.draws[(MIX, k)] = self._mix(k, self._answered(k))

    def pair(self, category: str, k: int, other: int) -> tuple[float, float, np.ndarray, np.ndarray]:
        """The speed at `k` and at `other`, as measured and resampled; MIX over the categories both answered."""
        if category != MIX:
            return (self.point[(category, k)], self.point[(category, other)], self.draws[(category, k)],
                    self.draws[(category, other)])
        both = self._answered(k, other)
        (point, draws), (other_point, other_draws) = self._mix(k, both), self._mix(other, both)
        return point, other_point, draws, other_draws

    def _answered(self, *ks: int) -> list[str]:
        return [c for c in self.strata if all(self.answers[(c, k)] for k in ks)]

    def _mix(self, k: int, strata: Sequence[str]) -> tuple[float, np.ndarray]:
        """The strata's speeds at `k` at their shares of the requests."""
        if not strata:
            return math.nan, np.full(self.resamples, np.nan)
        weights = [self.weight[c] for c in strata]
        return (_weighted([self.point[(c, k)] for c in strata], weights),
                _weighted(np.stack([self.draws[(c, k)] for c in strata]), weights))

    def _count(self, category: str, k: int, at: pd.DataFrame) -> None:
        self.answers[(category, k)] = len(at)
        self.distinct[(category, k)] = int(at["key"].nunique())
        tpot = at["tpot"].to_numpy(dtype=float)
        tpot = tpot[np.isfinite(tpot)]
        self.tpot[(category, k)] = float(np.median(tpot)) if len(tpot) else None

    def _keep(self, category: str, k: int, total: np.ndarray, sums: np.ndarray) -> None:
        self.point[(category, k)] = float(total[0] / total[1]) if total[1] else math.nan
        self.draws[(category, k)] = ratio(sums[:, 0], sums[:, 1])


class CategoryJudge:
    """The speeds table and the verdicts from one SpeedDraws, the decision's config and its life noise."""

    def __init__(self, speeds: SpeedDraws, p: DecisionConfig, noise: Mapping[int, LifeNoise], baseline_k: int | None,
                 verdict_k: int | None, eligible: Collection[int] | None) -> None:
        self.s, self.p, self.tie = speeds, p, p.tie_tolerance_frac
        self.base = baseline_k if baseline_k in speeds.ks else (speeds.ks[0] if speeds.ks else None)
        self.k = verdict_k if verdict_k in speeds.ks else None
        self.eligible = [k for k in speeds.ks if eligible is None or k in eligible or k == self.base]
        life_rng = np.random.default_rng([p.seed, LIFE_STREAM])
        self.factor = {k: noise.get(k, LifeNoise()).draw(life_rng, p.resamples) for k in speeds.ks}

    def enough(self, category: str, k: int | None) -> bool:
        return k is not None and self.s.distinct.get((category, k), 0) >= MIN_DISTINCT

    def _relative(self, category: str, k: int, other: int) -> tuple[float, Bounds]:
        """Speed at `k` over speed at `other`, less 1, as measured and its interval (each life's factor drawn)."""
        point, other_point, draws, other_draws = self.s.pair(category, k, other)
        with np.errstate(all="ignore"):
            draws = (draws * self.factor[k]) / (other_draws * self.factor[other]) - 1
        return point / other_point - 1, interval(draws, self.p.interval_level)

    def _vs_mix(self, category: str, k: int) -> tuple[float, Bounds]:
        """(1 + the category's gain at k) / (1 + the mix's) - 1: the life factors cancel."""
        s, b = self.s, self.base
        mix, mix_base, mix_draws, mix_base_draws = s.pair(MIX, k, b)
        point = (s.point[(category, k)] / mix) / (s.point[(category, b)] / mix_base) - 1
        with np.errstate(all="ignore"):
            draws = (s.draws[(category, k)] / mix_draws) / (s.draws[(category, b)] / mix_base_draws) - 1
        return point, interval(draws, self.p.interval_level)

    def table(self) -> list[CategorySpeed]:
        out = []
        for category in self.s.categories + [MIX]:
            for k in self.s.ks:
                if (category, k) not in self.s.point:
                    continue
                row = CategorySpeed(category=category, k=k, requests=self.s.answers[(category, k)],
                                    distinct_requests=self.s.distinct[(category, k)],
                                    speed=_finite(self.s.point[(category, k)]), tpot_p50_ms=self.s.tpot[(category, k)])
                if category == MIX or self.enough(category, k):
                    row.speed_range = _range(interval(self.s.draws[(category, k)] * self.factor[k],
                                                      self.p.interval_level))
                if k != self.base and (category == MIX or (self.enough(category, k) and
                                                           self.enough(category, self.base))):
                    gain, bounds = self._relative(category, k, self.base)
                    row.gain, row.gain_range = _finite(gain), _range(bounds)
                    if category != MIX:
                        vs_mix, bounds = self._vs_mix(category, k)
                        row.vs_mix, row.vs_mix_range = _finite(vs_mix), _range(bounds)
                out.append(row)
        return out

    def own_best(self, category: str) -> int | None:
        """The decision's pick on this category's speed: the smallest K within the tie band of the best."""
        speeds = {k: self.s.point[(category, k)] for k in self.eligible if self.enough(category, k)}
        if not speeds:
            return None
        best = max(speeds.values())
        return min(k for k, v in speeds.items() if v >= best / (1 + self.tie))

    def verdict(self, category: str, acceptance: Mapping[tuple[str, int], float]) -> CategoryVerdict:
        b, k = self.base, self.k
        out = CategoryVerdict(category=category, k=k)
        if not self.enough(category, b):
            out.text = f"{category}: too few of its requests at K={b} ({self.s.distinct.get((category, b), 0)}, " \
                       f"{MIN_DISTINCT} needed)"
            return out
        if k is not None and k != b and self.enough(category, k):
            text, reference, joint = self._beside_mix(category, out), k, ";"
        else:   # the verdict's K is the baseline, none, or has too few of its requests: against the baseline alone
            text, reference, joint = f"{category}:", b, ""
            if k is not None and k != b:
                text += f" too few of its requests at K={k} ({self.s.distinct.get((category, k), 0)});"
        best = self.own_best(category)
        if best is not None and best != reference:
            better, bounds = self._relative(category, best, reference)
            if bounds.low is not None and bounds.low > self.tie:
                out.best_k, out.best_gain, out.best_gain_range = best, _finite(better), _range(bounds)
                text += (f"{joint} its own best K={best}: {pct(better, True)} {_bracket(bounds)} per request over "
                         f"K={reference}")
        if reference == b and out.best_k is None:
            text += " " + self._against_baseline(category)
        accepted_at = k or out.best_k    # acceptance exists at K > 0 only
        if accepted_at and (category, accepted_at) in acceptance:
            out.acceptance_length = acceptance[(category, accepted_at)]
            out.mix_acceptance_length = acceptance.get((MIX, accepted_at))
            mix = f" (the mix {out.mix_acceptance_length:.2f})" if out.mix_acceptance_length is not None else ""
            text += f"; acceptance length {out.acceptance_length:.2f} at K={accepted_at}{mix}"
        out.text = text
        return out

    def _beside_mix(self, category: str, out: CategoryVerdict) -> str:
        """Its gain at the verdict's K and how it stands beside the mix's (sets out.relation)."""
        tie, b, k = self.tie, self.base, self.k
        gain, bounds = self._relative(category, k, b)
        mix = pct(self._relative(MIX, k, b)[0], True)
        diff, apart = self._vs_mix(category, k)
        text = f"{category}: {pct(gain, True)} {_bracket(bounds)} per request at K={k}"
        if apart.bounded and -tie <= apart.low and apart.high <= tie:
            out.relation = "within the tie band"
            return text + f", within the tie band (±{pct(tie)}) of the mix's {mix}"
        more, less = apart.low is not None and apart.low > tie, apart.high is not None and apart.high < -tie
        if more or less:
            out.relation = "more than the mix" if more else "less than the mix"
            return text + f", {out.relation}'s {mix} by {pct(diff, True)} {_bracket(apart)}"
        out.relation = "not told apart"
        return text + (f", not told apart from the mix's {mix} ({pct(diff, True)} {_bracket(apart)} against the "
                       f"±{pct(tie)} tie band)")

    def _against_baseline(self, category: str) -> str:
        """Where no K beats the baseline for it: within the tie band at every K (intervals inside it), or not."""
        others = [k for k in self.eligible if k != self.base and self.enough(category, k)]
        figures = {k: self._relative(category, k, self.base) for k in others}
        if others and all(b.bounded and -self.tie <= b.low and b.high <= self.tie for _, b in figures.values()):
            return f"within the tie band (±{pct(self.tie)}) of K={self.base} at every K"
        if not others:
            return f"no other K with {MIN_DISTINCT} of its requests"
        each = ", ".join(f"K={k}: {pct(gain, True)} {_bracket(bounds)}" for k, (gain, bounds) in figures.items())
        return f"no K beats K={self.base} beyond the ±{pct(self.tie)} tie band and the noise ({each})"

    def mix_text(self) -> str:
        if self.k is None:
            return f"{MIX}: not decided"
        if self.k == self.base:
            return f"{MIX}: K={self.k}"
        gain, bounds = self._relative(MIX, self.k, self.base)
        return f"{MIX}: K={self.k}, {pct(gain, True)} {_bracket(bounds)} per request against K={self.base}"


@dataclass(frozen=True)
class CategoryFigures:
    speeds: list[CategorySpeed]
    verdicts: list[CategoryVerdict]
    mix: str = ""                     # the mix's K and its per-request gain
    baseline_k: int | None = None

    @property
    def line(self) -> str:
        return "; ".join([v.text for v in self.verdicts] + [self.mix]) if self.verdicts else ""


def judge_categories(lives: Sequence, users: int | None, p: DecisionConfig, acceptance: Sequence[CategoryAcceptance],
                     *, baseline_k: int | None = None, verdict_k: int | None = None,
                     eligible: Collection[int] | None = None, noise: Mapping[int, LifeNoise] | None = None
                     ) -> CategoryFigures:
    """Per category and K the speeds table, per category its verdict (`lives`: LifeRequests)."""
    answers = _answers(lives, users) if users is not None else pd.DataFrame()
    if answers.empty:
        return CategoryFigures([], [])
    speeds = SpeedDraws(answers, p.resamples, np.random.default_rng(p.seed))
    judge = CategoryJudge(speeds, p, noise or {}, baseline_k, verdict_k, eligible)
    accepted = {(a.category, a.k): a.acceptance_length for a in acceptance}
    verdicts = [judge.verdict(category, accepted) for category in speeds.categories]
    return CategoryFigures(judge.table(), verdicts, judge.mix_text(), judge.base)


def _weighted(values, weights):
    """The weighted mean over the first axis, NaN values (a draw without such a request) left out."""
    values, weights = np.asarray(values, dtype=float), np.asarray(weights, dtype=float)
    if not values.size:
        return math.nan
    weights = np.where(np.isfinite(values), weights.reshape((-1,) + (1,) * (values.ndim - 1)), 0.0)
    with np.errstate(all="ignore"):
        out = np.nansum(values * weights, axis=0) / weights.sum(axis=0)
    return float(out) if np.ndim(out) == 0 else np.where(weights.sum(axis=0) > 0, out, np.nan)


def _finite(value: float) -> float | None:
    return None if value is None or not math.isfinite(value) else float(value)


def _range(bounds: Bounds) -> Range:
    return Range(low=bounds.low, high=bounds.high)


def _bracket(bounds: Bounds) -> str:
    if not bounds.bounded:
        return "[unbounded]"
    return f"[{pct(bounds.low, True)}, {pct(bounds.high, True)}]"
