"""One timeline chart per server life: engine queue, KV usage and GPU memory, with the load stages shaded."""

from __future__ import annotations

import base64
import functools
import html
import re
from collections.abc import Mapping

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..runfolder.plan import LifeResult
from ..runfolder.results import life_key
from .charts import PALETTE, REFERENCE_COLOUR, TEMPLATE, column, figure_entry

# Timestamps above this are unix seconds; below it, seconds since the life started.
UNIX_EPOCH_THRESHOLD_S = 1e8
# Bounds the page size for very long lives; 1 s samples over 2 h still fit without thinning.
MAX_POINTS_PER_TRACE = 8000
_STAGE_FILL = ("#8fa8c8", "#c8b38f")


def _frame(parts: Mapping | None, name: str) -> pd.DataFrame:
    frame = parts.get(name) if isinstance(parts, Mapping) else None
    return frame if isinstance(frame, pd.DataFrame) else pd.DataFrame()


def _thin(frame: pd.DataFrame) -> pd.DataFrame:
    step = -(-len(frame) // MAX_POINTS_PER_TRACE)
    return frame.iloc[::step] if step > 1 else frame


def relative_times(times: list[pd.Series]) -> list[np.ndarray]:
    """Puts unix-time series on one axis starting at 0; series already relative are left as they are."""
    arrays = [pd.to_numeric(t, errors="coerce").to_numpy(dtype="float64") for t in times]
    absolute = [a for a in arrays if a.size and np.isfinite(a).any() and np.nanmedian(a) > UNIX_EPOCH_THRESHOLD_S]
    origin = min(float(np.nanmin(a)) for a in absolute) if absolute else 0.0
    return [a - origin if any(a is b for b in absolute) else a for a in arrays]


def _series(x: np.ndarray, y: pd.Series, name: str, colour: str, dash: str = "solid") -> go.Scatter:
    # float32 halves the embedded size and is exact enough for seconds and gauges.
    return go.Scatter(x=x.astype("float32"), y=y.to_numpy(dtype="float32"), name=name, mode="lines",
                      line={"color": colour, "width": 1.6, "dash": dash}, hovertemplate="%{y:.4g}")


def stage_label(index: int, users: float, rate: float) -> str:
    """A stage's load: its arrival rate where it is a rate stage (its users column is 0 there), else its users."""
    if np.isfinite(rate):
        return f"{rate:g} req/s"
    return f"{int(users)} users" if np.isfinite(users) else f"stage {index}"


def _stage_marks(starts: np.ndarray, ends: np.ndarray, stages: pd.DataFrame) -> tuple[list[dict], list[dict]]:
    """A shaded band per stage, labelled with its load (users or arrival rate) and its workload variant, when the
    life ran several."""
    shapes, labels = [], []
    variants = stages.get("variant")
    names = [""] * len(starts) if variants is None else variants.fillna("").astype(str).tolist()
    loads = zip(column(stages, "users").reindex(range(len(starts))), column(stages, "rate").reindex(range(len(starts))))
    for index, (t0, t1, (n_users, rate)) in enumerate(zip(starts, ends, loads)):
        if not (np.isfinite(t0) and np.isfinite(t1)):
            continue
        shapes.append({"type": "rect", "xref": "x", "yref": "paper", "x0": float(t0), "x1": float(t1),
                       "y0": 0, "y1": 1, "fillcolor": _STAGE_FILL[index % 2], "opacity": 0.16,
                       "line": {"width": 0}, "layer": "below"})
        # plotly reads HTML in an annotation (<a href> is a link): a label from the run folder goes in as text
        text = stage_label(index, n_users, rate) + (f" · {html.escape(names[index], quote=False)}" if names[index] else "")
        labels.append({"xref": "x", "yref": "paper", "x": float((t0 + t1) / 2), "y": 1.0, "yanchor": "bottom",
                       "text": text, "showarrow": False, "font": {"size": 10, "color": "#555"}})
    return shapes, labels


# (frame, column, label, colour, dash, secondary y) of every series a timeline can show, in drawing order.
_SERVER_SERIES = (("server", "running", "running", PALETTE[0], "solid", False),
                  ("server", "waiting", "waiting", PALETTE[1], "solid", False),
                  ("server", "kv_usage", "KV usage %", PALETTE[2], "solid", True))
_GPU_SERIES = (("gpu", "used_mib", "GPU used MiB", PALETTE[4], "solid", False),
               ("gpu", "total_mib", "GPU total MiB", REFERENCE_COLOUR, "dash", False))
_PROCESS_SERIES = ("gpu", "server_process_mib", "server process MiB", PALETTE[6], "solid", False)
_PER_GPU_COLUMN = re.compile(r"gpu(\d+)_used_mib")
_PER_GPU_COLOURS = tuple(c for i, c in enumerate(PALETTE) if i not in (4, 6))
PROCESS_NOT_VISIBLE = ("the server process's own GPU memory was not visible: NVML listed none of its pids "
                       "(a container's own PID namespace, or a driver that hides per-process usage)")


def memory_panel_series(gpu: pd.DataFrame) -> tuple:
    """The memory panel's series: the sums; each GPU's used memory when there are several (one GPU's line
    would repeat the sum); the server process's memory when some reading saw it."""
    matches = (_PER_GPU_COLUMN.fullmatch(str(name)) for name in gpu.columns)
    per_gpu = sorted((int(m.group(1)), m.group(0)) for m in matches if m)
    series = [_GPU_SERIES[0]]
    if len(per_gpu) > 1:
        series += [("gpu", name, f"GPU {index} used MiB", _PER_GPU_COLOURS[n % len(_PER_GPU_COLOURS)], "dot", False)
                   for n, (index, name) in enumerate(per_gpu)]
    if column(gpu, _PROCESS_SERIES[1]).notna().any():
        series.append(_PROCESS_SERIES)
    return tuple(s for s in series + [_GPU_SERIES[1]] if s[1] in gpu.columns)


def process_memory_note(parts: Mapping | None) -> str:
    """Says why the server-process line is missing when the source tried to measure it."""
    gpu = _frame(parts, "gpu")
    name = _PROCESS_SERIES[1]
    return PROCESS_NOT_VISIBLE if name in gpu.columns and len(gpu) and column(gpu, name).isna().all() else ""


def typed_array(values: np.ndarray) -> dict:
    """plotly.js's typed-array form (base64 little-endian float32), as plotly.py writes numpy arrays.

    float32 halves the embedded size and is exact enough for seconds and gauges; NaN stays a gap.
    """
    return {"dtype": "f4", "bdata": base64.b64encode(np.asarray(values, dtype="<f4").tobytes()).decode("ascii")}


@functools.lru_cache(maxsize=16)
def _skeleton(server_series: tuple, gpu_series: tuple) -> dict:
    """The figure of one timeline shape (which series, one or two panels) with empty traces, as a dict.

    Built once per shape through plotly's validating API, then filled with each life's arrays as plain data:
    validating 30 long lives' figures one by one is what made a large sweep's page slow.
    """
    rows = 2 if (server_series and gpu_series) else 1
    fig = make_subplots(rows=rows, cols=1, shared_xaxes=True, vertical_spacing=0.08,
                        row_heights=[0.62, 0.38] if rows == 2 else None,
                        specs=[[{"secondary_y": True}]] + ([[{}]] if rows == 2 else []))
    empty = np.zeros(0)
    for _, name, label, colour, dash, secondary in server_series:
        fig.add_trace(_series(empty, pd.Series(dtype="float64"), label, colour, dash), row=1, col=1,
                      secondary_y=secondary)
    if server_series:
        fig.update_yaxes(title_text="sequences", row=1, col=1, secondary_y=False, rangemode="tozero")
        fig.update_yaxes(title_text="KV usage %", row=1, col=1, secondary_y=True, range=[0, 105],
                         tickvals=[0, 25, 50, 75, 100], showgrid=False)
    for _, name, label, colour, dash, _ in gpu_series:
        fig.add_trace(_series(empty, pd.Series(dtype="float64"), label, colour, dash), row=rows, col=1)
    if gpu_series:
        fig.update_yaxes(title_text="MiB", row=rows, col=1, rangemode="tozero")
    fig.update_layout(template=TEMPLATE, height=360 if rows == 2 else 280, hovermode="x unified", margin={"t": 52})
    fig.update_xaxes(title_text="seconds since first sample", row=rows, col=1)
    return fig.to_plotly_json()


def timeline_figure(parts: Mapping | None) -> dict | None:
    """The timeline of one life as a plotly figure dict, or None without samples."""
    frames = {"server": _thin(_frame(parts, "server")), "gpu": _thin(_frame(parts, "gpu"))}
    stages = _frame(parts, "stages")
    has_server = "t_s" in frames["server"].columns and not frames["server"].empty
    has_gpu = {"t_s", "used_mib"} <= set(frames["gpu"].columns) and not frames["gpu"].empty
    if not (has_server or has_gpu):
        return None
    server_t, gpu_t, stage_t0, stage_t1 = relative_times([
        frames["server"].get("t_s", pd.Series(dtype="float64")), frames["gpu"].get("t_s", pd.Series(dtype="float64")),
        stages.get("t_start_s", pd.Series(dtype="float64")), stages.get("t_end_s", pd.Series(dtype="float64"))])
    times = {"server": server_t, "gpu": gpu_t}
    server_series = tuple(s for s in _SERVER_SERIES if has_server and s[1] in frames["server"].columns)
    memory_series = memory_panel_series(frames["gpu"]) if has_gpu else ()
    skeleton = _skeleton(server_series, memory_series)
    data = []
    for trace, (frame, name, *_rest) in zip(skeleton["data"], server_series + memory_series):
        values = column(frames[frame], name) * (100.0 if name == "kv_usage" else 1.0)
        data.append(trace | {"x": typed_array(times[frame]), "y": typed_array(values.to_numpy())})
    shapes, labels = _stage_marks(stage_t0, stage_t1, stages.reset_index(drop=True))
    return {"data": data, "layout": skeleton["layout"] | {"shapes": shapes, "annotations": labels}}


def preemptions_during(parts: Mapping | None) -> int | None:
    values = column(_frame(parts, "server"), "preemptions_total").dropna()
    return int(values.iloc[-1] - values.iloc[0]) if len(values) >= 2 else None


def timeline_entries(timelines: Mapping | None, lives: list[LifeResult]) -> list[dict]:
    """Entries in plan order (every life, even one with no samples), then any timeline the plan does not list."""
    timelines = timelines if isinstance(timelines, Mapping) else {}
    # The runner keys a life's timeline by its folder, "<setting>/r<repeat>" today; accept either.
    ordered: list[tuple[str, str | None, LifeResult | None]] = []
    for life in lives:
        candidates = (life.planned.dir, life_key(life.planned.setting, life.planned.repeat))
        found = next((key for key in candidates if key in timelines), None)
        ordered.append((f"{candidates[1]} (K={life.planned.k})", found, life))
    used = {found for _, found, _ in ordered}
    ordered += [(key, key, None) for key in sorted(map(str, timelines)) if key not in used]
    entries = []
    for index, (title, key, life) in enumerate(ordered):
        parts = timelines.get(key) if key is not None else None
        preemptions = preemptions_during(parts)
        notes = [f"preemptions during this life: {preemptions}" if preemptions is not None else "",
                 process_memory_note(parts)]
        note = "; ".join(n for n in notes if n)
        entry = figure_entry(f"timeline-{index}", title, note, timeline_figure(parts),
                             empty="no data: no server or GPU samples were recorded for this life")
        entry.update({"status": life.state if life else "", "reason": life.reason if life else ""})
        entries.append(entry)
    return entries
