"""The run's verdict at its target rate and each K's capacity within the SLO, read from a run folder and joined to
the users verdict (finalize.py calls `with_rate_verdict` after the users decision).

- Rate stages only: the decision is the one at the target rate (decision.target_rate, else the last rate stage;
  decision/rate_decision.py), with the run's own notes (failed lives, diagnoses) carried over.
- User stages and rate stages, no decision.target_rate: the users verdict, with the capacity table.
- Both targets: both verdicts, consistently. `at_rate` holds the one at the rate; the headline says both. The
  status (and so the exit code) is the least settled of the two (per_variant.UNSETTLED: no measurement, no K
  passes, not decided), so 0 means act on both. Both decided: the users K is recommended where it also passes every
  gate at the rate (it keeps up and holds the SLO there, so it serves that traffic, though the rate's own verdict
  may prefer a K with more headroom or a lower latency there: the headline names it); where it fails one, the rate's K is recommended and the headline says what the users K
  misses at that rate (the traffic the user described wins over a concurrency).
The capacity rows (decision/capacity/estimate.py) read the same valid windows as the rate verdict (which weighs
them before the latency at the rate: gates/rate_pick.py), so a K the
verdict passes at the rate has its capacity at or above it; a disagreement (attainment not monotone over the
rates) is named in the diagnoses.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from ...decision.capacity.estimate import capacities, holds_at
from ...decision.cells.rate_cell import same_rate
from ...decision.cells.rate_window import RateWindow
from ...decision.gates import rules
from ...decision.gates.rate_gates import GATE_ATTAINMENT, GATE_KEEPS_UP
from ...decision.per_variant import UNSETTLED, by_variant
from ...decision.rate_decision import decide_at_rate
from ...decision.confirmation.rate_confirm import is_rate_plan, judge_at_rate, with_rate_confirmation
from ...decision.schema import Candidate, Capacity, ConfirmLife, Decision
from ...runfolder.plan import CAPACITY_PURPOSE, LifeStatus, PlannedLife
from ...runfolder.price import looks_of
from ...runfolder.read import RunData

NO_MEASUREMENT_AT_USERS = "Every window at the target concurrency"


def windows_of(data: RunData, axis_value: str = "") -> list[RateWindow]:
    return [w for value, w in data.rate_windows if value == axis_value]


def rate_decision(data: RunData, rate: float, variant: str = "") -> Decision:
    """The verdict at `rate` of one workload variant; with a grid, one per flag value and the best decided one. An
    adaptive sweep that chose its lives on this verdict looked at it as they ended: judged at the bar of the look it
    stopped at (decision/gates/looks.py), as the users verdict of one is."""
    config = data.config
    values = config.grid.values or [""]
    over = ended_over(data.plan.sweep_lives(), data.statuses)
    looked = config.adaptive_rate is not None and same_rate(config.adaptive_rate, rate)
    looks = looks_of(config) if looked else None
    decisions = [(value, decide_at_rate(windows_of(data, value), rate, config.decision, data.argv_by_k(value),
                                        data.setting_names(value), variant, over, looks)) for value in values]
    if not config.grid.axis:
        return decisions[0][1]

    def score(item) -> float:
        d = item[1]
        chosen = [c for c in d.candidates if d.recommended and c.k == d.recommended.k]
        return chosen[0].objective if chosen else float("-inf")

    value, best = max(decisions, key=score)
    return best.model_copy(update={"verdict": f"With {config.grid.axis} {value}: {best.verdict}"})


def ended_over(lives: Sequence[PlannedLife], statuses: Mapping[str, LifeStatus]) -> dict[int, list[float]]:
    """Per K, the rates of its capacity probes that ended early, clearly over capacity (estimate.with_over)."""
    out: dict[int, list[float]] = {}
    for life in lives:
        status = statuses.get(life.dir)
        if life.rates and status is not None and status.ended_early:
            out.setdefault(life.k, []).extend(life.rates)
    return out


def capacity_rows(data: RunData) -> list[Capacity]:
    """Each K's capacity within the SLO, per workload variant (none with a grid axis: one per value is not made)."""
    if data.config.grid.axis:
        return []
    probes = capacity_probes(data)
    over = ended_over(data.plan.sweep_lives(), data.statuses)
    windows = windows_of(data)
    return [row for v in data.config.load.variants
            for row in capacities(windows, data.evidence(variant=v.label) if data.config.load.user_stages else None,
                                  data.config.decision, v.label, dict(probes), over)]


