"""What the decision weighs: each valid stage window of each server life, as typed arrays.

A `Window` is one (K, repeat, stage): the successful requests it completed (their completion
time inside the window, latencies, tokens), how many finished and failed, and the server's
signals over it (from the summary row). A `Cell` is every valid window of one (K, users): the
requests pooled over repeats for latency, the repeats kept apart for throughput and stability.
Pure: frames in, typed evidence out; the run folder is read by finalize.py.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

# Per-request columns a window keeps, in this order (REQUEST_COLUMNS' names; itl_p99_ms is the
# request's own slowest gaps, tpot_ms its mean time per output token after the first).
LATENCY_COLUMNS = ("ttft_ms", "tpot_ms", "itl_p99_ms", "e2e_ms")
# Server and memory signals of a window, as the summary row names them.
SERVER_SIGNALS = ("running_mean", "waiting_mean", "kv_usage_mean", "kv_usage_peak", "preemptions",
                  "acceptance_rate", "mean_acceptance_length", "gpu_mem_peak_mib", "gpu_mem_total_mib",
                  "kv_pool_tokens", "drafted_per_step", "drafted_per_step_requests", "drafted_expected")


@dataclass(frozen=True, eq=False)
class Window:
    k: int
    repeat: int
    users: int
    duration_s: float
    t_done_s: np.ndarray            # completion time of each successful request, from the window's start
    output_tokens: np.ndarray       # per successful request
    latency_ms: np.ndarray          # successful requests x LATENCY_COLUMNS
    finished: int                   # successful + failed (cut requests are neither)
    failures: int
    timeouts: int
    server: Mapping[str, float] = field(default_factory=dict)
    req_per_s: float = math.nan     # requests served inside the window (analysis: shares of request lives)
    output_tok_per_s: float = math.nan
    variant: str = ""               # the workload variant's label ("" = the sweep's only one)
    not_in_effect: str = ""         # why its counters say the setting was not what the server ran (drafting.py)
    drafted_note: str = ""          # its counters and its requests' metrics disagree on a schedule (drafting.py)

    @property
    def served_per_s(self) -> float:
        """Requests per second served in the window; completions per second when not given."""
        return self.completed / self.duration_s if math.isnan(self.req_per_s) else self.req_per_s

    @property
    def tokens_per_s(self) -> float:
        return float(self.output_tokens.sum()) / self.duration_s if math.isnan(self.output_tok_per_s) \
            else self.output_tok_per_s

    @property
    def completed(self) -> int:
        return len(self.t_done_s)

    @property
    def drafted(self) -> float:
        """Drafted tokens per step: the counters', else its requests' own (the order drafting.check_window takes)."""
        counters = self.signal("drafted_per_step")
        return counters if math.isfinite(counters) else self.signal("drafted_per_step_requests")

    def signal(self, name: str) -> float:
        value = self.server.get(name, math.nan)
        return math.nan if value is None else float(value)


@dataclass(frozen=True, eq=False)
class Cell:
    """Every valid window of one (K, users), in repeat order."""

    k: int
    users: int
    windows: tuple[Window, ...]

    @property
    def repeats(self) -> int:
        return len(self.windows)

    @property
    def requests(self) -> int:
        return sum(w.completed for w in self.windows)

    def pooled(self, column: str) -> np.ndarray:
        at = LATENCY_COLUMNS.index(column)
        return np.concatenate([w.latency_ms[:, at] for w in self.windows]) if self.windows else np.empty(0)


@dataclass(frozen=True, eq=False)
class Evidence:
    """The cells of one decision (one value of a grid axis), keyed by (K, users)."""

    cells: Mapping[tuple[int, int], Cell]
    target_users: int
    # (K, users) measured without a valid window: why its first window is invalid (summary.csv's invalid_reason)
    invalid: Mapping[tuple[int, int], str] = field(default_factory=dict)

    @property
    def ks(self) -> list[int]:
        return sorted({k for k, _ in self.cells})

    @property
    def users(self) -> list[int]:
        return sorted({u for _, u in self.cells})

    def at(self, users: int) -> dict[int, Cell]:
        return {k: cell for (k, u), cell in sorted(self.cells.items()) if u == users}

    def cell(self, k: int, users: int) -> Cell | None:
        return self.cells.get((k, users))

    def subset(self, repeats_by_k: Mapping[int, Iterable[int]]) -> "Evidence":
        """The same evidence with only some repeats of each K (the accuracy benchmark's demo-sized draws)."""
        cells = {}
        for (k, users), cell in self.cells.items():
            keep = set(repeats_by_k.get(k, ()))
            windows = tuple(w for w in cell.windows if w.repeat in keep)
            if windows:
                cells[(k, users)] = Cell(k, users, windows)
        return Evidence(cells, self.target_users, self.invalid)


def _floats(frame: pd.DataFrame, column: str) -> np.ndarray:
    if column not in frame or frame.empty:
        return np.full(len(frame), np.nan)
    return pd.to_numeric(frame[column], errors="coerce").to_numpy(dtype=float)


def window(row: Mapping, finished: pd.DataFrame, ok: pd.DataFrame, t0: float) -> Window:
    """One summary row and the requests that finished in its window -> a Window."""
    latency = np.column_stack([_floats(ok, c) for c in LATENCY_COLUMNS]) if len(ok) else np.empty((0, 4))
    return Window(
        k=int(row["k"]), repeat=int(row["repeat"]), users=int(row["users"]), duration_s=float(row["duration_s"]),
        t_done_s=_floats(ok, "t_done_s") - t0 if len(ok) else np.empty(0),
        output_tokens=np.nan_to_num(_floats(ok, "output_tokens")) if len(ok) else np.empty(0),
        latency_ms=latency, finished=int(len(finished)), failures=int(row.get("failures", 0) or 0),
        timeouts=int(row.get("timeouts", 0) or 0),
        server={name: float(row[name]) if row.get(name) is not None else math.nan
                for name in SERVER_SIGNALS if name in row},
        req_per_s=float(row.get("req_per_s", math.nan)), output_tok_per_s=float(row.get("output_tok_per_s", math.nan)),
        variant=str(row.get("variant", "") or ""), not_in_effect=str(row.get("not_in_effect", "") or ""),
        drafted_note=str(row.get("drafted_note", "") or ""),
    )


def evidence(windows: Iterable[Window], target_users: int,
             invalid: Mapping[tuple[int, int], str] | None = None) -> Evidence:
    """`invalid`: why the stage windows of a (K, users) are invalid; kept where none of them is valid."""
    by_cell: dict[tuple[int, int], list[Window]] = {}
    for w in windows:
        by_cell.setdefault((w.k, w.users), []).append(w)
    cells = {key: Cell(key[0], key[1], tuple(sorted(ws, key=lambda w: w.repeat))) for key, ws in by_cell.items()}
    return Evidence(cells, target_users, {key: why for key, why in (invalid or {}).items() if key not in cells})
