"""The performance model's parts, fitted from measured windows (pure numpy/scipy).

Three parts, each from what every run already records:
- acceptance (perfmodel_acceptance.py): P(draft position i accepted) -> tokens per decode step for any K;
- step time: TPOT x tokens per step is the time of one engine step; fitted over every window as
  const + per-K draft cost + per running sequence + per verified token (batch x (K + 1)) + a roofline
  hinge beyond a knee of verified tokens + per prefill token sharing the step (least squares on relative
  error, coefficients >= 0; the knee chosen by leave-one-window-out error among none and the measured
  verified-token counts, then kept by the bootstrap refits);
- KV: tokens each running sequence holds (KV usage x pool / real batch) as a line in K, and the pool
  each K left (kv_pool_tokens) -> the largest real batch a K allows.
A closed loop of U users with no think time closes them (Little's law): a user's cycle is its e2e plus
the client's own overhead, the running batch is the cycle share spent running (kappa), capped by
--max-num-seqs and the KV limit; beyond the cap requests queue. `predict_draws` solves that fixed
point for every bootstrap draw of the parameters at once.
"""
from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass, fields

import numpy as np
from scipy.optimize import nnls

from ..cells.evidence import LATENCY_COLUMNS, Evidence
from .acceptance import Acceptance
from .loo import loo_errors

MIN_STEP_SHARE = 0.2          # prefill can take at most 80 % of a step in the fixed point
MIN_STEP_ROWS = 4             # windows a step-time fit needs before it drops the ones that preempted
MIN_SIDE = 3                  # windows a roofline knee needs on each side of it


@dataclass(frozen=True)
class WorkloadShape:
    """What the users send: prompt and output lengths, and the server's --max-num-seqs when known."""

    prompt_tokens: int
    output_tokens: int
    max_num_seqs: int | None = None


@dataclass(frozen=True)
class Obs:
    """One valid window's figures as the fit reads them (times in ms, rates per second)."""

    k: int
    users: int
    repeat: int
    req_per_s: float
    running: float
    waiting: float
    kv_usage_mean: float
    kv_usage_peak: float
    kv_pool_tokens: float
    preemptions: float
    tokens_per_step: float      # the window's mean acceptance length (nan without speculation data)
    tpot_ms: float              # means over the window's requests
    ttft_ms: float
    e2e_ms: float
    output_tokens: float
    ttft_p50_ms: float
    ttft_p90_ms: float
    tpot_p50_ms: float
    tpot_p90_ms: float


def _mean(values: np.ndarray) -> float:
    values = values[np.isfinite(values)]
    return float(values.mean()) if len(values) else math.nan


def _pct(values: np.ndarray, q: float) -> float:
    values = values[np.isfinite(values)]
    return float(np.percentile(values, q)) if len(values) else math.nan


def observations(evidence: Evidence) -> list[Obs]:
    out = []
    for cell in evidence.cells.values():
        for w in cell.windows:
            col = {name: w.latency_ms[:, i] for i, name in enumerate(LATENCY_COLUMNS)}
            out.append(Obs(
                k=w.k, users=w.users, repeat=w.repeat, req_per_s=w.served_per_s, running=w.signal("running_mean"),
                waiting=w.signal("waiting_mean"), kv_usage_mean=w.signal("kv_usage_mean"),
                kv_usage_peak=w.signal("kv_usage_peak"), kv_pool_tokens=w.signal("kv_pool_tokens"),
                preemptions=w.signal("preemptions"),
                tokens_per_step=w.signal("mean_acceptance_length") if w.k > 0 else 1.0,
                tpot_ms=_mean(col["tpot_ms"]), ttft_ms=_mean(col["ttft_ms"]), e2e_ms=_mean(col["e2e_ms"]),
                output_tokens=_mean(w.output_tokens.astype(float)), ttft_p50_ms=_pct(col["ttft_ms"], 50),
                ttft_p90_ms=_pct(col["ttft_ms"], 90), tpot_p50_ms=_pct(col["tpot_ms"], 50),
                tpot_p90_ms=_pct(col["tpot_ms"], 90)))
    return sorted(out, key=lambda o: (o.k, o.users, o.repeat))


