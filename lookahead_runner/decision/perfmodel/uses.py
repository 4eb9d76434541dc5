"""What a trusted performance model adds to a decision (pure): the best K at `decision.production_users`
with its interval and a plain statement that it is a prediction; the per-batch-size schedule's boundaries
at the model's crossovers instead of halfway between stages; and, when speculation is not the lever, the
numbers saying why. An untrusted model adds only its summary and the reason it is not trusted.
"""
from __future__ import annotations

import math

import numpy as np

from ...config import DecisionConfig
from ...vllm.schedule import Schedule, render_argv
from .model import PerformanceModel
from .summary import Curve, CurvePoint, HeldOutRow, ModelSummary, ProductionPoint
from ..schema import Decision, PerBatchSchedule
from ..explanation.text import pct, rate

CURVE_POINTS = 16
CURVE_REACH = 1.5           # curves run to this multiple of the highest stage
ACCEPTANCE_BOUND_TOKENS = 1.5   # fewer expected tokens per step than this: the drafts are mostly wasted
PREFILL_BOUND_SHARE = 0.3       # decoding below this share of a request's time: prefill-bound


def curve_users(model: PerformanceModel) -> list[int]:
    top = max(model.users, default=1)
    grid = np.geomspace(1, max(2, top * CURVE_REACH), CURVE_POINTS)
    return sorted({int(round(u)) for u in grid} | set(model.users))


def reach(model: PerformanceModel, users: int) -> str:
    stages = model.users
    if users in stages:
        return "a measured stage"
    if users > max(stages):
        return f"{users / max(stages):.2g}x the highest stage measured ({max(stages)}): an extrapolation"
    if users < min(stages):
        return f"below the lowest stage measured ({min(stages)}): an extrapolation"
    below, above = max(u for u in stages if u < users), min(u for u in stages if u > users)
    return f"between the measured stages {below} and {above}"


def production_point(model: PerformanceModel, users: int, baseline_k: int) -> ProductionPoint:
    if not model.trusted:
        return ProductionPoint(users=users, reach=reach(model, users) if model.users else "",
                               statement=f"No prediction at {users} users: the performance model is "
                                         f"{model.trust_reason}.")
    k, share = model.best_k_at(users, model.ks)
    best, base = model.predict(k, users), model.predict(baseline_k, users)
    where = reach(model, users)
    gain = "" if k == baseline_k else f" ({pct(best.requests_per_s / base.requests_per_s - 1, signed=True)})"
    return ProductionPoint(
        users=users, k=k, share=share, requests_per_s=best.requests_per_s, requests_per_s_low=best.requests_per_s_low,
        requests_per_s_high=best.requests_per_s_high, baseline_requests_per_s=base.requests_per_s, reach=where,
        statement=(f"Prediction, not a measurement: at {users} users K={k} would serve "
                   f"{rate(best.requests_per_s)} req/s [{rate(best.requests_per_s_low)}, "
                   f"{rate(best.requests_per_s_high)}] against "
                   f"{rate(base.requests_per_s)} at K={baseline_k}{gain}; K={k} is best in {pct(share)} of "
                   f"{len(model.params.step_ms)} refits of the model. {users} users is {where}. Only measured K "
                   f"({model.ks}) are candidates; a stage at {users} users would measure it."
                   + (f" Beyond the windows: {'; '.join(best.extrapolated)}." if best.extrapolated else "")))


def _crossover_batch(model: PerformanceModel, k_low: int, k_high: int, users_low: int, users_high: int) -> float | None:
    """The real batch (under k_low) at the first concurrency where k_high stops beating k_low, scanning
    from the stage that picked k_low to the one that picked k_high; None when the model sees no crossover."""
    step = 1 if users_high > users_low else -1
    for users in range(users_low, users_high + step, step):
        _, picks = model.choices(users, [k_low, k_high])
        if int(picks[0]) == k_high:
            return model.predict(k_low, users).real_batch
    return None


def refined_schedule(model: PerformanceModel, decision: Decision,
                     argv_by_k: dict[int, list[str]]) -> tuple[PerBatchSchedule | None, str]:
    """The stages' schedule with each boundary at the model's crossover (the K per range stay the stages'
    decided picks: the model never overrules a measurement)."""
    schedule = decision.per_batch_size
    if not schedule or not model.trusted:
        return schedule, ""
    picks = sorted((p for p in decision.per_stage if p.status == "decided" and p.k is not None
                    and p.running_mean is not None), key=lambda p: p.running_mean)
    ranges, lo, notes = [], 1, []
    for a, b in zip(picks, picks[1:] + [None]):
        if b is None:
            hi = 1_000_000
        elif a.k == b.k:
            continue
        else:
            batch = _crossover_batch(model, a.k, b.k, a.users, b.users)
            if batch is None or not math.isfinite(batch):
                notes.append(f"no crossover of K={a.k} and K={b.k} between {a.users} and {b.users} users; halfway kept")
                batch = (a.running_mean + b.running_mean) / 2
            hi = max(lo, int(batch))
        ranges.append([lo, hi, a.k])
        lo = hi + 1
    if ranges == [list(r) for r in schedule.ranges]:
        return schedule, "the model's crossovers fall where the stages put the boundaries"
    built = Schedule.from_ranges(ranges, schedule.form)
    refined = schedule.model_copy(update={
        "num_speculative_tokens_per_batch_size": built.value(), "ranges": built.as_lists(),
        "argv": render_argv(built, argv_by_k), "boundaries": "model crossovers", "stage_ranges": schedule.ranges})
    note = (f"boundaries moved to the model's crossovers ({schedule.ranges} -> {built.as_lists()})"
            + (f"; {'; '.join(notes)}" if notes else ""))
    return refined, note


