"""A fitted performance model of one run: predicted req/s, output tokens/s and TTFT/TPOT percentiles, with
intervals, for any (K, users), and which K is best at a concurrency no stage ran.

    model = fit_performance_model(evidence, WorkloadShape(prompt_tokens, output_tokens, max_num_seqs), positions)
    model.trusted, model.predict(k, users), model.best_k_at(users)

The parts and their fit: perfmodel_fit.py; the held-out validation that decides `trusted`:
perfmodel_check.py. Intervals are the bootstrap refits' (windows resampled within each cell, each K's level drawn
at its lives' spread or the restart spread: fit.bootstrap), widened
by the held-out median error: the fit's own scatter understates a model's error. Everything here is
a prediction; the decision engine decides on measured windows, and an untrusted model drives nothing.
"""
from __future__ import annotations

import dataclasses
import hashlib
import importlib.metadata
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from ..cells.evidence import Evidence
from .trust import ErrorAt, HeldOut, Trust, error_at, held_out, mean_output_tokens, trust
from .acceptance import Acceptance, PositionCounts, fit_acceptance
from .fit import Draws, Obs, Params, WorkloadShape, bootstrap, observations, pool_at, predict_draws

__all__ = ["Bound", "FitStore", "PerformanceModel", "PositionCounts", "Prediction", "WorkloadShape",
           "fit_performance_model"]

FIT_VERSION = 3             # raise when the fit's parts change: a kept fit of another version (or release) is not used
DEFAULT_ERROR_BOUND = 0.10
TIE_FRAC = 0.03          # objectives within this are a tie: the smaller K (the decision's tie band)
LEVEL = 0.95


@dataclass(frozen=True)
class Prediction:
    """One (K, users), predicted. Units are in the names; `_low`/`_high` bound a 95 % interval."""

    k: int
    users: int
    requests_per_s: float
    requests_per_s_low: float
    requests_per_s_high: float
    output_tokens_per_s: float
    output_tokens_per_s_low: float
    output_tokens_per_s_high: float
    ttft_p50_ms: float
    ttft_p50_ms_low: float
    ttft_p50_ms_high: float
    ttft_p90_ms: float
    ttft_p90_ms_low: float
    ttft_p90_ms_high: float
    tpot_p50_ms: float
    tpot_p50_ms_low: float
    tpot_p50_ms_high: float
    tpot_p90_ms: float
    tpot_p90_ms_low: float
    tpot_p90_ms_high: float
    real_batch: float
    kv_batch_limit: float           # the largest real batch this K's KV pool (and --max-num-seqs) allows
    kv_usage: float                 # predicted mean KV usage, 0..1 (nan when the run had no KV signals)
    preempting: bool                # the KV usage peak would reach the pool: preemptions start
    tokens_per_step: float          # expected tokens a sequence gains per verification step
    step_ms: float
    extrapolated: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Bound:
    """Point and interval of one predicted figure."""

    value: float
    low: float
    high: float


