"""When each request of a rate stage arrives: the open-loop schedule, pure numpy (no Locust, no clock).

As `vllm bench serve` paces (vllm/benchmarks/serve.py, get_request): the gaps between arrivals are drawn from a
gamma distribution of shape `burstiness` and mean 1 / rate (burstiness 1 = exponential gaps: a Poisson
process; below 1 burstier, above 1 more even), or are all exactly 1 / rate ("constant", vLLM's burstiness =
inf); the first request arrives one gap after the stage starts. Unlike vLLM, a stage is a duration, not a
request count, so the gaps are not rescaled to a total: the arrivals are those that fall inside the stage.

Bounded: a stage's draw stops at MAX_DRAWN_ARRIVALS (a ValueError past it), and a burstiness below
BURSTINESS_FLOOR is refused: at the floor, the largest stage the config allows passes that bound once in a
billion draws at most (the derivation is at the constant).

Seeded: stage `i` of a run draws from its own stream (seed, i), so every K, every repeat and every number of
Locust processes gets the same arrival times and the same requests.

Split: the Locust processes that send a run are named by Locust's worker indexes, which have gaps once a worker
has quit and another joined (the master never reuses one), so each is placed by its rank among them (the
indexes sorted, as its master listed them when the run started), never by its index. load.max_in_flight is
dealt slot by slot over the ranks (`slots_per_process`: exactly the cap in all, a cap below the processes
leaves the last ranks none), and arrival j goes to the owner of slot j mod the cap (`arrival_shares`): each
process sends in proportion to its slots, one without slots sends nothing, and the shares together are the
schedule, each arrival once. With no cap, arrival j goes to rank j mod the processes.
"""
from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal

import numpy as np

from lookahead_runner.contracts.records import RequestRecord
from lookahead_runner.workload.stages import MAX_STAGE_ARRIVALS

if TYPE_CHECKING:
    from lookahead_runner.workload.request_set import RequestSet, SetRequest

POISSON, CONSTANT = "poisson", "constant"
ARRIVALS = (POISSON, CONSTANT)
ArrivalKind = Literal["poisson", "constant"]

# What one stage's draw may hold (160 MB of float64): twice the arrivals a stage may expect
# (stages.MAX_STAGE_ARRIVALS), the room left for a bursty schedule's count above its mean.
MAX_DRAWN_ARRIVALS = 2 * MAX_STAGE_ARRIVALS
# The chance, at the floor below, that the largest stage the config allows draws past MAX_DRAWN_ARRIVALS.
BOUND_PASS_ODDS = 1e-9
# The floor of burstiness (k). The n-th arrival of a stage falls at the sum of n gamma(k, 1 / (rate k)) gaps, so
# P(count >= n) = P(Gamma(n k, 1) < rate k duration). With rate x duration <= MAX_STAGE_ARRIVALS = M and n = 2 M,
# that is at most P(Gamma(a) <= a / 2) for a = 2 M k, and the Chernoff bound of a gamma's lower tail,
# P(Gamma(a) <= a r) <= exp(-a (r - 1 - ln r)), gives exp(-a (ln 2 - 1/2)) at r = 1/2: at most BOUND_PASS_ODDS
# once k >= ln(1 / BOUND_PASS_ODDS) / ((ln 2 - 1/2) 2 M) = 5.4e-06. (Exact there: 7.6e-11; at half the floor,
# 3.3e-06.) Below it the gaps bunch into bursts of about 1 / k arrivals: 1e-7 drew 913k for 40 expected.
BURSTINESS_FLOOR = math.log(1 / BOUND_PASS_ODDS) / ((math.log(2) - 0.5) * MAX_DRAWN_ARRIVALS)


def burstiness_problem(value: float) -> str:
    """Why `value` cannot be load.burstiness ("" where it can): below BURSTINESS_FLOOR, or not a finite number (an
    infinite shape draws NaN gaps: a stage of no arrivals)."""
    if value >= BURSTINESS_FLOOR and math.isfinite(value):
        return ""
    return (f"give the gamma shape of the gaps between arrivals, {BURSTINESS_FLOOR:.2g} or more (1 = Poisson, as "
            f"vllm bench serve --burstiness; lower bunches a stage's arrivals past the {MAX_DRAWN_ARRIVALS} its "
            "schedule may draw)")


