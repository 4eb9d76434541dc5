"""The performance model's predictions (decision.json `performance_model`), held against a known performance curve.

Claims checked:
- each req/s interval the model prints (its curves, the production point; perfmodel/model.py, at its LEVEL, 95 %)
  holds the true curve: at a measured stage, between two measured stages, at 1.5 x the highest stage (the curves'
  reach, an extrapolation) and for a K no life measured; one K drawn per trial and place, so no trial counts twice;
- the held-out error at the target (trust.error_at, what the prior rules a K out against, perfmodel/prior.py): a
  prediction of a K not measured misses the truth by more than the largest held-out error there at most
  1 / (n + 1) of the time (n: the held-out predictions it is the largest of; the rate trust.error_at states), scored
  where the model is trusted (an untrusted model rules nothing out); every model's shown beside it;
- "trusted" (the median held-out error of each scheme within decision.model_error_bound): no rate is stated, so
  how often a trusted model's true median error over the same kind of predictions (each stage and each K left
  out, predicted by the fit on all the rest, against the true curve) is beyond the bound is shown, and how often an
  untrusted one's is within it.

A trial's world (`draw`): the model's own equations (perfmodel/fit.predict_draws) run forward with parameters drawn
around a plausible server (step costs, draft cost per K, a roofline knee or none, per-position acceptance
alpha^i with alpha 0.5-0.9, the KV pool shrinking with K), so the curve is known exactly. K 0, 1, 2, 4, 8 with one
of 1, 2, 4 not measured; 2-4 stages up to 16-64 users; 1-3 lives per cell, each life at its own speed (the
simulator's lognormal draw, restart spread 1-15 %: every step cost of that life / its speed), completions a
Poisson count over a 10-120 s window, latencies with a lognormal per-request scatter. The true curve is the mean
over lives (quadrature over the speed's law). Per-position counters from 10^4 drafts per K.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

from lookahead_runner.decision import Window

from . import adapters
from .intervals import holds
from .lives import life_speeds
from .regimes import Named, log_uniform
from .tally import COVERAGE, ERROR, SHOWN, Tallies

FAMILY_INTERVAL, FAMILY_FINDING = "interval", "finding"
LADDER = (0, 1, 2, 4, 8)
UNMEASURED = (1, 2, 4)
STAGE_SHARES = (0.125, 0.25, 0.5, 1.0)
REACH = 1.5                 # the curves run to 1.5 x the highest stage (perfmodel/uses.CURVE_REACH)
SPEED_NODES = 32            # quadrature over a life's speed: the curve's mean to ~1e-4 at a 15 % spread
DRAFTS = 10_000             # per-position counters' drafts per K
LATENCY_SIGMA = 0.2         # per-request scatter of TTFT and TPOT


@dataclass(frozen=True)
class ModelRegime:
    params: object              # perfmodel Params, the true server
    alpha: float
    pool: dict[int, float]
    measured_ks: tuple[int, ...]
    unmeasured_k: int
    stages: tuple[int, ...]
    lives: int
    spread: float
    window_s: float
    named: Named = Named()


def draw(rng: np.random.Generator) -> ModelRegime:
    knee = log_uniform(rng, 100, 400) if rng.uniform() < 0.5 else math.inf
    step_ms, per_k, per_seq = log_uniform(rng, 4, 16), log_uniform(rng, 0.3, 3), log_uniform(rng, 0.02, 0.2)
    params = adapters.model_params(
        step_ms=step_ms, step_ms_per_k=per_k, step_ms_per_seq=per_seq, step_ms_per_token=log_uniform(rng, 0.005, 0.05),
        step_ms_per_token_past_knee=0.1 if math.isfinite(knee) else 0.0, knee_tokens=knee,
        step_ms_per_prefill_token=0.03, ttft_ms=20.0, ttft_steps=1.5, client_ms=3.0,
        running_share=0.95, kv_tokens_per_seq=200.0, kv_tokens_per_seq_per_k=1.0, kv_peak_ratio=1.1,
        tpot_p50_ratio=1.0, tpot_p90_ratio=1.0, ttft_p50_ratio=1.0, ttft_p90_ratio=1.0)
    alpha = rng.uniform(0.5, 0.9)
    pool = {k: 40_000.0 - 1500.0 * k for k in LADDER}
    unmeasured = int(rng.choice(UNMEASURED))
    top = int(2 ** rng.integers(4, 7))
    count = int(rng.integers(2, 5))
    stages = tuple(sorted({max(1, round(top * s)) for s in STAGE_SHARES[-count:]}))
    lives = int(rng.integers(1, 4))
    spread = log_uniform(rng, 0.01, 0.15)
    window_s = log_uniform(rng, 10, 120)
    named = Named({"stages": str(len(stages)), "lives": str(lives),
                   "spread": "1-5%" if spread < 0.05 else "5-15%", "window": "10-30s" if window_s < 30 else "30-120s",
                   "knee": "yes" if math.isfinite(knee) else "none", "K not measured": str(unmeasured)})
    return ModelRegime(params, alpha, pool, tuple(k for k in LADDER if k != unmeasured), unmeasured, stages, lives,
                       spread, window_s, named)


def _at_speed(params, speeds: np.ndarray):
    """The true parameters for lives at these speeds (every step cost / speed), one draw per speed."""
    slow = {name: getattr(params, name) / speeds for name in
            ("step_ms", "step_ms_per_k", "step_ms_per_seq", "step_ms_per_token", "step_ms_per_token_past_knee",
             "step_ms_per_prefill_token")}
    others = {f.name: np.full(len(speeds), float(getattr(params, f.name))) for f in dataclasses.fields(params)
              if f.name not in slow}
    return type(params)(**slow, **others)


def _served(r: ModelRegime, k: int, users, speeds: np.ndarray):
    """Lives at `speeds` (one each) at every one of `users`: perf_fit.Draws of users x lives."""
    column = np.asarray(users, dtype=float).reshape(-1, 1)
    return adapters.model_truth(_at_speed(r.params, speeds), k, column, r.alpha, r.pool[k])


def true_rates(r: ModelRegime, k: int, users) -> np.ndarray:
    """At each of `users`: the mean over lives of the req/s a life serves at K (quadrature over the speed's law)."""
    sigma = math.sqrt(math.log1p(r.spread ** 2))
    u = (np.arange(SPEED_NODES) + 0.5) / SPEED_NODES
    speeds = np.exp(-sigma * sigma / 2 + sigma * stats.norm.ppf(u))
    rates = np.broadcast_to(_served(r, k, users, speeds).req_per_s, (len(np.atleast_1d(users)), SPEED_NODES))
    return rates.mean(axis=1)


def true_rate(r: ModelRegime, k: int, users: float) -> float:
    return float(true_rates(r, k, [users])[0])


def windows(r: ModelRegime, rng: np.random.Generator) -> list[Window]:
    out = []
    tokens = float(adapters.MODEL_SHAPE.output_tokens)
    for k in r.measured_ks:
        speeds = life_speeds(rng, r.spread, r.lives)
        lives = _served(r, k, r.stages, speeds)
        shape = (len(r.stages), r.lives)
        for repeat in range(r.lives):
            for s, users in enumerate(r.stages):
                d = type(lives)(**{f.name: np.broadcast_to(getattr(lives, f.name), shape)[s, repeat:repeat + 1]
                                   for f in dataclasses.fields(lives)})
                rate, step = float(d.req_per_s[0]), float(d.step_ms[0])
                n = max(2, int(rng.poisson(rate * r.window_s)))
                ttft = float(d.ttft_ms[0]) * rng.lognormal(-LATENCY_SIGMA ** 2 / 2, LATENCY_SIGMA, n)
                tpot = float(d.tpot_ms[0]) * rng.lognormal(-LATENCY_SIGMA ** 2 / 2, LATENCY_SIGMA, n)
                e2e = ttft + (tokens - 1) * tpot
                queue = max(0.0, float(d.ttft_ms[0]) - r.params.ttft_ms - r.params.ttft_steps * step)
                usage = float(d.kv_usage[0])
                server = {"running_mean": float(d.real_batch[0]), "waiting_mean": queue * rate / 1000.0,
                          "kv_usage_mean": usage, "kv_usage_peak": usage * 1.1, "kv_pool_tokens": r.pool[k],
                          "preemptions": 1.0 if usage * 1.1 >= 1 else 0.0, "gpu_mem_peak_mib": 70000.0,
                          "gpu_mem_total_mib": 81920.0,
                          "mean_acceptance_length": adapters.model_tokens_per_step(r.alpha, k) if k else math.nan,
                          "acceptance_rate": r.alpha if k else math.nan}
                out.append(Window(k=k, repeat=repeat, users=users, duration_s=r.window_s,
                                  t_done_s=np.sort(rng.uniform(0, r.window_s, n)), output_tokens=np.full(n, tokens),
                                  latency_ms=np.column_stack([ttft, tpot, tpot * 1.6, e2e]), finished=n, failures=0,
                                  timeouts=0, server=server))
    return out


def positions(r: ModelRegime, rng: np.random.Generator) -> dict[int, tuple[float, tuple[float, ...]]]:
    """Per measured K > 0: drafts and per-position accepted counts (position i accepted with alpha^(i+1))."""
    return {k: (float(DRAFTS), tuple(float(rng.binomial(DRAFTS, r.alpha ** (i + 1))) for i in range(k)))
            for k in r.measured_ks if k}


def _between(stages: tuple[int, ...], rng: np.random.Generator) -> int | None:
    gaps = [(a, b) for a, b in zip(stages, stages[1:]) if b - a >= 2]
    if not gaps:
        return None
    a, b = gaps[int(rng.integers(len(gaps)))]
    return int(round(math.sqrt(a * b)))


def trial(rng: np.random.Generator, tallies: Tallies) -> None:
    r = draw(rng)
    model = adapters.fit_model(windows(r, rng), max(r.stages), positions(r, rng))
    factors, top = r.named.factors, max(r.stages)
    measured = r.measured_ks[int(rng.integers(len(r.measured_ks)))]
    places = {"a measured stage": (measured, top), "beyond the top stage (x1.5)": (measured, round(top * REACH)),
              "a K not measured": (r.unmeasured_k, top)}
    if (between := _between(r.stages, rng)) is not None:
        places["between measured stages"] = (measured, between)
    for place, (k, users) in places.items():
        point, low, high = adapters.model_prediction(model, k, users)
        truth = true_rate(r, k, users)
        tallies.add(f"model req/s: {place}", FAMILY_INTERVAL, COVERAGE, adapters.MODEL_LEVEL, "the true curve's "
                    "req/s (mean over lives)", holds(low, high, truth), factors)
        if place == "a K not measured":
            _score_error(model, truth, point, top, factors, tallies)
    _score_trust(r, model, tallies)


def _score_error(model, truth: float, point: float, top: int, factors, tallies: Tallies) -> None:
    bound, count = adapters.model_error_at(model, top)
    if bound is None:
        return
    exceeded = abs(point / truth - 1) > bound
    stated = 1 / (count + 1)
    if adapters.model_trusted(model):
        tallies.add("model held-out error at the target: exceeded, K not measured", FAMILY_FINDING, ERROR, stated,
                    "|prediction / true curve - 1| beyond the largest held-out error there", exceeded, factors,
                    trial_stated=stated)
    tallies.add("model held-out error at the target: exceeded, any model", FAMILY_FINDING, SHOWN, 0.0,
                "shown, not scored", exceeded, factors)


def _score_trust(r: ModelRegime, model, tallies: Tallies) -> None:
    """The true median error of the held-out kind of predictions (each stage, each K left out of the fit)."""
    rows = adapters.model_held_out(model)
    truth = {}
    for k in {k for k, _, _ in rows}:
        users = sorted({u for x, u, _ in rows if x == k})
        truth.update({(k, u): float(t) for u, t in zip(users, true_rates(r, k, users))})
    errors = [predicted / truth[(k, users)] - 1 for k, users, predicted in rows]
    if not errors:
        return
    beyond = float(np.median(np.abs(errors))) > adapters.model_error_bound(model)
    if adapters.model_trusted(model):
        tallies.add("model trusted, its true held-out median error beyond the bound", FAMILY_FINDING, SHOWN, 0.0,
                    "shown, not scored", beyond, r.named.factors)
    else:
        tallies.add("model not trusted, its true held-out median error within the bound", FAMILY_FINDING, SHOWN, 0.0,
                    "shown, not scored", not beyond, r.named.factors)
