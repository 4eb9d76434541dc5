"""The open-loop dispatcher of rate stages: one Locust user per Locust process sends that process's share of
the schedule, each request at its scheduled time, whatever is outstanding.

The shape (workload/shape.py) spawns one dispatcher per process for a run of rate stages and says when the run
started and which processes send it (`RateRun`: Locust's worker indexes as the master saw them then; a worker
hears it from its master, scenario.py). The dispatcher walks the run's arrival times (workload/arrivals.py:
seeded, so the same in every life), takes its process's share of them and of load.max_in_flight (by its rank
among those indexes, never by the index itself: arrivals.worker_share and slots_per_process, so the processes
together send each arrival once and hold at most max_in_flight), sleeps until each is due and spawns its request
in a greenlet of its own (in_flight.OpenLoop), so a slow server never slows the sending: the queue shows up where
it is, at the server. A process sends a run once, however many dispatchers Locust gives it (it moves a quitting
worker's one to another).
Each request is the closed-loop user's (user.py: same stream reading, same records), tagged with its stage,
its scheduled time, its wait for a load.max_in_flight slot and its place in the schedule; how late it left
(send time - scheduled time - that wait) is the dispatcher's lateness, which the windows gate as they gate
the client's loop lag (runfolder/rate_windows.py).
"""
from __future__ import annotations

import logging
import math
import time
import traceback
from dataclasses import replace
from typing import Any

import gevent
from gevent import GreenletExit
from locust.runners import WorkerRunner
from locust.user.task import LOCUST_STATE_STOPPING

from lookahead_runner.contracts.records import NOT_SENT_ERROR, RequestRecord
from lookahead_runner.workload.arrivals import Arrival, scheduled, slots_per_process, stage_offsets, worker_share
from lookahead_runner.workload.in_flight import InFlightCap, NotSent
from lookahead_runner.workload.shape import RateRun, StagedShape
from lookahead_runner.workload.user import StreamingCompletionsBase

logger = logging.getLogger(__name__)

# A dispatcher's own HTTP connection pool: a request waiting for a connection would be a closed loop in
# disguise, so without load.max_in_flight the pool is as large as the process's open files allow.
UNCAPPED_POOL = 100_000
POLL_S = 0.25   # how often a dispatcher waiting for its next arrival (or its next run) looks for a stop
# An arrival's greenlet is armed this long before it is due, on a timer of its own: the timer switches straight
# into it at its time (no hop through the dispatcher's greenlet), and the dispatcher wakes once per lead, not
# once per arrival, when arrivals come faster.
LEAD_S = 0.2


def current_run(environment: Any) -> RateRun | None:
    """The rate run going on: the shape's, or on a worker the one its master announced."""
    shape = environment.shape_class
    if isinstance(shape, StagedShape) and shape.rate_run is not None:
        return shape.rate_run
    state = getattr(environment, "lookahead_scenario", None)
    return getattr(state, "rate_run", None)


def own_worker_id(environment: Any) -> int:
    """This process's Locust worker index (0 in a single process)."""
    runner = environment.runner
    return int(getattr(runner, "worker_index", 0) or 0) if isinstance(runner, WorkerRunner) else 0


def run_workers(run: RateRun, own_id: int) -> tuple[int, ...]:
    """The worker indexes of the processes sending `run`: its master's list, or this process alone."""
    return run.workers or (own_id,)


