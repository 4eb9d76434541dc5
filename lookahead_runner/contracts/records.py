"""Per-request and per-stage record schema, shared by the Locust scenario (writer) and analysis (reader).

The column names are the contract with the runner side, which reads these files with pandas.
Times ending in ``_s`` are unix seconds, durations ending in ``_ms`` are milliseconds; an empty
cell means "not measured" (for example ``ttft_ms`` of a request that failed before its first token).
The request-set columns (``request_index`` to ``finish_reason``) and the ``spec_*`` columns (vLLM 0.32's
per-request speculative-decoding metrics) are empty for synthetic prompts and without the server flag.

The client columns say whether the Locust process could be trusted while the request ran:
``lag_p99_ms`` is the p99 of that process's event-loop lag during the request (how late it ran a
greenlet that was ready: the delay it adds to every chunk it reads), ``client`` names the process
(``host:pid``; one per worker with ``--processes`` or master/worker), and ``client_cpu_pct`` is the
CPU that process used over the last second before the request ended, in percent of one core.
"""

from __future__ import annotations

import csv
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from typing import IO

REQUEST_COLUMNS: tuple[str, ...] = (
    "stage",
    "users",
    "t_send_s",
    "t_first_token_s",
    "t_done_s",
    "ttft_ms",
    "e2e_ms",
    "itl_p50_ms",
    "itl_p99_ms",
    "tpot_ms",
    "prompt_tokens",
    "output_tokens",
    "chunks",
    "ok",
    "error",
    "lag_p99_ms",
    "client",
    "client_cpu_pct",
    # a request of the user's set (load.requests; empty for synthetic prompts) and what came back
    "request_index",
    "category",
    "set_round",
    "output_hash",
    "finish_reason",
    # vLLM 0.32's per-request metrics.speculative_decoding (--per-request-spec-decode-metrics); empty without
    "spec_acceptance_length",
    "spec_acceptance_rate",
    "spec_steps",
    "spec_draft_tokens",
    "spec_accepted_tokens",
    # a rate stage's request (open loop; empty in a user stage): when the schedule had it arrive, how long it
    # waited for a load.max_in_flight slot before it was sent, and its place in the stage's schedule
    "t_scheduled_s",
    "held_ms",
    "arrival",
)

STAGE_COLUMNS: tuple[str, ...] = ("stage", "users", "t_start_s", "t_end_s", "rate")

# The error of a request that the end of the test (or a ramp-down) killed mid-flight.
CUT_ERROR = "cut"
# The error of a rate stage's arrival still waiting for a load.max_in_flight slot when its stages ended: never
# sent (it counts against the window it was scheduled in: an arrival the client could not offer).
NOT_SENT_ERROR = "not sent"

# How the error text of a failed request starts, per kind of failure: the scenario writes them
# (workload/request.py, workload/timeline.py, workload/user.py) and analysis.py counts timeouts and
# wrong lengths by them. Locust groups its failures by the same text.
TIMEOUT_ERROR = "timeout"
DISCONNECT_ERROR = "disconnect mid-stream"
CONNECTION_ERROR = "connection error"
MISSING_USAGE_ERROR = "missing usage"
SHORT_OUTPUT_ERROR = "short output"
WRONG_PROMPT_LENGTH_ERROR = "wrong prompt length"
LENGTH_ERRORS = (SHORT_OUTPUT_ERROR, WRONG_PROMPT_LENGTH_ERROR)
# How a stage window's invalid reason starts when none of its requests succeeded (analysis.py writes it, with the
# most common error; the verdict names it: decision/explanation/reasons.py)
ALL_FAILED_REASON = "every request failed"

# The simulated server rewrites its NVML-like memory reading into the file this variable names; the
# runner sets it for the server and for Locust (whose web UI shows the reading).
SIM_GPU_FILE_ENV = "LOOKAHEAD_SIM_GPU_FILE"
# ... and names the server life (run and life folder) for the simulated server, whose restart spread draws each
# life's speed from it (sim/restart.py); a real vLLM ignores it
SIM_LIFE_ENV = "LOOKAHEAD_SIM_LIFE"


