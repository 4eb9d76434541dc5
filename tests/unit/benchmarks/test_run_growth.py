"""benchmarks/run_growth.py: a real run folder grown on disk for benchmarks/report_render.py reads back through the
product's own read path at the size asked, its timelines one sample a second with counters still rising."""
from __future__ import annotations


import numpy as np
import pandas as pd

from lookahead_runner.runfolder.read import read_run

from .scripts import load

growth = load("run_growth")


def test_a_grown_folder_reads_back_at_the_size_asked(fixtures_dir, tmp_path):
    seed = fixtures_dir.parent / "run-plan-v1"  # a real two-life simulator run: one 2 s stage of 2 users each
    shape = growth.Shape(ks=[0, 2], stages=3, repeats=2, life_s=60.0, req_per_user_s=0.5)
    data = read_run(growth.grow(seed, tmp_path / "grown", shape))

    assert [life.planned.dir for life in data.lives] == ["k0/r0", "k0/r1", "k2/r0", "k2/r1"]
    assert all(life.state == "done" and life.status.measure_s == 60.0 for life in data.lives)
    assert [(s.users, s.duration_s) for s in data.config.load.stages] == [(2, 20.0), (4, 20.0), (8, 20.0)]
    assert data.config.load.repeats == 2 and data.plan.target_users == 4
    assert len(data.summary) == 2 * 2 * 3 and set(data.summary["users"]) == {2, 4, 8}
    assert len(data.windows) == 12  # every stage of every life a valid window
    for life, frames in data.timelines.items():
        for name in ("server", "gpu"):
            assert len(frames[name]) == 60 and np.allclose(np.diff(frames[name]["t_s"]), 1.0), (life, name)
        assert (frames["server"]["generation_tokens_total"].diff().dropna() >= 0).all()
        assert frames["server"]["generation_tokens_total"].iloc[-1] > 100 * frames["server"][
            "generation_tokens_total"].iloc[0]  # it kept rising over the whole life, not only the seed's 2 s
    requests = pd.read_csv(tmp_path / "grown" / "k0" / "r1" / "requests.csv")
    stages = pd.read_csv(tmp_path / "grown" / "k0" / "r1" / "stages.csv")
    for stage in stages.itertuples():
        sent = requests.loc[requests["stage"] == stage.stage, "t_send_s"]
        assert stage.t_start_s <= sent.min() and sent.max() <= stage.t_end_s
        assert 0.5 * stage.users * 0.5 * 20 <= len(sent) <= 1.5 * stage.users * 0.5 * 20  # Poisson, mean 10 a user
    assert ((requests["t_done_s"] - requests["t_send_s"]) * 1000 - requests["e2e_ms"]).abs().max() < 1.0
    # K=2 keeps its measured speed over K=0 (the seed's 9 requests to 3 in the same 2 s)
    seed_ratio = growth.request_rate(seed / "k2" / "r0") / growth.request_rate(seed / "k0" / "r0")
    grown_ratio = len(pd.read_csv(tmp_path / "grown" / "k2" / "r1" / "requests.csv")) / len(requests)
    assert seed_ratio > 2 and abs(grown_ratio / seed_ratio - 1) < 0.2


def test_stretching_replays_each_seed_stage_keeps_counter_rates_and_splits_rows_per_key():
    seed_stages = pd.DataFrame({"stage": [0, 1], "users": [2, 4], "t_start_s": [0.0, 4.0], "t_end_s": [4.0, 8.0]})
    t = np.arange(0.0, 9.0, 0.5)  # the sampler goes on past the last stage
    counter = np.where(t < 4, 10 * t, 40 + 30 * (t - 4))  # 10 a second in stage 0, 30 in stage 1
    frame = pd.DataFrame({"t_s": t, "running": np.where(t < 4, 1.0, 5.0), "tokens_total": counter})
    stages = pd.DataFrame({"stage": [0, 1], "users": [2, 4], "t_start_s": [100.0, 110.0], "t_end_s": [110.0, 120.0]})

    grown = growth.stretch_timeline(frame, seed_stages, stages, 100.0, 20.0, np.array([2.0, 1.0]))
    assert list(grown["t_s"]) == [100.0 + i for i in range(20)]
    assert list(grown["running"]) == [1.0] * 10 + [5.0] * 10
    steps = np.diff(grown["tokens_total"])
    assert np.allclose(steps[:9], 20.0) and np.allclose(steps[10:], 30.0)  # stage 0 at twice its seed rate

    per_position = pd.concat([frame.assign(position=p, tokens_total=counter * (p + 1)) for p in (0, 1)])
    grown = growth.stretch_timeline(per_position[["t_s", "position", "tokens_total"]], seed_stages, stages,
                                    100.0, 20.0)
    assert len(grown) == 40 and list(grown.columns) == ["t_s", "position", "tokens_total"]
    second = grown[grown["position"] == 1]
    assert np.allclose(np.diff(second["tokens_total"])[:9], 20.0)  # position 1's own rate (2 x 10 a second)
