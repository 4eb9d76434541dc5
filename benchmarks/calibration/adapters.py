"""The product's own decision code, one small function per call the suite makes.

Claim: none of its own; every figure the suite scores comes from these calls into lookahead_runner (the engine,
the adaptive chooser, auto repeats, the rate window, the rate verdict, the capacity estimate and search, a request
set's acceptance table, the performance model's fit), never
from a re-implementation. Other work moves these APIs: a changed signature is a one-line fix here. The findings
groups' calls (the knee, the gates, the drafts-short flag, in effect, the outlier guard) are in adapters_findings.py.
"""
from __future__ import annotations

import inspect
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from lookahead_runner.config import DecisionConfig
from lookahead_runner.config.decision import EarlierSpread
from lookahead_runner.config.slo import Slo, parse_slos
from lookahead_runner.decision import Evidence, Window, decide, evidence
from lookahead_runner.decision.capacity import estimate
from lookahead_runner.decision.cells import rate_window as rate_window_module
from lookahead_runner.decision.cells.rate_cell import RateCell
from lookahead_runner.decision.cells.rate_window import RateWindow
from lookahead_runner.decision.engine import auto_repeats_wanted
from lookahead_runner.decision.gates import rate_gates
from lookahead_runner.decision.rate_decision import decide_at_rate
from lookahead_runner.decision.schema import Decision
from lookahead_runner.runfolder.analysis import WindowRules
from lookahead_runner.runfolder.rate_windows import rate_window as window_from_frames
from lookahead_runner.workload.arrivals import ArrivalProcess, stage_offsets

SERVER_KIND = "simulator drawing a restart spread"   # a kind with no documented spread: it is measured or assumed


def decision_config(slo: Mapping[str, float] | None = None) -> DecisionConfig:
    """The product's defaults (confidence 90 %, intervals at 95 %, tie band 3 %), for a server whose restart spread
    is not known in advance; each SLO held at its key's percentile (ttft_p90_ms: 90 % within)."""
    fields = {"confirm": "off", **({"slo": dict(slo)} if slo else {})}
    return DecisionConfig.model_validate(fields).for_server(SERVER_KIND)


def with_ledger(p: DecisionConfig, entry, users: int, workload: str) -> DecisionConfig:
    """`p` (a copy) with what a ledger holding one earlier run on this server (`entry`: lives.LedgerEntry, as
    runfolder/spread_ledger.LedgerRun records it) gives a run at `users` on `workload`: the product's own selection
    (spread_ledger.earlier_of: only the same users and workload), as plan.json carries it; nothing where it gives
    none."""
    from lookahead_runner.runfolder.spread_ledger import Ledger, LedgerRun, LedgerServer, earlier_of

    run = LedgerRun(run_id="earlier", date="2026-12-01", users=entry.users, squares=entry.squares, df=entry.df,
                    lives=entry.lives, rel_sd=math.sqrt(entry.squares / entry.df), workload=entry.workload,
                    levels=dict(entry.levels), window_squares=entry.window_squares, window_df=entry.window_df)
    ledger = Ledger(servers={"server": LedgerServer(fingerprint={}, runs=[run])})
    copy = p.model_copy(deep=True).for_server(SERVER_KIND)
    return copy.with_earlier(earlier_of(ledger, "server", users, workload=workload))


def outlier_flagged(decision: Decision) -> set[int]:
    """The K whose one life the decision calls off what earlier runs measured (restart_spread.off_earlier_text's
    diagnosis: "K=4's one life reads -22% off the ... an outlier life?")."""
    return {int(text.split("'", 1)[0][2:]) for text in decision.diagnoses
            if text.startswith("K=") and "an outlier life?" in text}


def outlier_false_alarm_stated(decision: Decision, df: int, checked: int) -> float:
    """The outlier flag's stated false-alarm rate on a life the spread describes, per K: restart_spread.
    outlier_false_alarm (1 - decision.interval_level over the `checked` K); before issue 46's spread-derived floor,
    P(|t_df| > SUSPECT_SPREADS) (its tie-band floor only lowered it)."""
    from lookahead_runner.decision.cells import restart_spread

    if hasattr(restart_spread, "outlier_false_alarm"):
        return restart_spread.outlier_false_alarm(float(decision.thresholds.get("interval_level", 0.95)), checked)
    from scipy import stats

    return float(2 * stats.t.sf(restart_spread.SUSPECT_SPREADS, df))


