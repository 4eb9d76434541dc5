"""Background sampling of /metrics and device memory while a server life runs.

Rows are appended to CSV files and flushed as they arrive, so a crash keeps what was sampled.
Accepted tokens per draft position go to spec_positions.csv (t_s, position, accepted_total), one row
per position and sample, opened at the first sample that has them (a server without speculation has none).

The gaps between samples are drawn at random around `interval_s` (`sample_gaps`): a closed loop of users with
fixed-length requests turns over in lockstep (on the simulator, 8 users of 535 ms requests: waiting read 0-3
from one sample to the next), and a fixed grid whose period is near that cycle would read one phase of it for
a whole window. Samples at random phases average to the time average (tests/unit/telemetry/
test_sampler_phase.py).
"""
from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from ..contracts.records import CsvAppender
from ..vllm.metrics import POSITION_SIGNAL, SERVER_SAMPLE_COLUMNS
from . import prometheus
from .memory import BASE_COLUMNS, MemoryReading, reading_cells


JITTER = 0.5  # each gap is interval_s x uniform(1 - JITTER, 1 + JITTER): the same mean rate


def sample_gaps(interval_s: float, rng: random.Random) -> Iterator[float]:
    """The seconds between one sample and the next: `interval_s` on average, at a random phase each time."""
    while True:
        yield interval_s * rng.uniform(1 - JITTER, 1 + JITTER)


class Sampler:
    """Samples the server's /metrics and the memory source about every `interval_s` in a thread."""

    def __init__(self, metrics_url: str, memory_source, out_dir: Path, interval_s: float = 0.5,
                 headers: dict[str, str] | None = None, rng: random.Random | None = None) -> None:
        self.metrics_url = metrics_url
        self.memory = memory_source
        self.out_dir = Path(out_dir)
        self.interval_s = interval_s
        self._gaps = sample_gaps(interval_s, rng or random.Random())
        self.headers = headers
        self.metrics_errors = 0
        self.last_metrics_error = ""
        self._server_csv = CsvAppender(out_dir / "server_metrics.csv", SERVER_SAMPLE_COLUMNS, flush_interval_s=0)
        # opened at the first reading: a DCGM source learns its GPUs, and so its columns, only then
        self._gpu_csv: CsvAppender | None = None
        self._positions_csv: CsvAppender | None = None
        self.last_values: dict[str, float] = {}
        self.write_errors = 0  # rows lost because the disk refused them (full, read-only)
        self.last_write_error = ""
        self._progress_t: float | None = None  # last sample showing new tokens or nothing to do
        self._sample_t: float | None = None    # last successful sample
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()  # a sample asked for between two workload variants meets the thread's

    def sample_once(self) -> dict[str, float] | None:
        with self._lock:
            return self._sample()

    def _sample(self) -> dict[str, float] | None:
        now = time.time()
        values = None
        try:
            values = prometheus.parse(prometheus.scrape(self.metrics_url, headers=self.headers))
        except Exception as err:  # a slow or missing /metrics must not stop the load
            self.metrics_errors += 1
            self.last_metrics_error = f"{type(err).__name__}: {err}"
        else:
            self._track_progress(values, now)
            self.last_values = values | {"t_s": now}
            self._write(self._server_csv, [round(now, 3), *(values.get(k) for k in SERVER_SAMPLE_COLUMNS[1:])])
            self._write_positions(now, values)
        reading = self.memory.read()
        if reading is not None:
            self._write_reading(now, reading)
        return values

    def _open_gpu_csv(self) -> CsvAppender | None:
        if self._gpu_csv is None:
            try:
                self._gpu_csv = CsvAppender(self.out_dir / "gpu.csv", getattr(self.memory, "columns", BASE_COLUMNS),
                                            flush_interval_s=0)
            except OSError as err:
                self.write_errors += 1
                self.last_write_error = f"{self.out_dir / 'gpu.csv'}: {err.strerror or err}"
        return self._gpu_csv

    def _write_positions(self, now: float, values: dict[str, float]) -> None:
        positions = sorted((int(name.removeprefix(POSITION_SIGNAL)), value) for name, value in values.items()
                           if name.startswith(POSITION_SIGNAL))
        if not positions:
            return
        if self._positions_csv is None:
            try:
                self._positions_csv = CsvAppender(self.out_dir / "spec_positions.csv",
                                                  ("t_s", "position", "accepted_total"), flush_interval_s=0)
            except OSError as err:
                self.write_errors += 1
                self.last_write_error = f"{self.out_dir / 'spec_positions.csv'}: {err.strerror or err}"
                return
        for position, value in positions:
            self._write(self._positions_csv, [round(now, 3), position, value])

    def _write_reading(self, now: float, reading: MemoryReading) -> None:
        csv = self._open_gpu_csv()
        if csv is not None:
            cells = reading_cells(reading)
            self._write(csv, [round(now, 3), *(cells.get(name) for name in csv.columns[1:])])

    def _write(self, csv: CsvAppender, row: list) -> None:
        try:
            csv.append(row)
        except OSError as err:  # disk full: counted; the life's next status write reports it
            self.write_errors += 1
            self.last_write_error = f"{csv.path}: {err.strerror or err}"

    def _track_progress(self, values: dict[str, float], now: float) -> None:
        tokens = values.get("generation_tokens_total")
        if tokens is None:
            return
        busy = (values.get("running") or 0) + (values.get("waiting") or 0) > 0
        if not busy or self._progress_t is None or tokens != self.last_values.get("generation_tokens_total"):
            self._progress_t = now
        self._sample_t = now

    def stalled_s(self) -> float:
        """Seconds the server has had requests in flight without generating a token, as far as the
        successful samples show (a /metrics that stops answering is not counted as a stall)."""
        if self._progress_t is None or self._sample_t is None:
            return 0.0
        return self._sample_t - self._progress_t

    def _loop(self) -> None:
        next_t = time.monotonic()
        while not self._stop.is_set():
            self.sample_once()
            next_t += next(self._gaps)
            # behind after a slow scrape: one sample at once, not a burst of catch-up samples at one moment
            next_t = max(next_t, time.monotonic())
            self._stop.wait(max(0.0, next_t - time.monotonic()))

    def __enter__(self) -> "Sampler":
        self.sample_once()  # the closed window's opening sample
        self._thread = threading.Thread(target=self._loop, name="sampler", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self.sample_once()  # and its closing sample, after the load stopped
        self._open_gpu_csv()  # a header-only gpu.csv when no reading came
        for csv in (self._server_csv, self._gpu_csv, self._positions_csv):
            if csv is None:
                continue
            try:
                csv.close()
            except OSError as err:
                self.write_errors += 1
                self.last_write_error = f"{csv.path}: {err.strerror or err}"
