"""runfolder/columns.py: a life's CSV read through a typed copy that is current, rebuilt from the CSV when it
is missing, older, of another size or damaged; the CSV stays what is read when nothing can be written."""
from __future__ import annotations

import os

import numpy as np
import pandas as pd

from lookahead_runner.runfolder import columns
from lookahead_runner.runfolder.columns import cache_path, keep, read_table


def requests_csv(folder, rows=5):
    frame = pd.DataFrame({"stage": range(rows), "t_done_s": np.arange(rows) + 0.5, "ok": [1] * rows,
                          "error": [""] * (rows - 1) + ["timeout after 30 s"], "category": [np.nan] * rows})
    path = folder / "requests.csv"
    frame.to_csv(path, index=False)
    return path


def test_the_copy_reads_as_the_csv_does(tmp_path):
    path = requests_csv(tmp_path)
    first = read_table(path)
    assert cache_path(path).is_file()
    again = read_table(path)
    pd.testing.assert_frame_equal(first, again)
    pd.testing.assert_frame_equal(again, pd.read_csv(path))
    assert again["error"].isna().sum() == 4 and again["error"].iloc[-1] == "timeout after 30 s"


def test_a_changed_csv_is_read_again_and_its_copy_rebuilt(tmp_path, monkeypatch):
    path = requests_csv(tmp_path)
    read_table(path)
    requests_csv(tmp_path, rows=7)                      # the user edited the record
    os.utime(cache_path(path), ns=(1, 1))               # and the copy is older
    assert len(read_table(path)) == 7
    requests_csv(tmp_path, rows=9)                      # another size, even with a copy that reads as newer
    os.utime(path, ns=(1, 1))
    assert len(read_table(path)) == 9
    cache_path(path).write_bytes(b"damaged")
    os.utime(cache_path(path), ns=(2**62, 2**62))
    assert len(read_table(path)) == 9
    monkeypatch.setattr(columns, "CACHE_VERSION", b"2")  # another cache version
    calls = []
    monkeypatch.setattr(columns.results, "read_csv", lambda p: calls.append(p) or pd.read_csv(p))
    assert len(read_table(path)) == 9 and calls == [path]


def test_a_missing_csv_is_an_empty_frame_and_an_unwritable_folder_reads_the_csv(tmp_path):
    assert read_table(tmp_path / "requests.csv").empty
    path = requests_csv(tmp_path)
    (tmp_path / ".cache").write_text("a file where the folder would go", encoding="utf-8")
    assert len(read_table(path)) == 5 and len(read_table(path)) == 5


def test_a_life_keeps_a_copy_of_each_csv_of_its_own_and_of_its_blocks(tmp_path):
    requests_csv(tmp_path)
    (tmp_path / "variant-a").mkdir()
    requests_csv(tmp_path / "variant-a")
    (tmp_path / "stages.csv").write_text("", encoding="utf-8")     # empty: nothing to keep
    keep(tmp_path)
    assert cache_path(tmp_path / "requests.csv").is_file()
    assert cache_path(tmp_path / "variant-a" / "requests.csv").is_file()
    assert not cache_path(tmp_path / "stages.csv").exists()
