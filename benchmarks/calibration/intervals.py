"""Every interval decision.json and the report print, held against the truth of independent trials.

Claims checked (each an interval stated at decision.interval_level, 95 % by default, so it should hold the truth
in 95 % of the trials; more is conservative, less a miss):
- the gain of K=4 over K=0 at the target users (a candidate's gain_range), per strategy (sweeps.py): the truth
  the ratio of the K's true levels;
- the restart spread (decision.json's restart_spread, its chi-square interval), where this run measured it
  (grid x2, adaptive, auto) or borrowed the ledger's (alike: measured on lives like this run's; unlike: on
  windows 0.25-4 x as long, the ledger's runs at another stage or on another workload being no spread the product
  borrows, spread_ledger.earlier_of): the truth the relative SD of a life's throughput, the drawn restart spread
  and this run's window's own Poisson noise together (lives.life_spread). Measured on this run's lives, it is
  claimed where the spread describes every one of them; an outlier life among them (10-25 % slow: no draw of the
  spread) is one of a pair that two lives per K cannot tell from a wide spread (the pool's F test on 1 and 1
  degrees of freedom sets it apart only past 161 x the other's square), so the spread it states takes the outlier
  in: there the claim is one-sided, the interval never below the truth ((1 + L) / 2, its upper end's share), and
  how often it holds the truth is shown;
- the SLO attainment at a rate: one window's (summary.csv's slo_attainment_low / high) and the gate's over a K's
  repeats (gates/rate_gates.py), the truth the M/M/c steady state's share (lives.mmc_attainment);
- the gain at a rate (the rate verdict's gain_range: K=4's e2e percentile against K=0's, as speeds) against the
  ratio of the true percentiles;
- the capacity within the SLO (estimate.capacities' rate_range) over a rate ramp and over the capacity
  search's probes, against the rate at which the true attainment is the target (the share of those intervals
  unbounded on both ends, which hold any truth, shown beside it).
"""
from __future__ import annotations

from . import adapters
from .lives import life_spread
from .rate_trials import AttainmentTrial, CapacityTrial
from .sweeps import SweepTrial
from .tally import COVERAGE, SHOWN, Tallies

FAMILY = "interval"


def holds(low: float | None, high: float | None, truth: float) -> bool:
    """An interval (None: unbounded on that side) holds the truth."""
    return (low is None or low <= truth) and (high is None or truth <= high)


def _level(p) -> float:
    return float(p.interval_level)


def score_sweep(trial: SweepTrial, tallies: Tallies) -> None:
    r, factors = trial.regime, trial.regime.named.factors
    for strategy, decision in trial.decisions.items():
        level = float(decision.thresholds.get("interval_level", 0.95))
        low, high = adapters.gain_range(decision, 4)
        if low is not None or high is not None:
            tallies.add(f"gain (users): {strategy}", FAMILY, COVERAGE, level, "ratio of the K's true levels - 1",
                        holds(low, high, r.gain), factors)
        spread = adapters.spread_interval(decision)
        if spread is None:
            continue
        _, low, high = spread
        truth, name = life_spread(r), f"restart spread: {strategy}"
        if strategy == "ledger":   # measured alike or on other windows (regimes.LEDGER_KINDS): none of this run's lives
            name += " alike" if factors.get("ledger") == "alike" else " unlike"
        elif r.outlier and r.outlier_k in adapters.spread_ks(decision):   # this run's lives measured it, the
            # outlier among them (its K's first life; a K of two or more lives has its first among them)
            tallies.add(f"{name}, outlier life: not below the truth", FAMILY, COVERAGE, (1 + level) / 2,
                        "the spread the lives are drawn with, the outlier apart", high is None or truth <= high,
                        factors)
            tallies.add(f"{name}, outlier life: holds the truth", FAMILY, SHOWN, 0.0, "shown, not scored",
                        holds(low, high, truth), factors)
            continue
        tallies.add(name, FAMILY, COVERAGE, level, "sqrt(restart spread^2 + 1/completions)", holds(low, high, truth),
                    factors)


def score_attainment(trial: AttainmentTrial, tallies: Tallies) -> None:
    p, factors, truth = trial.p, trial.regime.named.factors, trial.attainment[0]
    level = _level(p)
    windows = trial.windows[0]
    low, high = adapters.window_attainment(windows[0], level)
    tallies.add("SLO attainment: one window", FAMILY, COVERAGE, level, "M/M/c steady-state share",
                holds(low, high, truth), factors)
    low, high = adapters.cell_attainment(windows, p)
    tallies.add("SLO attainment: the gate, 1-3 repeats", FAMILY, COVERAGE, level, "M/M/c steady-state share",
                holds(low, high, truth), factors)
    decision = adapters.decide_rate([w for ws in trial.windows.values() for w in ws], trial.regime.rate, p)
    low, high = adapters.gain_range(decision, 4)
    if low is not None or high is not None:
        tallies.add("gain (rate): e2e percentile, K=4 / K=0", FAMILY, COVERAGE, level,
                    "ratio of the true e2e percentiles - 1", holds(low, high, trial.gain), trial.gain_named.factors)


def score_capacity(trial: CapacityTrial, tallies: Tallies, how: str) -> None:
    rows = adapters.capacity_ranges(trial.windows, trial.p)
    if 0 not in rows:
        return
    _, low, high = rows[0]
    tallies.add(f"capacity (rate): {how}", FAMILY, COVERAGE, _level(trial.p),
                "the rate whose M/M/c attainment is the target", holds(low, high, trial.capacity),
                trial.regime.named.factors)
    # an interval unbounded on both ends holds any truth: it counts in the coverage (the claim is over every
    # interval stated), and its share is shown, so a coverage carried by such intervals is seen as such
    tallies.add(f"capacity (rate): {how}, unbounded both ends", FAMILY, SHOWN, 0.0, "shown, not scored",
                low is None and high is None, trial.regime.named.factors)