def capacity_probes(data: RunData) -> Counter:
    """Per K, its capacity probes: the capacity search's lives of one rate stage, or the adaptive sweep's marked as
    probes (its repeat at the target rate runs one rate stage too, and is none)."""
    capacity = data.config.sweep.strategy == "capacity"
    return Counter(entry.k for entry in data.plan.sweep_lives()
                   if entry.rates and (capacity or entry.purpose == CAPACITY_PURPOSE))


def _least_settled(*statuses: str) -> str:
    return next((s for s in UNSETTLED if s in statuses), "decided")


def _candidate(decision: Decision, k: int) -> Candidate | None:
    return next((c for c in decision.candidates if c.k == k), None)


def passes_at_rate(at_rate: Decision, k: int) -> bool:
    """K passed every gate at the rate (none failed, none unknown)."""
    found = _candidate(at_rate, k)
    return found is not None and all(c.status in (rules.PASS, rules.WAIVED) for c in found.gates)


def _missed(at_rate: Decision, k: int) -> str:
    found = _candidate(at_rate, k)
    if found is None:
        return f"has no valid window at {at_rate.target_rate:g} req/s"
    failing = [c for c in found.gates if c.status != rules.PASS]
    return "; ".join(f"{c.name} {c.status}: {c.evidence}" for c in failing) or "passes"


def combined(users: Decision, at_rate: Decision) -> Decision:
    """Both verdicts, consistently (the module's docstring says how)."""
    out = users.model_copy(deep=True)
    out.at_rate, out.target_rate = at_rate, at_rate.target_rate
    out.status = _least_settled(users.status, at_rate.status)
    rate = f"{at_rate.target_rate:g} req/s"
    if out.status != "decided":
        out.recommended = None
        out.verdict = f"{users.verdict} {at_rate.verdict}"
        return out
    u, r = users.recommended.k, at_rate.recommended.k
    if u == r:
        out.verdict = f"{users.verdict} {at_rate.verdict}"
    elif passes_at_rate(at_rate, u):
        out.verdict = (f"{users.verdict} At {rate} K={u} keeps the SLO too (it passes every gate there, so it "
                       f"serves that traffic; the rate's own verdict would set K={r}): {at_rate.verdict}")
    else:
        out.recommended = at_rate.recommended
        out.verdict = (f"Set K={r} for your {rate}: {at_rate.verdict} At {users.target_users} users K={u} serves the "
                       f"most, but at {rate} it {_missed(at_rate, u)}. {users.verdict}")
    return out


def _consistency(at_rate: Decision, rows: list[Capacity], offered: Mapping[int, float]) -> list[str]:
    """Where the capacity table and the gates at the target rate disagree on a K (attainment not monotone), each K
    placed at the rate its windows there were offered (`offered`; the capacity's brackets are of offered rates)."""
    out = []
    for c in at_rate.candidates:
        row = next((x for x in rows if x.k == c.k and x.variant == at_rate.variant), None)
        says = holds_at(row, offered.get(c.k, at_rate.target_rate)) if row is not None else None
        gates = {g.name: g.status for g in c.gates}
        failed = rules.FAIL in (gates.get(GATE_KEEPS_UP), gates.get(GATE_ATTAINMENT))
        passed = gates.get(GATE_KEEPS_UP) == rules.PASS and gates.get(GATE_ATTAINMENT) == rules.PASS
        if (says is True and failed) or (says is False and passed):
            out.append(f"K={c.k}: its capacity within the SLO ({row.rate_text}) and its gates at "
                       f"{at_rate.target_rate:g} req/s disagree: its SLO attainment is not monotone over the rates "
                       "measured (a noisy or non-monotone server); repeat the rate stages around it.")
    return out


