"""gpu.csv: the columns a memory source declares, one header per life, empty cells for missing detail."""

from __future__ import annotations

import csv
import time

import pytest

from lookahead_runner.telemetry import prometheus
from lookahead_runner.telemetry.memory import BASE_COLUMNS, GpuMemory, MemoryReading, NoMemory, gpu_columns
from lookahead_runner.telemetry.sampler import Sampler

FULL = MemoryReading(300.0, 2000.0, (GpuMemory(0, 100.0, 1000.0), GpuMemory(1, 200.0, 1000.0)), 250.04)
NO_PROCESS = MemoryReading(300.0, 2000.0, (GpuMemory(0, 100.0, 1000.0), GpuMemory(1, 200.0, 1000.0)))
GPU0_ONLY = MemoryReading(100.0, 1000.0, (GpuMemory(0, 100.0, 1000.0),), 50.0)


class ScriptedMemory:
    """Gives the readings in order, then the last one again; its columns may change after the first read."""

    name = "fake"
    unavailable_reason = ""

    def __init__(self, readings, columns, columns_after_first_read=None):
        self.readings = list(readings)
        self.columns = columns
        self._later_columns = columns_after_first_read
        self.reads = 0

    def read(self):
        self.reads += 1
        if self._later_columns is not None:
            self.columns = self._later_columns
        return self.readings[min(self.reads - 1, len(self.readings) - 1)]


@pytest.fixture(autouse=True)
def no_network(monkeypatch):
    monkeypatch.setattr(prometheus, "scrape", lambda url, *args, **kwargs: "vllm:num_requests_running 1\n")


def rows(path):
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.reader(handle))


def test_sampler_writes_per_gpu_and_process_columns(tmp_path):
    columns = gpu_columns([0, 1], with_process=True)
    source = ScriptedMemory([FULL, NO_PROCESS, GPU0_ONLY], columns)
    sampler = Sampler("http://server/metrics", source, tmp_path, interval_s=0.02)
    for _ in range(3):
        sampler.sample_once()
    with sampler:  # the thread too: a few more rows, then the closing one
        deadline = time.monotonic() + 5.0
        while source.reads < 8 and time.monotonic() < deadline:
            time.sleep(0.02)
    table = rows(tmp_path / "gpu.csv")
    assert table[0] == list(columns)
    assert table[1][1:] == ["300.0", "2000.0", "100.0", "1000.0", "200.0", "1000.0", "250.0"]
    assert table[2][1:] == ["300.0", "2000.0", "100.0", "1000.0", "200.0", "1000.0", ""]
    assert table[3][1:] == ["100.0", "1000.0", "100.0", "1000.0", "", "", "50.0"]
    assert source.reads >= 8 and len(table) == 1 + source.reads
    assert all(len(row) == len(columns) for row in table)
    assert sampler.write_errors == 0


def test_header_is_what_the_source_declared_at_its_first_reading(tmp_path):
    """A DCGM source knows its GPUs after its first scrape; later changes must not split the file."""
    first, later = gpu_columns([0, 1], with_process=False), gpu_columns([0], with_process=False)
    source = ScriptedMemory([NO_PROCESS, GPU0_ONLY], BASE_COLUMNS, columns_after_first_read=first)
    sampler = Sampler("http://server/metrics", source, tmp_path)
    sampler.sample_once()
    source._later_columns = later
    sampler.sample_once()
    sampler.__exit__(None, None, None)
    table = rows(tmp_path / "gpu.csv")
    assert table[0] == list(first)
    assert table[2][1:] == ["100.0", "1000.0", "100.0", "1000.0", "", ""]


def test_sources_without_detail_keep_three_columns(tmp_path):
    source = ScriptedMemory([NO_PROCESS], BASE_COLUMNS)
    sampler = Sampler("http://server/metrics", source, tmp_path)
    sampler.sample_once()
    sampler.__exit__(None, None, None)  # with its closing sample
    assert [row[1:] for row in rows(tmp_path / "gpu.csv")] == [["used_mib", "total_mib"], *[["300.0", "2000.0"]] * 2]


def test_no_reading_still_leaves_a_header_only_gpu_csv(tmp_path):
    with Sampler("http://server/metrics", NoMemory(), tmp_path, interval_s=0.05):
        time.sleep(0.1)
    assert rows(tmp_path / "gpu.csv") == [list(BASE_COLUMNS)]


def test_unwritable_gpu_csv_is_counted_not_raised(tmp_path):
    (tmp_path / "gpu.csv").mkdir()  # opening it as a file fails with an OSError
    sampler = Sampler("http://server/metrics", ScriptedMemory([FULL], BASE_COLUMNS), tmp_path)
    sampler.sample_once()
    sampler.__exit__(None, None, None)
    assert sampler.write_errors >= 1 and "gpu.csv" in sampler.last_write_error


def test_accepted_tokens_per_position_go_to_their_own_file(tmp_path, monkeypatch):
    text = iter(['vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",position="0"} 5\n'
                 'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",position="1"} 2\n',
                 'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",position="1"} 3\n'
                 'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",position="0"} 9\n'])
    monkeypatch.setattr(prometheus, "scrape", lambda url, *args, **kwargs: next(text))
    sampler = Sampler("http://server/metrics", NoMemory("none"), tmp_path)
    sampler.sample_once()
    sampler.sample_once()
    sampler._positions_csv.close()
    table = rows(tmp_path / "spec_positions.csv")
    assert table[0] == ["t_s", "position", "accepted_total"]
    assert [row[1:] for row in table[1:]] == [["0", "5.0"], ["1", "2.0"], ["0", "9.0"], ["1", "3.0"]]


def test_no_positions_file_without_speculation(tmp_path):
    sampler = Sampler("http://server/metrics", NoMemory("none"), tmp_path)
    sampler.sample_once()
    assert not (tmp_path / "spec_positions.csv").exists()
