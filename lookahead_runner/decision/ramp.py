"""The concurrency-scaling check alone (`lookahead-runner ramp`): evidence of one setting over rising
stages in, a `Decision` out, so the same report machinery renders it:

- over users stages (closed loop): the knee where more users buy little throughput at a latency or KV cost
  (gates/knee.py);
- over rate stages (`ramp --rates`, open loop): the knee in rate terms, the highest rate the K still holds
  before the first it does not (`rate_knee`). A rate holds while the achieved rate follows the offered one,
  the K keeps up (its repeats' windows pooled: rate_window.windows_behind) and, with decision.slo set, each SLO's
  attainment measured reaches its own percentile (cells/slo_attainment.py: `ttft_p90_ms = 500` holds where 90 %
  of the arrivals meet 500 ms): the point, as the SLO gate reads a share (rules.slo_status, in every resample)
  and the simulator's capacity truth does (sim/open_loop.holds); the Wilson interval of the SLO furthest below
  its percentile is shown, and a fall whose interval still reaches it says so. "Follows": the
  requests short of the offered ones (offered - achieved, times the span the achieved rate was counted over)
  stay within the noise of a steady queue of that size (falls_behind). A rate whose every window was shorter
  than its answers need (RateWindow.too_short) cannot be judged: neither held nor "does not hold", the knee is
  not found there, and the verdict says how long a stage would tell. A ramp with both kinds of stage gets both
  knees.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

from ..config import DecisionConfig
from .engine import cell_summaries, evaluate_stages
from .cells.evidence import Evidence
from .cells.rate_window import RateWindow, effective_arrivals, falls_behind, windows_behind
from .cells.slo_attainment import SloAttainment
from .cells.stats import wilson
from .explanation.reasons import unmeasured
from .explanation.text import pct
from .gates.knee import find_knee
from .schema import Decision, RateKnee, RateKneeStep, Range, Recommended, StagePick


def ramp_decision(ev: Evidence, k: int, setting: str, argv: list[str], p: DecisionConfig,
                  rate_windows: Sequence[RateWindow] = (), user_stages: bool = True) -> Decision:
    """The knee of one K (its setting's name: `setting`) over the ramp's users stages, as a decision; over its
    rate stages' windows (`rate_windows`) too, in rate terms; over those alone without users stages."""
    if not user_stages:
        return rate_ramp_decision(rate_windows, k, setting, argv, p)
    decision = users_ramp_decision(ev, k, setting, argv, p)
    if rate_windows:
        knee = rate_knee(k, rate_windows, p)
        decision.rate_knee = knee
        decision.reasons.append(f"In rate terms: {rate_verdict(knee)}")
    return decision


def users_ramp_decision(ev: Evidence, k: int, setting: str, argv: list[str], p: DecisionConfig) -> Decision:
    """The knee over the users stages."""
    stages = evaluate_stages(ev, p)
    stages = {u: st for u, st in stages.items() if k in st.stats}
    base = _base(k, setting, argv, p)
    if not stages:
        return Decision(status="no_measurement",
                        verdict=f"No valid stage at K={k}: no knee to find.{unmeasured(ev.invalid, k=k)}", **base)
    knee = find_knee(k, {u: st.stats[k] for u, st in stages.items()}, {u: st.draws[k] for u, st in stages.items()}, p)
    verdict = (f"The knee at K={k} is {knee.users} users: {knee.reason.split(': ', 1)[1]}." if knee.users is not None
               else f"No knee found at K={k}: {knee.reason}.")
    per_stage = [StagePick(users=u, status="decided", k=k, leading_k=k, running_mean=st.stats[k].running_mean,
                           objective=st.stats[k].objective(p.objective), argv=argv) for u, st in sorted(stages.items())]
    return Decision(status="decided" if knee.users is not None else "not_decided", verdict=verdict,
                    target_users=knee.users, leading_k=k, knee=knee, per_stage=per_stage,
                    cells=cell_summaries(stages, p), reasons=[step_text(s) for s in knee.steps], **base)


def step_text(step) -> str:
    gain = "?" if step.gain_per_doubling is None else f"{step.gain_per_doubling:+.1%}"
    low = "?" if step.gain_range.low is None else f"{step.gain_range.low:+.1%}"
    high = "?" if step.gain_range.high is None else f"{step.gain_range.high:+.1%}"
    return f"{step.users_from} -> {step.users_to} users: {gain} [{low}, {high}] per doubling; {step.cost or 'no cost measured'}."


def _base(k: int, setting: str, argv: list[str], p: DecisionConfig) -> dict:
    return {"mode": "ramp", "objective": p.objective, "resamples": p.resamples, "confidence_threshold": p.confidence,
            "thresholds": p.model_dump(mode="json"), "recommended": Recommended(k=k, setting=setting, argv=argv)}


def rate_ramp_decision(windows: Sequence[RateWindow], k: int, setting: str, argv: list[str],
                       p: DecisionConfig) -> Decision:
    """The knee in rate terms of one K over the ramp's rate stages, as a decision."""
    knee = rate_knee(k, windows, p)
    invalid = [f"{w.rate:g} req/s: {w.invalid_reason}" for w in windows if w.k == k and not w.valid]
    if not knee.steps:
        why = f" Invalid windows: {'; '.join(invalid)}." if invalid else ""
        return Decision(status="no_measurement", verdict=f"No valid rate window at K={k}: no knee to find.{why}",
                        **_base(k, setting, argv, p))
    reasons = [rate_step_text(s) for s in knee.steps] + [f"Left out (invalid): {line}." for line in invalid]
    return Decision(status="decided" if knee.rate is not None else "not_decided", verdict=rate_verdict(knee),
                    leading_k=k, rate_knee=knee, reasons=reasons, **_base(k, setting, argv, p))


def rate_step(rate: float, windows: Sequence[RateWindow], p: DecisionConfig) -> RateKneeStep:
    """One rate's valid windows (the repeats pooled) judged: does the K follow it, keep up, meet the SLO?"""
    arrivals = sum(w.arrivals for w in windows)
    duration = sum(w.duration_s for w in windows)
    counted = [(w.achieved_per_s, _span(w)) for w in windows if math.isfinite(w.achieved_per_s)]
    span = sum(s for _, s in counted)
    offered = arrivals / duration
    achieved = sum(a * s for a, s in counted) / span if span > 0 else math.nan
    outstanding = (max(w.outstanding[0] for w in windows), max(w.outstanding[1] for w in windows))
    keeps_up = not windows_behind(windows)
    too_short = next((w.too_short for w in windows), "") if keeps_up and all(w.too_short for w in windows) else ""
    follows = bool(too_short) or math.isnan(achieved) or \
        not falls_behind((offered - achieved) * span, arrivals, outstanding)
    found = _attainments(windows, p) if any(w.has_slo for w in windows) and arrivals else ()
    # the SLO furthest below its percentile (or nearest above it) stands for them in the step's figures
    binding = min(found, key=lambda a: (a.share - a.slo.share, a.slo.key)) if found else None
    meets = all(a.holds for a in found)
    first, last = windows[0], windows[-1]
    queue = _queue(first, last)
    broken = []
    if not follows:
        broken.append(f"{achieved:.1f} of {offered:.1f} req/s served")
    if not keeps_up:
        broken.append(f"the queue grows ({queue})")
    for a in found:
        if not a.holds:
            unproven = a.bounds.high is not None and a.bounds.high >= a.slo.share
            broken.append(f"{a.slo.text()} met by {pct(a.share, digits=1)} [{pct(a.bounds.low, digits=1)}, "
                          f"{pct(a.bounds.high, digits=1)}] < {pct(a.slo.share, digits=1)}"
                          + (" (its interval reaches the percentile: a longer stage would tell)" if unproven else ""))
    return RateKneeStep(
        # a rate too short to judge served nothing yet in its window: no figure, not 0.0 of the offered
        rate=rate, offered_per_s=offered, achieved_per_s=None if math.isnan(achieved) or too_short else achieved,
        arrivals=arrivals, follows=follows, keeps_up=keeps_up,
        attainment=None if binding is None else binding.share,
        attainment_range=Range() if binding is None else Range(low=binding.bounds.low, high=binding.bounds.high),
        meets_slo=meets, queue=queue, holds=not broken and not too_short, reason="; ".join(broken),
        too_short="" if broken else too_short)


def _span(window: RateWindow) -> float:
    """The seconds its achieved rate was counted over (the window's where not given)."""
    return window.duration_s if math.isnan(window.achieved_span_s) else window.achieved_span_s


def _attainments(windows: Sequence[RateWindow], p: DecisionConfig) -> tuple[SloAttainment, ...]:
    """Each SLO's attainment over a rate's windows pooled: its Wilson interval on the arrivals over their design
    effect (rate_window.effective_arrivals, as the gate at a rate reads it)."""
    n = sum(w.arrivals for w in windows)
    found = []
    for i, slo in enumerate(p.slos):
        met = sum(int(w.met(i).sum()) for w in windows)
        deff = effective_arrivals(windows, i).design_effect_at(p.interval_level)
        found.append(SloAttainment(slo, met, n, wilson(met, n, p.interval_level, deff), deff))
    return tuple(found)


def _queue(first: RateWindow, last: RateWindow) -> str:
    """The server's waiting queue from the first window's start to the last one's end (outstanding requests,
    the client's count, where the server's is not sampled)."""
    start, end = first.waiting[0], last.waiting[1]
    if math.isnan(start) or math.isnan(end):
        start, end = first.outstanding[0], last.outstanding[1]
        return "" if math.isnan(start) or math.isnan(end) else f"outstanding {start:.0f} -> {end:.0f}"
    return f"waiting {start:.0f} -> {end:.0f}"


def rate_knee(k: int, windows: Sequence[RateWindow], p: DecisionConfig) -> RateKnee:
    """The knee of K's rate ramp: the highest rate it holds before the first rate it does not (the rates in
    rising order, each one's valid windows pooled over repeats)."""
    by_rate: dict[float, list[RateWindow]] = {}
    for window in sorted(windows, key=lambda w: (w.rate, w.repeat)):
        if window.k == k and window.valid and window.arrivals:
            by_rate.setdefault(window.rate, []).append(window)
    steps = [rate_step(rate, mine, p) for rate, mine in sorted(by_rate.items())]
    broken = next((i for i, step in enumerate(steps) if not step.holds), None)
    if not steps:
        return RateKnee(k=k, reason=f"no valid rate window at K={k}")
    if broken is None:
        last = steps[-1]
        return RateKnee(k=k, steps=steps, reason=(
            f"no knee up to {last.rate:g} req/s at K={k}: it held every rate ({_served(last)} at "
            f"{last.rate:g}{_slo_text(last)}); add higher rates to find "
            f"it, e.g. --rates {last.rate * 2:g},{last.rate * 4:g}"))
    step = steps[broken]
    if step.too_short:   # cannot be judged there: neither the knee nor a rate that does not hold
        fails = next((s for s in steps[broken + 1:] if not s.holds and not s.too_short), None)
        above = f"; at {fails.rate:g} req/s it does not hold: {fails.reason}" if fails else ""
        if broken == 0:
            return RateKnee(k=k, steps=steps, reason=(
                f"K={k} cannot be judged at {step.rate:g} req/s, the lowest rate: {step.too_short}{above}"))
        held = steps[broken - 1]
        return RateKnee(k=k, steps=steps, reason=(
            f"no knee found above {held.rate:g} req/s at K={k}: it holds {held.rate:g} ({_served(held)}"
            f"{_slo_text(held)}); at {step.rate:g} req/s it cannot be judged: {step.too_short}{above}"))
    if broken == 0:
        return RateKnee(k=k, next_rate=step.rate, steps=steps, reason=(
            f"K={k} does not hold even the lowest rate, {step.rate:g} req/s: {step.reason}; add lower rates to "
            f"find its knee, e.g. --rates {step.rate / 4:g},{step.rate / 2:g}"))
    held = steps[broken - 1]
    return RateKnee(k=k, rate=held.rate, next_rate=step.rate, steps=steps, reason=(
        f"the knee at K={k} lies between {held.rate:g} and {step.rate:g} req/s: it holds {held.rate:g} "
        f"({_served(held)}{_slo_text(held)}); at "
        f"{step.rate:g} req/s {step.reason}"))


def _slo_text(step: RateKneeStep) -> str:
    if step.attainment is None:
        return ""
    return (f", SLO met by {pct(step.attainment, digits=1)} [{pct(step.attainment_range.low, digits=1)}, "
            f"{pct(step.attainment_range.high, digits=1)}]")


def rate_verdict(knee: RateKnee) -> str:
    text = knee.reason[:1].upper() + knee.reason[1:]
    return text if text.endswith(".") else text + "."


def _served(step: RateKneeStep, unit: str = " req/s") -> str:
    achieved = "?" if step.achieved_per_s is None else f"{step.achieved_per_s:.1f}"
    return f"{achieved} of {step.offered_per_s:.1f}{unit} served"


def rate_step_text(step: RateKneeStep) -> str:
    state = ("holds" if step.holds else f"cannot be judged: {step.too_short}" if step.too_short
             else f"does not hold: {step.reason}")
    return f"{step.rate:g} req/s: {_served(step, '')}{_slo_text(step)}{f', {step.queue}' if step.queue else ''}; {state}."
