"""Keeping-up findings (decision/cells/keeping_up.py) of synthetic first-come-first-served servers, to put on rate
windows (not a test module): one that keeps up, one behind, one a stage too short, one repeat's chance excursion."""
from __future__ import annotations

import heapq
from dataclasses import replace

import numpy as np

from lookahead_runner.decision.cells.keeping_up import BEHIND, KEEPS_UP, TOO_SHORT, QueueFinding, queue_finding
from lookahead_runner.decision.cells.rate_window import RateWindow


def _fcfs(arrived: np.ndarray, slots: int, answers: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    free = [0.0] * slots
    first, done = np.empty(len(arrived)), np.empty(len(arrived))
    for i, t in enumerate(arrived):
        start = max(t, heapq.heappop(free))
        first[i], done[i] = start + 0.05, start + 0.05 + answers[i]
        heapq.heappush(free, done[i])
    return first, done


def served(load: float, seed: int, burstiness: float = 1.0) -> QueueFinding:
    """A 20 s stage (its window after 5 s) at `load` x the throughput of 16 slots of ~1 s answers."""
    rng = np.random.default_rng(seed)
    gaps = rng.gamma(burstiness, 1.0 / (16 * load * burstiness), size=int(16 * load * 60 + 50))
    arrived = np.cumsum(gaps)
    arrived = arrived[arrived < 20.0]
    first, done = _fcfs(arrived, 16, 0.75 + 0.5 * rng.random(len(arrived)))
    return queue_finding(arrived, first, done, 5.0, 20.0, 0.0)


def keeps_up(seed: int = 0) -> QueueFinding:
    finding = served(0.6, seed)
    assert finding.status == KEEPS_UP
    return finding


def behind(seed: int = 0) -> QueueFinding:
    finding = served(1.5, seed)
    assert finding.status == BEHIND
    return finding


def excursion() -> tuple[QueueFinding, QueueFinding, QueueFinding]:
    """Three repeats at 90 % load with bursty arrivals: the third reads behind on its own, the three pooled do not
    (tests/unit/decision/test_keeping_up.py shows the pooled rule on them)."""
    found = served(0.9, 0, 0.2), served(0.9, 1, 0.2), served(0.9, 15, 0.2)
    assert [f.status for f in found] == [KEEPS_UP, KEEPS_UP, BEHIND]
    return found


def too_short() -> QueueFinding:
    """Answers of 25 s on an idle server, a 20 s stage: "stage too short for answers of 25 s; lengthen to 50 s"."""
    arrived = (np.arange(40) + 0.5) / 2.0
    first, done = _fcfs(arrived, 256, np.full(40, 25.0))
    finding = queue_finding(arrived, first, done, 5.0, 20.0, 0.0)
    assert finding.status == TOO_SHORT
    return finding


def with_queue(window: RateWindow, finding: QueueFinding) -> RateWindow:
    """The window with `finding` as its keeping-up finding (its growth the finding's)."""
    return replace(window, queue=finding, growth=finding.judged.change)
