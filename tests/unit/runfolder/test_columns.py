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
    assert len(read_table(path)) == 9 and len(calls) == 1


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


def same_size_other_values(path):
    """The CSV rewritten with other values of the same length (an edited figure, a restored backup)."""
    text = path.read_text(encoding="utf-8")
    edited = text.replace("1.5", "7.5")
    assert edited != text and len(edited) == len(text)
    path.write_text(edited, encoding="utf-8")


def test_a_csv_of_the_same_size_restored_with_its_older_time_is_read_again(tmp_path):
    """`cp -p`, `rsync -a` or a tar restore keep the file's old time: a copy newer than it is no proof."""
    path = requests_csv(tmp_path)
    stamp = path.stat().st_mtime_ns
    read_table(path)
    same_size_other_values(path)
    os.utime(path, ns=(stamp - 10**9, stamp - 10**9))
    assert read_table(path)["t_done_s"].tolist() == [0.5, 7.5, 2.5, 3.5, 4.5]


def test_a_csv_changed_within_its_copys_clock_tick_is_read_again(tmp_path):
    """A file time is only as fine as the file system's clock (a jiffy; 1-2 s on some): a CSV rewritten just
    after its copy was made can carry the very time stamp the copy has."""
    path = requests_csv(tmp_path)
    read_table(path)
    copy_time = cache_path(path).stat().st_mtime_ns
    same_size_other_values(path)
    os.utime(path, ns=(copy_time, copy_time))
    assert read_table(path)["t_done_s"].tolist() == [0.5, 7.5, 2.5, 3.5, 4.5]
    assert read_table(path)["t_done_s"].tolist() == [0.5, 7.5, 2.5, 3.5, 4.5]


def test_a_copy_checked_once_is_not_hashed_again(tmp_path, monkeypatch):
    """The check of a copy made just after its CSV is done once: an old enough CSV's copy is then trusted on
    its time and size alone (no read of the CSV's bytes)."""
    path = requests_csv(tmp_path)
    read_table(path)
    old = path.stat().st_mtime_ns - 10 * 10**9
    os.utime(path, ns=(old, old))                      # the same content, its time moved: checked by content
    reads = []
    real = type(path).read_bytes
    monkeypatch.setattr(type(path), "read_bytes", lambda self: reads.append(self) or real(self))
    assert len(read_table(path)) == 5 and reads == [path]
    assert len(read_table(path)) == 5 and reads == [path]


def test_a_failed_write_leaves_no_part_of_a_copy_behind(tmp_path, monkeypatch):
    """Disk full while writing a copy: the partial file is removed (it would hold the space the report needs),
    and the frame is still read."""
    path = requests_csv(tmp_path)

    def full_disk(table, dest, **_):
        with open(dest, "wb") as out:
            out.write(b"ARROW1" + b"\0" * 4096)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(columns.feather, "write_feather", full_disk)
    assert len(read_table(path)) == 5
    assert not cache_path(path).exists() and list((tmp_path / ".cache").iterdir()) == []


def test_no_copy_is_written_where_the_disk_is_nearly_full(tmp_path, monkeypatch):
    """A copy is only a speed-up: on a nearly full disk it is not written, leaving the room to the record (the
    next life's CSVs) and the report."""
    path = requests_csv(tmp_path)
    usage = columns.shutil.disk_usage(tmp_path)
    monkeypatch.setattr(columns.shutil, "disk_usage", lambda _: usage._replace(free=columns.RESERVE_BYTES // 2))
    assert len(read_table(path)) == 5 and not cache_path(path).exists()


def test_a_copy_made_by_another_pandas_or_pyarrow_is_rebuilt(tmp_path, monkeypatch):
    """The frame a copy gives back (its dtypes: object or arrow strings, NaN or None) is the one pandas and
    pyarrow of the writing process gave: another version reads the CSV again."""
    path = requests_csv(tmp_path)
    read_table(path)
    calls = []
    monkeypatch.setattr(columns.results, "read_csv", lambda p: calls.append(p) or pd.read_csv(p))
    read_table(path)
    assert calls == []
    monkeypatch.setattr(columns.pd, "__version__", "99.0.0")
    read_table(path)
    assert len(calls) == 1
