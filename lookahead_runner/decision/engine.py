"""Evidence in, `Decision` out: every stage judged by the same rules, gates and resampling; the
target's verdict, checklist, candidates, per-stage picks, knee and evidence table assembled.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np

from ..config import DecisionConfig
from ..vllm.knob import Setting
from .explanation import reasons as explain
from .gates import rules
from .gates.checks import not_measured
from .cells.evidence import Evidence
from .gates.knee import find_knee, scaling_check
from .gates.looks import RULE, Look, Looks
from .cells.measure import QUANTILES, PreparedCell
from .confirmation.schedule import schedule_from_picks
from .schema import (Candidate, CellSummary, Check, Decision, LookStop, Percentile, Range, Recommended,
                     RestartSpread, StagePick)
from .gates.stage import (MAX_RESAMPLE_FACTOR, StageEval, evaluate, gain_bounds, held_back_by_the_share_alone,
                          off_earlier_held, tie_confidence)
from .explanation.tradeoffs import tradeoffs
from .cells.stats import interval, quantile_bounds, wilson
from .cells import users_attainment

METRICS = {"ttft_ms": "ttft", "tpot_ms": "tpot", "itl_p99_ms": "itl", "e2e_ms": "e2e"}


def prepare(evidence: Evidence, p: DecisionConfig) -> dict[tuple[int, int], PreparedCell]:
    return {key: PreparedCell(cell, p.slos, p.bin_min_s) for key, cell in evidence.cells.items()}


def stage_rng(p: DecisionConfig, users: int) -> np.random.Generator:
    """The resampling of one stage: the run's seed and the stage, so a report is reproducible and a stage
    judged alone (the sweep's early stop, auto repeats) gets the same draws as in the whole decision."""
    return np.random.default_rng([p.seed, users])


def evaluate_stages(evidence: Evidence, p: DecisionConfig) -> dict[int, StageEval]:
    """Every stage, judged alone: the restart spread earlier runs on this server measured (at the target users, where
    the ledger was read) at the target stage only, as the spread changes with concurrency (vLLM #53436: 7.5-19.7 %
    at 1-4 concurrent requests, under 0.7 % at 8 and more)."""
    prepared = prepare(evidence, p)
    elsewhere = p.model_copy().with_earlier(None) if p.earlier_spread is not None else p
    return {u: evaluate(u, {k: prepared[(k, u)] for k in evidence.ks if (k, u) in prepared},
                        p if u == evidence.target_users else elsewhere, stage_rng(p, u))
            for u in evidence.users}


def _range(bounds) -> Range:
    return Range(low=bounds.low, high=bounds.high)


def _finite(value: float) -> float | None:
    return None if value is None or (isinstance(value, float) and not math.isfinite(value)) else float(value)


def cell_summaries(stages: dict[int, StageEval], p: DecisionConfig) -> list[CellSummary]:
    rows = []
    for users, stage in sorted(stages.items()):
        for k, s in sorted(stage.stats.items()):
            draws = stage.draws[k]
            percentiles = [Percentile(metric=METRICS[column], q=q, value_ms=_finite(s.quantile(column, q)),
                                      range=_range(b := quantile_bounds(stage.pooled[k][column], q, p.interval_level)),
                                      n=s.requests, decisive=b.bounded)
                           for column in METRICS for q in QUANTILES]
            windows = stage.prepared[k].cell.windows
            attainment = {slo.key: _range(users_attainment.attainment_bounds(s.slo_met[i], s.finished, windows,
                                                                             p.slos, i, p.interval_level))
                          for i, slo in enumerate(p.slos)}
            rows.append(CellSummary(
                k=k, users=users, repeats=s.repeats, requests=s.requests, failures=s.failures, timeouts=s.timeouts,
                req_per_s=s.req_per_s, req_per_s_range=_range(interval(draws.req_per_s, p.interval_level)),
                req_per_s_by_repeat=[w.served_per_s for w in stage.prepared[k].cell.windows],
                output_tok_per_s=s.output_tok_per_s,
                output_tok_per_s_range=_range(interval(draws.output_tok_per_s, p.interval_level)),
                goodput=s.goodput if p.slos else None,
                goodput_range=_range(users_attainment.goodput_bounds(
                    draws.req_per_s, windows, p.slos, p.interval_level, np.random.default_rng([p.seed, 39, k, users])))
                if p.slos else Range(),
                throughput_units=s.throughput_units, percentiles=percentiles, slo_attainment=attainment,
                failure_rate=_finite(s.failure_rate), failure_rate_range=_range(wilson(s.failures, s.finished,
                                                                                        p.interval_level)),
                running_mean=_finite(s.running_mean), waiting_mean=_finite(s.waiting_mean),
                kv_usage_mean=_finite(s.kv_usage_mean), kv_usage_peak=_finite(s.kv_usage_peak),
                preemptions=_finite(s.preemptions), acceptance_rate=_finite(s.acceptance_rate),
                kv_pool_tokens=_finite(s.kv_pool_tokens), not_measured=not_measured(s),
                drafted_per_step=_mean_drafted(stage.prepared[k].cell.windows)))
    return rows


def _mean_drafted(windows) -> float | None:
    """Drafted tokens per step over the windows: each the counters' figure, else its requests' own."""
    values = [w.drafted for w in windows if math.isfinite(w.drafted)]
    return sum(values) / len(values) if values else None


def candidates(stage: StageEval, p: DecisionConfig) -> list[Candidate]:
    out = []
    for k, s in sorted(stage.stats.items()):
        gain = stage.gain(k, p.objective) if k != stage.base_k else None
        out.append(Candidate(
            k=k, objective=s.objective(p.objective),
            objective_range=_range(interval(stage.objective_draws(k, p.objective), p.interval_level)),
            gain=_finite(gain) if gain is not None else None,
            gain_range=_range(gain_bounds(stage, k, stage.base_k, p)) if k != stage.base_k else Range(),
            win_share=stage.shares.get(k, 0.0), gates=stage.checks[k],
            blocked_by=[c.name for c in stage.blocked_by(k)],
            beyond_stop=stage.stopped_at is not None and k >= stage.stopped_at, tradeoffs=tradeoffs(stage, k, p)))
    return out


def stage_pick(stage: StageEval, p: DecisionConfig, argv_by_k: dict[int, list[str]]) -> StagePick:
    k = stage.pick if stage.status == "decided" else None
    focus = stage.stats.get(stage.pick if stage.pick is not None else stage.base_k)
    return StagePick(
        users=stage.users, status=stage.status, k=k, leading_k=stage.pick,
        confidence=stage.shares.get(stage.pick) if stage.pick is not None else None,
        running_mean=_finite(focus.running_mean) if focus else None,
        objective=_finite(focus.objective(p.objective)) if focus else None,
        blocked={str(x): [c.name for c in stage.blocked_by(x)] for x in stage.ks if stage.blocked_by(x)},
        argv=list(argv_by_k.get(k, [])) if k is not None else [], reason=explain.stage_reason(stage, p))


def checklist(stage: StageEval, k: int, knee_check: Check, p: DecisionConfig) -> list[Check]:
    """The method's four acceptance checks for K at the target: two gates, two pieces of advice."""
    gates = {c.name: c for c in stage.checks[k]}
    latency = [c for c in stage.checks[k] if c.name != rules.GATE_MEMORY and c.name != rules.GATE_BATCH]
    worst = next((status for status in (rules.FAIL, rules.UNKNOWN, rules.WAIVED) if any(c.status == status
                                                                                         for c in latency)), rules.PASS)
    because = next((c.unknown_because for c in latency if c.status == "unknown"), "")
    failures_and_latency = Check(name="failures and latency", kind="gate", status=worst, unknown_because=because,
                                 evidence="; ".join(f"{c.name}: {c.evidence}" for c in latency),
                                 n=stage.stats[k].finished)
    memory = gates[rules.GATE_MEMORY]
    return [explain.repeat_check(stage, k, p), failures_and_latency, memory, knee_check]


def decide(evidence: Evidence, p: DecisionConfig, argv_by_k: dict[int, list[str]],
           schedule_form: str | None = None, setting_names: Mapping[int, str] | None = None,
           tie_bar: float | None = None) -> Decision:
    """`setting_names`: each K's Setting.name in this run (a raw-slots or grid setting is not "kK"). `tie_bar`: a
    target stage that only its share holds back is decided as a tie where every other K's gain lies inside the tie
    band at this bar (gates/stage.tie_confidence; the looks of a sweep, `verdict_at_end`, say where)."""
    thresholds = p.model_dump(mode="json")
    base = {"objective": p.objective, "target_users": evidence.target_users,
            "confidence_threshold": p.confidence, "thresholds": thresholds}
    stages = evaluate_stages(evidence, p)
    target = stages.get(evidence.target_users)
    if target is None:
        return Decision(status="no_measurement",
                        verdict=explain.no_measurement(evidence.target_users, evidence.invalid),
                        reasons=["Every window at the target concurrency was invalid or missing; see summary.csv."],
                        resamples=p.resamples, **base)
    tie = _decided_as_a_tie(target, p, tie_bar)
    focus = target.pick if target.pick is not None else target.base_k
    ramp = {u: st for u, st in stages.items() if focus in st.stats}
    knee = find_knee(focus, {u: st.stats[focus] for u, st in ramp.items()}, {u: st.draws[focus] for u, st in ramp.items()},
                     p)
    per_stage = [stage_pick(stages[u], p, argv_by_k) for u in sorted(stages)]
    decided = target.status == "decided"
    recommended = Recommended(k=target.pick, setting=setting_name(target.pick, setting_names),
                              argv=list(argv_by_k.get(target.pick, []))) if decided else None
    return Decision(
        status=target.status, baseline_k=target.base_k,
        verdict=explain.verdict(target, p) + (explain.tie_text(target, p, tie, tie_bar) if tie is not None else "")
        + explain.unmeasured(evidence.invalid, users=evidence.target_users, all_failed_only=True),
        recommended=recommended, leading_k=target.pick,
        confidence=tie if tie is not None else target.shares.get(target.pick) if target.pick is not None else None,
        confidence_range=(_range(wilson(tie * p.resamples, p.resamples, p.interval_level)) if tie is not None else
                          _range(target.share_range) if target.pick is not None else Range()),
        resamples=target.resamples,
        checklist=checklist(target, focus, scaling_check(knee, evidence.target_users, p), p),
        candidates=candidates(target, p), cells=cell_summaries(stages, p), per_stage=per_stage,
        per_batch_size=schedule_from_picks(per_stage, argv_by_k, schedule_form), knee=knee,
        stopped_at_k=target.stopped_at, reasons=explain.reasons(target, stages, p),
        diagnoses=explain.diagnoses(target, stages, p),
        next_runs=explain.next_runs(target, p, contender_share(p, target.resamples)),
        restart_spread=spread_summary(target.noise), **base)


def _decided_as_a_tie(target: StageEval, p: DecisionConfig, bar: float | None) -> float | None:
    """Where the target is a tie told by equivalence at `bar`: marked decided, and its confidence (the least
    one-sided share of its tests); else None, the target untouched."""
    if bar is None or not held_back_by_the_share_alone(target, p):
        return None
    confidence = tie_confidence(target, p, bar)
    if confidence is not None:
        target.status, target.why_not_decided = "decided", []
    return confidence


def spread_summary(noise) -> RestartSpread | None:
    """decision.json's `restart_spread`: the target's, where it was measured (decision/cells/restart_spread.py)."""
    origin = noise.origin
    if origin is None or noise.one_life:
        return None
    earlier = origin.earlier
    return RestartSpread(rel_sd=origin.rel_sd, low=_finite(origin.low), high=_finite(origin.high), df=origin.df,
                         lives=origin.lives, ks=list(origin.ks), squares=origin.squares, this_df=origin.this_df,
                         ledger_squares=origin.ledger_squares, ledger_df=origin.ledger_df,
                         ledger_lives=origin.ledger_lives, window_squares=origin.window_squares,
                         window_df=origin.window_df,
                         earlier_runs=earlier.runs if earlier else 0, earlier_last=earlier.last if earlier else "",
                         text=origin.text())


def setting_name(k: int, names: Mapping[int, str] | None) -> str:
    return (names or {}).get(k) or Setting(k).name


def target_stage(evidence: Evidence, p: DecisionConfig) -> StageEval | None:
    """The target stage alone, judged as `decide` judges it (what the sweep asks between lives)."""
    cells = evidence.at(evidence.target_users)
    if not cells:
        return None
    prepared = {k: PreparedCell(cell, p.slos, p.bin_min_s) for k, cell in cells.items()}
    return evaluate(evidence.target_users, prepared, p, stage_rng(p, evidence.target_users))


def next_setting(evidence: Evidence, p: DecisionConfig, planned_ks: list[int]) -> tuple[int | None, int | None]:
    """The sweep's early stop, in memory: (the next K to measure or None, the K where the stop rule fired).
    Larger K are skipped only where the stop is agreed (`agreed_stop`: past the early-stop bar)."""
    stage = target_stage(evidence, p) if len(evidence.at(evidence.target_users)) >= 2 else None
    stopped = agreed_stop(stage, p)
    if stopped is not None:
        return None, stopped
    later = [k for k in planned_ks if k > max(evidence.ks, default=-1)]
    return (later[0] if later else None), None


# A sweep that looks at its verdict after each life and stops buying lives once it is decided is wrong more often
# than the confidence it states: each look is one more chance for a lucky streak (two restarted lives per K, a
# spread of 8 % per life, a true gain of +5 %, 2 points past the tie band: 11 % wrong stopping at the first decided
# look, 7.7 % deciding once; benchmarks/spread_calibration.py). Where the sweep plans its looks (`Looks`: the
# adaptive sweep, load.repeats = "auto"), each look that could still buy a life stops past the bar the error-spending
# rule sets for it (decision/gates/looks.py: 96.9 % at look 5 of at most 8 lives at a confidence of 90 %), the last look
# spends what the earlier ones left, and a tie stops as soon as every rival's gain lies inside the tie band at the
# look's bar (gates/stage.tie_confidence). Without planned looks (the grid's early stop, which skips larger K) a look
# stops past a fixed stricter bar, the verdict's error share times EARLY_STOP_ERROR_SHARE (99 % at 90 %: a
# Haybittle-Peto-style bar). Every look judges its one bar: the verdict (`early_judged`), the stop that skips larger
# K (`agreed_stop`), the K in the running (`contender_share`).
EARLY_STOP_ERROR_SHARE = 0.1
CONTENDER_FRACTION = 0.2
MIN_CONTENDER_DRAWS = 5


def _reachable(p: DecisionConfig) -> float:
    """The highest share the resamples can show: a share won in every draw the stage may take (its Monte Carlo
    interval's low end), less a margin."""
    draws = MAX_RESAMPLE_FACTOR * p.resamples
    return wilson(draws, draws, p.interval_level).low - 0.002


def early_look(p: DecisionConfig, look: Look | None = None) -> DecisionConfig:
    """The decision config a look judges by: `confidence` raised to `look`'s bar as it is, even past what the
    resamples readily show (judged lower, the look would spend more than its share of the error the looks hold
    together): it stops only where the share's Monte Carlo interval clears its bar; without one, to the fixed
    early-stop bar, kept within what the resamples can show."""
    if look is not None:
        return p.model_copy(update={"confidence": max(p.confidence, look.bar)})
    wanted = 1 - (1 - p.confidence) * EARLY_STOP_ERROR_SHARE
    return p.model_copy(update={"confidence": max(p.confidence, min(wanted, _reachable(p)))})


def agreed_stop(stage: StageEval | None, p: DecisionConfig, look: Look | None = None) -> int | None:
    """The K the stop rule fires at where it fires in at least the look's bar's share of the resamples
    (`early_look`), else None. Skipping the K at and above it is a look before the last that cannot be undone (the
    grid's early stop, the adaptive sweep's K never run), so it clears the bar an early verdict clears."""
    if stage is None or stage.stopped_at is None:
        return None
    return stage.stopped_at if stage.stop_share >= early_look(p, look).confidence else None


def look_number(evidence: Evidence, looks: Looks) -> int:
    """The look the evidence stands at: its lives with a valid window at the target (the adaptive sweep), or the
    most repeats of any K there (load.repeats = "auto")."""
    lives = [len({w.repeat for w in cell.windows}) for cell in evidence.at(evidence.target_users).values()]
    return (sum(lives) if looks.unit == "lives" else max(lives, default=0))


@dataclass
class Judged:
    """A look at the target stage: as the last look would judge it (`stage`, by `stage_config`: the last look's
    bar; decision.confidence without planned looks) and as a look that could still buy a life judges it
    (`judged`, by `config`: the look's bar). `tie`: `judged` is decided as a tie by equivalence at the look's bar;
    `tie_at_last`: `stage` would be, at the last look's bar."""

    stage: StageEval | None
    judged: StageEval | None
    config: DecisionConfig
    stage_config: DecisionConfig
    look: Look | None = None      # this look, at the bar of a look that could still buy a life
    last: Look | None = None      # the same look, as the last (all the error left spent)
    tie: bool = False
    tie_at_last: bool = False

    @property
    def decided_at_last_look(self) -> bool:
        return self.stage is not None and (self.stage.status == "decided" or self.tie_at_last)


def _tie(stage: StageEval | None, p: DecisionConfig, look: Look | None) -> bool:
    """A tie by equivalence at the look's bar (planned looks only: a single look decides by the share)."""
    return (look is not None and stage is not None and stage.status != "decided"
            and held_back_by_the_share_alone(stage, p) and tie_confidence(stage, p, look.bar) is not None)


def early_judged(evidence: Evidence, p: DecisionConfig, looks: Looks | None = None) -> Judged:
    """The target stage judged at a look: as the last look would (the verdict if no life follows) and as a look
    that could still buy a life (decided past the look's stricter bar, or as a tie by equivalence at it)."""
    number = look_number(evidence, looks) if looks is not None else 0
    look, last = (looks.at(number), looks.at(number, last=True)) if looks is not None else (None, None)
    final = early_look(p, last) if last else p
    stage = target_stage(evidence, final)
    tie_at_last = _tie(stage, final, last)
    if stage is None or (stage.status != "decided" and not tie_at_last) or stage.pick is None:
        return Judged(stage, stage, final, final, look, last, tie_at_last=tie_at_last)
    config = early_look(p, look)
    judged = target_stage(evidence, config)
    if _tie(judged, config, look):
        return Judged(stage, replace(judged, status="decided", why_not_decided=[]), config, final, look, last, True,
                      tie_at_last)
    return Judged(stage, judged, config, final, look, last, tie_at_last=tie_at_last)


def verdict_at_end(evidence: Evidence, p: DecisionConfig, looks: Looks | None
                   ) -> tuple[DecisionConfig, LookStop | None, float | None]:
    """How the final verdict is judged where the sweep looked as lives ended: the config, where it stopped, and
    the bar a tie is told by equivalence at (None: by the share alone). At a look that could still buy a life it
    stopped past its bar ("boundary") or on a tie ("tie"); else at its last look, by the bar that spends the error
    the earlier looks left ("last look", or "tie" told at it). Either way the config forms its gain and restart
    spread intervals at the look's level (Looks.interval_level). Without planned looks: `p`, None, None."""
    seen = early_judged(evidence, p, looks)
    if looks is None or seen.stage is None or seen.look is None:
        return p, None, None
    early = seen.judged is not None and seen.judged.status == "decided" and seen.look.number < looks.at_most
    look = seen.look if early else seen.last
    tie = seen.tie if early else seen.tie_at_last
    stopped_by = "tie" if tie else "boundary" if early else "last look"
    where = f"look {look.number} of at most {look.at_most}"
    text = {"boundary": f"stopped at {look.text()}",
            "tie": f"stopped at {where} on a tie: every other K's gain inside the ±{p.tie_tolerance_frac:.0%} tie "
                   f"band at {look.bar * 100:.1f} % (equivalence)",
            "last look": f"the last look, {where}: boundary {look.bar * 100:.1f} % (the error the earlier looks "
                         "left)"}[stopped_by]
    # its gain and restart spread intervals at the look's level: they hold at interval_level over the looks together
    reported = looks.interval_level(look.number, p.interval_level, last=not early)
    config = (seen.config if early else seen.stage_config).model_copy().at_look(reported)
    return config, LookStop(rule=RULE, look=look.number, at_most=look.at_most, unit=looks.unit,
                            boundary=round(look.bar, 4), stopped_by=stopped_by, confidence=p.confidence,
                            text=text, interval_level=reported), \
        (look.bar if tie else None)


def auto_repeats_wanted(evidences: list[Evidence], p: DecisionConfig, looks: Looks | None = None
                        ) -> tuple[list[int], str]:
    """load.repeats = "auto": the K to repeat once more over every workload variant's evidence, judged as a look
    that could still buy a life (`early_judged`, at `looks`' bar), and the words for why."""
    wanted: set[int] = set()
    undecided = False
    short: list[str] = []
    for ev in evidences:
        seen = early_judged(ev, p, looks)
        now = wanted_of(seen.judged, seen.config)
        wanted.update(now)
        undecided = undecided or (seen.judged is seen.stage and bool(now))
        if now and seen.judged is not seen.stage:
            at = "" if seen.look is None else f" at look {seen.look.number} of at most {seen.look.at_most}"
            short.append(f"{seen.config.confidence:.1%} an early stop needs{at}")
    if not wanted:
        return [], ""
    return sorted(wanted), ("not decided yet" if undecided else f"decided, short of the {short[0]}")


def repeats_wanted(evidence: Evidence, p: DecisionConfig) -> list[int]:
    """The K to measure once more so an undecided verdict can be decided (load.repeats = "auto"): the
    leader, every K it loses to in at least `contender_share` of the resamples (2 % of 1000 at 90 %), and the
    baseline when a comparison with it lacks data. Empty once decided or blocked."""
    return wanted_of(target_stage(evidence, p), p)


def contender_share(p: DecisionConfig, draws: int) -> float:
    """The win share that keeps a K in the running for a verdict judged at `p.confidence`, among `draws` resamples
    (the stage's `resamples`: more than asked where the share was near the bar): a fifth of the share the verdict
    leaves to the others (2 % at 90 %, 1 % at 95 %; at the early-stop bar of 99 % a rival winning 1 % is what holds
    the stop back, so its next life narrows the verdict, not the leader's), and never fewer than
    MIN_CONTENDER_DRAWS of those draws (0.5 % of 1000): a K winning a draw or two is Monte Carlo noise. The one rule
    for every look: the repeats wanted, the adaptive sweep's bracket, the next runs."""
    return max((1 - p.confidence) * CONTENDER_FRACTION, MIN_CONTENDER_DRAWS / max(draws, 1)) - 1e-9


def wanted_of(stage: StageEval | None, p: DecisionConfig) -> list[int]:
    """`repeats_wanted` of a target stage judged already."""
    if stage is None or stage.status != "not_decided" or stage.pick is None:
        return []
    unknown = [c for k in stage.ks for c in stage.unknown_gates(k)]
    confident = stage.share_range.low is not None and stage.share_range.low >= p.confidence
    if confident and stage.noise.source != "none" and unknown and \
            all(c.unknown_because == "not measured" for c in unknown):
        return []  # a metric is missing: repeats would not bring it
    bar = contender_share(p, stage.resamples)
    wanted = {stage.pick} | {k for k, share in stage.shares.items() if k is not None and share >= bar}
    wanted |= set(off_earlier_held(stage, p))   # a life off what earlier runs measured: its second life tells
    if stage.unknown_gates(stage.pick) or stage.noise.source != "repeats":
        wanted.add(stage.base_k)
    return sorted(wanted)
