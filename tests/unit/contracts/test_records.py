"""contracts/records.py: the column contract, cell formatting and the flushing CSV appender."""

from __future__ import annotations

import csv
import math
from dataclasses import fields

import pytest

from lookahead_runner.contracts.records import (
    CUT_ERROR,
    REQUEST_COLUMNS,
    STAGE_COLUMNS,
    CsvAppender,
    RequestRecord,
    StageRecord,
    format_cell,
)


class FakeClock:
    def __init__(self) -> None:
        self.now_s = 1000.0

    def __call__(self) -> float:
        return self.now_s


def _read(path) -> list[list[str]]:
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.reader(handle))


def _record(**overrides) -> RequestRecord:
    values = dict(
        stage=1, users=16, t_send_s=1795992044.547945, t_first_token_s=1795992044.601684,
        t_done_s=1795992044.653112, ttft_ms=53.73832, e2e_ms=105.166592, itl_p50_ms=3.41, itl_p99_ms=3.46,
        tpot_ms=3.43, prompt_tokens=128, output_tokens=64, chunks=22, ok=True, error="", lag_p99_ms=None,
    )
    values.update(overrides)
    return RequestRecord(**values)


def test_columns_are_the_contract():
    assert REQUEST_COLUMNS == (
        "stage", "users", "t_send_s", "t_first_token_s", "t_done_s", "ttft_ms", "e2e_ms", "itl_p50_ms",
        "itl_p99_ms", "tpot_ms", "prompt_tokens", "output_tokens", "chunks", "ok", "error", "lag_p99_ms",
        "client", "client_cpu_pct", "request_index", "category", "set_round", "output_hash", "finish_reason",
        "spec_acceptance_length", "spec_acceptance_rate", "spec_steps", "spec_draft_tokens", "spec_accepted_tokens",
        "t_scheduled_s", "held_ms", "arrival",
    )
    assert STAGE_COLUMNS == ("stage", "users", "t_start_s", "t_end_s", "rate")
    assert tuple(f.name for f in fields(RequestRecord)) == REQUEST_COLUMNS
    assert tuple(f.name for f in fields(StageRecord)) == STAGE_COLUMNS


def test_cells_keep_microseconds_of_unix_times_and_empty_for_none():
    assert format_cell(None) == ""
    assert format_cell(True) == "1" and format_cell(False) == "0"
    assert format_cell(7) == "7"
    assert float(format_cell(1795992044.5479451)) == pytest.approx(1795992044.547945, abs=1e-6)
    row = _record(ok=False, error=CUT_ERROR, ttft_ms=None).as_row()
    assert row[REQUEST_COLUMNS.index("ok")] == "0"
    assert row[REQUEST_COLUMNS.index("error")] == "cut"
    assert row[REQUEST_COLUMNS.index("ttft_ms")] == ""


def test_header_once_then_rows(tmp_path):
    path = tmp_path / "out" / "requests.csv"
    with CsvAppender(path, REQUEST_COLUMNS) as log:
        log.append(_record().as_row())
        log.append(_record(ok=False, error='HTTP 400: {"error": "bad, really"}').as_row())
    with CsvAppender(path, REQUEST_COLUMNS) as log:  # a second run appends, no second header
        log.append(_record(stage=2).as_row())

    rows = _read(path)
    assert rows[0] == list(REQUEST_COLUMNS)
    assert len(rows) == 4
    assert rows[2][REQUEST_COLUMNS.index("error")] == 'HTTP 400: {"error": "bad, really"}'
    assert rows[3][0] == "2"


def test_rows_reach_the_file_within_the_flush_interval(tmp_path):
    clock = FakeClock()
    path = tmp_path / "stages.csv"
    log = CsvAppender(path, STAGE_COLUMNS, flush_interval_s=1.0, clock_s=clock)
    clock.now_s += 5.0
    log.append(StageRecord(0, 4, 10.0, 30.0).as_row())  # quiet for long: flushed at once
    assert len(_read(path)) == 2

    log.append(StageRecord(1, 16, 30.0, 50.0).as_row())  # within the interval: may wait in the buffer
    clock.now_s += 0.5
    log.flush_if_due()
    clock.now_s += 0.6
    log.flush_if_due()  # now overdue
    assert len(_read(path)) == 3
    log.close()
    assert log.closed


def test_close_flushes_and_late_rows_still_land(tmp_path):
    path = tmp_path / "requests.csv"
    log = CsvAppender(path, REQUEST_COLUMNS, flush_interval_s=3600.0)
    log.append(_record().as_row())
    log.append(_record().as_row())
    log.close()
    log.append(_record(ok=False, error=CUT_ERROR).as_row())  # a request cut after the owner closed
    rows = _read(path)
    assert len(rows) == 4 and rows[-1][REQUEST_COLUMNS.index("error")] == "cut"
    assert log.rows_written == 3


def test_row_length_is_checked(tmp_path):
    log = CsvAppender(tmp_path / "x.csv", STAGE_COLUMNS)
    with pytest.raises(ValueError):
        log.append([1, 2, 3])
    log.close()


def test_pandas_reads_the_columns_with_their_types(tmp_path):
    pandas = pytest.importorskip("pandas")
    path = tmp_path / "requests.csv"
    with CsvAppender(path, REQUEST_COLUMNS) as log:
        log.append(_record().as_row())
        log.append(_record(ok=False, error=CUT_ERROR, ttft_ms=None, t_first_token_s=None).as_row())
    frame = pandas.read_csv(path, keep_default_na=False, na_values=[""])
    assert list(frame.columns) == list(REQUEST_COLUMNS)
    assert frame["ok"].tolist() == [1, 0]
    assert math.isnan(frame["ttft_ms"][1])
    assert frame["t_send_s"][0] == pytest.approx(1795992044.547945, abs=1e-6)
