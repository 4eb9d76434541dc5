"""Client lag: how late this Locust process's event loop runs a greenlet that is ready to run.

A greenlet sleeps `interval_s` over and over and records how much longer than asked each sleep took.
A stream's bytes wait in the socket for the same loop, so this oversleep is the delay the client adds
to every TTFT/ITL reading; when it grows to the size of an ITL, the client (not the server) is
the bottleneck and the run's latencies are not trustworthy.
"""

from __future__ import annotations

import time
from collections import deque
from itertools import islice

import gevent

from lookahead_runner.workload.timeline import percentile


class LoopLagMonitor:
    def __init__(self, interval_s: float = 0.02, capacity: int = 30_000) -> None:
        self.interval_s = interval_s
        self._samples_s: deque[float] = deque(maxlen=capacity)
        self._count = 0
        self._greenlet: gevent.Greenlet | None = None

    def start(self) -> None:
        if self._greenlet is None:
            self._greenlet = gevent.spawn(self._run)

    def stop(self) -> None:
        if self._greenlet is not None:
            self._greenlet.kill(block=False)
            self._greenlet = None

    def _run(self) -> None:
        while True:
            before_s = time.perf_counter()
            gevent.sleep(self.interval_s)
            self._samples_s.append(max(time.perf_counter() - before_s - self.interval_s, 0.0))
            self._count += 1

    def mark(self) -> int:
        """A position in the sample stream; pass it to `p99_since_ms` later."""
        return self._count

    def p99_since_ms(self, mark: int) -> float | None:
        """p99 of the lag samples taken since `mark`, in ms; None if none were taken (or not running)."""
        if self._greenlet is None:
            return None
        count = min(self._count - mark, len(self._samples_s))
        if count <= 0:
            return None
        recent = list(islice(reversed(self._samples_s), count))
        value = percentile(recent, 99)
        return None if value is None else value * 1000.0
