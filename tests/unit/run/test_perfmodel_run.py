"""A run folder's inputs to the performance model: accepted tokens per position over each life, summed per K."""
from __future__ import annotations

import pandas as pd

from lookahead_runner.run.verdict.perfmodel_run import life_positions, max_num_seqs


def write_life(folder, drafts, per_position):
    folder.mkdir(parents=True)
    pd.DataFrame({"t_s": [1.0, 2.0], "spec_drafts_total": drafts}).to_csv(folder / "server_metrics.csv", index=False)
    rows = [(t, p, v[i]) for p, v in enumerate(per_position) for i, t in enumerate((1.0, 2.0))]
    pd.DataFrame(rows, columns=["t_s", "position", "accepted_total"]).to_csv(folder / "spec_positions.csv", index=False)


def test_positions_are_the_growth_over_the_life(tmp_path):
    write_life(tmp_path / "k2", [100.0, 1100.0], [(50.0, 850.0), (20.0, 620.0)])
    counts = life_positions(tmp_path / "k2")
    assert counts.drafts == 1000.0 and counts.accepted == (800.0, 600.0)


def test_no_counts_without_the_file_or_without_drafts(tmp_path):
    (tmp_path / "k0").mkdir()
    assert life_positions(tmp_path / "k0") is None
    write_life(tmp_path / "k4", [100.0, 100.0], [(1.0, 2.0)])
    assert life_positions(tmp_path / "k4") is None


def test_max_num_seqs_from_the_argv():
    assert max_num_seqs(["vllm", "serve", "m", "--max-num-seqs", "64"]) == 64
    assert max_num_seqs(["vllm", "serve", "m", "--max-num-seqs=32"]) == 32
    assert max_num_seqs(["vllm", "serve", "m"]) is None
