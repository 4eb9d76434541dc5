"""The performance model as a prior in the adaptive sweep (pure): which K not run yet it rules out, and on what
prediction.

The claim: a K is ruled out on the model's word only where the model is trusted, and either its KV pool is predicted
to fill at the target (the memory gate would block it), or all of these hold:
- the model states its held-out errors (`ModelView.heldout_errors`: each held-out prediction's at the target's
  concurrency, or every one when none is there, and says which) and the chance the rule may take (`skip_level`);
- the most the K can measure given those errors (`skip_bound`: a new error drawn as theirs misses by more than it
  with probability `skip_level`, by Student's t on their scale; an error is predicted / measured - 1, so its
  prediction / (1 - bound)), and its interval's top, stay below the leader's figure less the tie band, both as the
  model predicts them (a bias the model has at the target is shared by every K and cancels; the leader's own
  prediction, or its measured figure where the model has none, or none that is a number), so it is behind by more
  than the bound;
- its prediction and interval are numbers (one that is not says nothing about the K);
- K measured at the target lie on both sides of it: a K beyond every K measured is never ruled out, its prediction
  being an extrapolation no held-out check covers.
So a K that would beat the leader is ruled out with probability at most `skip_level` (where the model's errors at the
target are normal about zero, as its held-out ones; a bias shared by every K only widens the bound). The largest of
n held-out errors, the bound before, is passed by the next with probability 1/(n + 1): a quarter of the time on the
3 to 6 a target holds. Anything else the model says only orders the K that could still win. The chooser
(decision/adaptive.py) runs a K ruled out after all when the verdict comes to hang on it.
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache

from scipy import stats

from ..explanation.text import pct


@dataclass(frozen=True)
class Prediction:
    """The performance model's objective at the target for one K, with its interval."""

    objective: float
    low: float
    high: float
    preempting: bool = False    # the KV pool would fill at the target: the memory gate would block it


@dataclass(frozen=True)
class ModelView:
    """What the performance model says about K not run yet; `trusted` false = it drives nothing."""

    trusted: bool = False
    predictions: Mapping[int, Prediction] = field(default_factory=dict)
    why_not: str = "no performance model"
    production_best: int | None = None     # its best K at decision.production_users (when that is set)
    # the largest |relative error| of its held-out req/s predictions at the target (trust.error_at), and where it
    # comes from when not at the target ("" = at the target)
    heldout_error: float | None = None
    error_scope: str = ""
    unit: str = ""                         # the objective's unit, for the words ("req/s")
    heldout_errors: tuple[float, ...] = ()  # those relative errors, each (the skip's bound is formed on them)
    # the chance a K that would beat the leader is ruled out (the early-stop bar's error: adaptive_sweep.view_of);
    # None: nothing ruled out on its objective
    skip_level: float | None = None


@dataclass(frozen=True)
class ModelSkip:
    """A K the model ruled out, with the figures it was ruled out on (plan.json keeps them, the report says them)."""

    k: int
    predicted: float
    low: float
    high: float
    leader: int
    leader_predicted: float     # the leader's figure as the model predicts it (its measured one where it has none)
    leader_measured: float
    heldout_error: float | None
    error_scope: str = ""       # "" = at the target
    unit: str = ""
    kv_fills: bool = False      # ruled out because its KV pool is predicted to fill at the target
    bound: float | None = None  # the error it was given (skip_bound; None: a record from before the bound)
    level: float | None = None  # ... exceeded with this probability
    count: int = 0              # ... on this many held-out errors

    @property
    def behind(self) -> float:
        """How far its prediction is behind the leader's, as a fraction of the leader's."""
        return 1 - self.predicted / self.leader_predicted if self.leader_predicted > 0 else float("nan")


def as_skip(saved) -> ModelSkip:
    """A ModelSkip from anything with its fields (plan.json's record of one)."""
    return saved if isinstance(saved, ModelSkip) else ModelSkip(**{f.name: getattr(saved, f.name)
                                                                    for f in dataclasses.fields(ModelSkip)})