@dataclass(eq=False)
class PerformanceModel:
    shape: WorkloadShape
    acceptance: Acceptance
    params: Params                   # every bootstrap draw; draw 0 is the fit on all windows
    obs: list[Obs]
    output_tokens: float             # mean output tokens per request, as measured
    held_out: list[HeldOut]
    verdict: Trust
    error_bound: float

    @property
    def trusted(self) -> bool:
        return self.verdict.trusted

    @property
    def trust_reason(self) -> str:
        return self.verdict.reason

    @property
    def heldout_error(self) -> float | None:
        return self.verdict.median_error

    @property
    def heldout_worst(self) -> float | None:
        return self.verdict.worst_error

    def heldout_error_at(self, users: int) -> ErrorAt:
        """The held-out error at `users` (trust.error_at): the figure a K is ruled out against there."""
        return error_at(self.held_out, users)

    @property
    def ks(self) -> list[int]:
        return sorted({o.k for o in self.obs})

    @property
    def users(self) -> list[int]:
        return sorted({o.users for o in self.obs})

    def pool_tokens(self, k: int) -> float:
        return pool_at(self.obs, k)

    def draws(self, k: int, users: int) -> Draws:
        if k < 0 or users < 1:
            raise ValueError(f"predict(k={k}, users={users}): K must be >= 0 and users >= 1")
        return predict_draws(self.params, k, users, self.acceptance.tokens_per_decode_step(k, self.output_tokens - 1),
                             self.shape, self.output_tokens, self.pool_tokens(k))

    def _bound(self, values: np.ndarray, widen: bool = True) -> Bound:
        point = float(values[0])
        finite = values[np.isfinite(values)]
        if not len(finite) or not math.isfinite(point):
            return Bound(point, math.nan, math.nan)
        tail = (1 - LEVEL) / 2
        low, high = float(np.quantile(finite, tail)), float(np.quantile(finite, 1 - tail))
        error = (self.heldout_error or 0.0) if widen else 0.0
        return Bound(point, min(low, point * (1 - error)), max(high, point * (1 + error)))

    def preempting(self, draws: Draws) -> np.ndarray:
        return np.nan_to_num(draws.kv_usage * self.params.kv_peak_ratio, nan=0.0) >= 1.0

    def extrapolation(self, k: int, users: int, draws: Draws | None = None) -> list[str]:
        """Where a prediction leaves what the windows showed: a regime they never reached (a roofline bend,
        the KV pool filling) can start there unseen, and no held-out check covers it."""
        notes = []
        if self.users and users > max(self.users):
            notes.append(f"users {users} beyond the highest stage measured ({max(self.users)}), "
                         f"x{users / max(self.users):.2g}")
        elif self.users and users < min(self.users):
            notes.append(f"users {users} below the lowest stage measured ({min(self.users)})")
        if self.ks and k not in self.ks:
            side = "beyond the largest" if k > max(self.ks) else "between the measured"
            notes.append(f"K={k} not measured ({side} K {self.ks})")
        if k > 0 and self.acceptance.extrapolates(k):
            notes.append(f"acceptance of draft positions {self.acceptance.positions_observed + 1}..{k} extrapolated "
                         f"(observed up to {self.acceptance.positions_observed})")
        if k > 0 and self.acceptance.source == "none":
            notes.append("no acceptance was measured: 1 token per step assumed")
        if draws is not None and self.obs:
            verified = float(draws.real_batch[0]) * (k + 1)
            seen = max(o.running * (o.k + 1) for o in self.obs if math.isfinite(o.running))
            if verified > seen * 1.05:
                notes.append(f"{verified:.0f} verified tokens per step, beyond the {seen:.0f} measured: the step "
                             "time there is extrapolated")
            usage = float(draws.kv_usage[0])
            usage_seen = max((o.kv_usage_mean for o in self.obs if math.isfinite(o.kv_usage_mean)), default=math.nan)
            if math.isfinite(usage) and math.isfinite(usage_seen) and usage > usage_seen * 1.05:
                notes.append(f"KV usage {usage:.0%} beyond the {usage_seen:.0%} measured")
        return notes

    def predict(self, k: int, users: int) -> Prediction:
        return self._prediction(k, users, self.draws(k, users))

    def predict_many(self, k: int, users: Sequence[int]) -> list[Prediction]:
        """`predict` at each of `users`, the closed loop solved for all of them at once."""
        if not users:
            return []
        if k < 0 or min(users) < 1:
            raise ValueError(f"predict(k={k}, users={list(users)}): K must be >= 0 and users >= 1")
        d = predict_draws(self.params, k, np.asarray(users, dtype=float)[:, None],
                          self.acceptance.tokens_per_decode_step(k, self.output_tokens - 1), self.shape,
                          self.output_tokens, self.pool_tokens(k))
        return [self._prediction(k, u, Draws(*(np.broadcast_to(getattr(d, f.name), d.req_per_s.shape)[i]
                                                 for f in dataclasses.fields(Draws))))
                for i, u in enumerate(users)]

    def _prediction(self, k: int, users: int, d: Draws) -> Prediction:
        p = self.params
        req, tok = self._bound(d.req_per_s), self._bound(d.req_per_s * self.output_tokens)
        ttft50, ttft90 = self._bound(d.ttft_ms * p.ttft_p50_ratio), self._bound(d.ttft_ms * p.ttft_p90_ratio)
        tpot50, tpot90 = self._bound(d.tpot_ms * p.tpot_p50_ratio), self._bound(d.tpot_ms * p.tpot_p90_ratio)
        return Prediction(
            k=k, users=users, requests_per_s=req.value, requests_per_s_low=req.low, requests_per_s_high=req.high,
            output_tokens_per_s=tok.value, output_tokens_per_s_low=tok.low, output_tokens_per_s_high=tok.high,
            ttft_p50_ms=ttft50.value, ttft_p50_ms_low=ttft50.low, ttft_p50_ms_high=ttft50.high,
            ttft_p90_ms=ttft90.value, ttft_p90_ms_low=ttft90.low, ttft_p90_ms_high=ttft90.high,
            tpot_p50_ms=tpot50.value, tpot_p50_ms_low=tpot50.low, tpot_p50_ms_high=tpot50.high,
            tpot_p90_ms=tpot90.value, tpot_p90_ms_low=tpot90.low, tpot_p90_ms_high=tpot90.high,
            real_batch=float(d.real_batch[0]), kv_batch_limit=float(d.kv_batch_limit[0]),
            kv_usage=float(d.kv_usage[0]), preempting=bool(self.preempting(d)[0]),
            tokens_per_step=self.acceptance.tokens_per_step(k), step_ms=float(d.step_ms[0]),
            extrapolated=self.extrapolation(k, users, d))

    def candidate_ks(self) -> list[int]:
        return list(range(0, max(self.ks, default=0) + 1))

    def choices(self, users: int, ks: Sequence[int] | None = None) -> tuple[list[int], np.ndarray]:
        """The K each draw picks at `users`: the best req/s among K the KV pool does not preempt (all K when
        every K would), the smallest K within the tie band."""
        ks = list(ks) if ks is not None else self.ks
        if not ks:
            raise ValueError("best_k_at: no K to choose from")
        draws = [self.draws(k, users) for k in ks]
        objective = np.array([d.req_per_s for d in draws])             # K x draws
        blocked = np.array([self.preempting(d) for d in draws])
        objective = np.where(blocked & ~blocked.all(axis=0), -np.inf, objective)
        best = objective.max(axis=0)
        within = objective >= best * (1 - TIE_FRAC)
        return ks, np.array(ks)[within.argmax(axis=0)]                   # first (smallest) K within the band

    def best_k_at(self, users: int, ks: Sequence[int] | None = None) -> tuple[int, float]:
        """(the best K at `users`, the share of the bootstrap refits that pick it); among the measured K unless
        `ks` names others."""
        _, picks = self.choices(users, ks)
        k = int(picks[0])
        return k, float(np.mean(picks == k))


