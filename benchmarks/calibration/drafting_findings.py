"""The drafts-short flag (a window "not in effect": telemetry/drafting.check_window, as runfolder/analysis.py calls
it) and the decision's word on a K never in effect (gates/in_effect.py), as binary findings: how often a window
whose server ran its setting is flagged (a false alarm), how often a window whose server did not is passed (a miss).

The truth, step by step (50 ms decode steps through the window): the real batch an Ornstein-Uhlenbeck series
(mean 2-128, relative SD 5-40 %, correlation 1-10 s), the sampler reading it at its scrapes (0.5 s, jittered);
each step drafts, per running request, the K its setting runs at that batch, times the fault's share:
- no fault: a single K (2, 3, 4 or 8) or a per-batch-size schedule of 2-3 ranges (the last K=0 in half of them),
  with 0-3 % of drafts cut short near max_model_len (the only shortfall a fault-free server shows);
- drafts-short: every draft holds a share 0.2-0.8 of its K (`--sim-fault drafts-short`);
- ignore-spec-schedule: a schedule accepted, every step drafting its largest K (`--sim-fault ignore-spec-schedule`,
  vLLM #51510) - the case issue 46 found unnamed where the counters were missing.
The counters (drafts, draft tokens, generated and accepted tokens with each request's first token as a step) give
the window's figure and drafting share; in a quarter of the trials the counters are missing and the requests' own
figure is judged, over the steps the window's requests ran (from 5-60 s, at most a window, before its start). A
window's truth: fires where at least a quarter of its request-steps in the window drafted off the setting's K at their
batch by more than the tolerance (drafting.tolerance: what "not in effect" means), a step lasting longer the more it
drafts;
does not where none did (any shortfall near max_model_len aside); in between it is not scored. No error rate is
stated (the tolerance is a measured spread, not a rate): each is held to 10 % (issue 46's bar) and a miss names its
regime. The decision: a K whose every life at the target had its fault cannot be recommended (a miss where it can),
a K without one is never barred (a false alarm where it is).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import adapters_findings
from .gate_findings import FINE_S, UNSTATED, ou_series, scrape_times
from .regimes import Named, log_uniform
from .tally import ERROR, SHOWN, Tallies

FAMILY = "finding"
FAULTS = ("none", "drafts-short", "ignore-spec-schedule")
MISMATCH_FIRES = 0.25   # a window fires where this share of its request-steps drafted off the setting's K
# a decode step's time grows with the tokens it drafts: 5 % a token (a draft model's forward per token, against the
# target's one verification step); the direction matters, not the figure: readings in time overweight a larger K
STEP_COST_PER_TOKEN = 0.05


@dataclass(frozen=True)
class DraftRegime:
    k: int                                       # the life's K (a schedule's largest)
    schedule: tuple[tuple[int, int, int], ...]   # () = a single K
    fault: str
    short_share: float                           # drafts-short: the share of K a draft holds
    cut_share: float                             # drafts cut short near max_model_len (no fault)
    batch_mean: float
    batch_sd: float                              # relative
    tau_s: float
    window_s: float
    counters: bool                               # False: the counters missing, the requests' own figure judged
    request_span_s: float                        # how long before the window's start its requests started
    acceptance: float
    steps_per_request: float
    repeats: int
    named: Named


def _scheduled(schedule, k: int, batch: np.ndarray) -> np.ndarray:
    """The K a schedule runs at each batch size (vllm/schedule.Schedule.k_for: the range holding it, the tail
    carrying the last range's K), or K at every batch without a schedule."""
    if not schedule:
        return np.full(len(batch), k)
    los = np.array([lo for lo, _, _ in schedule])
    ks = np.array([kk for _, _, kk in schedule])
    return np.minimum(ks[np.clip(np.searchsorted(los, batch, side="right") - 1, 0, None)], k)


def draw_drafting(rng: np.random.Generator) -> DraftRegime:
    """Half the trials a single K, half a schedule; a third of each without a fault, a third drafts-short, a third
    ignore-spec-schedule (single K: no fault then)."""
    on_schedule = bool(rng.uniform() < 0.5)
    fault = FAULTS[int(rng.integers(3))]
    if fault == "ignore-spec-schedule" and not on_schedule:
        fault = "none"
    k = int(rng.choice((2, 4, 8))) if on_schedule else int(rng.choice((2, 3, 4, 8)))
    schedule: tuple[tuple[int, int, int], ...] = ()
    if on_schedule:
        first = int(rng.integers(4, 49))
        second = int(first * rng.uniform(1.5, 4))
        last = 0 if rng.uniform() < 0.5 else 1
        schedule = ((1, first, k), (first + 1, second, max(1, k // 2)), (second + 1, 1024, last))
    window_s = log_uniform(rng, 10.0, 120.0)
    counters = bool(rng.uniform() >= 0.25)
    regime = DraftRegime(k, schedule, fault, rng.uniform(0.2, 0.8), rng.uniform(0.0, 0.03), log_uniform(rng, 2, 128),
                         rng.uniform(0.05, 0.40), log_uniform(rng, 1.0, 10.0), window_s, counters,
                         min(window_s, log_uniform(rng, 5.0, 60.0)), rng.uniform(0.3, 0.9),
                         log_uniform(rng, 20, 300), int(rng.integers(1, 4)), Named())
    return _named(regime)


def _named(r: DraftRegime) -> DraftRegime:
    labels = {"setting": "schedule" if r.schedule else "single K", "fault": r.fault,
              "source": "counters" if r.counters else "requests",
              "window": "10-30s" if r.window_s < 30 else "30-120s", "K": str(r.k)}
    if r.schedule:
        ks = set(_scheduled(r.schedule, r.k, np.array([max(1, round(r.batch_mean * f)) for f in (0.7, 1.0, 1.3)])))
        labels["batch"] = "one range" if len(ks) == 1 else "crosses a boundary"
    return DraftRegime(**{**r.__dict__, "named": Named(labels)})


@dataclass(frozen=True)
class DraftWindow:
    counters: float | None
    share: float | None
    requests: float
    batches: list[float]
    request_batches: list[float]
    mismatch: float             # the truth: the share of request-steps off the setting's K


def draft_window(r: DraftRegime, rng: np.random.Generator) -> DraftWindow:
    """One window (and the span before it where its requests started): the batch and the K each step ran, a step
    lasting 1 + STEP_COST_PER_TOKEN x its drafted tokens as long as a step drafting none (so readings equally spaced
    in time weigh a larger K's steps more than their count), the counters over the window, the readings at the
    sampler's scrapes."""
    lead = r.request_span_s
    steps = int((lead + r.window_s) / FINE_S)
    moving = 1 + r.batch_sd * ou_series(rng, steps, r.tau_s / FINE_S)
    batch = np.maximum(1, np.round(r.batch_mean * moving)).astype(int)
    wanted = _scheduled(r.schedule, r.k, batch)
    ran = np.full(steps, r.k) if r.fault == "ignore-spec-schedule" else wanted
    tokens = ran * (r.short_share if r.fault == "drafts-short" else 1.0 - r.cut_share / 2)
    drafting = ran > 0
    drafts = batch * drafting
    drafted = batch * tokens * drafting
    accepted = drafted * r.acceptance
    generated = batch * (1 + 1 / r.steps_per_request) + accepted
    times = np.cumsum(FINE_S * (1 + STEP_COST_PER_TOKEN * tokens))
    times *= (lead + r.window_s) / times[-1]
    window = times > lead
    # the truth: request-steps whose drafted tokens are off the setting's K at their batch beyond the tolerance
    off = np.abs(tokens - wanted) > adapters_findings.drafted_tolerance(wanted)
    mismatch = float((batch * off)[window].sum() / batch[window].sum())

    def per_step(mask) -> float:
        return adapters_findings.drafted_per_step(float(drafted[mask].sum()), float(drafts[mask].sum()))

    scraped = scrape_times(rng, lead + r.window_s)
    readings = batch[np.minimum(np.searchsorted(times, scraped), steps - 1)].astype(float)
    in_window = scraped > lead
    share = adapters_findings.drafting_share(float(drafts[window].sum()), float(generated[window].sum()),
                                    float(accepted[window].sum()))
    return DraftWindow(per_step(window) if r.counters else None, share if r.counters else None,
                       per_step(np.ones(steps, dtype=bool)), readings[in_window].tolist(), readings.tolist(), mismatch)


def score_drafting(rng: np.random.Generator, tallies: Tallies) -> None:
    r = draw_drafting(rng)
    windows = [draft_window(r, rng) for _ in range(r.repeats)]
    flags = [adapters_findings.drafts_flag(r.k, r.schedule, w.counters, w.requests, w.share, w.batches,
                                           w.request_batches) for w in windows]
    factors = r.named.factors
    for w, flag in zip(windows, flags):
        if w.mismatch >= MISMATCH_FIRES:
            tallies.add("drafts-short flag: miss", FAMILY, ERROR, UNSTATED,
                        "a quarter or more of the request-steps off the setting's K beyond the tolerance", not flag,
                        factors)
        elif w.mismatch == 0:
            tallies.add("drafts-short flag: false alarm", FAMILY, ERROR, UNSTATED,
                        "the server ran the setting (0-3 % of drafts cut near max_model_len)", bool(flag), factors)
        else:
            tallies.add("drafts-short flag: partly off (not scored)", FAMILY, SHOWN, 0.0, "shown, not scored",
                        bool(flag), factors)
    barred = adapters_findings.barred_not_in_effect(r.k, flags)
    if all(w.mismatch >= MISMATCH_FIRES for w in windows):
        tallies.add("in effect: K recommended though never in effect", FAMILY, ERROR, UNSTATED,
                    "every life at the target off its setting", not barred, factors)
    elif all(w.mismatch == 0 for w in windows):
        tallies.add("in effect: K barred though in effect", FAMILY, ERROR, UNSTATED,
                    "every life at the target ran its setting", barred, factors)