# --- parameters ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Params:
    """One fit, or (as arrays) every bootstrap draw of it; draw 0 is the fit on every window."""

    step_ms: np.ndarray | float            # const
    step_ms_per_k: np.ndarray | float      # draft cost per drafted position
    step_ms_per_seq: np.ndarray | float    # per running sequence (its context read, its sampling), any K
    step_ms_per_token: np.ndarray | float  # per verified token (batch x (K + 1))
    step_ms_per_token_past_knee: np.ndarray | float
    knee_tokens: np.ndarray | float        # verified tokens per step where the roofline bends (inf: none)
    step_ms_per_prefill_token: np.ndarray | float
    ttft_ms: np.ndarray | float            # TTFT outside the queue = ttft_ms + ttft_steps x step
    ttft_steps: np.ndarray | float
    client_ms: np.ndarray | float          # a user's cycle beyond its e2e (client overhead)
    running_share: np.ndarray | float      # kappa: real batch / (req/s x e2e outside the queue)
    kv_tokens_per_seq: np.ndarray | float  # KV tokens a running sequence holds at K = 0 ...
    kv_tokens_per_seq_per_k: np.ndarray | float   # ... and per K
    kv_peak_ratio: np.ndarray | float      # KV usage peak / mean where nothing was preempted
    tpot_p50_ratio: np.ndarray | float     # percentile / mean, over the windows
    tpot_p90_ratio: np.ndarray | float
    ttft_p50_ratio: np.ndarray | float
    ttft_p90_ratio: np.ndarray | float


def stack(draws: list[Params]) -> Params:
    return Params(**{f.name: np.array([getattr(d, f.name) for d in draws], dtype=float) for f in fields(Params)})


def _median(values, default: float) -> float:
    values = np.asarray([v for v in values if math.isfinite(v)], dtype=float)
    return float(np.median(values)) if len(values) else default


def _nnls(columns: list[np.ndarray], y: np.ndarray, weight: np.ndarray) -> tuple[np.ndarray, float]:
    design = np.column_stack(columns) * weight[:, None]
    coef, residual = nnls(design, y * weight)
    return coef, float(residual)


def _tau(o: Obs, acceptance: Acceptance, shape: WorkloadShape) -> float:
    """Tokens per decode step of the window's requests (TPOT x this = one step)."""
    output = o.output_tokens if math.isfinite(o.output_tokens) else shape.output_tokens
    return _tokens_per_decode_step(acceptance, o.k, output - 1)


@functools.lru_cache(maxsize=1 << 16)
def _tokens_per_decode_step(acceptance: Acceptance, k: int, decode_tokens: float) -> float:
    """Acceptance.tokens_per_decode_step, once per window: every refit of the bootstrap reads it again."""
    return acceptance.tokens_per_decode_step(k, decode_tokens)


def _step_rows(obs: Sequence[Obs], acceptance: Acceptance, shape: WorkloadShape) -> tuple[np.ndarray, ...] | None:
    """(step ms, K, batch, verified tokens, prefill tokens per step) of the windows that tell a step time:
    a window that preempted re-prefills what it dropped, which this model leaves out, so those go when
    enough others remain."""
    rows = [o for o in obs if math.isfinite(o.tpot_ms) and math.isfinite(o.running) and o.running > 0]
    calm = [o for o in rows if not o.preemptions > 0]
    rows = calm if len(calm) >= MIN_STEP_ROWS else rows
    if not rows:
        return None
    tau = np.array([_tau(o, acceptance, shape) for o in rows])
    step = np.array([o.tpot_ms for o in rows]) * tau
    k = np.array([o.k for o in rows], dtype=float)
    batch = np.array([o.running for o in rows])
    prefill = np.array([o.req_per_s for o in rows]) * shape.prompt_tokens * step / 1000.0
    return step, k, batch, batch * (k + 1), prefill


def _design(k, batch, verified, prefill, knee: float) -> list[np.ndarray]:
    hinge = np.maximum(0.0, verified - knee) if math.isfinite(knee) else np.zeros_like(verified)
    return [np.ones_like(k), k, batch, verified, hinge, prefill]


def choose_knee(obs: Sequence[Obs], acceptance: Acceptance, shape: WorkloadShape) -> float:
    """The roofline knee (verified tokens per step) whose fit predicts each window best when that window is
    left out, among none and the measured counts with at least MIN_SIDE windows on either side: a knee
    fitted to a couple of windows would bend every extrapolation."""
    rows = _step_rows(obs, acceptance, shape)
    if rows is None:
        return math.inf
    step, k, batch, verified, prefill = rows
    candidates = [math.inf] + [v for v in np.unique(verified)
                               if (verified <= v).sum() >= MIN_SIDE and (verified > v).sum() >= MIN_SIDE]
    if len(candidates) == 1 or len(step) < MIN_STEP_ROWS:
        return math.inf
    best, best_knee = math.inf, math.inf
    for knee in candidates:
        design = np.column_stack(_design(k, batch, verified, prefill, knee)) / step[:, None]
        score = float(np.mean(np.square(loo_errors(design, np.ones(len(step))))))
        if score < best - 1e-12:
            best, best_knee = score, knee
    return float(best_knee)