class FitStore(Protocol):
    """Where fitted parts are kept between reports (run/verdict/perfmodel_run.py: a file in the run folder)."""

    def get(self, key: str) -> tuple[Params, list[HeldOut]] | None: ...

    def put(self, key: str, params: Params, results: list[HeldOut]) -> None: ...


def _release() -> str:
    """The installed release of the package: another one's fit code may differ without FIT_VERSION raised."""
    try:
        return importlib.metadata.version("lookahead-runner")
    except importlib.metadata.PackageNotFoundError:
        return ""


def fit_key(obs: Sequence[Obs], positions: Mapping[int, PositionCounts] | None, shape: WorkloadShape, seed: int,
            resamples: int, restart_spread: float = 0.0, one_life_per_k: bool = False) -> str:
    """A hash of everything the bootstrap and the held-out fits read: the same key, the same fit (the error bound
    and the decision's thresholds are not in it: they judge the fit, they do not change it)."""
    inputs = [FIT_VERSION, _release(), [dataclasses.astuple(o) for o in obs],
              sorted((k, c.drafts, list(c.accepted)) for k, c in (positions or {}).items()),
              dataclasses.astuple(shape), seed, resamples, restart_spread, one_life_per_k]
    return hashlib.sha256(json.dumps(inputs).encode()).hexdigest()


def fit_performance_model(evidence: Evidence, shape: WorkloadShape,
                          positions: Mapping[int, PositionCounts] | None = None, *,
                          error_bound: float = DEFAULT_ERROR_BOUND, seed: int = 0,
                          resamples: int = 200, store: FitStore | None = None,
                          restart_spread: float = 0.0, one_life_per_k: bool = False) -> PerformanceModel:
    """Fit every part on every valid window, bootstrap it, and validate it held-out (pure; `store` keeps the
    bootstrap and the held-out fits under their inputs' hash, so the same inputs are not fitted twice).
    `restart_spread`: the relative SD of one server life's throughput the decision takes for a K measured on one
    life (decision.json's measured restart spread, else decision.restart_prior()): the refits draw such a K's life
    at it (fit.bootstrap); `one_life_per_k`: every repeat of a K ran on one server life (same-server repeats)."""
    obs = [o for o in observations(evidence) if o.req_per_s > 0]
    acceptance = fit_acceptance(obs, positions)
    key = fit_key(obs, positions, shape, seed, resamples, restart_spread, one_life_per_k) if store is not None else ""
    kept = store.get(key) if store is not None else None
    if kept is not None:
        params, results = kept
    else:
        params = bootstrap(obs, acceptance, shape, resamples, seed, restart_spread, one_life_per_k)
        results = held_out(obs, positions, shape)
        if store is not None:
            store.put(key, params, results)
    return PerformanceModel(shape=shape, acceptance=acceptance, params=params, obs=obs,
                            output_tokens=mean_output_tokens(obs, shape), held_out=results,
                            verdict=trust(results, error_bound), error_bound=error_bound)