def _with_capacity(at_rate: Decision, rows: list[Capacity], offered: Mapping[int, float]) -> Decision:
    mine = [row for row in rows if row.variant == at_rate.variant and row.rate_text]
    if not mine or at_rate.target_rate is None:
        return at_rate
    out = at_rate.model_copy(deep=True)
    out.verdict += " Capacity within the SLO: " + "; ".join(f"K={row.k} {row.rate_text}" for row in mine) + "."
    out.diagnoses += _consistency(at_rate, rows, offered)
    return out


def offered_at(data: RunData, rate: float, variant: str = "") -> dict[int, float]:
    """Per K, the rate its valid windows at `rate` were offered, pooled (as capacity/estimate.rate_points places
    them)."""
    seconds: dict[int, float] = {}
    arrivals: dict[int, int] = {}
    for _, w in data.rate_windows:
        if w.valid and w.variant == variant and same_rate(w.rate, rate):
            seconds[w.k] = seconds.get(w.k, 0.0) + w.duration_s
            arrivals[w.k] = arrivals.get(w.k, 0) + w.arrivals
    return {k: round(arrivals[k] / s, 6) for k, s in seconds.items() if s > 0}


def with_rate_verdict(decision: Decision, data: RunData) -> Decision:
    """The decision with the verdict at the target rate (where there is one) and the capacity table."""
    config = data.config
    rows = capacity_rows(data) if data.rate_windows else []
    rate = config.target_rate
    if rate is None:
        return decision.model_copy(update={"capacity": rows})
    variants = config.load.variants
    parts = [(v.label, _with_capacity(rate_decision(data, rate, v.label), rows, offered_at(data, rate, v.label)))
             for v in variants]
    at_rate = parts[0][1] if len(parts) == 1 else by_variant(parts).model_copy(update={"target_rate": rate})
    if config.load.user_stages:
        out = combined(decision, at_rate)
    elif is_rate_plan(data.plan.confirm):
        out = confirmed_at_rate(data, at_rate)
    else:
        out = at_rate.model_copy(deep=True)
        out.reasons += [r for r in decision.reasons if not r.startswith(NO_MEASUREMENT_AT_USERS)]
        out.diagnoses = decision.diagnoses + out.diagnoses
        out.failed_lives, out.skipped_lives = decision.failed_lives, decision.skipped_lives
    out.capacity = rows
    return out


def confirmed_at_rate(data: RunData, at_rate: Decision) -> Decision:
    """The verdict at the rate with the verdict of its confirmation life (decision/confirmation/rate_confirm.py)."""
    plan = data.plan.confirm
    lives = [life for life in data.lives if life.planned.confirms]
    states = [ConfirmLife(l.planned.dir, l.state, l.reason) for l in lives]
    verdict = judge_at_rate(plan, at_rate, windows_of_confirmation(data), states,
                            lives[0].planned.argv if lives else [], data.config.decision)
    return with_rate_confirmation(at_rate, verdict)


def windows_of_confirmation(data: RunData) -> list[RateWindow]:
    return [w for _, w in data.confirm_rate_windows]


def capacity_note(data: RunData) -> str:
    """The reason line about a capacity search: what it probed, why it stopped."""
    lives = data.plan.sweep_lives()
    probes = Counter(entry.k for entry in lives if entry.rates)
    ran = ", ".join(f"K={k} {n} probe{'s' if n > 1 else ''}" for k, n in sorted(probes.items())) or "no probe"
    ended = sum(1 for status in data.statuses.values() if status.ended_early)
    early = f"; {ended} ended early, clearly over capacity" if ended else ""
    stopped = data.plan.adaptive.stopped if data.plan.adaptive else ""
    return (f"Capacity search: {len(lives)} lives (every K once over the stages, then {ran}{early}); "
            f"stopped: {stopped or 'not yet (interrupted)'}.")

