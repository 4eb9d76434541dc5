"""The product's knee, gate, drafting, in-effect and outlier code, one small function per call the findings groups
make (gate_findings.py, drafting_findings.py, outliers.py, set_apart.py): adapters.py's other half, split off by
family.

Claim: none of its own; every finding the suite scores comes from these calls into lookahead_runner (gates/knee,
gates/checks through the stage's evaluation, telemetry/drafting, gates/in_effect, cells/restart_spread), never from a
re-implementation. Other work moves these APIs: a changed signature is a one-line fix here.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from lookahead_runner.config import DecisionConfig
from lookahead_runner.decision import Evidence, Window, evidence
from lookahead_runner.decision.schema import Decision
from lookahead_runner.runfolder.analysis import WindowRules


def ramp_knee(windows: Sequence[Window], k: int, p: DecisionConfig):
    """The knee `lookahead-runner ramp` finds for K over the windows' users stages (decision.json's knee): as
    decision/ramp.users_ramp_decision finds it (every stage evaluated, gates/knee.find_knee over them), without the
    decision's texts."""
    from lookahead_runner.decision.engine import evaluate_stages
    from lookahead_runner.decision.gates.knee import find_knee

    stages = evaluate_stages(evidence(windows, max(w.users for w in windows)), p)
    stages = {u: st for u, st in stages.items() if k in st.stats}
    return find_knee(k, {u: st.stats[k] for u, st in stages.items()}, {u: st.draws[k] for u, st in stages.items()}, p)


def gate_status(windows: Sequence[Window], users: int, k: int, gate: str, p: DecisionConfig) -> str:
    """One gate's status for K at a users stage as decision.json's candidate shows it (gates/checks.py through the
    stage's evaluation, engine.candidates' `gates`, without the candidates' trade-off texts): gate is failures,
    latency, memory or real batch."""
    from lookahead_runner.decision.engine import evaluate_stages
    from lookahead_runner.decision.gates import rules

    name = {"failures": rules.GATE_FAILURES, "latency": rules.GATE_LATENCY, "memory": rules.GATE_MEMORY,
            "real batch": rules.GATE_BATCH}[gate]
    stage = evaluate_stages(evidence(windows, users), p)[users]
    return next(g.status for g in stage.checks[k] if g.name == name)


def requests_to_bound(p: DecisionConfig) -> int:
    """The requests a latency percentile needs before it has an upper bound at the decision's interval level."""
    from lookahead_runner.decision.cells.stats import min_samples_for_upper_bound

    return min_samples_for_upper_bound(p.latency_percentile / 100, p.interval_level)


def drafted_per_step(drafted: float, drafts: float) -> float:
    """Drafted tokens per step from two counters' deltas (telemetry/drafting.py), 0 where they saw no draft: as
    runfolder/analysis.py reads the counters and the requests' own figure (not unknown)."""
    from lookahead_runner.telemetry.drafting import drafted_per_step as ratio

    per_step = ratio(drafted, drafts)
    return 0.0 if per_step is None else per_step


def drafting_share(drafts: float, generated: float, accepted: float) -> float | None:
    from lookahead_runner.telemetry.drafting import drafting_share as share

    return share(drafts, generated, accepted)


def drafts_flag(k: int, schedule, counters: float | None, requests: float | None, share: float | None,
                batches: Sequence[float], request_batches: Sequence[float]) -> str:
    """Why a window was not in effect ("" where it was), as runfolder/analysis.py asks telemetry/drafting.py: the
    schedule's K at the window's readings of the batch, the counters' figure else the requests' own (judged at the
    batches read while those requests ran)."""
    from lookahead_runner.telemetry.drafting import check_window, expected_drafts

    schedule = [list(r) for r in schedule] or None
    expected = expected_drafts(k, schedule, batches)
    return check_window(k, counters, requests, expected, schedule or (), share, request_batches).reason


def barred_not_in_effect(k: int, reasons: Sequence[str], users: int = 16) -> bool:
    """Whether the decision says K cannot be recommended, its lives' windows at the target flagged `reasons`
    ("" = in effect; gates/in_effect.with_settings_in_effect)."""
    from lookahead_runner.decision.gates.in_effect import WindowFinding, with_settings_in_effect

    decision = Decision(status="decided", verdict="", target_users=users)
    out = with_settings_in_effect(decision, [WindowFinding(k, users, reason) for reason in reasons])
    return f"K={k} cannot be recommended" in out.verdict


def drafted_tolerance(expected: np.ndarray) -> np.ndarray:
    """telemetry/drafting.tolerance per step: how far a window's drafted tokens per step may be off its K and still be
    that K (what "not in effect" means)."""
    from lookahead_runner.telemetry.drafting import tolerance

    return np.vectorize(tolerance, otypes=[float])(np.asarray(expected, dtype=float))


def min_requests() -> int:
    """The fewest completed requests a window needs to be valid (runfolder/analysis.WindowRules)."""
    return WindowRules().min_requests


@dataclass(frozen=True)
class OutlierCheck:
    """The outlier guard on one users stage of single-life K against a ledger's levels (restart_spread.off_earlier):
    the K it flags, each K's relative deviation from its level, and the K a one-sided (slow-only) Student's t test
    at the same false-alarm rate would flag (restart_spread.outlier_limit at twice the rate: its one tail)."""

    flagged: frozenset[int]
    deviation: dict[int, float]
    slow_flagged: frozenset[int]
    false_alarm: float   # the stated rate per K (restart_spread.outlier_false_alarm)


def outlier_check(ev: Evidence, p: DecisionConfig) -> OutlierCheck:
    from lookahead_runner.decision.cells import restart_spread
    from lookahead_runner.decision.engine import evaluate_stages

    stage = evaluate_stages(ev, p)[ev.target_users]
    earlier = p.earlier_spread
    objective = {k: s.objective(p.objective) for k, s in stage.stats.items()}
    lives = {k: len(cell.windows) for k, cell in stage.prepared.items()}
    flagged = restart_spread.off_earlier(objective, lives, stage.noise_by_k, earlier, p.interval_level)
    checked = [k for k in objective if lives[k] == 1 and earlier is not None and str(k) in earlier.levels]
    rate = restart_spread.outlier_false_alarm(p.interval_level, len(checked))
    deviation = {k: objective[k] / earlier.levels[str(k)] - 1 for k in checked}
    window = (earlier.window_squares / earlier.df, earlier.window_df) if earlier.window_df and earlier.df else (0.0, 0)
    slow = frozenset(k for k in checked if -deviation[k] > restart_spread.outlier_limit(
        stage.noise_by_k[k].rel_sd, stage.noise_by_k[k].df, earlier.runs, 2 * rate, *window))
    return OutlierCheck(frozenset(flagged), deviation, slow, rate)


def spread_set_apart(decision: Decision) -> bool:
    """Whether the stage's pool set a K's lives apart (restart_spread.with_restart_spread's note on the spread)."""
    s = decision.restart_spread
    return s is not None and "wider beyond an F test" in s.text
