"""A life's files on their way from a Ray slot's node into the run folder.

The slot packs the life's scratch run folder into an archive on its node's disk (`pack`); the driver pulls it
a chunk at a time (`read_chunk` there, `receive` here), so no more than one chunk is in Ray's object store at
once however large the life's files are, into a staging folder beside the run folder's lives, unpacks it there,
then moves each life folder in whole: a cut transfer or unpack never leaves a life half there with a "done"
status that --resume would keep (a staging folder a killed driver left is removed by the next). Only plain
files and folders with names inside the run folder are unpacked.
"""
from __future__ import annotations

import os
import shutil
import tarfile
import tempfile
import zlib
from collections.abc import Callable
from pathlib import Path, PurePosixPath

from ...contracts.paths import inside

CHUNK_BYTES = 8 * 1024 * 1024
STAGING_PREFIX = ".unpacking-"


def pack(run_dir: Path, archive: Path) -> int:
    """Everything under `run_dir`, packed relative to it into `archive`; its size in bytes."""
    with tarfile.open(archive, mode="w:gz") as files:
        for path in sorted(run_dir.iterdir()):
            files.add(path, arcname=path.name)
    return archive.stat().st_size


def read_chunk(archive: Path, offset: int, size: int = CHUNK_BYTES) -> bytes:
    with open(archive, "rb") as file:
        file.seek(offset)
        return file.read(size)


def receive(chunk_at: Callable[[int], bytes], size: int, run_dir: Path, life_dirs: list[str]) -> list[str]:
    """The archive of `size` bytes, read by `chunk_at(offset)` one chunk after another, into the run folder: the
    life folders (`life_dirs`, e.g. "k2/r1") replace what it had of them (a "running" status, a cut run's files);
    the archive's other entries (the pre-flight's files) replace theirs. The names of those other entries."""
    for stale in run_dir.glob(f"{STAGING_PREFIX}*"):  # a cut transfer of an earlier run of this folder
        shutil.rmtree(stale, ignore_errors=True)
    staging = Path(tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=run_dir))
    try:
        archive, files = staging / "files.tar.gz", staging / "files"
        _fetch(chunk_at, size, archive)
        try:
            with tarfile.open(archive, mode="r:gz") as packed:
                for member in packed:
                    _extract(packed, member, files)
        except (EOFError, zlib.error) as err:  # gzip's own words for a damaged archive
            raise tarfile.ReadError(f"the archive is damaged: {err}") from None
        settings = {PurePosixPath(life_dir).parts[0] for life_dir in life_dirs}
        others = [entry.name for entry in files.iterdir() if entry.name not in settings] if files.exists() else []
        for name in [*life_dirs, *others]:
            if (files / name).exists():
                _replace(files / name, inside(run_dir, name))  # never a folder outside the run folder
        return others
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _fetch(chunk_at: Callable[[int], bytes], size: int, into: Path) -> None:
    with open(into, "wb") as file:
        while file.tell() < size:
            chunk = chunk_at(file.tell())
            if not chunk:
                raise tarfile.ReadError(f"the archive was cut at {file.tell()} of {size} bytes")
            file.write(chunk)


def _extract(files: tarfile.TarFile, member: tarfile.TarInfo, staging: Path) -> None:
    parts = PurePosixPath(member.name).parts
    if not parts or member.name.startswith("/") or ".." in parts or not (member.isfile() or member.isdir()):
        raise tarfile.TarError(f"{member.name!r}: not a plain file or folder inside the run folder")
    target = staging.joinpath(*parts)
    if member.isdir():
        target.mkdir(parents=True, exist_ok=True)
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    with files.extractfile(member) as source, open(target, "wb") as copy:
        shutil.copyfileobj(source, copy)


def _replace(new: Path, old: Path) -> None:
    """`new` moved to `old`'s place (same disk: a rename), whatever `old` was."""
    if old.is_dir() and not old.is_symlink():
        shutil.rmtree(old)
    elif old.exists() or old.is_symlink():
        old.unlink()
    old.parent.mkdir(parents=True, exist_ok=True)
    os.replace(new, old)