def skip_text(skip: ModelSkip) -> str:
    """One K ruled out, in words: "K=8 not run: the model predicts 41.2 req/s [38.0, 44.1] against 52.3 for the leader
    K=4 (measured 52.3), 21% behind, more than the 11.7% its 6 held-out errors at the target allow (a larger miss 1
    time in 100; the largest 7.8%)"."""
    unit = f" {skip.unit}" if skip.unit else ""
    predicted = f"{skip.predicted:.1f}{unit} [{skip.low:.1f}, {skip.high:.1f}]"
    if skip.kv_fills:
        return f"K={skip.k} not run: the model predicts its KV pool fills at the target ({predicted})"
    where = skip.error_scope or "at the target"
    said = (f"K={skip.k} not run: the model predicts {predicted} against {skip.leader_predicted:.1f} for the leader "
            f"K={skip.leader} (measured {skip.leader_measured:.1f}), {pct(skip.behind)} behind, more than ")
    if skip.bound is None or skip.level is None:
        return f"{said}its largest held-out error, {pct(skip.heldout_error, digits=1)} {where}"
    where = f"({skip.error_scope})" if skip.error_scope else "at the target"
    return (f"{said}the {pct(skip.bound, digits=1)} its {skip.count} held-out errors {where} allow (a larger miss 1 "
            f"time in {1 / skip.level:.0f}; the largest {pct(skip.heldout_error, digits=1)})")


def leader_mark(model: ModelView, leader: int, measured: float) -> float:
    """The leader's figure as the model predicts it (its measured one where it predicts none): a K is held against it
    so that a bias shared by every K at the target cancels (e.g. +9 % at stop-mid's 48 users, fitted on 12 and 24
    too, made a K the model ranks clearly below the leader look able to beat its measured figure)."""
    predicted = model.predictions.get(leader)
    usable = predicted is not None and math.isfinite(predicted.objective) and predicted.objective > 0
    return predicted.objective if usable and measured > 0 else measured


def reach(prediction: Prediction, error: float | None) -> float:
    """The highest figure the model allows the K: its interval's top, or the most its truth can be given the held-out
    error (an error is predicted / measured - 1, so a prediction at most `error` too low: prediction / (1 - error)).
    Unbounded where the prediction is not a number or the error reaches 100 %: the model then says nothing of it."""
    figures = (prediction.objective, prediction.low, prediction.high)
    if not all(math.isfinite(x) for x in figures) or (error or 0.0) >= 1:
        return math.inf
    return max(prediction.high, prediction.objective / (1 - (error or 0.0)))


@lru_cache(maxsize=256)
def _t_quantile(level: float, count: int) -> float:
    return float(stats.t.ppf(1 - level, count))


def skip_bound(model: ModelView) -> float | None:
    """The error a K's prediction is given before it is ruled out: the held-out errors' root mean square (about zero,
    so a bias the model has at the target widens it) times Student's t quantile at 1 - `skip_level` on as many degrees
    of freedom as errors. A new error drawn as theirs (normal about zero) falls below -bound with probability
    `skip_level` exactly, whatever their scale. None (nothing ruled out on it) without errors or a level."""
    errors = [e for e in model.heldout_errors if math.isfinite(e)]
    level = model.skip_level
    if not errors or level is None or not 0 < level < 1:
        return None
    return math.sqrt(sum(e * e for e in errors) / len(errors)) * _t_quantile(level, len(errors))


def ruled_out(untried: Iterable[int], leader: int, leader_measured: float, measured: Iterable[int], model: ModelView,
              tie_tolerance: float) -> dict[int, ModelSkip]:
    """The K of `untried` the model rules out (module docstring), each with the figures it was ruled out on."""
    if not model.trusted:
        return {}
    mark = leader_mark(model, leader, leader_measured)
    bound = skip_bound(model)
    seen = list(measured)
    out = {}
    for k in untried:
        p = model.predictions.get(k)
        if p is None:
            continue
        skip = ModelSkip(k, p.objective, p.low, p.high, leader, mark, leader_measured, model.heldout_error,
                         model.error_scope, model.unit, kv_fills=p.preempting, bound=bound, level=model.skip_level,
                         count=sum(math.isfinite(e) for e in model.heldout_errors))
        inside = any(m < k for m in seen) and any(m > k for m in seen)
        if p.preempting or (bound is not None and inside and reach(p, bound) < mark / (1 + tie_tolerance)):
            out[k] = skip
    return out
