"""Whether a K keeps up with an arrival rate (decision/cells/keeping_up.py), on synthetic servers: answers longer
than the window on an idle server are a stage too short, never behind; a queue of arrivals waiting for a slot is
behind; bursty arrivals at a sustainable rate rarely read behind (the false-alarm and miss rates the module's
docstring claims, measured here); repeats are judged pooled."""
from __future__ import annotations

import heapq

import numpy as np
import pytest
from scipy import stats

from lookahead_runner.decision.cells.keeping_up import (BEHIND, GROWTH_T, KEEPS_UP, QUEUE_POINTS, TOO_SHORT, Growth,
                                                        count_growth, pooled_behind, pooled_growth, queue_finding)
from lookahead_runner.decision.cells.rate_cell import RateCell
from lookahead_runner.decision.cells.rate_window import RateWindow


def fcfs(arrived: np.ndarray, slots: int, answers: np.ndarray, prefill_s: float = 0.05):
    """(first token, end) of each arrival on a server of `slots` concurrent requests, first come first served."""
    free = [0.0] * slots
    first, done = np.empty(len(arrived)), np.empty(len(arrived))
    for i, t in enumerate(arrived):
        start = max(t, heapq.heappop(free))
        first[i], done[i] = start + prefill_s, start + prefill_s + answers[i]
        heapq.heappush(free, done[i])
    return first, done


def gamma_arrivals(rng: np.random.Generator, rate: float, duration_s: float, burstiness: float) -> np.ndarray:
    """Gamma gaps of shape `burstiness` and mean 1 / rate, as workload/arrivals.py draws them."""
    times = np.cumsum(rng.gamma(burstiness, 1.0 / (rate * burstiness), size=int(rate * duration_s * 3 + 50)))
    return times[times < duration_s]


def behind_share(load: float, burstiness: float, trials: int = 300, slots: int = 16, answer_s: float = 1.0,
                 stage_s: float = 20.0, seed: int = 46) -> float:
    """The share of `trials` windows read behind at `load` x the server's throughput (slots / answer_s; answers
    uniform in 0.75-1.25 x answer_s), the window the stage after a 25 % warm-up."""
    rng = np.random.default_rng(seed)
    behind = 0
    for _ in range(trials):
        arrived = gamma_arrivals(rng, load * slots / answer_s, stage_s, burstiness)
        first, done = fcfs(arrived, slots, answer_s * (0.75 + 0.5 * rng.random(len(arrived))))
        behind += queue_finding(arrived, first, done, 0.25 * stage_s, stage_s, 0.0).behind
    return behind / trials


def test_answers_longer_than_the_window_on_an_idle_server_are_a_stage_too_short():
    arrived = (np.arange(40) + 0.5) / 2.0                       # 2 req/s for 20 s
    first, done = fcfs(arrived, 256, np.full(40, 25.0))         # room for all; every answer 25 s
    finding = queue_finding(arrived, first, done, 5.0, 20.0, 0.0)
    assert finding.status == TOO_SHORT and not finding.behind
    assert finding.too_short == "stage too short for answers of 25 s; lengthen to 50 s"
    # the same stage long enough settles: 60 s, answers of 25 s from 25 s on
    arrived = (np.arange(120) + 0.5) / 2.0
    first, done = fcfs(arrived, 256, np.full(120, 25.0))
    assert queue_finding(arrived, first, done, 15.0, 60.0, 0.0).status == KEEPS_UP


def test_a_queue_of_arrivals_waiting_for_a_slot_is_behind():
    rng = np.random.default_rng(0)
    arrived = gamma_arrivals(rng, 24.0, 20.0, 1.0)              # 24 req/s offered, 16 served
    first, done = fcfs(arrived, 16, np.ones(len(arrived)))
    finding = queue_finding(arrived, first, done, 5.0, 20.0, 0.0)
    assert finding.status == BEHIND and finding.judged_name == "queued" and finding.queued.change > 60


def test_a_server_whose_answers_get_ever_longer_is_behind_once_they_settle():
    # nothing waits for a slot, but each answer is longer than the last: the outstanding requests never level
    arrived = (np.arange(600) + 0.5) / 10.0
    first, done = fcfs(arrived, 10_000, 0.2 + 0.02 * np.arange(600))
    finding = queue_finding(arrived, first, done, 15.0, 60.0, 0.0)
    assert finding.status == BEHIND and finding.judged_name == "outstanding"


def test_the_growth_is_judged_against_the_counts_own_noise():
    assert count_growth(np.arange(41.0)).grows                  # one more every step: no noise at all
    assert not count_growth(np.zeros(41)).grows
    assert not count_growth(np.array([0.0] * 40 + [5.0])).grows  # one burst at the end, not a trend
    # a level jittered by batches ending together, climbing through it: the jitter does not hide the climb
    sawtooth = np.tile([0.0, 6.0, 3.0, 9.0], 11)[:41] + np.linspace(0, 30, 41)
    assert count_growth(sawtooth).grows and not count_growth(np.tile([0.0, 6.0, 3.0, 9.0], 11)[:41]).grows


