"""A K measured once at a stage where the F test set a K's pair of lives apart: its gain interval against the truth.

Claim checked: the gain of K=4 (one life) over K=0 (two lives) at decision.interval_level (95 %), where K=8's two
lives and K=0's differ so much the pool's F test sets one pair apart (cells/measure.throughput_noises) and the
stage states the spread of every restarted life (cells/restart_spread.every_restarted_life), which K=4 borrows.
Under one spread for every K that happens by chance (a pair reading close sets the other apart: about 10 % of such
stages): the trials are those stages alone (drawn again, bounded, until the stage sets a pair apart). Half the
trials draw K=8's lives 3 x as spread as the others' (a K truly noisier: what the F test is there for). The sweeps
group's regimes (regimes.draw_closed_loop: gain, spread, window, rate); K=8's level -20 to +40 % of K=0's.
"""
from __future__ import annotations

import numpy as np
from scipy import stats

from . import adapters, adapters_findings
from .intervals import holds
from .lives import closed_window, life_speeds
from .regimes import draw_closed_loop
from .sweeps import sweep_config
from .tally import COVERAGE, SHOWN, Tallies

FAMILY = "interval"
LIVES = {0: 2, 4: 1, 8: 2}
NOISIER = 3.0          # K=8's spread over the others' in half the trials
DRAWS = 1000           # stages drawn at most for one the F test splits (each does with >= 5 %: 1000 fail in 1e-22)
F_LEVEL = 0.95         # the pool's one-sided F test (cells/measure._noisier), screened here; the product confirms


def _squares(windows, k: int) -> float:
    rates = np.array([w.served_per_s for w in windows if w.k == k])
    return float(((rates / rates.mean() - 1) ** 2).sum())


def draw_split_stage(rng: np.random.Generator, noisier: float):
    """A stage's windows (K 0, 4, 8 on 2, 1, 2 lives) whose two pairs differ beyond the F test, and its regime."""
    critical = float(stats.f.ppf(F_LEVEL, 1, 1))
    for _ in range(DRAWS):
        r = draw_closed_loop(rng)
        levels = {0: r.base_rate, 4: r.base_rate * (1 + r.gain), 8: r.base_rate * (1 + rng.uniform(-0.2, 0.4))}
        windows = [closed_window(k, r.users, levels[k] * speed, life, r.window_s, rng)
                   for k, n in LIVES.items()
                   for life, speed in enumerate(life_speeds(rng, r.spread * (noisier if k == 8 else 1.0), n))]
        a, b = _squares(windows, 0), _squares(windows, 8)
        if max(a, b) > critical * min(a, b):
            return r, windows
    raise RuntimeError(f"no stage of {DRAWS} drawn set a pair apart")


def run_trial(rng: np.random.Generator, tallies: Tallies) -> None:
    noisier = NOISIER if rng.uniform() < 0.5 else 1.0
    r, windows = draw_split_stage(rng, noisier)
    decision = adapters.decide_users(adapters.users_evidence(windows, r.users), sweep_config(r).decision)
    split = adapters_findings.spread_set_apart(decision)
    factors = {**{key: r.named.factors[key] for key in ("gain", "spread", "window")},
               "K=8": "3 x noisier" if noisier > 1 else "alike"}
    tallies.add("set apart by the product's F test (of the screened stages)", FAMILY, SHOWN, 0.0,
                "shown, not scored", split, factors)
    if not split:
        return
    low, high = adapters.gain_range(decision, 4)
    tallies.add("gain (users): one life, a pair set apart", FAMILY, COVERAGE,
                float(decision.thresholds.get("interval_level", 0.95)), "ratio of the K's true levels - 1",
                holds(low, high, r.gain), factors)