def _step_fit(obs: Sequence[Obs], acceptance: Acceptance, shape: WorkloadShape, knee: float) -> tuple[float, ...]:
    rows = _step_rows(obs, acceptance, shape)
    if rows is None:
        return (math.nan,) * 7
    step, k, batch, verified, prefill = rows
    coef, _ = _nnls(_design(k, batch, verified, prefill, knee), step, 1.0 / step)
    return (float(coef[0]), float(coef[1]), float(coef[2]), float(coef[3]), float(coef[4]), float(knee),
            float(coef[5]))


def pool_at(obs: Sequence[Obs], k: int) -> float:
    """The KV pool (tokens) K leaves: measured at K, else a line through the other K > 0 (K = 0 has no
    draft model, so it is used only for itself or when nothing else was measured)."""
    pools: dict[int, float] = {}
    for o in obs:
        if math.isfinite(o.kv_pool_tokens) and o.kv_pool_tokens > 0:
            pools[o.k] = min(pools.get(o.k, math.inf), o.kv_pool_tokens)
    if k in pools:
        return pools[k]
    with_draft = {x: v for x, v in pools.items() if x > 0} if k > 0 else pools
    points = with_draft or pools
    if not points:
        return math.nan
    if len(points) == 1:
        return next(iter(points.values()))
    xs, ys = np.array(sorted(points)), np.array([points[x] for x in sorted(points)])
    slope, intercept = np.polyfit(xs, ys, 1)
    return float(max(intercept + slope * k, ys.min() * 0.1))


def fit_params(obs: Sequence[Obs], acceptance: Acceptance, shape: WorkloadShape, knee: float | None = None) -> Params:
    """One fit; `knee` as chosen on every window (bootstrap refits keep it), or chosen here when None."""
    knee = choose_knee(obs, acceptance, shape) if knee is None else knee
    const, per_k, per_seq, per_token, past_knee, knee, per_prefill = _step_fit(obs, acceptance, shape, knee)
    steps, ttft_svc, queue_ms, shares, kv = [], [], [], [], []
    for o in obs:
        tau = _tau(o, acceptance, shape)
        queued = 1000.0 * o.waiting / o.req_per_s if o.req_per_s > 0 and math.isfinite(o.waiting) else 0.0
        if math.isfinite(o.tpot_ms) and math.isfinite(o.ttft_ms):
            steps.append(o.tpot_ms * tau)
            ttft_svc.append(max(0.0, o.ttft_ms - queued))
        queue_ms.append(queued)
        if o.req_per_s > 0 and math.isfinite(o.running) and math.isfinite(o.e2e_ms) and o.e2e_ms > queued:
            shares.append(o.running / (o.req_per_s * (o.e2e_ms - queued) / 1000.0))
        if math.isfinite(o.kv_usage_mean) and math.isfinite(o.kv_pool_tokens) and o.running >= 1:
            kv.append((o.k, o.kv_usage_mean * o.kv_pool_tokens / o.running))
    if steps:
        ttft_coef, _ = _nnls([np.ones(len(steps)), np.array(steps)], np.array(ttft_svc),
                             1.0 / np.maximum(np.array(ttft_svc), 1.0))
    else:
        ttft_coef = np.array([math.nan, math.nan])
    if len({k for k, _ in kv}) >= 2:
        kv_slope, kv_const = np.polyfit([k for k, _ in kv], [v for _, v in kv], 1)
    else:
        kv_slope, kv_const = 1.0, _median([v for _, v in kv], math.nan)  # one K: a slot per drafted position
    calm = [o for o in obs if not (o.preemptions > 0) and o.kv_usage_mean > 0]
    return Params(
        step_ms=const, step_ms_per_k=per_k, step_ms_per_seq=per_seq, step_ms_per_token=per_token,
        step_ms_per_token_past_knee=past_knee,
        knee_tokens=knee, step_ms_per_prefill_token=per_prefill, ttft_ms=float(ttft_coef[0]),
        ttft_steps=float(ttft_coef[1]),
        client_ms=max(0.0, _median([1000.0 * o.users / o.req_per_s - o.e2e_ms for o in obs if o.req_per_s > 0],
                                   0.0)),
        running_share=_median(shares, 1.0), kv_tokens_per_seq=float(kv_const),
        kv_tokens_per_seq_per_k=max(0.0, float(kv_slope)),
        kv_peak_ratio=max(1.0, _median([o.kv_usage_peak / o.kv_usage_mean for o in calm], 1.0)),
        tpot_p50_ratio=_median([o.tpot_p50_ms / o.tpot_ms for o in obs], 1.0),
        tpot_p90_ratio=_median([o.tpot_p90_ms / o.tpot_ms for o in obs], 1.0),
        ttft_p50_ratio=_median([o.ttft_p50_ms / o.ttft_ms for o in obs], 1.0),
        ttft_p90_ratio=_median([o.ttft_p90_ms / o.ttft_ms for o in obs], 1.0))