class RateDispatcherBase(StreamingCompletionsBase):
    """Sends this process's share of a run of rate stages on schedule (see the module docstring)."""

    abstract = True

    def __init__(self, environment: Any) -> None:
        settings = getattr(environment, "lookahead_scenario", None)
        cap = settings.settings.max_in_flight if settings is not None else 0
        self.concurrency = cap or UNCAPPED_POOL
        super().__init__(environment)

    def on_start(self) -> None:  # no spawn spread: the schedule says when
        pass

    @property
    def _stopping(self) -> bool:
        return self._state == LOCUST_STATE_STOPPING

    def _sleep_until(self, due_s: float) -> bool:
        """Sleep until `due_s` (unix seconds); False when Locust asked this user to stop meanwhile."""
        while not self._stopping:
            delay = due_s - time.time()
            if delay <= 0:
                return True
            gevent.sleep(min(delay, POLL_S))
        return False

    def dispatch_run(self) -> None:
        """The task: send this process's share of the current rate run, once; idle until the next run."""
        run = current_run(self.environment)
        if run is None or run.t_start_s in self.scenario.runs_dispatched:
            self._sleep_until(time.time() + POLL_S)
            return
        self.scenario.runs_dispatched.add(run.t_start_s)
        own_id = own_worker_id(self.environment)
        workers = run_workers(run, own_id)
        if own_id not in workers:
            logger.warning("Worker %d joined after the rate run started (its workers: %s): it sends none of it",
                           own_id, ", ".join(map(str, workers)))
        settings = self.scenario.settings
        # no slot under a cap (InFlightCap(0) would be none) comes with no arrivals: worker_share gives it none
        cap = InFlightCap(slots_per_process(settings.max_in_flight, workers).get(own_id, 0))
        process = settings.arrival_process
        # each arrival's number across every rate stage so far picks its request of a request set
        number = sum(len(stage_offsets(s.rate, s.duration_s, process, i))
                     for i, s in enumerate(run.stages[:run.first]) if s.rate is not None)
        try:
            self._send_run(run, own_id, number, cap)
            self._sleep_until(run.end_s)   # an arrival held by max_in_flight may still go out until the run ends
        finally:  # also when Locust kills this user (no --stop-timeout): none held goes out in a later stage
            dropped = cap.drop_waiting()
        if cap.held:
            logger.warning("%d arrivals found max_in_flight (%d here) full and waited; %d of them were never sent",
                           cap.held, cap.limit, dropped)
        # This user stops once the run's requests have ended (Locust waits --stop-timeout for it), and the shape
        # opens a users stage after the run only then (shape._draining): on a server that has served its backlog.
        self.scenario.open_loop.requests.join()

    def _send_run(self, run: RateRun, own_id: int, number: int, cap: InFlightCap) -> None:
        """Arm this process's share of the run's arrivals, each on a timer of its own; stops early when Locust
        stops this user. `number`: the arrivals of the rate stages before the run."""
        settings = self.scenario.settings
        process, seed, workers = settings.arrival_process, settings.arrival_seed, run_workers(run, own_id)
        for stage_index in range(run.first, run.last + 1):
            stage = run.stages[stage_index]
            offsets = stage_offsets(stage.rate or 0.0, stage.duration_s, process, stage_index)
            start_s = run.start_s(stage_index)
            for arrival_index in map(int, worker_share(len(offsets), workers, own_id, settings.max_in_flight)):
                due_s = start_s + float(offsets[arrival_index])
                if not self._sleep_until(due_s - LEAD_S):
                    return
                arrival = Arrival(stage_index, arrival_index, due_s, number + arrival_index, seed)
                self.scenario.open_loop.spawn_at(due_s, self._arrive, arrival, cap)
            number += len(offsets)

    def _arrive(self, arrival: Arrival, cap: InFlightCap) -> None:
        """One arrival: a slot (waiting for one if max_in_flight is full), then its request."""
        while (early_s := arrival.t_scheduled_s - time.time()) > 0:  # a timer may fire up to a loop tick early
            gevent.sleep(early_s)
        if not cap.take():
            waited_from_s = time.time()
            try:
                cap.wait()
            except (NotSent, GreenletExit):
                self._not_sent(arrival)
                return
            arrival = replace(arrival, held_ms=(time.time() - waited_from_s) * 1000.0)
        try:
            self.stream_completion(arrival)
        except GreenletExit:
            raise
        except Exception as exc:  # outside Locust's user greenlet: its handler would never see it
            logger.exception("An open-loop request failed in the scenario's own code")
            runner = self.environment.runner
            if runner is not None:
                runner.log_exception("local", repr(exc), traceback.format_exc())
        finally:
            cap.give()

    def _not_sent(self, arrival: Arrival) -> None:
        """A row (and a Locust failure) for an arrival that waited for a slot until its stages ended."""
        state = self.scenario
        now_s = time.time()
        record = RequestRecord(stage=arrival.stage, users=0, t_send_s=math.nan, t_first_token_s=None, t_done_s=now_s,
                               ttft_ms=None, e2e_ms=math.nan, itl_p50_ms=None, itl_p99_ms=None, tpot_ms=None,
                               prompt_tokens=None, output_tokens=0, chunks=0, ok=False, error=NOT_SENT_ERROR,
                               lag_p99_ms=None, client=state.client)
        self._write(scheduled(record, replace(arrival, held_ms=(now_s - arrival.t_scheduled_s) * 1000.0)))
        self.environment.events.request.fire(
            request_type="POST", name="not sent (max_in_flight full until the stage ended)", response_time=0,
            response_length=0, response=None, context={}, exception=NotSent("max_in_flight full"))
