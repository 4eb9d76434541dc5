"""The binary findings: how often one is raised where it is false (a false alarm) or not raised where it is true
(a miss).

Claims checked: the outlier flag (a life off what earlier runs measured: `score_outlier_flag`), and falls
behind / keeps up (cells/keeping_up.py through the runner's window, runfolder/
rate_windows.py). The rule tests two counts in turn (queued, then outstanding over the settled span), each at a
one-sided level, so it states a false alarm in at most 1 - (1 - alpha)^2 of the windows where the K keeps up
(adapters.behind_stated; 4.9 % at alpha 2.5 %). A miss is scored where the K is clearly behind: the backlog's
expected growth through the window at least twice the Poisson bar of BEHIND_NOISE_SDS deviations of a queue its
size, held to the same rate. A window that says its stage is too short to tell is neither (its share is shown).
The truth: the system's utilisation (rate_trials.queue_trial; below 0.9 it keeps up, above 1.1 it falls
behind), whatever the answer's length against the stage's, the burstiness, the max_in_flight cap and the Locust
processes, a worker dying mid-stage.
"""
from __future__ import annotations

import math

from . import adapters
from .lives import KS
from .regimes import QueueRegime, binding_service_rate
from .sweeps import SweepTrial
from .tally import ERROR, SHOWN, Tallies

FAMILY = "finding"


def stated_error() -> float:
    return adapters.behind_stated()


def detectable(r: QueueRegime) -> bool:
    """The backlog's expected growth through the window is at least twice the rule's bar at the size the queue
    reaches by the window's end (in service plus the backlog since the stage started)."""
    servable = binding_service_rate(r.slots, r.cap, r.processes, r.service_mean_s)
    excess = r.rate - servable
    t0 = adapters.warmup_s(r.stage_s)
    level = servable * r.service_mean_s + excess * r.stage_s
    return excess * (r.stage_s - t0) >= 2 * adapters.behind_noise_sds() * math.sqrt(max(level, 1.0))


def score_queue(r: QueueRegime, window, tallies: Tallies) -> None:
    short = adapters.too_short(window)
    truth = "falls behind" if r.behind else "keeps up"
    tallies.add(f"too short to tell ({truth})", FAMILY, SHOWN, 0.0, "shown, not scored", short, r.named.factors)
    if short:
        return
    keeps_up = adapters.keeps_up(window)
    if not r.behind:
        tallies.add("falls behind: false alarm", FAMILY, ERROR, stated_error(), "utilisation 0.3-0.9 (keeps up)",
                    not keeps_up, r.named.factors)
    elif detectable(r):
        tallies.add("falls behind: miss", FAMILY, ERROR, stated_error(),
                    "utilisation 1.1-2, backlog growth >= 2 x the Poisson bar", keeps_up, r.named.factors)


def score_outlier_flag(trial: SweepTrial, tallies: Tallies) -> None:
    """The ledger strategy's outlier flag (restart_spread.off_earlier), where the ledger it borrowed holds levels
    (measured alike or with another window): a false alarm is a flag on a K whose one life is no outlier (stated per
    K: adapters.outlier_false_alarm_stated); on the outlier life (10-25 % slow), the share flagged is shown (what
    the spread explains decides what it can see)."""
    r = trial.regime
    decision = trial.decisions.get("ledger")
    if decision is None or r.ledger not in ("alike", "another window"):
        return
    flagged = adapters.outlier_flagged(decision)
    stated = adapters.outlier_false_alarm_stated(decision, r.ledger_df, len(KS))
    for k in KS:
        if r.outlier and k == r.outlier_k:
            tallies.add("outlier flag: caught (slow life)", FAMILY, SHOWN, 0.0, "shown, not scored", k in flagged,
                        r.named.factors)
        else:
            tallies.add("outlier flag: false alarm", FAMILY, ERROR, 0.0, "a life the spread describes",
                        k in flagged, r.named.factors, stated)
