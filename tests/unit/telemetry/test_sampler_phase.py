"""The sampler's gaps are drawn at random: a gauge that cycles with the users' lockstep turnover (8 users of
535 ms requests on the simulator, near the 0.5 s interval) must average to its time average, not to the one
phase a fixed grid keeps reading."""
from __future__ import annotations

import itertools
import random
import statistics
import time

import numpy as np
import pytest

from lookahead_runner.telemetry import prometheus
from lookahead_runner.telemetry.memory import NoMemory
from lookahead_runner.telemetry.sampler import Sampler, sample_gaps

INTERVAL_S = 0.5
SAMPLES_PER_WINDOW = 16  # an 8 s window


def queued(t: np.ndarray, period_s: float) -> np.ndarray:
    """1 while the cycle's arrivals wait for a step (its first quarter), else 0: a time average of 0.25."""
    return ((t % period_s) < period_s / 4).astype(float)


def window_means(gaps, period_s: float, windows: int, rng: random.Random) -> np.ndarray:
    means = []
    for _ in range(windows):
        start = rng.uniform(0, period_s)  # each server life starts at its own phase of the cycle
        times = start + np.cumsum([0.0, *itertools.islice(gaps, SAMPLES_PER_WINDOW - 1)])
        means.append(queued(times, period_s).mean())
    return np.array(means)


@pytest.mark.parametrize("period_s", [INTERVAL_S, 0.535, 2 * INTERVAL_S])
def test_a_lockstep_cycle_reads_its_time_average(period_s):
    rng = random.Random(7)
    means = window_means(sample_gaps(INTERVAL_S, random.Random(11)), period_s, 400, rng)
    assert abs(means.mean() - 0.25) < 0.03, means.mean()
    # one window of 16 samples: the time average give or take its sampling noise, never a phase held throughout
    assert (means >= 0.75).mean() < 0.01 and (means == 0).mean() < 0.05, np.histogram(means, bins=4)


def test_a_fixed_grid_would_read_one_phase_for_the_whole_window():
    """What the test above guards against: a grid at the cycle's period reads 0 or 1 in every window."""
    means = window_means(itertools.repeat(INTERVAL_S), INTERVAL_S, 400, random.Random(7))
    assert set(np.unique(means)) <= {0.0, 1.0}


def test_gaps_keep_the_mean_rate():
    gaps = list(itertools.islice(sample_gaps(INTERVAL_S, random.Random(3)), 4000))
    assert statistics.mean(gaps) == pytest.approx(INTERVAL_S, rel=0.02)
    assert min(gaps) >= 0.5 * INTERVAL_S and max(gaps) <= 1.5 * INTERVAL_S


def thread_gaps(tmp_path, monkeypatch, count: int, slow_at: int | None = None) -> np.ndarray:
    """The gaps between the sampling thread's own samples (not the opening and closing ones), at interval_s 0.1;
    the scrape numbered `slow_at` answers 0.8 s late."""
    monkeypatch.setattr(prometheus, "scrape", lambda url, *args, **kwargs: "vllm:num_requests_running 1\n")
    sampler = Sampler("http://server/metrics", NoMemory(), tmp_path, interval_s=0.1, rng=random.Random(5))
    stamps = []
    original = sampler._sample

    def stamped():
        if len(stamps) == slow_at:
            time.sleep(0.8)
        stamps.append(time.monotonic())
        return original()

    sampler._sample = stamped
    with sampler:
        deadline = time.monotonic() + 10.0
        while len(stamps) < count and time.monotonic() < deadline:
            time.sleep(0.05)
    return np.diff(stamps[1:-1])


def test_the_sampling_thread_draws_its_gaps(tmp_path, monkeypatch):
    gaps = thread_gaps(tmp_path, monkeypatch, 22)
    assert len(gaps) >= 15, len(gaps)
    # drawn from 0.05-0.15 s (SD 29 ms); a fixed grid's gaps vary only by the host's scheduling delay
    assert gaps.std() > 0.015 and gaps.mean() == pytest.approx(0.1, rel=0.25), gaps


def test_a_slow_scrape_is_not_followed_by_a_burst_of_samples_at_one_moment(tmp_path, monkeypatch):
    """A /metrics answer late by 0.8 s (a busy server, up to the 2 s scrape timeout) leaves the schedule behind; the
    thread then samples once at once, not the 7 or so samples it fell behind back to back, each reading the same
    moment of the cycle (a fifth of an 8 s window's samples at one phase)."""
    gaps = thread_gaps(tmp_path, monkeypatch, 16, slow_at=3)
    assert len(gaps) >= 10, len(gaps)
    assert (gaps < 0.02).sum() <= 2, gaps   # drawn gaps are 0.05-0.15 s