def slos(key: str, limit_ms: float) -> tuple[Slo, ...]:
    return parse_slos(((key, limit_ms),))


def users_evidence(windows: Sequence[Window], target_users: int) -> Evidence:
    return evidence(windows, target_users)


def decide_users(ev: Evidence, p: DecisionConfig) -> Decision:
    return decide(ev, p, {})


def gain_range(decision: Decision, k: int) -> tuple[float | None, float | None]:
    """The gain interval decision.json states for K over the baseline (users or rate)."""
    for c in decision.candidates:
        if c.k == k:
            return c.gain_range.low, c.gain_range.high
    return None, None


def objective_range(decision: Decision, k: int) -> tuple[float | None, float | None]:
    for c in decision.candidates:
        if c.k == k:
            return c.objective_range.low, c.objective_range.high
    return None, None


def verdict(decision: Decision) -> tuple[bool, int | None, float | None]:
    """(decided, the K recommended, its stated confidence)."""
    decided = decision.status == "decided" and decision.recommended is not None
    return decided, decision.recommended.k if decided else None, decision.confidence


def decided_by(decision: Decision) -> str:
    """What set the verdict at a rate's pick apart (decision.json's decided_by: capacity, latency, gates, tie; ""
    undecided)."""
    return decision.decided_by


def confidence_bar(decision: Decision) -> float:
    """The confidence a verdict must reach to be decided (decision.json's confidence_threshold)."""
    return float(decision.confidence_threshold)


def spread_interval(decision: Decision) -> tuple[float, float | None, float | None] | None:
    """decision.json's restart spread (rel SD, its interval) where the verdict rests on a measured one."""
    s = decision.restart_spread
    return None if s is None else (s.rel_sd, s.low, s.high)


def spread_ks(decision: Decision) -> tuple[int, ...]:
    """The K whose restarted lives this run's restart spread was measured on (decision.json's restart_spread.ks;
    none where it is earlier runs' alone)."""
    s = decision.restart_spread
    return () if s is None else tuple(s.ks)


def auto_repeats(ev: Evidence, p: DecisionConfig, looks=None) -> list[int]:
    """load.repeats = "auto": the K the runner repeats once more (run/runner.py's loop asks exactly this, with
    `looks` = runfolder/price.looks_of(config))."""
    return auto_repeats_wanted([ev], p, looks)[0]


def auto_looks(config):
    """The looks load.repeats = "auto" takes with this config's cap of repeats (runfolder/price.looks_of)."""
    from lookahead_runner.runfolder.price import looks_of

    load = config.load.model_copy(update={"repeats": "auto"})
    return looks_of(config.model_copy(update={"load": load}))


def decide_looked(ev: Evidence, p: DecisionConfig, looks) -> Decision:
    """The verdict where the sweep looked as lives ended: at the bar of the look it stopped at, as the run's
    finalize judges it (run/verdict/finalize.decide_looked: engine.verdict_at_end, then the decision)."""
    from lookahead_runner.decision.engine import verdict_at_end

    judged_at, stop, tie_bar = verdict_at_end(ev, p, looks)
    decision = decide(ev, judged_at, {}, tie_bar=tie_bar)
    decision.looks = stop
    return decision


def client_split(cap: int, processes: int, count: int) -> list[tuple[int, np.ndarray]]:
    """Per Locust process: its part of load.max_in_flight and the indexes of the `count` arrivals it sends, as the
    dispatcher deals them (workload/arrivals.py); without a cap, each process's share and 0 slots."""
    from lookahead_runner.workload import arrivals as schedule

    ids = list(range(processes))
    if not hasattr(schedule, "slots_per_process"):   # the dispatcher before issue 46: every n-th arrival
        from lookahead_runner.workload.dispatcher import cap_share

        return [(cap_share(cap, processes, i), np.arange(i, count, processes)) for i in ids]
    slots = schedule.slots_per_process(cap, ids)
    shares = schedule.arrival_shares(count, ids, cap)
    return [(slots[i], shares[i]) for i in ids]


def arrival_process(burstiness: float, seed: int) -> ArrivalProcess:
    return ArrivalProcess("poisson", burstiness, seed)


def arrivals(rate: float, stage_s: float, burstiness: float, seed: int) -> np.ndarray:
    """The rate stage's seeded schedule as the dispatcher sends it (workload/arrivals.py)."""
    return stage_offsets(rate, stage_s, arrival_process(burstiness, seed), 0)


