"""A life's files from a Ray slot into the run folder (run/cluster/files.py): packed on the node, pulled a chunk at
a time, unpacked whole or not at all."""
import io
import random
import tarfile

import pytest

from lookahead_runner.run.cluster import files as cluster_files
from lookahead_runner.run.cluster.files import CHUNK_BYTES, pack, read_chunk, receive


def unpack(archive, run_dir, life_dirs):
    """The archive at `archive` into the run folder, as the driver pulls it from a slot."""
    receive(lambda offset: read_chunk(archive, offset), archive.stat().st_size, run_dir, life_dirs)
from lookahead_runner.runfolder.plan import life_state


def test_a_life_comes_back_into_the_run_folder_replacing_what_was_there(tmp_path):
    worker, run_dir = tmp_path / "worker", tmp_path / "run"
    (worker / "k2" / "r1").mkdir(parents=True)
    (worker / "k2" / "r1" / "status.json").write_text('{"state": "done"}')
    (worker / "preflight").mkdir()
    (worker / "preflight" / "requests.csv").write_text("new")
    (worker / "preflight.json").write_text("{}")
    (run_dir / "k2" / "r1").mkdir(parents=True)
    (run_dir / "k2" / "r1" / "stale.csv").write_text("cut run")
    (run_dir / "k2" / "r0").mkdir()
    (run_dir / "k2" / "r0" / "status.json").write_text('{"state": "done"}')
    (run_dir / "preflight").mkdir()
    (run_dir / "preflight" / "old.csv").write_text("an earlier invocation's")
    pack(worker, tmp_path / "files.tar.gz")
    unpack(tmp_path / "files.tar.gz", run_dir, ["k2/r1"])
    assert (run_dir / "k2" / "r1" / "status.json").read_text() == '{"state": "done"}'
    assert not (run_dir / "k2" / "r1" / "stale.csv").exists()
    assert (run_dir / "k2" / "r0" / "status.json").exists() and (run_dir / "preflight.json").exists()
    assert sorted(p.name for p in (run_dir / "preflight").iterdir()) == ["requests.csv"]
    assert sorted(p.name for p in run_dir.iterdir()) == ["k2", "preflight", "preflight.json"]  # no staging left


def test_an_unpack_cut_half_way_leaves_no_done_life_for_resume_to_keep(tmp_path):
    """The archive breaks after the life's "done" status.json (a driver killed mid-unpack reads the same): the life
    must not be half there with that status, or --resume would keep it."""
    run_dir = tmp_path / "run"
    (run_dir / "k4" / "r0").mkdir(parents=True)
    (run_dir / "k4" / "r0" / "status.json").write_text('{"state": "running"}')
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, data in (("k4/r0/status.json", b'{"state": "done"}'), ("k4/r0/requests.csv", b"x" * 100_000)):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    (tmp_path / "cut.tar.gz").write_bytes(buffer.getvalue()[:len(buffer.getvalue()) // 2])
    with pytest.raises(tarfile.ReadError, match="the archive is damaged"):  # the life fails, the sweep goes on
        unpack(tmp_path / "cut.tar.gz", run_dir, ["k4/r0"])
    assert life_state(run_dir / "k4" / "r0") == "running"  # rerun by --resume
    assert sorted(p.name for p in run_dir.iterdir()) == ["k4"]


@pytest.mark.parametrize("name, kind", [("../escaped.txt", tarfile.REGTYPE), ("/tmp/abs.txt", tarfile.REGTYPE),
                                        ("k0/r0/link", tarfile.SYMTYPE)])
def test_files_that_would_land_outside_the_run_folder_are_refused(tmp_path, name, kind):
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        info = tarfile.TarInfo(name)
        info.type = kind
        info.linkname = "/etc/passwd" if kind == tarfile.SYMTYPE else ""
        data = b"" if kind == tarfile.SYMTYPE else b"x"
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))
    (tmp_path / "bad.tar.gz").write_bytes(buffer.getvalue())
    (tmp_path / "run").mkdir()
    with pytest.raises(tarfile.TarError, match="not a plain file or folder"):
        unpack(tmp_path / "bad.tar.gz", tmp_path / "run", ["k0/r0"])
    assert not (tmp_path / "escaped.txt").exists() and list((tmp_path / "run").iterdir()) == []


def test_an_archive_comes_across_a_chunk_at_a_time(tmp_path, monkeypatch):
    """No transfer carries more than a chunk (Ray's object store holds one at a time), and the bytes arrive whole."""
    monkeypatch.setattr(cluster_files, "CHUNK_BYTES", 1000)
    worker = tmp_path / "worker" / "k0" / "r0"
    worker.mkdir(parents=True)
    (worker / "requests.csv").write_bytes(random.Random(0).randbytes(10_000))  # gzip cannot shrink it: 10 chunks
    size = pack(tmp_path / "worker", tmp_path / "files.tar.gz")
    sent = []

    def chunk_at(offset: int) -> bytes:
        sent.append(read_chunk(tmp_path / "files.tar.gz", offset, cluster_files.CHUNK_BYTES))
        return sent[-1]

    (tmp_path / "run").mkdir()
    receive(chunk_at, size, tmp_path / "run", ["k0/r0"])
    assert len(sent) > 3 and max(map(len, sent)) <= 1000 and sum(map(len, sent)) == size
    assert (tmp_path / "run" / "k0" / "r0" / "requests.csv").read_bytes() == (worker / "requests.csv").read_bytes()
    assert CHUNK_BYTES <= 64 * 1024 * 1024  # well under a local Ray's 256 MiB object store
    with pytest.raises(tarfile.ReadError, match="cut at"):
        receive(lambda offset: b"" if offset else b"abc", 10, tmp_path / "run", ["k0/r0"])
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["k0"]  # the cut transfer's staging is gone


def test_a_staging_folder_a_killed_driver_left_is_removed_by_the_next_transfer(tmp_path):
    worker, run_dir = tmp_path / "worker", tmp_path / "run"
    (worker / "k0" / "r0").mkdir(parents=True)
    (worker / "k0" / "r0" / "status.json").write_text('{"state": "done"}')
    (run_dir / ".unpacking-cut" / "files" / "k4" / "r0").mkdir(parents=True)
    pack(worker, tmp_path / "files.tar.gz")
    unpack(tmp_path / "files.tar.gz", run_dir, ["k0/r0"])
    assert sorted(p.name for p in run_dir.iterdir()) == ["k0"]
