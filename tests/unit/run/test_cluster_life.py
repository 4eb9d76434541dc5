"""A life on a Ray slot (run/cluster/worker_life.py): its scratch folder on the node, listed with the slot's watchdog, its
archive pulled a chunk at a time, and gone once the driver has it."""
import tempfile
from pathlib import Path
from types import SimpleNamespace

from lookahead_runner.config import config_from_dict
from lookahead_runner.run.cluster import worker_life as cluster_life
from lookahead_runner.run.life import reaper
from lookahead_runner.run.cluster.files import CHUNK_BYTES
from lookahead_runner.run.cluster.worker_life import LifeOrder, SlotWorker, Where
from lookahead_runner.run.life.placement import slot_placement
from lookahead_runner.run.life.preflight_turn import PreflightTurn
from lookahead_runner.runfolder import results
from lookahead_runner.runfolder.plan import write_status
from lookahead_runner.vllm.knob import Setting


def test_a_slot_lists_its_scratch_with_its_watchdog_and_removes_it_once_its_files_are_pulled(tmp_path, monkeypatch,
                                                                                              ray_installed):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    told = []
    monkeypatch.setattr(reaper, "start_watchdog", lambda label="": told.append(label))
    monkeypatch.setattr(reaper, "remove_at_exit", lambda folder: told.append(Path(folder)))
    placements = []

    def server_life(config, caps, setting, repeats, run_dir, say, server, placement=None, **kwargs):
        placements.append(placement)
        out = results.life_dir(run_dir, setting.name, repeats[0])
        out.mkdir(parents=True)
        write_status(out, "done")

    monkeypatch.setattr(cluster_life, "run_server_life", server_life)
    worker = SlotWorker()
    monkeypatch.setattr(worker, "where", lambda: Where("10.0.0.1", "aaaaaaaanode", ("ray-gpu:0",)))
    config = config_from_dict({"cluster": {"engine": "ray", "gpus": 2, "cpus_per_life": 2}})
    turn = PreflightTurn(False, slot_placement(config))
    order = LifeOrder(config, None, Setting(0, False), [0], SimpleNamespace(load_env={}), turn)
    files = worker.run(order)
    assert files.error == "" and files.turn == turn
    label, scratch = told
    assert label == "watchdog of a Ray slot on 10.0.0.1" and scratch.name.startswith("lookahead-life-")
    assert scratch.parent == tmp_path and Path(files.archive).parent == scratch  # removed even if the slot is killed
    assert placements == [turn.placement] and placements[0].mode == "slot"      # the slot's own placement
    assert worker.chunk(0) == Path(files.archive).read_bytes() and files.size <= CHUNK_BYTES
    worker.run(order)  # the next life: the last one's files were pulled
    assert not scratch.exists() and told[-1].exists()
    worker.release()
    assert not told[-1].exists() and list(tmp_path.iterdir()) == []