def test_each_reading_passes_a_driftless_random_walk_2_5_percent_of_the_time():
    rng = np.random.default_rng(2025)
    walks = [count_growth(np.concatenate([[0.0], np.cumsum(rng.normal(size=QUEUE_POINTS - 1))]))
             for _ in range(20_000)]
    assert np.quantile([w.t_line for w in walks], 0.975) == pytest.approx(GROWTH_T, abs=0.1)
    assert np.mean([w.t > stats.t.ppf(0.975, w.steps - 1) for w in walks]) == pytest.approx(0.025, abs=0.005)
    assert 0.025 < np.mean([w.grows for w in walks]) < 0.05          # either: 5 % at most


@pytest.mark.parametrize(("load", "burstiness", "at_most"), [
    (0.8, 1.0, 0.02), (0.8, 0.2, 0.03), (0.9, 1.0, 0.05), (0.9, 0.2, 0.06)])
def test_bursty_arrivals_at_a_sustainable_rate_rarely_read_behind(load, burstiness, at_most):
    """False alarms in 300 trials (16 slots of ~1 s answers, 20 s stages): measured 1.0 % (0.8, Poisson), 1.7 %
    (0.8, shape 0.2), 3.0 % (0.9, Poisson), 4.3 % (0.9, shape 0.2); the rule before (3 sqrt of the outstanding
    requests) read 1.3 %, 22 %, 6.3 % and 29 %."""
    assert behind_share(load, burstiness) <= at_most


@pytest.mark.parametrize(("load", "burstiness", "at_least"), [
    (1.25, 1.0, 0.9), (1.5, 1.0, 0.98), (1.5, 0.2, 0.8), (2.0, 0.2, 0.97)])
def test_an_overload_is_read_behind(load, burstiness, at_least):
    """Detected in 300 trials (as above): measured 97.7 % (1.25, Poisson), 100 % (1.5, Poisson), 88 % (1.5, shape
    0.2), 100 % (2.0, shape 0.2). Bursty arrivals hide a moderate overload in a 20 s stage (1.25, shape 0.2: 46 %
    read behind): the module's docstring states it."""
    assert behind_share(load, burstiness) >= at_least


def _window(load: float, seed: int, burstiness: float = 1.0):
    """One 20 s stage at `load` x what 16 slots of ~1 s answers serve."""
    rng = np.random.default_rng(seed)
    arrived = gamma_arrivals(rng, load * 16, 20.0, burstiness)
    first, done = fcfs(arrived, 16, 0.75 + 0.5 * rng.random(len(arrived)))
    return queue_finding(arrived, first, done, 5.0, 20.0, 0.0)


def test_repeats_are_judged_pooled_so_one_repeats_excursion_does_not_mark_the_k():
    # at 90 % load with bursty arrivals, seed 15 is one of the 7 in 400 windows read behind; seeds 0 and 1 are not
    steady, excursion = [_window(0.9, 0, 0.2), _window(0.9, 1, 0.2)], _window(0.9, 15, 0.2)
    assert excursion.behind and not any(w.behind for w in steady)
    assert not pooled_behind(steady + [excursion])
    assert pooled_behind([_window(1.5, seed) for seed in range(3)])
    assert pooled_behind([excursion]) and not pooled_behind(steady)     # one window: its own finding


def _rate_window(finding, repeat: int) -> RateWindow:
    n = 100
    return RateWindow(k=0, repeat=repeat, stage=0, rate=10.0, duration_s=15.0, latency_ms=np.full((n, 4), 100.0),
                      ok=np.ones(n, dtype=bool), good=np.ones(n, dtype=bool), late_ms=np.zeros(n),
                      achieved_per_s=10.0, queue=finding)


def test_one_repeat_falling_behind_alone_does_not_mark_the_k_at_the_rate_nor_every_resample():
    windows = (_window(0.9, 0, 0.2), _window(0.9, 1, 0.2), _window(0.9, 15, 0.2))
    cell = RateCell(0, tuple(_rate_window(w, repeat) for repeat, w in enumerate(windows)))
    assert not cell.windows[2].keeps_up and cell.behind == []
    drawn = cell.behind_draws(np.random.default_rng(0), 400)
    assert 0.0 < drawn.mean() < 0.5        # behind only where the draw is mostly that repeat
    behind = RateCell(0, tuple(_rate_window(_window(1.5, seed), seed) for seed in range(3)))
    assert behind.behind and behind.behind_draws(np.random.default_rng(0), 50).all()


def test_pooled_repeats_of_unequal_noise_pass_a_driftless_walk_at_the_stated_rate():
    """Review (issue 46): pooled_growth's change over its summed step noises is Student's t only with Welch-
    Satterthwaite's degrees of freedom; with the degrees of freedom summed, a quiet repeat pooled with a noisy one
    (step sd 1 and 10) passed a driftless walk 2.8 % of the time, not the 2.5 % GROWTH_ALPHA states."""
    trials, steps = 60_000, QUEUE_POINTS // 2
    walks = np.random.default_rng(46).normal(size=(trials, 2, steps)) * np.array([1.0, 10.0])[:, None]
    changes, noises = walks.sum(axis=2), steps * walks.var(axis=2, ddof=1)
    grew = sum(pooled_growth([Growth(0.0, float(c), steps, float(v), 0.0, 1.0) for c, v in zip(change, noise)])
               for change, noise in zip(changes, noises))
    assert grew / trials == pytest.approx(0.025, abs=0.002)
