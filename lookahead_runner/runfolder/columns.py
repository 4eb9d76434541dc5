"""A life's CSVs as typed columns: each read from a Feather copy in the life's .cache/ (pyarrow), written when the
life ends (`keep`) and rebuilt from the CSV whenever it is missing, older than the CSV, of another size than the
CSV it was made from, or of another cache version. The CSVs stay the record a user reads and edits; the copy is
only how `report` reads them fast. A copy that cannot be written (a read-only folder) is no error.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
from pyarrow import feather

from . import results

CACHE_VERSION = b"1"
SOURCE_SIZE, VERSION = b"source_size", b"lookahead_runner_cache"


def cache_path(path: Path) -> Path:
    return path.parent / results.CACHE_DIR / (path.stem + ".feather")


def read_table(path: Path) -> pd.DataFrame:
    """A CSV of a life (missing or empty: an empty frame), through its typed copy when that is current."""
    path = Path(path)
    try:
        source = path.stat()
    except OSError:
        return pd.DataFrame()
    copy = cache_path(path)
    frame = _read_copy(copy, source)
    if frame is None:
        frame = results.read_csv(path)
        _write_copy(frame, copy, source.st_size)
    return frame


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


def _read_copy(copy: Path, source: os.stat_result) -> pd.DataFrame | None:
    try:
        if copy.stat().st_mtime_ns < source.st_mtime_ns:
            return None
        table = feather.read_table(copy)
    except (OSError, pa.ArrowException):
        return None
    meta = table.schema.metadata or {}
    if meta.get(VERSION) != CACHE_VERSION or meta.get(SOURCE_SIZE) != str(source.st_size).encode():
        return None
    try:
        frame = table.to_pandas()
    except (pa.ArrowException, ValueError, TypeError, KeyError):  # a copy pandas cannot take back: the CSV then
        return None
    for column in frame.columns[frame.dtypes == object]:   # text with gaps: NaN as read_csv gives, not None
        values = frame[column]
        if values.isna().any():
            frame[column] = values.where(values.notna(), np.nan)
    return frame


def _write_copy(frame: pd.DataFrame, copy: Path, source_size: int) -> None:
    if frame.empty:
        return
    try:
        table = pa.Table.from_pandas(frame, preserve_index=False)
        table = table.replace_schema_metadata({**(table.schema.metadata or {}), VERSION: CACHE_VERSION,
                                               SOURCE_SIZE: str(source_size).encode()})
        copy.parent.mkdir(exist_ok=True)
        tmp = copy.with_suffix(".tmp")
        feather.write_feather(table, tmp)
        os.replace(tmp, copy)
    except (OSError, pa.ArrowException, ValueError, TypeError):
        return  # not cached: read from the CSV again next time