def behind_stated() -> float:
    """The false-alarm rate the keeps-up rule states: two counts (queued, then outstanding) each tested at
    keeping_up.GROWTH_ALPHA one-sided, so at most 1 - (1 - alpha)^2; before that rule, one count beyond
    rate_window.BEHIND_NOISE_SDS normal SDs."""
    try:
        from lookahead_runner.decision.cells.keeping_up import GROWTH_ALPHA
    except ImportError:
        from scipy import stats

        return float(stats.norm.sf(rate_window_module.BEHIND_NOISE_SDS))
    return 1 - (1 - GROWTH_ALPHA) ** 2


def behind_noise_sds() -> float:
    """The Poisson bar of the old keeps-up rule (cells/rate_window.py), which the suite's "clearly behind" reads."""
    return float(rate_window_module.BEHIND_NOISE_SDS)


def warmup_s(stage_s: float) -> float:
    """The runner's default warm-up of a stage (the window starts after it)."""
    return WindowRules().warmup_for(stage_s)


def users_window_start(stage_s: float, users: int, sent_s: np.ndarray, done_s: np.ndarray) -> tuple[float, str]:
    """(where a users stage's window starts, from the stage's start; why the stage is too short, "" when not) as the
    runner reads it from the stage's requests (`done_s` NaN: still running at the stage's end). Before issue 46 the
    default warm-up alone."""
    try:
        from lookahead_runner.runfolder.users_warmup import users_warmup
    except ImportError:
        return warmup_s(stage_s), ""
    window = users_warmup(0.0, stage_s, warmup_s(stage_s), users, sent_s, done_s, np.isnan(done_s))
    return window.window_start_s, window.too_short


def rate_window(k: int, repeat: int, rate: float, stage_s: float, requests: pd.DataFrame,
                slo: tuple[Slo, ...] = (), process: ArrivalProcess | None = None) -> RateWindow:
    """The window of one rate stage as the runner reads it from a life's requests.csv rows (runfolder/
    rate_windows.py): the stage's steady part after the warm-up, its arrivals followed to their end, checked
    against the stage's schedule (`process`) for arrivals with no row."""
    t0, t1 = warmup_s(stage_s), stage_s
    done = pd.to_numeric(requests["t_done_s"], errors="coerce").to_numpy(dtype=float)
    completed = int(((done >= t0) & (done < t1) & (requests["ok"].to_numpy() == 1)).sum())
    row = {"k": k, "repeat": repeat, "users": 0, "stage": 0, "duration_s": t1 - t0, "requests": completed,
           "failures": 0, "top_error": "", "client_lag_p99_ms": math.nan, "length_mismatches": 0,
           "output_tok_per_s": math.nan}
    if "process" not in inspect.signature(window_from_frames).parameters:
        # the reader before issue 46 (no stage bounds, no schedule): to measure that code too. Told by its signature,
        # never by catching a TypeError, which would take a bug inside today's reader for the older one
        return window_from_frames(row, requests, pd.DataFrame(), 0, rate, t0, t1, slo, WindowRules())
    return window_from_frames(row, requests, pd.DataFrame(), 0, rate, t0, t1, slo, WindowRules(), 0.0, stage_s,
                              process)


def too_short(window: RateWindow) -> bool:
    """The window says its stage is too short to tell (neither keeps up nor behind)."""
    return bool(getattr(window, "too_short", ""))


def keeps_up(window: RateWindow) -> bool:
    return bool(window.keeps_up)


def window_attainment(window: RateWindow, level: float) -> tuple[float | None, float | None]:
    """The window's SLO attainment interval (summary.csv's slo_attainment_low / high)."""
    b = window.attainment_bounds(level)
    return b.low, b.high


def cell_attainment(windows: Sequence[RateWindow], p: DecisionConfig) -> tuple[float | None, float | None]:
    """The SLO attainment gate's interval over a K's windows at one rate (gates/rate_gates.py)."""
    b = rate_gates.attainment_bounds(RateCell(windows[0].k, tuple(windows)).measure(p), p)
    return b.low, b.high


def decide_rate(windows: Sequence[RateWindow], rate: float, p: DecisionConfig) -> Decision:
    return decide_at_rate(windows, rate, p, {})