def at_speed(o: Obs, factor: float) -> Obs:
    """The window as a server life `factor` times as fast would have served it: every rate x factor, every
    latency / factor (at a fixed concurrency latency ~ 1 / throughput); batch, queue and KV unchanged."""
    slower = {name: getattr(o, name) / factor for name in ("tpot_ms", "ttft_ms", "e2e_ms", "ttft_p50_ms",
                                                           "ttft_p90_ms", "tpot_p50_ms", "tpot_p90_ms")}
    return dataclasses.replace(o, req_per_s=o.req_per_s * factor, **slower)


def _by_life(obs: Sequence[Obs], one_life_per_k: bool = False) -> dict[int, list[dict[int, list[Obs]]]]:
    """K -> its server lives (repeat numbers; one, every repeat's, with same-server repeats) -> each life's windows
    by users."""
    lives: dict[int, dict[int, dict[int, list[Obs]]]] = {}
    for o in obs:
        lives.setdefault(o.k, {}).setdefault(0 if one_life_per_k else o.repeat, {}).setdefault(o.users, []).append(o)
    return {k: list(by_repeat.values()) for k, by_repeat in lives.items()}


def life_spread(obs: Sequence[Obs], one_life_per_k: bool = False) -> tuple[float, int]:
    """(relative SD of one server life's level around its K's, degrees of freedom), pooled over the K with two or
    more lives: a life's level is its mean log req/s over the stages every life of its K ran; (0, 0) with none."""
    squares, df = 0.0, 0
    for of_k in _by_life(obs, one_life_per_k).values():
        common = set.intersection(*(set(life) for life in of_k)) if len(of_k) > 1 else set()
        if not common:
            continue
        levels = np.array([np.mean([math.log(np.mean([o.req_per_s for o in life[u]])) for u in common])
                           for life in of_k])
        squares += float(np.sum(np.square(levels - levels.mean())))
        df += len(of_k) - 1
    return (math.sqrt(squares / df), df) if df else (0.0, 0)


def bootstrap(obs: Sequence[Obs], acceptance: Acceptance, shape: WorkloadShape, resamples: int,
              seed: int, restart_spread: float = 0.0, one_life_per_k: bool = False) -> Params:
    """Draw 0: the fit on every window; then refits on windows resampled within each (K, users) cell, so every
    measured cell stays in every refit, each K's windows at every stage multiplied by one draw of its lives' level
    (a server life runs every stage a few % faster or slower: that moves the K's whole curve, and resampling the
    windows stage by stage averages it away). A K with L >= 2 lives: 1 + s / sqrt(L) x Student's t, s the spread
    of life levels pooled over such K (`life_spread`) with its degrees of freedom, as the decision draws a measured
    spread; a K on one life, whose windows cannot show how far the next life lands: 1 + `restart_spread` x a
    standard normal (the spread the decision takes for such a K, drawn as its cells draw a known or assumed one:
    decision/cells/measure.py). `one_life_per_k`: every repeat of a K ran on one server life (same-server repeats):
    each K is one life."""
    rng = np.random.default_rng([seed, 20])
    lives = _by_life(obs, one_life_per_k)
    spread, df = life_spread(obs, one_life_per_k)
    draws = [fit_params(obs, acceptance, shape)]
    knee = float(draws[0].knee_tokens)
    for _ in range(max(0, resamples - 1)):
        sample: list[Obs] = []
        for of_k in lives.values():
            if len(of_k) > 1:
                level = spread / math.sqrt(len(of_k)) * rng.standard_t(df) if df else 0.0
            else:
                level = restart_spread * rng.standard_normal()
            factor = max(0.01, 1.0 + level)
            cells: dict[int, list[Obs]] = {}
            for life in of_k:
                for users, ws in life.items():
                    cells.setdefault(users, []).extend(ws)
            for ws in cells.values():
                sample += [at_speed(ws[i], factor) if factor != 1.0 else ws[i]
                           for i in rng.integers(0, len(ws), len(ws))]
        draws.append(fit_params(sample, acceptance, shape, knee))
    return stack(draws)


