"""The steps of turning a run folder into its decision and report (finalize.py), timed: any step still running
after a second shows as a line of the sweep's progress display (rich, on stderr, only on a terminal), and with
--verbose each step's time is printed as it ends.

    steps = Steps(verbose=True)
    with steps.step("read the run folder"):
        ...
    steps.times  # [("read the run folder", 1.234), ...]
"""
from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

SHOW_AFTER_S = 1.0


class Steps:
    def __init__(self, verbose: bool = False, enabled: bool = True, console: Console | None = None) -> None:
        self.verbose = verbose
        self.console = console or Console(stderr=True)
        self.enabled = enabled and self.console.is_terminal
        self.times: list[tuple[str, float]] = []

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        started = time.perf_counter()
        with self._shown_after(name):
            yield
        elapsed = time.perf_counter() - started
        self.times.append((name, elapsed))
        if self.verbose:
            self.console.print(f"{name}: {elapsed:.2f} s", highlight=False) if self.enabled \
                else print(f"{name}: {elapsed:.2f} s", flush=True)

    @contextmanager
    def _shown_after(self, name: str) -> Iterator[None]:
        """A progress line for the step, drawn only once it has run for SHOW_AFTER_S (a quick step flashes none)."""
        if not self.enabled:
            yield
            return
        progress = Progress(TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(), console=self.console,
                            transient=True)
        progress.add_task(name, total=None)
        lock, ended = threading.Lock(), []

        def show() -> None:
            with lock:
                if not ended:
                    progress.start()

        timer = threading.Timer(SHOW_AFTER_S, show)
        timer.daemon = True
        timer.start()
        try:
            yield
        finally:
            with lock:
                ended.append(True)
                timer.cancel()
            progress.stop()

    def total_s(self) -> float:
        return sum(seconds for _, seconds in self.times)
