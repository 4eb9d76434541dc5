"""Progress over the whole sweep (rich): current life, stage, users, server req/s and tok/s, ETA.

The bar advances in planned seconds of load; a background refresh reads the live sampler's last
values, so the numbers shown are the server's own counters.
"""
from __future__ import annotations

import threading
import time

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from ..telemetry.signals import counter_signals
from ..workload.stages import load_label


class SweepProgress:
    def __init__(self, stages, lives_total: int, enabled: bool = True, blocks: int = 1) -> None:
        self.stages = list(stages)
        self.blocks = blocks                    # workload variants: each life runs its stages once per variant
        self.stage_total_s = sum(s.duration_s for s in self.stages) * blocks
        self.console = Console(stderr=True)
        self.enabled = enabled and self.console.is_terminal
        self._progress = Progress(TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(),
                                  TextColumn("ETA"), TimeRemainingColumn(), console=self.console,
                                  disable=not self.enabled)
        self._task = self._progress.add_task("sweep", total=lives_total * self.stage_total_s)
        self._life = ""
        self._variant, self._block_s = "", 0.0  # the variant running, and the load seconds of its blocks before
        self._now = self.stages                 # the stages of the life running (a confirmation has its own)
        self._stages_of: dict[str, list] = {}
        self._sampler = None
        self._load_started = 0.0
        self._done_s = 0.0
        self._last: dict = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._refresh_loop, daemon=True)

    def say(self, text: str) -> None:
        self.console.print(text, highlight=False) if self.enabled else print(text, flush=True)

    def life_started(self, key: str) -> None:
        self._life, self._sampler, self._last = key, None, {}
        self._now = self._stages_of.get(key, self.stages)
        self._variant, self._block_s = "", 0.0

    def variant_started(self, variant) -> None:
        """A workload variant's block starts (life/life.py); its label is shown beside the stage."""
        if self._variant:
            self._block_s += sum(s.duration_s for s in self._now)
        self._variant = variant.label

    def load_started(self, sampler) -> None:
        self._sampler, self._load_started = sampler, time.monotonic()

    def add_lives(self, count: int, stages=None, keys=()) -> None:
        """Lives added while the sweep runs (repeats = "auto"; the confirmation, with its own `stages`)."""
        stages = list(stages) if stages is not None else self.stages
        self._stages_of.update(dict.fromkeys(keys, stages))
        task = self._progress.tasks[0]
        self._progress.update(self._task, total=(task.total or 0) + count * sum(s.duration_s for s in stages))

    def life_finished(self, key: str) -> None:
        """The life `key` ended (done, failed, skipped or kept): its own stages are credited, and it is named
        (lives end in any order on a Ray cluster, and a skipped one never started)."""
        stages = self._stages_of.get(key)
        self._done_s += sum(s.duration_s for s in stages) if stages is not None else self.stage_total_s
        if key == self._life:
            self._sampler = None
        self._progress.update(self._task, completed=self._done_s, description=f"{key} finished")

    def _describe(self) -> str:
        elapsed = time.monotonic() - self._load_started
        stages = self._now
        edge, stage_no, load = 0.0, len(stages), _label(stages[-1])
        for number, stage in enumerate(stages, 1):
            edge += stage.duration_s
            if elapsed < edge:
                stage_no, load = number, _label(stage)
                break
        values = self._sampler.last_values if self._sampler else {}
        variant = f" · {self._variant}" if self._variant else ""
        return (f"{self._life} stage {stage_no}/{len(stages)} ({load}{variant}{self._rates(values)})",
                self._block_s + min(elapsed, sum(s.duration_s for s in stages)))

    def _rates(self, values: dict) -> str:
        """Server-side req/s and tok/s since the previous refresh, from its own counters."""
        if "t_s" not in values:
            return ""
        previous, self._last = self._last, values
        dt = values["t_s"] - previous.get("t_s", values["t_s"])
        if dt <= 0:
            return ""
        rates = counter_signals({name: values[name] - previous[name] for name in values.keys() & previous.keys()}, dt)
        shown = ((rates.requests_per_s, "req/s", 1), (rates.generation_tokens_per_s, "tok/s", 0))
        return "".join(f", {rate:.{digits}f} {unit}" for rate, unit, digits in shown if rate is not None)

    def _refresh_loop(self) -> None:
        while not self._stop.wait(1.0):
            if self._sampler is not None:
                text, elapsed = self._describe()
                self._progress.update(self._task, description=text, completed=self._done_s + elapsed)

    def __enter__(self) -> "SweepProgress":
        self._progress.__enter__()
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        self._progress.__exit__(*exc)


def _label(stage) -> str:
    """A stage of the config, or a bare one with users alone."""
    return load_label(stage.users, getattr(stage, "rate", None))