def not_the_lever(model: PerformanceModel, decision: Decision, p: DecisionConfig) -> str:
    """Why no K beats the baseline at the target, in the model's numbers (empty when a K > 0 is recommended)."""
    base_k, users = decision.baseline_k, decision.target_users
    spec_ks = [k for k in model.ks if k > 0]
    if not model.trusted or base_k is None or not users or not spec_ks or \
            (decision.recommended is not None and decision.recommended.k != base_k):
        return ""
    k = max(spec_ks, key=lambda x: model.predict(x, users).requests_per_s)
    base, spec = model.predict(base_k, users), model.predict(k, users)
    decode_share = (model.output_tokens - 1) * base.tpot_p50_ms / max(base.ttft_p50_ms + (model.output_tokens - 1)
                                                                      * base.tpot_p50_ms, 1e-9)
    if spec.preempting or spec.kv_batch_limit < base.real_batch * (1 - p.batch_drop_frac):
        label = "KV-bound: the pool caps the real batch"
    elif spec.tokens_per_step < ACCEPTANCE_BOUND_TOKENS:
        label = "acceptance-bound: expected tokens per step barely above 1"
    elif decode_share < PREFILL_BOUND_SHARE:
        label = f"prefill-bound: decoding is {pct(decode_share)} of a request's time at K={base_k}"
    else:
        label = "compute-bound: the step time grows with the verified tokens"
    return (f"Performance model (trusted, held-out error {pct(model.heldout_error, digits=1)}): not the lever at "
            f"{users} users, {label}. K={k}, the best K > 0 by the model: {spec.tokens_per_step:.2f} tokens per "
            f"step; a step of {spec.step_ms:.1f} ms vs {base.step_ms:.1f} ms at K={base_k} "
            f"(x{spec.step_ms / base.step_ms:.2f}); KV room for {spec.kv_batch_limit:.0f} running sequences vs "
            f"a real batch of {base.real_batch:.0f} at K={base_k}; predicted {rate(spec.requests_per_s)} vs "
            f"{rate(base.requests_per_s)} req/s.")


def _curves(model: PerformanceModel) -> tuple[list[Curve], dict[str, int | None]]:
    curves, preempts = [], {}
    for k in model.candidate_ks():
        points = []
        grid = curve_users(model)
        for users, pr in zip(grid, model.predict_many(k, grid)):
            points.append(CurvePoint(users=users, requests_per_s=pr.requests_per_s,
                                     requests_per_s_low=pr.requests_per_s_low,
                                     requests_per_s_high=pr.requests_per_s_high, real_batch=pr.real_batch,
                                     preempting=pr.preempting))
        curves.append(Curve(k=k, measured_k=k in model.ks, points=points))
        preempts[str(k)] = next((pt.users for pt in points if pt.preempting), None)
    return curves, preempts


def _finite(value: float) -> float | None:
    return float(value) if value is not None and math.isfinite(value) else None


def summary(model: PerformanceModel, decision: Decision, p: DecisionConfig, production_users: int = 0) -> ModelSummary:
    point = {name: float(np.asarray(getattr(model.params, name))[0]) for name in model.params.__dataclass_fields__}
    curves, preempts = _curves(model) if model.obs else ([], {})
    base_k = decision.baseline_k if decision.baseline_k is not None else min(model.ks, default=0)
    return ModelSummary(
        trusted=model.trusted, reason=model.trust_reason, error_bound=model.error_bound,
        heldout_median_error=model.heldout_error, heldout_worst_error=model.heldout_worst,
        acceptance_source=model.acceptance.source,
        tokens_per_step={str(k): model.acceptance.tokens_per_step(k) for k in model.candidate_ks()},
        kv_batch_limit={str(k): v for k in model.candidate_ks()
                        if (v := _finite(model.predict(k, max(model.users, default=1)).kv_batch_limit)) is not None},
        preemptions_from_users=preempts,
        parameters={name: v for name, value in point.items() if (v := _finite(value)) is not None},
        held_out=[HeldOutRow(scheme=h.scheme, k=h.k, users=h.users, predicted_requests_per_s=h.predicted_requests_per_s,
                             measured_requests_per_s=h.measured_requests_per_s, error=h.error) for h in model.held_out],
        curves=curves,
        production=production_point(model, production_users, base_k) if production_users and model.obs else None,
        diagnosis=not_the_lever(model, decision, p))