@dataclass(frozen=True)
class ArrivalProcess:
    """How gaps between arrivals are drawn (load.arrival, load.burstiness, load.arrival_seed)."""

    kind: ArrivalKind = POISSON
    burstiness: float = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        if self.kind not in ARRIVALS:
            raise ValueError(f"arrival: must be one of {', '.join(ARRIVALS)}, got {self.kind!r}")
        if burstiness_problem(self.burstiness):
            raise ValueError(f"burstiness: must be >= {BURSTINESS_FLOOR:.2g} (the gamma shape of the gaps; "
                             f"1 = Poisson), got {self.burstiness!r}")
        if self.seed < 0:   # numpy's seed sequence takes none
            raise ValueError(f"arrival_seed: must be >= 0, got {self.seed!r}")

    def describe(self) -> str:
        if self.kind == CONSTANT:
            return "constant gaps"
        return "Poisson" if self.burstiness == 1.0 else f"gamma gaps (burstiness {self.burstiness:g})"


def stage_offsets(rate: float, duration_s: float, process: ArrivalProcess, stage: int, *,
                  max_arrivals: int = MAX_DRAWN_ARRIVALS) -> np.ndarray:
    """Arrival times of stage `stage`, in seconds from its start, in [0, duration_s), ascending; ValueError where
    they would be more than `max_arrivals` (nothing more is drawn)."""
    if not rate > 0 or not duration_s > 0:
        return np.empty(0)
    expected = rate * duration_s
    if expected > max_arrivals:
        raise _too_many(stage, f"rate x duration_s = {expected:.3g}", max_arrivals)
    if process.kind == CONSTANT:
        times = np.arange(1, int(np.floor(expected)) + 2) / rate
        return times[times < duration_s]
    rng = np.random.default_rng([process.seed, stage])
    scale = 1.0 / (rate * process.burstiness)
    blocks: list[np.ndarray] = []
    drawn, last = 0, 0.0
    # draw gaps in blocks until the running sum passes the stage's end (one block almost always); the blocks'
    # sizes do not change the gaps (numpy draws them one after another from the stream)
    batch = int(expected + 10 * np.sqrt(expected / process.burstiness) + 16)
    while last < duration_s:
        if drawn > max_arrivals:
            raise _too_many(stage, f"burstiness {process.burstiness:g} bunched the gaps", max_arrivals)
        size = min(batch, max_arrivals + 1 - drawn)
        block = last + np.cumsum(rng.gamma(process.burstiness, scale, size=size))
        blocks.append(block)
        drawn, last = drawn + size, float(block[-1])
    times = np.concatenate(blocks)
    return times[times < duration_s]


def _too_many(stage: int, why: str, max_arrivals: int) -> ValueError:
    return ValueError(f"stage {stage}: more than {max_arrivals} arrivals in one stage ({why}): lower the rate, "
                      "split the stage or raise burstiness")


def _ranks(worker_ids: Sequence[int]) -> list[int]:
    """The processes' ids in rank order; ValueError on none or a repeated one."""
    ranked = sorted(worker_ids)
    if not ranked or len(set(ranked)) != len(ranked):
        raise ValueError(f"dispatchers: give each process's worker id once, got {list(worker_ids)!r}")
    return ranked


def slots_per_process(max_in_flight: int, worker_ids: Sequence[int]) -> dict[int, int]:
    """load.max_in_flight split among the processes `worker_ids` (Locust's worker indexes, gaps allowed; one
    process: any one id): slot s goes to the process of rank s mod P, so the slots add up to exactly
    max_in_flight, each process holds max_in_flight // P or one more, and where max_in_flight < P the last
    ranks hold none. 0 (no cap): 0 each."""
    ranked = _ranks(worker_ids)
    processes = len(ranked)
    return {worker: max_in_flight // processes + (rank < max_in_flight % processes)
            for rank, worker in enumerate(ranked)}


def worker_share(count: int, worker_ids: Sequence[int], worker_id: int, max_in_flight: int = 0) -> np.ndarray:
    """The arrival indexes (ascending) of a schedule of `count` that process `worker_id` sends: arrival j goes to
    the owner of slot j mod max_in_flight (`slots_per_process`), or with no cap to rank j mod P. Empty for an id
    not among `worker_ids` (a worker that joined after the run started)."""
    ranked = _ranks(worker_ids)
    if worker_id not in ranked:
        return np.empty(0, dtype=np.int64)
    rank = ranked.index(worker_id)
    period = max_in_flight or len(ranked)   # the deal repeats every `period` arrivals
    owners = min(len(ranked), period)       # the ranks that own a slot: the first max_in_flight, if fewer
    mine_in_period = np.arange(rank, period, owners) if rank < owners else np.empty(0, dtype=np.int64)
    starts = np.arange(0, count, period)
    share = (starts[:, None] + mine_in_period[None, :]).ravel()
    return share[share < count]


def arrival_shares(count: int, worker_ids: Sequence[int], max_in_flight: int = 0) -> dict[int, np.ndarray]:
    """Every process's share of a schedule of `count` arrivals (`worker_share`): together range(count), once each."""
    return {worker: worker_share(count, worker_ids, worker, max_in_flight) for worker in worker_ids}


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