def capacity_ranges(windows: Sequence[RateWindow], p: DecisionConfig) -> dict[int, tuple[float | None, float | None,
                                                                                        float | None]]:
    """Per K: the capacity within the SLO decision.json states (rate, its interval)."""
    return {row.k: (row.rate, row.rate_range.low, row.rate_range.high)
            for row in estimate.capacities(windows, None, p)}


# sweep.max_lives a capacity search runs under here: the config's first life, then up to 7 probes (the product's
# default, 2 lives per K, leaves a single K one probe)
CAPACITY_MAX_LIVES = 8
CAPACITY_PRECISION = 0.10   # sweep.capacity_precision's default


def next_probe(points, probes: int, spent, budget, target: float, reach: tuple[float, float],
               tried: Sequence[float]) -> float | None:
    """The capacity search's next rate for the one K (0) measured, or None where it stops (`target`: the SLO's
    percentile, as a share)."""
    from lookahead_runner.decision.capacity.search import next_probe as choose

    probe = choose([0], points, {0: probes}, spent, budget, target, CAPACITY_PRECISION, reach, {0: list(tried)})
    return probe.rate if probe.k is not None else None


def capacity_search_probe(windows: Sequence[RateWindow], lives: Mapping[int, int], probes: Mapping[int, int],
                          target: float, precision: float, rates: Sequence[float], highest: float,
                          tried: Mapping[int, Sequence[float]]) -> tuple[int, float] | None:
    """The capacity search's next probe (K, rate) over every K of `lives` (lives run per K, the config's and the
    probes'), from every window measured so far, under the product's default budget (sweep.max_lives: 8 lives per
    K), or None where it stops (`target`: the one SLO's percentile, as a share). Its reach as the product's
    (capacity_sweep.reach): the config's `rates` divided or multiplied by search.RATE_REACH, none over `highest`."""
    from lookahead_runner.decision.adaptive import Budget, Spent
    from lookahead_runner.decision.capacity.search import RATE_REACH
    from lookahead_runner.decision.capacity.search import next_probe as choose
    from lookahead_runner.run.strategies.capacity_sweep import LIVES_PER_K

    reach = (min(rates) / RATE_REACH, min(max(rates) * RATE_REACH, highest))
    probe = choose(sorted(lives), estimate.rate_points(windows), probes, Spent(dict(lives), dict(lives)),
                   Budget(LIVES_PER_K * len(lives)), target, precision, reach, {k: list(v) for k, v in tried.items()})
    return (probe.k, probe.rate) if probe.k is not None else None


# --- acceptance per category and the mix (acceptance.py) ----------------------------------------------------------
from lookahead_runner.decision.traffic.schema import MIX  # noqa: E402  (the report's name for the whole set)


@dataclass(frozen=True)
class AcceptanceRow:
    """One row of decision.json's request_set.acceptance: its category (or MIX) and the three intervals, in the
    order pooled, request-weighted, token-weighted."""

    category: str
    ranges: tuple[tuple[float | None, float | None], ...]


def acceptance_rows(k: int, requests: pd.DataFrame, p: DecisionConfig) -> list[AcceptanceRow]:
    """request_set.acceptance for one life at K whose requests.csv rows are `requests` (traffic/request_set.py)."""
    from lookahead_runner.decision.traffic.request_set import LifeRequests, acceptance_table

    return [AcceptanceRow(a.category, tuple((r.low, r.high) for r in (a.acceptance_length_range,
                                                                      a.request_weighted_range,
                                                                      a.token_weighted_range)))
            for a in acceptance_table([LifeRequests(k, 0, requests)], p)]


def users_capacity(ev: Evidence, p: DecisionConfig) -> dict[int, tuple[float | None, float | None, float | None, str]]:
    """Per K: the capacity within the SLO in users decision.json states over user stages (users, its interval,
    users_from)."""
    return {row.k: (row.users, row.users_range.low, row.users_range.high, row.users_from)
            for row in estimate.capacities([], ev, p)}


def users_capacity_rate(windows: Sequence[RateWindow], p: DecisionConfig
                        ) -> dict[int, tuple[float | None, float | None, float | None, str]]:
    """Per K: the capacity in users a run of rate stages alone states (Little's law at its rate capacity)."""
    return {row.k: (row.users, row.users_range.low, row.users_range.high, row.users_from)
            for row in estimate.capacities(windows, None, p)}


