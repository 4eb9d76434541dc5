"""A life's CSVs as typed columns: each read from a Feather copy in the life's .cache/ (pyarrow), written when the
life ends (`keep`) and rebuilt from the CSV whenever it is missing, damaged, of another cache version or of other
pandas and pyarrow versions, or no longer the CSV it was made from. The CSVs stay the record a user reads and
edits; the copy is only how `report` reads them fast.

Which CSV a copy was made from: its size, time stamp and a digest of its bytes (the very bytes parsed). Another
size: stale. The same size and time stamp: current, unless the CSV was written within RACY_NS of being read (a
file time is only as fine as the file system's clock, so it may change again under the same stamp); then, or under
another time stamp (`touch`, a restore that keeps an older time), the CSV's bytes are hashed and compared, and a
copy found current is marked so (checked once). A copy is no error when it cannot be written (a read-only folder,
a full disk) and is not written where the disk is nearly full (RESERVE_BYTES): the record and the report need it.
"""
from __future__ import annotations

import hashlib
import io
import os
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
from pyarrow import feather

from . import results

CACHE_VERSION = "2"
VERSION, SOURCE_SIZE, SOURCE_MTIME, DIGEST, RACY = (b"lookahead_runner_cache", b"source_size", b"source_mtime_ns",
                                                    b"source_blake2b", b"source_racy")
RACY_NS = 2 * 10**9            # FAT's 2 s file times are the coarsest; Linux's are a jiffy
RESERVE_BYTES = 256 * 2**20    # left free on the disk beside a copy


def cache_path(path: Path) -> Path:
    return path.parent / results.CACHE_DIR / (path.stem + ".feather")


def read_table(path: Path) -> pd.DataFrame:
    """A CSV of a life (missing or empty: an empty frame), through its typed copy when that is current. A CSV that is
    a link reads as missing and a cache folder that is a link is neither read nor written: what a run folder someone
    sent holds is read inside it, and nothing is written through it elsewhere."""
    path = Path(path)
    try:
        source = path.stat()
    except OSError:
        return pd.DataFrame()
    if path.is_symlink():
        return pd.DataFrame()
    copy = cache_path(path)
    if copy.parent.is_symlink() or copy.is_symlink():
        return _read_csv(path)
    frame = _read_copy(path, copy, source)
    return frame if frame is not None else _read_csv_and_copy(path, copy)


def _read_csv(path: Path) -> pd.DataFrame:
    try:
        return results.read_csv(io.BytesIO(path.read_bytes()))
    except OSError:
        return pd.DataFrame()


def keep(life_dir: Path) -> None:
    """Typed copies of a life's CSVs (its workload variants' blocks' too, one folder down), as the life ends; a
    file that cannot be read is left to the report that reads it."""
    life_dir = Path(life_dir)
    for path in sorted(life_dir.glob("*.csv")) + sorted(life_dir.glob("*/*.csv")):
        if path.parent.name != results.CACHE_DIR:
            try:
                read_table(path)
            except (OSError, ValueError):
                continue


def _version() -> bytes:
    """The copy's format and what turned it into a frame (dtypes differ between pandas and pyarrow versions)."""
    return f"{CACHE_VERSION} pandas {pd.__version__} pyarrow {pa.__version__}".encode()


def _digest(raw: bytes) -> bytes:
    return hashlib.blake2b(raw, digest_size=16).hexdigest().encode()


def _read_copy(path: Path, copy: Path, source: os.stat_result) -> pd.DataFrame | None:
    try:
        table = feather.read_table(copy)
    except (OSError, pa.ArrowException):
        return None
    meta = table.schema.metadata or {}
    if meta.get(VERSION) != _version() or meta.get(SOURCE_SIZE) != str(source.st_size).encode():
        return None
    if meta.get(SOURCE_MTIME) != str(source.st_mtime_ns).encode() or meta.get(RACY) != b"0":
        started = time.time_ns()
        try:
            raw = path.read_bytes()
        except OSError:
            return None
        if len(raw) != source.st_size or _digest(raw) != meta.get(DIGEST):
            return None
        _write_table(table, copy, raw, source.st_mtime_ns, started)   # checked: marked so, not hashed again
    try:
        frame = table.to_pandas()
    except (pa.ArrowException, ValueError, TypeError, KeyError):  # a copy pandas cannot take back: the CSV then
        return None
    for column in frame.columns[frame.dtypes == object]:   # text with gaps: NaN as read_csv gives, not None
        values = frame[column]
        if values.isna().any():
            frame[column] = values.where(values.notna(), np.nan)
    return frame


def _read_csv_and_copy(path: Path, copy: Path) -> pd.DataFrame:
    """The CSV parsed from the bytes its copy records (a life still writing it cannot slip rows in between)."""
    started = time.time_ns()
    try:
        mtime_ns = path.stat().st_mtime_ns
        raw = path.read_bytes()
    except OSError:
        return pd.DataFrame()
    frame = results.read_csv(io.BytesIO(raw))
    if not frame.empty:
        try:
            _write_table(pa.Table.from_pandas(frame, preserve_index=False), copy, raw, mtime_ns, started)
        except (pa.ArrowException, ValueError, TypeError):
            pass  # a frame arrow cannot hold: read from the CSV each time
    return frame


def _write_table(table: pa.Table, copy: Path, raw: bytes, mtime_ns: int, read_at_ns: int) -> None:
    """The copy of the CSV `raw` (its time stamp `mtime_ns` when read at `read_at_ns`), written whole or not at
    all."""
    meta = {**(table.schema.metadata or {}), VERSION: _version(), SOURCE_SIZE: str(len(raw)).encode(),
            SOURCE_MTIME: str(mtime_ns).encode(), DIGEST: _digest(raw),
            RACY: b"1" if read_at_ns - mtime_ns < RACY_NS else b"0"}
    tmp = None
    try:
        if shutil.disk_usage(copy.parent.parent).free < table.nbytes + RESERVE_BYTES:
            return
        copy.parent.mkdir(exist_ok=True)
        handle, tmp = tempfile.mkstemp(dir=copy.parent, prefix=copy.stem + ".", suffix=".tmp")
        os.close(handle)
        feather.write_feather(table.replace_schema_metadata(meta), tmp)
        os.replace(tmp, copy)
        tmp = None
    except (OSError, pa.ArrowException, ValueError, TypeError):
        return  # not cached: read from the CSV again next time
    finally:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
