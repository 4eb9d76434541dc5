"""A life's memory panel: the sums always, each GPU when there are several, the server process when seen."""

from __future__ import annotations

import base64
import json

import numpy as np
import pandas as pd

from lookahead_runner.runfolder.plan import LifeResult, PlannedLife
from lookahead_runner.report.timelines import PROCESS_NOT_VISIBLE, timeline_entries, timeline_figure

K0_LIFE = LifeResult(planned=PlannedLife(setting="k0", k=0, repeat=0, argv=[], dir="k0/r0"))

T0_UNIX_S = 1_760_000_000.0


def life(gpus: int, process: list | None = None, rows: int = 4) -> dict:
    t_s = T0_UNIX_S + np.arange(rows, dtype="float64")
    gpu = {"t_s": t_s, "used_mib": 100.0 * gpus, "total_mib": 1000.0 * gpus}
    for index in range(gpus):
        gpu[f"gpu{index}_used_mib"] = 100.0 + index
        gpu[f"gpu{index}_total_mib"] = 1000.0
    if process is not None:
        gpu["server_process_mib"] = process
    stages = pd.DataFrame({"stage": [0], "users": [4], "t_start_s": [T0_UNIX_S], "t_end_s": [T0_UNIX_S + rows]})
    return {"server": pd.DataFrame(), "gpu": pd.DataFrame(gpu), "stages": stages}


def traces(parts: dict) -> dict[str, np.ndarray]:
    figure = timeline_figure(parts)
    return {trace["name"]: np.frombuffer(base64.b64decode(trace["y"]["bdata"]), dtype="<f4") for trace in figure["data"]}


def test_two_gpus_and_the_server_process():
    shown = traces(life(2, process=[np.nan, 80.0, 90.0, np.nan]))
    assert list(shown) == ["GPU used MiB", "GPU 0 used MiB", "GPU 1 used MiB", "server process MiB", "GPU total MiB"]
    assert shown["GPU 1 used MiB"].tolist() == [101.0] * 4
    process = shown["server process MiB"]
    assert process[1:3].tolist() == [80.0, 90.0] and np.isnan(process[[0, 3]]).all()  # gaps stay gaps


def test_one_gpu_draws_no_per_gpu_line():
    assert list(traces(life(1, process=[50.0] * 4))) == ["GPU used MiB", "server process MiB", "GPU total MiB"]


def test_three_column_gpu_csv_draws_as_before():
    parts = life(0)
    assert list(traces(parts)) == ["GPU used MiB", "GPU total MiB"]
    entry = timeline_entries({"k0/r0": parts}, [K0_LIFE])[0]
    assert PROCESS_NOT_VISIBLE not in entry["note"]


def test_process_never_seen_is_said_not_drawn():
    parts = life(2, process=[np.nan] * 4)
    assert "server process MiB" not in traces(parts)
    entry = timeline_entries({"k0/r0": parts}, [K0_LIFE])[0]
    assert entry["note"] == PROCESS_NOT_VISIBLE
    assert json.loads(entry["figure_json"])["data"]  # the sums are still drawn


def test_per_gpu_columns_from_csv_with_empty_cells(tmp_path):
    """As finalize reads gpu.csv: empty cells come back as NaN, columns as written."""
    path = tmp_path / "gpu.csv"
    path.write_text("t_s,used_mib,total_mib,gpu0_used_mib,gpu0_total_mib,gpu1_used_mib,gpu1_total_mib,"
                    "server_process_mib\n"
                    f"{T0_UNIX_S},300.0,2000.0,100.0,1000.0,200.0,1000.0,\n"
                    f"{T0_UNIX_S + 1},300.0,2000.0,100.0,1000.0,,,250.0\n")
    shown = traces({"gpu": pd.read_csv(path)})
    assert shown["server process MiB"][1] == 250.0 and np.isnan(shown["GPU 1 used MiB"][1])