def cell_goodput(ev: Evidence, p: DecisionConfig) -> list[tuple[int, tuple[float | None, float | None],
                                                               tuple[float | None, float | None], int]]:
    """Per users cell of K=0 (decision.json's cells[]): its users, goodput interval, the first SLO's attainment
    interval and the throughput units behind it (repeats x bins), as the engine states them
    (engine.cell_summaries)."""
    from lookahead_runner.decision.engine import cell_summaries, evaluate_stages

    rows = []
    for cell in cell_summaries(evaluate_stages(ev, p), p):
        if cell.k == 0:
            attained = cell.slo_attainment[p.slos[0].key]
            rows.append((cell.users, (cell.goodput_range.low, cell.goodput_range.high), (attained.low, attained.high),
                         cell.throughput_units))
    return rows


def window_goodput(window: RateWindow) -> float:
    """A rate window's goodput (summary.csv's goodput_per_s): arrivals meeting every SLO per second."""
    return float(window.goodput_per_s)


# --- the performance model's predictions (model_claims.py) ---------------------------------------------------------
from lookahead_runner.decision.perfmodel import fit as perf_fit  # noqa: E402
from lookahead_runner.decision.perfmodel import model as perf_model  # noqa: E402
from lookahead_runner.decision.perfmodel.acceptance import Acceptance, PositionCounts  # noqa: E402

MODEL_SHAPE = perf_fit.WorkloadShape(prompt_tokens=128, output_tokens=64, max_num_seqs=256)
MODEL_LEVEL = perf_model.LEVEL   # the level of every req/s interval the model prints


def model_params(**fields) -> perf_fit.Params:
    return perf_fit.Params(**fields)


def _geometric(alpha: float, k: int) -> Acceptance:
    return Acceptance(tuple(alpha ** (i + 1) for i in range(k)), "per-position counters")


def model_tokens_per_step(alpha: float, k: int) -> float:
    return _geometric(alpha, k).tokens_per_step(k)


def model_truth(params: perf_fit.Params, k: int, users: float, alpha: float, pool_tokens: float):
    """The model's own closed loop run forward with `params` (arrays: one draw each): perf_fit.Draws."""
    tau = _geometric(alpha, k).tokens_per_decode_step(k, MODEL_SHAPE.output_tokens - 1)
    return perf_fit.predict_draws(params, k, users, tau, MODEL_SHAPE, float(MODEL_SHAPE.output_tokens), pool_tokens)


def fit_model(windows: Sequence[Window], target_users: int, positions: Mapping[int, tuple[float, tuple[float, ...]]],
              ) -> perf_model.PerformanceModel:
    """The model as the report fits it (run/verdict/perfmodel_run.fit_run: the bound decision.model_error_bound's
    default, the decision's seed, 200 refits; a K on one life drawn at the restart spread the decision takes where
    no K has two lives on a server whose spread is unknown: restart_prior()'s 15 %)."""
    p = DecisionConfig().for_server("vllm")
    counts = {k: PositionCounts(drafts, accepted) for k, (drafts, accepted) in positions.items()}
    return perf_model.fit_performance_model(evidence(windows, target_users), MODEL_SHAPE, counts,
                                            error_bound=p.model_error_bound, seed=p.seed,
                                            restart_spread=p.restart_prior()[0])


def model_prediction(model: perf_model.PerformanceModel, k: int, users: int) -> tuple[float, float, float]:
    """req/s at (K, users): the point and its interval, as the curves and the production point print them."""
    pred = model.predict(k, users)
    return pred.requests_per_s, pred.requests_per_s_low, pred.requests_per_s_high


def model_error_at(model: perf_model.PerformanceModel, users: int) -> tuple[float | None, int]:
    """The held-out error stated at `users` (trust.error_at) and how many held-out predictions it is the largest of."""
    found = model.heldout_error_at(users)
    here = [r for r in model.held_out if r.users == users and math.isfinite(r.error)]
    count = len(here) if not found.scope else sum(math.isfinite(r.error) for r in model.held_out)
    return found.value, count


def model_trusted(model: perf_model.PerformanceModel) -> bool:
    return bool(model.trusted)


def model_error_bound(model: perf_model.PerformanceModel) -> float:
    return float(model.error_bound)


def model_held_out(model: perf_model.PerformanceModel) -> list[tuple[int, int, float]]:
    """Each held-out prediction (a stage or a K left out of the fit): its K, users and predicted req/s."""
    return [(r.k, r.users, r.predicted_requests_per_s) for r in model.held_out]