# --- prediction ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Draws:
    """One (K, users) predicted by every parameter draw (arrays of the draws)."""

    req_per_s: np.ndarray
    real_batch: np.ndarray
    kv_batch_limit: np.ndarray
    kv_usage: np.ndarray
    step_ms: np.ndarray
    tpot_ms: np.ndarray
    ttft_ms: np.ndarray
    e2e_ms: np.ndarray


def step_ms(p: Params, k: int, batch, prefill_tokens) -> np.ndarray:
    verified = batch * (k + 1)
    past = np.maximum(0.0, verified - p.knee_tokens)  # an infinite knee (none) leaves nothing past it
    return (p.step_ms + p.step_ms_per_k * k + p.step_ms_per_seq * batch + p.step_ms_per_token * verified
            + p.step_ms_per_token_past_knee * past + p.step_ms_per_prefill_token * prefill_tokens)


def kv_batch_limit(p: Params, k: int, pool_tokens: float, max_num_seqs: int | None) -> np.ndarray:
    per_seq = np.maximum(1.0, p.kv_tokens_per_seq + p.kv_tokens_per_seq_per_k * k)
    kv_cap = pool_tokens / per_seq if math.isfinite(pool_tokens) else np.full_like(per_seq, np.inf)
    kv_cap = np.where(np.isfinite(kv_cap), kv_cap, np.inf)
    return np.minimum(kv_cap, max_num_seqs) if max_num_seqs else kv_cap


def predict_draws(p: Params, k: int, users: int | np.ndarray, decode_tokens_per_step: float, shape: WorkloadShape,
                  output_tokens: float, pool_tokens: float, bisections: int = 26, inner: int = 5) -> Draws:
    """The closed loop's fixed point for every draw. For a rate X: the prefill share of each step, the real
    batch (Little: kappa x X x the time in service, up to the cap; a few substitutions), the step, and the
    rate F(X) the users would then drive. F falls as X rises (more prefill, longer steps), so X = F(X) has
    one root, found by bisection between 0 and F(0)."""
    limit = kv_batch_limit(p, k, pool_tokens, shape.max_num_seqs)
    decode_tokens = max(output_tokens - 1.0, 0.0)

    def state(rate: np.ndarray) -> tuple[np.ndarray, ...]:
        share = np.minimum(1.0 - MIN_STEP_SHARE, p.step_ms_per_prefill_token * rate * shape.prompt_tokens / 1000.0)
        batch = np.minimum(limit, users)
        for _ in range(inner):
            step = step_ms(p, k, batch, 0.0) / (1.0 - share)
            service = np.maximum(p.ttft_ms + p.ttft_steps * step + decode_tokens * step / decode_tokens_per_step, 1e-3)
            batch = np.minimum(np.minimum(limit, users), p.running_share * rate * service / 1000.0)
        step = step_ms(p, k, batch, 0.0) / (1.0 - share)
        service = np.maximum(p.ttft_ms + p.ttft_steps * step + decode_tokens * step / decode_tokens_per_step, 1e-3)
        driven = np.minimum(1000.0 * users / (service + p.client_ms),
                            1000.0 * limit / np.maximum(p.running_share * service, 1e-3))
        return driven, batch, step, service

    low = np.zeros(np.broadcast(limit, users).shape)   # users: one count, or a column of them (users x draws)
    high = state(low)[0]
    for _ in range(bisections):
        mid = (low + high) / 2
        above = state(mid)[0] < mid
        high, low = np.where(above, mid, high), np.where(above, low, mid)
    rate = (low + high) / 2
    _, batch, step, service = state(rate)
    tpot = step / decode_tokens_per_step
    queue = np.maximum(0.0, 1000.0 * users / np.maximum(rate, 1e-9) - service - p.client_ms)
    per_seq = np.maximum(1.0, p.kv_tokens_per_seq + p.kv_tokens_per_seq_per_k * k)
    usage = batch * per_seq / pool_tokens if math.isfinite(pool_tokens) else np.full_like(batch, np.nan)
    ttft = p.ttft_ms + p.ttft_steps * step + queue
    return Draws(req_per_s=rate, real_batch=batch, kv_batch_limit=limit, kv_usage=usage, step_ms=step, tpot_ms=tpot,
                 ttft_ms=ttft, e2e_ms=ttft + decode_tokens * tpot)
