"""A Locust process's open-loop requests: the greenlets of a rate stage's arrivals, and load.max_in_flight.

Each arrival runs in its own greenlet (workload/dispatcher.py spawns it at its scheduled time), whatever is
outstanding. `InFlightCap` is vLLM bench's --max-concurrency: at most `limit` requests in flight; an arrival
that finds them all busy waits for one, first come first served, and counts as held (its wait goes to
requests.csv as held_ms). When the rate stages end, the arrivals still waiting are never sent (`drop_waiting`).
"""
from __future__ import annotations

import logging
import time
from collections import deque

import gevent
from gevent.event import AsyncResult
from gevent.pool import Group

logger = logging.getLogger(__name__)


class NotSent(Exception):
    """Raised in an arrival still waiting for a slot when its rate stages ended."""


class InFlightCap:
    """At most `limit` requests in flight (0 = no cap); the rest wait in arrival order."""

    def __init__(self, limit: int = 0) -> None:
        self.limit = limit
        self.in_flight = 0
        self.held = 0                       # arrivals that had to wait
        self.closed = False                 # the rate stages ended: an arrival that finds no slot is not sent
        self._waiting: deque[AsyncResult] = deque()

    def take(self) -> bool:
        """A slot now, if one is free."""
        if self.limit and self.in_flight >= self.limit:
            return False
        self.in_flight += 1
        return True

    def wait(self) -> None:
        """Wait for a slot that `give` hands over; NotSent when `drop_waiting` comes first (or came already)."""
        self.held += 1
        if self.closed:
            raise NotSent()
        turn = AsyncResult()
        self._waiting.append(turn)
        try:
            turn.get()
        except BaseException:
            if turn in self._waiting:
                self._waiting.remove(turn)
            elif turn.successful():   # handed a slot, then killed before it could use it: pass it on
                self.give()
            raise

    def give(self) -> None:
        """A request ended: its slot goes to the longest-waiting arrival, else back to the pool."""
        if self._waiting:
            self._waiting.popleft().set(True)
        else:
            self.in_flight = max(self.in_flight - 1, 0)

    def drop_waiting(self) -> int:
        """The rate stages ended: every arrival still waiting, or coming to a full cap from now on, is not sent.
        Returns how many were waiting."""
        self.closed = True
        dropped = len(self._waiting)
        while self._waiting:
            self._waiting.popleft().set_exception(NotSent())
        return dropped


class OpenLoop:
    """This process's arrival greenlets: they outlive the dispatcher's stage (a request sent late in a rate
    stage finishes after it), and the test's stop waits for them (`finish`)."""

    def __init__(self) -> None:
        self.requests = Group()

    def spawn(self, function, *args) -> gevent.Greenlet:
        return self.requests.spawn(function, *args)

    def spawn_at(self, due_s: float, function, *args) -> gevent.Greenlet:
        """Start `function(*args)` at unix time `due_s` (at once if it is past), from a timer of its own."""
        greenlet = gevent.Greenlet(function, *args)
        self.requests.add(greenlet)
        loop = gevent.get_hub().loop
        loop.update_now()  # the loop's clock, which the timer counts from, may be a whole iteration old
        greenlet.start_later(max(due_s - time.time(), 0.0))
        return greenlet

    @property
    def outstanding(self) -> int:
        return len(self.requests)

    def finish(self, timeout_s: float) -> None:
        """Wait up to `timeout_s` for the requests in flight, then stop the rest (their rows say "cut")."""
        if not len(self.requests):
            return
        if not self.requests.join(timeout=timeout_s):
            logger.warning("Stopping %d open-loop requests still in flight after %g s", len(self.requests), timeout_s)
            self.requests.kill(block=True, timeout=5.0)
