"""Held-out validation of the performance model: each stage, then each K, left out of the fit and
predicted from the rest, against the measured req/s of every window of it (a cell's repeats averaged).

A stage left out is an unseen concurrency (the top stage is an extrapolation), a K left out an unseen
setting: its acceptance comes only from the other K's counters, its KV pool from a line through theirs.
Nothing of the held-out windows enters the fit it is judged by. The model is trusted only when the
median error of every held-out prediction is within the stated bound.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from .acceptance import PositionCounts, fit_acceptance
from .fit import Obs, WorkloadShape, fit_params, pool_at, predict_draws, stack

SCHEME_STAGE, SCHEME_K = "stage", "K"
MIN_HELD_OUT = 3
MIN_KS_FOR_K_SCHEME = 3       # a K left out of two leaves one: its draft cost cannot be told from the rest


@dataclass(frozen=True)
class HeldOut:
    scheme: str                   # "stage" (a stage left out) or "K" (a K left out)
    k: int
    users: int
    predicted_requests_per_s: float
    measured_requests_per_s: float

    @property
    def error(self) -> float:
        """Signed relative error of the prediction (+ = predicted too high)."""
        return self.predicted_requests_per_s / self.measured_requests_per_s - 1.0


def mean_output_tokens(obs: Sequence[Obs], shape: WorkloadShape) -> float:
    values = [o.output_tokens for o in obs if math.isfinite(o.output_tokens) and o.output_tokens > 0]
    return float(np.mean(values)) if values else float(shape.output_tokens)


def point_fit(obs: Sequence[Obs], positions: Mapping[int, PositionCounts] | None, shape: WorkloadShape):
    """The fit on `obs` alone -> its point prediction of req/s at (k, users)."""
    acceptance = fit_acceptance(obs, positions)
    params = stack([fit_params(obs, acceptance, shape)])
    output_tokens = mean_output_tokens(obs, shape)

    def req_per_s(k: int, users: int) -> float:
        return float(predict_draws(params, k, users, acceptance.tokens_per_decode_step(k, output_tokens - 1), shape,
                                   output_tokens,
                                   pool_at(obs, k)).req_per_s[0])

    return req_per_s


def _measured(obs: Sequence[Obs]) -> dict[tuple[int, int], float]:
    cells: dict[tuple[int, int], list[float]] = {}
    for o in obs:
        if o.req_per_s > 0:
            cells.setdefault((o.k, o.users), []).append(o.req_per_s)
    return {key: float(np.mean(v)) for key, v in cells.items()}


def held_out(obs: Sequence[Obs], positions: Mapping[int, PositionCounts] | None,
             shape: WorkloadShape) -> list[HeldOut]:
    measured = _measured(obs)
    stages = sorted({u for _, u in measured})
    ks = sorted({k for k, _ in measured})
    out = []
    if len(stages) >= 2:
        for users in stages:
            rest = [o for o in obs if o.users != users]
            predict = point_fit(rest, positions, shape)
            for k in ks:
                if (k, users) in measured and any(o.k == k for o in rest):
                    out.append(HeldOut(SCHEME_STAGE, k, users, predict(k, users), measured[(k, users)]))
    if len(ks) >= MIN_KS_FOR_K_SCHEME:
        for k in ks:
            rest = [o for o in obs if o.k != k]
            predict = point_fit(rest, {x: c for x, c in (positions or {}).items() if x != k}, shape)
            for users in stages:
                if (k, users) in measured:
                    out.append(HeldOut(SCHEME_K, k, users, predict(k, users), measured[(k, users)]))
    return out


@dataclass(frozen=True)
class Trust:
    trusted: bool
    reason: str
    median_error: float | None    # median |relative error| of the held-out predictions
    worst_error: float | None
    count: int


def summarize(errors: Sequence[float]) -> tuple[float | None, float | None]:
    finite = [abs(e) for e in errors if math.isfinite(e)]
    return (float(np.median(finite)), float(max(finite))) if finite else (None, None)


@dataclass(frozen=True)
class ErrorAt:
    """The largest held-out error of the model where a prediction is used, and where the figure comes from."""

    value: float | None           # the largest |relative error|
    scope: str = ""               # "" = at that concurrency; else the wider set it was taken over
    errors: tuple[float, ...] = ()  # each relative error it is the largest of (perfmodel/prior.py's bound)


def error_at(results: Sequence[HeldOut], users: int) -> ErrorAt:
    """The largest |error| of the held-out predictions at `users` (every K there, a stage or a K left out); with none
    there, the largest over every held-out prediction, saying so; with the errors themselves, on which a K is ruled
    out (perfmodel/prior.skip_bound: not the largest, which a new error drawn as theirs passes with probability
    1/(n + 1), nor the median, which half of them pass)."""
    errors = tuple(r.error for r in results if r.users == users and math.isfinite(r.error))
    if errors:
        return ErrorAt(summarize(errors)[1], "", errors)
    errors = tuple(r.error for r in results if math.isfinite(r.error))
    return ErrorAt(summarize(errors)[1], f"over every held-out prediction, none at {users} users", errors)


def trust(results: Sequence[HeldOut], bound: float) -> Trust:
    """Trusted when the held-out predictions of each scheme (stages left out, K left out), apart, have a
    median error within the bound: an easy scheme cannot carry a failing one."""
    median, worst = summarize([r.error for r in results])
    if median is None or len(results) < MIN_HELD_OUT:
        return Trust(False, f"not trusted: {len(results)} held-out predictions, at least {MIN_HELD_OUT} are needed "
                            "(measure at least 2 stages or 3 K)", median, worst, len(results))
    by_scheme = {scheme: summarize([r.error for r in results if r.scheme == scheme])[0]
                 for scheme in (SCHEME_STAGE, SCHEME_K) if any(r.scheme == scheme for r in results)}
    parts = ", ".join(f"{scheme} left out {error:.1%}" for scheme, error in by_scheme.items())
    stated = (f"held-out req/s error {median:.1%} median ({parts}), {worst:.1%} worst over {len(results)} "
              f"predictions; bound {bound:.0%} on each median")
    if any(error > bound for error in by_scheme.values()):
        return Trust(False, f"not trusted: {stated}", median, worst, len(results))
    return Trust(True, f"trusted: {stated}", median, worst, len(results))
