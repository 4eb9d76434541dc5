"""When each request of a rate stage arrives: the open-loop schedule, pure numpy (no Locust, no clock).

As `vllm bench serve` paces (vllm/benchmarks/serve.py, get_request): the gaps between arrivals are drawn from a
gamma distribution of shape `burstiness` and mean 1 / rate (burstiness 1 = exponential gaps: a Poisson
process; below 1 burstier, above 1 more even), or are all exactly 1 / rate ("constant", vLLM's burstiness =
inf); the first request arrives one gap after the stage starts. Unlike vLLM, a stage is a duration, not a
request count, so the gaps are not rescaled to a total: the arrivals are those that fall inside the stage.

Seeded: stage `i` of a run draws from its own stream (seed, i), so every K, every repeat and every number of
Locust processes gets the same arrival times and the same requests; `mine(n, d)` is the share of dispatcher
`d` of `n` (every n-th arrival), so the processes together send exactly the schedule.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal

import numpy as np

from lookahead_runner.contracts.records import RequestRecord

if TYPE_CHECKING:
    from lookahead_runner.workload.request_set import RequestSet, SetRequest

POISSON, CONSTANT = "poisson", "constant"
ARRIVALS = (POISSON, CONSTANT)
ArrivalKind = Literal["poisson", "constant"]


@dataclass(frozen=True)
class ArrivalProcess:
    """How gaps between arrivals are drawn (load.arrival, load.burstiness, load.arrival_seed)."""

    kind: ArrivalKind = POISSON
    burstiness: float = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        if self.kind not in ARRIVALS:
            raise ValueError(f"arrival: must be one of {', '.join(ARRIVALS)}, got {self.kind!r}")
        if not self.burstiness > 0:
            raise ValueError(f"burstiness: must be > 0 (the gamma shape of the gaps; 1 = Poisson), "
                             f"got {self.burstiness!r}")
        if self.seed < 0:   # numpy's seed sequence takes none
            raise ValueError(f"arrival_seed: must be >= 0, got {self.seed!r}")

    def describe(self) -> str:
        if self.kind == CONSTANT:
            return "constant gaps"
        return "Poisson" if self.burstiness == 1.0 else f"gamma gaps (burstiness {self.burstiness:g})"


def stage_offsets(rate: float, duration_s: float, process: ArrivalProcess, stage: int) -> np.ndarray:
    """Arrival times of stage `stage`, in seconds from its start, in [0, duration_s), ascending."""
    if not rate > 0 or not duration_s > 0:
        return np.empty(0)
    expected = rate * duration_s
    if process.kind == CONSTANT:
        times = np.arange(1, int(np.floor(expected)) + 2) / rate
        return times[times < duration_s]
    rng = np.random.default_rng([process.seed, stage])
    scale = 1.0 / (rate * process.burstiness)
    times = np.empty(0)
    # draw gaps in blocks until the running sum passes the stage's end (one block almost always)
    batch = int(expected + 10 * np.sqrt(expected / process.burstiness) + 16)
    last = 0.0
    while last < duration_s:
        block = last + np.cumsum(rng.gamma(process.burstiness, scale, size=batch))
        times = np.concatenate([times, block])
        last = float(block[-1])
    return times[times < duration_s]


def mine(count: int, dispatchers: int, index: int) -> range:
    """The arrival indexes dispatcher `index` of `dispatchers` sends: every n-th, starting at its own."""
    dispatchers = max(dispatchers, 1)
    return range(index % dispatchers, count, dispatchers)


@dataclass(frozen=True)
class Arrival:
    """One scheduled request of a rate stage: which stage, its place in that stage's schedule, when it was due
    (unix seconds), its number across the rate stages (which request of a request set it sends), the seed of
    its synthetic prompt, and how long it waited for a max_in_flight slot."""

    stage: int
    index: int
    t_scheduled_s: float
    number: int
    seed: int = 0
    held_ms: float = 0.0

    def rng(self) -> random.Random:
        """The stream its synthetic prompt is drawn from: the same for this arrival in every life."""
        return random.Random(f"arrival-{self.seed}-{self.stage}-{self.index}")

    def pick(self, request_set: RequestSet) -> tuple[SetRequest, int]:
        """(its request of the set, how many times the rate stages had run through the set before it)."""
        size = len(request_set)
        return request_set.requests[self.number % size], self.number // size


def scheduled(record: RequestRecord, arrival: Arrival | None) -> RequestRecord:
    """The request's record with its arrival's schedule columns (unchanged in a user stage)."""
    if arrival is None:
        return record
    return replace(record, t_scheduled_s=arrival.t_scheduled_s, held_ms=round(arrival.held_ms, 3),
                   arrival=arrival.index)
