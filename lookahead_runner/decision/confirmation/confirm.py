"""The confirmation: what the report recommends, run in a life of its own and judged against the per-K lives.

`plan` says what to run (the schedule of `decision.per_batch_size`, or with `decision.confirm = "always"`
the single recommended K) and at which stages: the sweep's, plus threshold stages around each boundary
(thresholds.py). `judge` compares every stage of that life with the cell the decision expected (the
per-K life of the K the recommendation runs there), on the objective, with the intervals of the
engine: both cells resampled, the interval put on their ratio, the tie band as the business tolerance.

- confirmed: every stage within the tie band of its expectation (or better), no boundary collapses;
- confirmed with a cost: the target holds, but some stage or boundary falls short beyond the tie band
  and its interval (e.g. the schedule's per-step overhead at a low batch), listed with the numbers;
- not confirmed: a boundary collapses (beyond `collapse_frac` below what the stages beside it expect),
  the target falls below the single K (a schedule) or below the runner-up (a single K), requests fail,
  or the life never measured; then the single K stands, and the report shows why;
- not in effect: in some stage the server did not draft what the schedule (or the K) says at the real batch it
  measured (the window's drafted tokens per step, telemetry/drafting.py): the server ignored it (vLLM #51510),
  so its figures are not the schedule's; the single K stands. A different finding from a cost at a boundary.
Pure: typed evidence in, a `Confirmation` out.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...config import DecisionConfig
from ...vllm.schedule import Schedule
from ..cells.evidence import Cell, Evidence
from ..explanation.reasons import OBJECTIVE_LABEL
from ..gates.in_effect import NOT_IN_EFFECT, not_applied, not_in_effect_verdict
from ..cells.measure import PreparedCell, ThroughputNoise, throughput_noise
from ..schema import Boundary, Confirmation, ConfirmLife, ConfirmPlan, ConfirmStage, Decision, Range
from ..cells.stats import Bounds, interval, proportion_difference
from ..explanation.text import pct, rate
from .thresholds import boundaries, confirmation_stages, lands_in_band

FAILING = ("failures", "collapse")


def what_to_confirm(decision: Decision, mode: str) -> str | None:
    """"schedule", "k" or None: a schedule by default, the single K only when asked ("always")."""
    if mode == "off" or decision.mode == "ramp":
        return None
    if decision.per_batch_size and decision.per_batch_size.argv:
        return "schedule"
    if mode == "always" and decision.recommended is not None and decision.status == "decided":
        return "k"
    return None


def plan(decision: Decision, evidence: Evidence, stages: list[tuple[int, float]], p: DecisionConfig,
         axis_value: str = "") -> ConfirmPlan | None:
    kind = what_to_confirm(decision, p.confirm)
    if kind is None:
        return None
    if kind == "schedule":
        ranges = [list(r) for r in decision.per_batch_size.ranges]
        form, k, bounds = decision.per_batch_size.form, max(r[2] for r in ranges), \
            boundaries(ranges, evidence)
    else:
        ranges, form, k, bounds = [], "list", decision.recommended.k, []
    chosen = confirmation_stages(stages, evidence.target_users, p.confirm_stages, bounds)
    swept = {users for users, _ in stages}
    extra = [s["users"] for s in chosen if s["users"] not in swept]
    sweep_repeats = max((cell.repeats for cell in evidence.cells.values()), default=0)
    scope = (f"{p.confirm_repeats} {'life' if p.confirm_repeats == 1 else 'lives'} of "
             + ("every stage of the sweep" if p.confirm_stages == "all" else
                f"the target stage only ({evidence.target_users} users)")
             + (f", plus threshold stages at {', '.join(map(str, extra))} users around "
                f"{len(bounds)} {'boundary' if len(bounds) == 1 else 'boundaries'}" if extra else "")
             + f" (the sweep measured each K {sweep_repeats} {'time' if sweep_repeats == 1 else 'times'})")
    return ConfirmPlan(kind=kind, k=k, ranges=ranges, form=form, axis_value=axis_value, stages=chosen,
                       boundaries=bounds, repeats=p.confirm_repeats, scope=scope)


def describe(plan_: ConfirmPlan) -> str:
    if plan_.kind == "k":
        return f"K={plan_.k}"
    parts = [f"K={k} " + (f"up to batch {hi}" if i == 0 else
                          "above" if i == len(plan_.ranges) - 1 else f"for batch {lo}-{hi}")
             for i, (lo, hi, k) in enumerate(plan_.ranges)]
    return "the per-batch-size schedule (" + ", ".join(parts) + ")"


@dataclass(frozen=True)
class Figures:
    """A cell's objective as measured and resampled (draws index-aligned across the judge), and what a row
    shows beside it; an expectation may be a line between two cells (a threshold stage's)."""

    value: float
    draws: np.ndarray
    failures: int = 0
    finished: int = 0
    running_mean: float | None = None
    tpot_p50_ms: float | None = None

    @classmethod
    def of(cls, cell: Cell | None, p: DecisionConfig, rng: np.random.Generator, noise: ThroughputNoise) -> Figures | None:
        if cell is None:
            return None
        prepared = PreparedCell(cell, p.slos, p.bin_min_s)
        stats = prepared.measure()
        return cls(stats.objective(p.objective), prepared.draws(rng, p.resamples, noise).objective(p.objective),
                   stats.failures, stats.finished, _finite(stats.running_mean), _finite(stats.quantile("tpot_ms", 0.5)))

    @classmethod
    def line(cls, points: list[tuple[float, Figures]], users: float) -> Figures:
        """Linear in users between two stages (from the origin when none is below): req/s is concave in
        users, so the line between two stages is a floor for the stages between them; past the last, its value."""
        if len(points) == 1 and points[0][0] <= users:
            return cls(points[0][1].value, points[0][1].draws)
        (u0, f0), (u1, f1) = points if len(points) == 2 else ((0.0, None), points[0])
        w = (users - u0) / (u1 - u0)
        low_value, low_draws = (f0.value, f0.draws) if f0 is not None else (0.0, 0.0)
        return cls((1 - w) * low_value + w * f1.value, (1 - w) * low_draws + w * f1.draws)


def _relative(mine: Figures, theirs: Figures, p: DecisionConfig) -> tuple[float, Bounds]:
    with np.errstate(all="ignore"):
        point = mine.value / theirs.value - 1 if theirs.value else np.nan
        return float(point), interval(mine.draws / theirs.draws - 1, p.interval_level)


def _range(bounds: Bounds) -> Range:
    return Range(low=bounds.low, high=bounds.high)


def _clearly_below(bounds: Bounds, tie: float) -> bool:
    return bounds.high is not None and bounds.high < -tie


def _diff_text(point: float, bounds: Bounds) -> str:
    return f"{pct(point, signed=True)} [{pct(bounds.low, signed=True)}, {pct(bounds.high, signed=True)}]"


class _Judge:
    """Resamples each cell once (the run's seed) and compares the confirmation's stages with them."""

    def __init__(self, plan_: ConfirmPlan, decision: Decision, evidence: Evidence, confirmed: dict[int, Cell],
                 p: DecisionConfig) -> None:
        self.plan, self.decision, self.evidence, self.p = plan_, decision, evidence, p
        self.rng = np.random.default_rng(p.seed)
        self.label = OBJECTIVE_LABEL[p.objective]
        self._noise: dict[int, ThroughputNoise] = {}
        self.confirmed = {u: Figures.of(c, p, self.rng, self.noise(u)) for u, c in sorted(confirmed.items())}
        self.windows = {u: c.windows for u, c in confirmed.items()}
        self.cells: dict[tuple[int, int], Figures | None] = {}
        self.schedule = Schedule.from_ranges(plan_.ranges, "list") if plan_.ranges else None
        self.single = decision.recommended.k if decision.recommended else None

    def noise(self, users: int) -> ThroughputNoise:
        """The per-K lives' throughput noise at this stage (a confirmation life alone has one repeat), or over
        every stage when it has none (a threshold stage the sweep did not run)."""
        if users not in self._noise:
            noise = throughput_noise(self._prepared(self.evidence.at(users).values()))
            self._noise[users] = noise if noise.df else throughput_noise(self._prepared(self.evidence.cells.values()))
        return self._noise[users]

    def _prepared(self, cells) -> list[PreparedCell]:
        return [PreparedCell(c, self.p.slos, self.p.bin_min_s) for c in cells]

    def cell(self, k: int, users: int) -> Figures | None:
        if (k, users) not in self.cells:
            self.cells[(k, users)] = Figures.of(self.evidence.cell(k, users), self.p, self.rng, self.noise(users))
        return self.cells[(k, users)]

    def k_at(self, users: int) -> int:
        """The K the recommendation runs at this sweep stage: the stage's own pick where it anchors the
        schedule, else the schedule's K at the real batch the stage measured."""
        if self.schedule is None:
            return self.plan.k
        pick = next((s for s in self.decision.per_stage if s.users == users), None)
        if pick is not None and pick.k is not None and pick.status == "decided":
            return pick.k
        batch = pick.running_mean if pick is not None and pick.running_mean is not None else users
        return self.schedule.k_for(max(1, round(batch)), self.plan.k)

    def stage(self, users: int) -> ConfirmStage:
        k = self.k_at(users)
        mine, expected = self.confirmed.get(users), self.cell(k, users)
        row = ConfirmStage(users=users, k=k, expected_from=f"K={k} at {users} users")
        self._fill(row, mine, expected)
        if mine is None or expected is None:
            return row
        if self.schedule is not None and self.single is not None and (single := self.cell(self.single, users)):
            row.vs_single, bounds = _relative(mine, single, self.p)
            row.vs_single_range = _range(bounds)
            if _clearly_below(bounds, self.p.tie_tolerance_frac) and row.outcome != "failures":
                row.outcome = "worse than the single K"
                row.text += f"; {_diff_text(row.vs_single, bounds)} vs K={self.single} alone"
        self.in_effect(row)
        if self.schedule is not None and k < self.plan.k and row.running_mean is not None \
                and expected.running_mean and row.running_mean < expected.running_mean * (1 - self.p.batch_drop_frac):
            row.text += (f"; real batch {row.running_mean:.1f} vs {expected.running_mean:.1f} in k{k}'s life: the server "
                         f"sizes KV lookahead and memory for the schedule's largest K ({self.plan.k}) at every batch")
        return row

    def _fill(self, row: ConfirmStage, mine: Figures | None, expected: Figures | None) -> None:
        p, tie = self.p, self.p.tie_tolerance_frac
        if mine is not None:
            row.running_mean, row.objective = mine.running_mean, _finite(mine.value)
            row.objective_range = _range(interval(mine.draws, p.interval_level))
            row.tpot_p50_ms = mine.tpot_p50_ms
            row.failure_rate = mine.failures / mine.finished if mine.finished else None
        if expected is not None:
            row.expected, row.expected_range = _finite(expected.value), _range(interval(expected.draws, p.interval_level))
            if row.role == "stage":
                row.expected_running_mean, row.expected_tpot_p50_ms = expected.running_mean, expected.tpot_p50_ms
        if mine is None:
            row.outcome, row.text = "no measurement", f"{row.users} users: no valid window in the confirmation life"
            return
        if expected is None:
            row.outcome, row.text = "no expectation", f"{row.users} users: no valid per-K cell ({row.expected_from})"
            return
        row.difference, bounds = _relative(mine, expected, p)
        row.difference_range = _range(bounds)
        failures = proportion_difference(mine.failures, mine.finished, expected.failures, expected.finished,
                                         p.interval_level) if expected.finished else Bounds(None, None)
        row.outcome = ("failures" if failures.low is not None and failures.low > p.failure_rate_slack else
                       "cost" if _clearly_below(bounds, tie) else
                       "better" if bounds.low is not None and bounds.low > tie else "as expected")
        row.text = self._text(row, bounds)

    def _text(self, row: ConfirmStage, bounds: Bounds) -> str:
        batch = f", real batch {row.running_mean:.1f}" if row.running_mean is not None else ""
        text = (f"{row.users} users ({'K=' + str(row.k) if row.k is not None else ''}{batch}): "
                f"{rate(row.objective)} {self.label} vs {rate(row.expected)} from {row.expected_from} "
                f"({_diff_text(row.difference, bounds)})")
        if row.tpot_p50_ms is not None and row.expected_tpot_p50_ms:
            text += (f"; TPOT p50 {row.tpot_p50_ms:.1f} ms vs {row.expected_tpot_p50_ms:.1f} ms "
                     f"({pct(row.tpot_p50_ms / row.expected_tpot_p50_ms - 1, signed=True)})")
        if row.outcome == "failures":
            text += f"; failures {pct(row.failure_rate)} of its requests"
        if self.noise(row.users).source == "bins":
            text += "; its interval holds the noise within the windows only (one life per K: no restart-to-restart spread)"
        return text

    def threshold(self, bound: Boundary, side: str) -> ConfirmStage | None:
        """A threshold stage against the per-K lives of the K the schedule runs on its side: the line between
        that K's cells at the sweep stages beside it (one K's req/s is concave in users, so the line is a floor
        between them; from the origin below the first stage, flat past the last). Below it beyond `collapse_frac`
        (and the tie band, interval included) is a collapse."""
        users = bound.users_below if side == "below" else bound.users_above
        if users is None:
            return None
        k = bound.k_below if side == "below" else bound.k_above
        row = ConfirmStage(users=users, role=side, k=k, expected_running_mean=bound.expected_batch_below
                           if side == "below" else bound.expected_batch_above)
        measured = [u for u in self.evidence.users if self.evidence.cell(k, u) is not None]
        if users in measured:  # a sweep stage already sits there: its K's own cell
            beside, expected = [users], self.cell(k, users)
        else:
            beside = [u for u in (max((u for u in measured if u < users), default=None),
                                  min((u for u in measured if u > users), default=None)) if u is not None]
            expected = Figures.line([(float(u), self.cell(k, u)) for u in beside], users) if beside else None
        row.expected_from = (f"the line between K={k} at {beside[0]} and {beside[1]} users" if len(beside) == 2
                             else f"K={k} at {users} users" if beside == [users]
                             else f"the line from the origin to k{k} at {beside[0]} users" if beside and beside[0] > users
                             else f"K={k} at {beside[0]} users (no stage above)" if beside else f"no K={k} stage beside it")
        self._fill(row, self.confirmed.get(users), expected)
        if row.outcome == "cost" and row.difference is not None and row.difference < -self.p.collapse_frac:
            row.outcome = "collapse"
            row.text = f"{self.label} falls {pct(-row.difference)} at batch {bound.batch} -> {bound.batch + 1}: {row.text}"
        if row.running_mean is not None and not lands_in_band(row.running_mean, bound.batch, side):
            row.text += f" (its real batch landed outside the ~10 % band {side} batch {bound.batch})"
        self.in_effect(row)
        return row

    def in_effect(self, row: ConfirmStage) -> None:
        """The stage's drafted tokens per step against the schedule's K at the real batch it measured: where the
        analysis found them off (telemetry/drafting.py), the stage is "not in effect", first in its text; where its
        counters and its requests' own metrics disagree (a schedule's windows can), the stage keeps the note."""
        windows = self.windows.get(row.users, ())
        drafted = [w.drafted for w in windows if np.isfinite(w.drafted)]
        row.drafted_per_step = float(np.mean(drafted)) if drafted else None
        off = next((w for w in windows if w.not_in_effect), None)
        if row.outcome == "no measurement":
            return
        row.drafted_note = next((w.drafted_note for w in windows if w.drafted_note), "")
        if off is None:
            return
        row.outcome = NOT_IN_EFFECT
        said = not_applied(self.schedule, self.plan.k, off.drafted, off.signal("running_mean"))
        row.text = f"{said}; {row.text}"

    def crossing(self, bound: Boundary, below: ConfirmStage | None, above: ConfirmStage | None) -> str:
        """What the objective does from the stage below a boundary to the one above: a fall beyond the tie band
        (interval included) is a cost of the threshold, beyond `collapse_frac` a collapse."""
        mine_below = self.confirmed.get(below.users) if below else None
        mine_above = self.confirmed.get(above.users) if above else None
        if mine_below is None or mine_above is None:
            return (f"batch {bound.batch} -> {bound.batch + 1}: not measured on both sides"
                    + (f" ({bound.note})" if bound.note else ""))
        point, bounds = _relative(mine_above, mine_below, self.p)
        tie = self.p.tie_tolerance_frac
        falls = _clearly_below(bounds, tie)
        verb = (f"falls {pct(-point)}" if falls else
                f"rises {pct(point)}" if bounds.low is not None and bounds.low > tie else "holds")
        text = (f"{self.label} {verb} crossing batch {bound.batch} -> {bound.batch + 1} "
                f"({below.users} users, batch {_batch(below.running_mean)}, K={bound.k_below} -> {above.users} users, "
                f"batch {_batch(above.running_mean)}, K={bound.k_above}): {rate(below.objective)} -> "
                f"{rate(above.objective)} ({_diff_text(point, bounds)})")
        if falls and above.outcome not in FAILING:
            above.outcome = "collapse" if point < -self.p.collapse_frac else "cost"
            above.text = f"{text}; {above.text}"
        return text


def _finite(value: float | None) -> float | None:
    return None if value is None or not np.isfinite(value) else float(value)


def _batch(value: float | None) -> str:
    return "?" if value is None else f"{value:.1f}"


def judge(plan_: ConfirmPlan, decision: Decision, evidence: Evidence, confirmed: dict[int, Cell],
          lives: list[ConfirmLife], argv: list[str], p: DecisionConfig) -> Confirmation:
    """The confirmation's verdict. `lives`: where each confirmation life stands."""
    out = Confirmation(status="pending", kind=plan_.kind, life=", ".join(life.folder for life in lives), argv=argv,
                       k=plan_.k, ranges=plan_.ranges,
                       single_k=decision.recommended.k if decision.recommended else None, scope=plan_.scope,
                       boundaries=plan_.boundaries)
    what = describe(plan_)
    done = [life for life in lives if life.state == "done"]
    if not done:
        failed = [life for life in lives if life.state == "failed"]
        if not failed:
            out.verdict = f"Confirmation of {what} not run yet (continue with --resume)."
            return out
        out.reasons = [f"{life.folder}: {life.reason}" for life in failed]
        return _not_confirmed(out, what, f"the server did not run it: {failed[0].reason}", decision)
    j = _Judge(plan_, decision, evidence, confirmed, p)
    sweep = [s["users"] for s in plan_.stages if s["users"] in evidence.users]
    out.stages = [j.stage(u) for u in sweep]
    for bound in plan_.boundaries:
        below, above = j.threshold(bound, "below"), j.threshold(bound, "above")
        out.stages += [row for row in (below, above) if row is not None]
        out.crossings.append(j.crossing(bound, below, above))
    out.stages.sort(key=lambda row: row.users)
    return _verdict(out, what, decision, evidence.target_users, p)


def _verdict(out: Confirmation, what: str, decision: Decision, target: int, p: DecisionConfig) -> Confirmation:
    ignored = [r for r in out.stages if r.outcome == NOT_IN_EFFECT]
    if ignored:
        return not_in_effect_verdict(out, what, decision, ignored)
    target_row = next((r for r in out.stages if r.users == target and r.role == "stage"), None)
    failing = [r for r in out.stages if r.outcome in FAILING]
    measured = target_row is not None and target_row.objective is not None
    if measured and out.kind == "schedule" and target_row.outcome == "worse than the single K":
        failing.append(target_row)
    if measured and out.kind == "k" and target_row.outcome == "cost":
        runner_up = max((c.objective for c in decision.candidates if c.k != out.k and not c.blocked_by
                         and not c.beyond_stop), default=None)
        if runner_up is not None and target_row.objective < runner_up:
            target_row.text += f"; below the runner-up's {rate(runner_up)}"
            failing.append(target_row)
    out.reasons = [r.text if r.text.startswith(f"{OBJECTIVE_LABEL[p.objective]} falls") else f"{r.outcome} at {r.text}"
                   for r in sorted(failing, key=lambda r: r.users)]
    if not measured:
        out.reasons.insert(0, f"no valid window at the target ({target} users)")
    if out.reasons:
        return _not_confirmed(out, what, "; ".join(out.reasons), decision)
    out.costs = [r.text for r in out.stages if r.outcome in ("cost", "worse than the single K")]
    unchecked = [c for c in out.crossings if "not measured on both sides" in c]
    where = "every stage" + (" and across each boundary" if out.boundaries and not unchecked else "")
    caveat = "".join(f" Not checked: {c}." for c in unchecked)
    if out.costs:
        out.status = "confirmed with a cost"
        out.verdict = (f"Confirmed with a cost: {what} ran in a life of its own ({out.life}) and holds at the target, "
                       f"but falls short beyond the tie band ({pct(p.tie_tolerance_frac)}) at " + "; ".join(out.costs)
                       + "." + caveat)
    else:
        out.status = "confirmed"
        out.verdict = (f"Confirmed: {what} ran in a life of its own ({out.life}) and delivered what the per-K lives "
                       f"showed at {where}, within the tie band ({pct(p.tie_tolerance_frac)}) and the noise." + caveat)
    return out


def _not_confirmed(out: Confirmation, what: str, why: str, decision: Decision) -> Confirmation:
    out.status = "not confirmed"
    if out.kind == "schedule":
        stands = (f"K={decision.recommended.k} alone stands (the command above)" if decision.recommended
                  else "no single K stands either (not decided at the target)")
    else:
        stands = "the sweep's figures did not hold in a life of their own: add repeats before trusting them"
    out.verdict = f"Not confirmed: {what}, run in a life of its own ({out.life}): {why}. {stands[0].upper() + stands[1:]}."
    return out


def with_confirmation(decision: Decision, confirmation: Confirmation) -> Decision:
    """The decision with its confirmation recorded and told in the verdict (and the next runs)."""
    decision = decision.model_copy(deep=True)
    decision.confirmation = confirmation
    decision.verdict = f"{decision.verdict} {confirmation.verdict}".strip()
    if confirmation.status in ("not confirmed", NOT_IN_EFFECT) and confirmation.kind == "k":
        # the one K picked did not hold in its own life: nothing stands, so it is not a verdict to act on
        decision.status, decision.recommended = "not_decided", None
        decision.verdict = (f"Not decided yet at {decision.target_users} users: the sweep picked K={confirmation.k}, "
                            f"but its own life disagreed. {confirmation.verdict}")
        decision.next_runs.append(f"Add repeats of K={confirmation.k} (load.repeats): its own life disagreed "
                                  "with the sweep's.")
    return decision


def unconfirmed_note(decision: Decision, mode: str) -> str:
    """What a report says of a schedule no life confirmed (decision.confirm = "off")."""
    if not (decision.per_batch_size and decision.per_batch_size.argv) or mode != "off":
        return ""
    return ("The per-batch-size schedule was not run in a life of its own (decision.confirm = \"off\"): a schedule "
            "can cost every step and collapse at a boundary (vLLM issue #49548), which no per-K life shows; confirm it "
            "(--confirm) before using it.")

