"""Background sampling of /metrics and device memory while a server life runs.

Rows are appended to CSV files and flushed as they arrive, so a crash keeps what was sampled.
"""
from __future__ import annotations

import threading
import time
from pathlib import Path

from ..records import CsvAppender
from ..vllm.metrics import SERVER_SAMPLE_COLUMNS, SIGNALS
from . import prometheus

GPU_COLUMNS = ("t_s", "used_mib", "total_mib")


class Sampler:
    """Samples the server's /metrics and the memory source every `interval_s` in a thread."""

    def __init__(self, metrics_url: str, memory_source, out_dir: Path, interval_s: float = 0.5,
                 headers: dict[str, str] | None = None) -> None:
        self.metrics_url = metrics_url
        self.memory = memory_source
        self.interval_s = interval_s
        self.headers = headers
        self.metrics_errors = 0
        self.last_metrics_error = ""
        self._server_csv = CsvAppender(out_dir / "server_metrics.csv", SERVER_SAMPLE_COLUMNS, flush_interval_s=0)
        self._gpu_csv = CsvAppender(out_dir / "gpu.csv", GPU_COLUMNS, flush_interval_s=0)
        self.last_values: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def sample_once(self) -> dict[str, float] | None:
        now = time.time()
        values = None
        try:
            values = prometheus.parse(prometheus.scrape(self.metrics_url, headers=self.headers))
            self._server_csv.append([round(now, 3), *(values.get(k) for k in SIGNALS)])
            self.last_values = values | {"t_s": now}
        except Exception as err:  # a slow or missing /metrics must not stop the load
            self.metrics_errors += 1
            self.last_metrics_error = f"{type(err).__name__}: {err}"
        reading = self.memory.read()
        if reading is not None:
            self._gpu_csv.append([round(now, 3), round(reading.used_mib, 1), round(reading.total_mib, 1)])
        return values

    def _loop(self) -> None:
        next_t = time.monotonic()
        while not self._stop.is_set():
            self.sample_once()
            next_t += self.interval_s
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
        self._server_csv.close()
        self._gpu_csv.close()