@dataclass(frozen=True)
class RequestRecord:
    """One finished (or cut) request; field order is REQUEST_COLUMNS."""

    stage: int
    users: int
    t_send_s: float
    t_first_token_s: float | None
    t_done_s: float
    ttft_ms: float | None
    e2e_ms: float
    itl_p50_ms: float | None
    itl_p99_ms: float | None
    tpot_ms: float | None
    prompt_tokens: int | None
    output_tokens: int
    chunks: int
    ok: bool
    error: str
    lag_p99_ms: float | None
    client: str = ""
    client_cpu_pct: float | None = None
    request_index: int | None = None       # its place in the request set (0-based)
    category: str = ""
    set_round: int | None = None           # times this user had run through the whole set before it
    output_hash: str = ""                  # of the output text: equal across K when the text is
    finish_reason: str = ""
    spec_acceptance_length: float | None = None   # mean_acceptance_length
    spec_acceptance_rate: float | None = None     # draft_acceptance_rate
    spec_steps: int | None = None                 # num_spec_steps
    spec_draft_tokens: int | None = None          # num_draft_tokens
    spec_accepted_tokens: int | None = None       # num_accepted_draft_tokens
    t_scheduled_s: float | None = None     # a rate stage's arrival time (workload/arrivals.py)
    held_ms: float | None = None           # its wait for a load.max_in_flight slot (0: sent on arrival)
    arrival: int | None = None             # its index in the stage's schedule (the same in every life)

    @property
    def late_ms(self) -> float | None:
        """How long after its scheduled time the dispatcher sent it, beyond any wait for a slot."""
        if self.t_scheduled_s is None:
            return None
        return (self.t_send_s - self.t_scheduled_s) * 1000.0 - (self.held_ms or 0.0)

    def as_row(self) -> list[str]:
        # by name, not dataclasses.astuple: that deep-copies every value, 0.3-0.6 ms a request on a busy core
        # (a rate stage's dispatcher writes 200 a second: measured with cProfile, benchmarks/dispatch_accuracy.py)
        return [format_cell(getattr(self, name)) for name in REQUEST_COLUMNS]


@dataclass(frozen=True)
class StageRecord:
    """One stage of the load shape as it ran; field order is STAGE_COLUMNS. A rate stage has users 0 and its
    requests per second in `rate`, and its times are its schedule's (the dispatcher's, not the shape's tick)."""

    stage: int
    users: int
    t_start_s: float
    t_end_s: float
    rate: float | None = None

    def as_row(self) -> list[str]:
        return [format_cell(getattr(self, name)) for name in STAGE_COLUMNS]


assert tuple(f.name for f in fields(RequestRecord)) == REQUEST_COLUMNS
assert tuple(f.name for f in fields(StageRecord)) == STAGE_COLUMNS


def format_cell(value: object) -> str:
    """CSV text for one value: "" for None, 0/1 for booleans, floats rounded to microseconds."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, float):
        return repr(round(value, 6))
    return str(value)


class CsvAppender:
    """Appends rows to a CSV file: header once, rows buffered, flushed at least every `flush_interval_s`.

    The header is written only when the file is new or empty, so several runs (or a restarted
    process) can append to one file. Rows are flushed when an append finds the last flush at least
    `flush_interval_s` old; to bound the delay of every row, the owner also calls `flush()` once per
    interval (the scenario does, from a greenlet). After `close()`, appends still work but open,
    write and close the file each time: requests cut by a shutdown can arrive after the owner
    closed the log, and must not be lost.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        columns: Sequence[str],
        flush_interval_s: float = 1.0,
        clock_s: Callable[[], float] = time.monotonic,
    ) -> None:
        self.path = os.fspath(path)
        self.columns = tuple(columns)
        self.flush_interval_s = flush_interval_s
        self._clock_s = clock_s
        self._file: IO[str] | None = None
        self._writer = None
        self._last_flush_s = clock_s()
        self._pending_rows = 0
        self.rows_written = 0
        self._open()

    def _open(self) -> None:
        directory = os.path.dirname(self.path)
        if directory:
            os.makedirs(directory, exist_ok=True)
        is_new = not os.path.exists(self.path) or os.path.getsize(self.path) == 0
        self._file = open(self.path, "a", newline="", encoding="utf-8")
        self._writer = csv.writer(self._file)
        if is_new:
            self._writer.writerow(self.columns)
            self._file.flush()

    @property
    def closed(self) -> bool:
        return self._file is None

    def append(self, row: Sequence[object]) -> None:
        if len(row) != len(self.columns):
            raise ValueError(f"{self.path}: row has {len(row)} cells, expected {len(self.columns)}")
        cells = [cell if isinstance(cell, str) else format_cell(cell) for cell in row]
        if self._file is None:
            with open(self.path, "a", newline="", encoding="utf-8") as late_file:
                csv.writer(late_file).writerow(cells)
            self.rows_written += 1
            return
        assert self._writer is not None
        self._writer.writerow(cells)
        self._pending_rows += 1
        self.rows_written += 1
        self.flush_if_due()

    def flush_if_due(self) -> None:
        if self._pending_rows and self._clock_s() - self._last_flush_s >= self.flush_interval_s:
            self.flush()

    def flush(self) -> None:
        if self._file is not None and self._pending_rows:
            self._file.flush()
        self._pending_rows = 0
        self._last_flush_s = self._clock_s()

    def close(self) -> None:
        if self._file is not None:
            self._file.flush()
            self._file.close()
            self._file = None
            self._writer = None
            self._pending_rows = 0

    def __enter__(self) -> CsvAppender:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()
