"""Client lag and CPU: is this Locust process keeping up with the streams it reads?

Lag: a greenlet sleeps `interval_s` over and over and records how much longer than asked each sleep
took. A stream's bytes wait in the socket for the same loop, so this oversleep is the delay the
client adds to every TTFT/ITL reading; when it grows to the size of an ITL, the client (not the
server) is the bottleneck and the run's latencies are not trustworthy.
CPU: every `cpu_window_s` the same greenlet reads the process's CPU time; `cpu_pct()` is the share of
one core the process used over the last full window (one reading a second, not one per request).
"""

from __future__ import annotations

import time
from collections import deque
from itertools import islice

import gevent

from lookahead_runner.workload.timeline import percentile


class LoopLagMonitor:
    def __init__(self, interval_s: float = 0.02, capacity: int = 30_000, cpu_window_s: float = 1.0) -> None:
        self.interval_s = interval_s
        self.cpu_window_s = cpu_window_s
        self._samples_s: deque[float] = deque(maxlen=capacity)
        self._count = 0
        self._greenlet: gevent.Greenlet | None = None
        self._cpu_pct: float | None = None

    def start(self) -> None:
        if self._greenlet is None:
            self._greenlet = gevent.spawn(self._run)

    def stop(self) -> None:
        if self._greenlet is not None:
            self._greenlet.kill(block=False)
            self._greenlet = None

    def _run(self) -> None:
        window_start_s, window_cpu_s = time.perf_counter(), time.process_time()
        while True:
            before_s = time.perf_counter()
            gevent.sleep(self.interval_s)
            after_s = time.perf_counter()
            self._samples_s.append(max(after_s - before_s - self.interval_s, 0.0))
            self._count += 1
            if after_s - window_start_s >= self.cpu_window_s:
                cpu_s = time.process_time()
                self._cpu_pct = 100.0 * (cpu_s - window_cpu_s) / (after_s - window_start_s)
                window_start_s, window_cpu_s = after_s, cpu_s

    def cpu_pct(self) -> float | None:
        """CPU of this process over the last full window, in percent of one core; None before one ended."""
        return self._cpu_pct if self._greenlet is not None else None

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
