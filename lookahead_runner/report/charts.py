"""Plotly figures for the report, built from summary.csv rows.

Every public function is pure: DataFrame in, a chart entry (plain dict holding script-safe figure JSON) out.
Aggregation across repeats is the median, with min-max as error bars, over valid rows only. A load is either the
users of a closed-loop stage or the offered arrival rate of a rate stage (`LoadAxis`): the same charts are drawn
against either, each stage kind's rows against its own axis (a rate stage's users column is 0).
"""

from __future__ import annotations

import html
from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio
from plotly.subplots import make_subplots

from ..vllm.knob import MAX_NUM_SEQS_FLAG

# Tableau 10: distinguishable, colour-blind tolerant, and small to embed (no plotly template).
PALETTE = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
           "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac")
REFERENCE_COLOUR = "#888888"

_AXIS = {"gridcolor": "#e5e5e5", "zeroline": False, "linecolor": "#999", "showline": True, "automargin": True}
# A tiny explicit template: the default one adds ~10 kB of JSON to every figure.
TEMPLATE = {"layout": {
    "font": {"family": "system-ui, -apple-system, Segoe UI, Roboto, sans-serif", "size": 12, "color": "#222"},
    "plot_bgcolor": "white", "paper_bgcolor": "white", "colorway": list(PALETTE),
    "hovermode": "closest", "xaxis": _AXIS, "yaxis": _AXIS,
    "legend": {"orientation": "h", "y": -0.22, "yanchor": "top"},
    "margin": {"l": 60, "r": 20, "t": 40, "b": 40},
}}


@dataclass(frozen=True)
class LoadAxis:
    """The load a chart's points are at: summary.csv's column for it, and how it reads in titles and labels."""

    column: str        # "users" or "rate"
    noun: str          # in chart titles: "vs concurrency", "vs offered rate"
    title: str         # the x axis's title
    unit: str          # a level's label: "16 users", "36 req/s"
    id_prefix: str     # chart ids: "latency", "rate-latency"

    def label(self, level: float) -> str:
        return f"{level:g} {self.unit}"

    def axis(self, levels: pd.Series) -> dict:
        if self.column == "users":
            return users_axis(levels)
        found = sorted(float(v) for v in pd.to_numeric(levels, errors="coerce").dropna().unique())
        return {"title_text": self.title, "tickvals": found, "type": "linear"}


USERS = LoadAxis("users", "concurrency", "client concurrency (users)", "users", "")
RATE = LoadAxis("rate", "offered rate", "offered arrival rate (req/s, open loop)", "req/s", "rate-")


@dataclass(frozen=True)
class SettingStyle:
    setting: str
    k: int
    label: str
    colour: str


def plot_text(value: object) -> str:
    """Text for plotly labels: plotly reads a small HTML subset in labels, entities render as plain text."""
    return html.escape(str(value), quote=True)


def script_safe_json(json_text: str) -> str:
    """JSON that can sit inside <script type="application/json">: no '<', '>' or '&' survives literally.

    In JSON these characters only occur inside strings, where the \\u escapes mean the same thing.
    """
    return json_text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def figure_json(fig: go.Figure | dict) -> str:
    """A figure, or a figure dict already built from validated parts, as script-safe JSON."""
    return script_safe_json(fig.to_json() if isinstance(fig, go.Figure) else pio.to_json(fig, validate=False))


def figure_entry(chart_id: str, title: str, note: str, fig: go.Figure | dict | None, empty: str = "no data") -> dict:
    figure_json_text = figure_json(fig) if fig is not None else None
    return {"id": chart_id, "title": title, "note": note, "figure_json": figure_json_text, "empty": empty,
            "status": "", "reason": ""}


def column(frame: pd.DataFrame, name: str) -> pd.Series:
    """A numeric column, NaN where it is absent or unparsable (summary.csv may come back as strings)."""
    if name not in frame.columns:
        return pd.Series(np.nan, index=frame.index, dtype="float64")
    return pd.to_numeric(frame[name], errors="coerce").astype("float64")


def setting_styles(summary: pd.DataFrame) -> dict[str, SettingStyle]:
    """One colour and legend label per setting, ordered by K; the label names the setting only when K repeats."""
    if summary.empty or "setting" not in summary.columns:
        return {}
    pairs = (pd.DataFrame({"setting": summary["setting"].astype(str), "k": column(summary, "k")})
             .drop_duplicates("setting").sort_values(["k", "setting"]))
    k_counts = pairs["k"].value_counts(dropna=False)
    styles = {}
    for index, (setting, k) in enumerate(zip(pairs["setting"], pairs["k"])):
        k_int = int(k) if pd.notna(k) else -1
        label = f"K={k_int}" if k_counts[k] == 1 else f"K={k_int} ({setting})"
        styles[setting] = SettingStyle(setting, k_int, label, PALETTE[index % len(PALETTE)])
    return styles


def aggregate(rows: pd.DataFrame, metric: str, by: list[str]) -> pd.DataFrame:
    """Median, min and max of one metric over repeats, per group; groups with no finite value are dropped."""
    empty = pd.DataFrame(columns=[*by, "median", "lo", "hi", "n"])
    if rows.empty or any(key not in rows.columns for key in by):
        return empty
    frame = pd.DataFrame({key: rows[key] for key in by})
    frame["value"] = column(rows, metric)
    frame = frame.dropna(subset=["value"])
    if frame.empty:
        return empty
    grouped = frame.groupby(by, sort=True)["value"]
    out = grouped.agg(median="median", lo="min", hi="max", n="count").reset_index()
    return out


def _error_bars(points: pd.DataFrame, colour: str) -> dict:
    return {"type": "data", "symmetric": False, "array": (points["hi"] - points["median"]).to_numpy(),
            "arrayminus": (points["median"] - points["lo"]).to_numpy(), "color": colour,
            "thickness": 1.2, "width": 4, "visible": True}


def _line(points: pd.DataFrame, x: str, name: str, colour: str, dash: str = "solid",
          legendgroup: str | None = None, showlegend: bool = True) -> go.Scatter:
    return go.Scatter(x=points[x].to_numpy(), y=points["median"].to_numpy(), name=plot_text(name),
                      mode="lines+markers", line={"color": colour, "dash": dash, "width": 2},
                      marker={"size": 7}, error_y=_error_bars(points, colour),
                      legendgroup=legendgroup, showlegend=showlegend,
                      customdata=points["n"].to_numpy(),
                      hovertemplate="%{x}: %{y:.4g} (median of %{customdata})<extra>%{fullData.name}</extra>")


def users_axis(users: pd.Series) -> dict:
    """Ticks on the stage levels; a log axis once they span 8x, since ramps usually double concurrency."""
    levels = sorted(int(u) for u in column(pd.DataFrame({"u": users}), "u").dropna().unique())
    wide = len(levels) > 1 and levels[0] > 0 and levels[-1] / levels[0] >= 8
    return {"title_text": "client concurrency (users)", "tickvals": levels, "type": "log" if wide else "linear"}


def k_axis(ks: pd.Series) -> dict:
    levels = sorted(int(k) for k in column(pd.DataFrame({"k": ks}), "k").dropna().unique())
    return {"title_text": "speculative lookahead K", "tickvals": levels}


def _layout(fig: go.Figure, xaxis: dict, y_title: str, height_px: int = 380, subplots: bool = False) -> go.Figure:
    # Subplot titles sit in the top margin, under the mode bar: give them room.
    fig.update_layout(template=TEMPLATE, height=height_px, margin={"t": 64 if subplots else 40})
    fig.update_xaxes(**xaxis)
    fig.update_yaxes(title_text=y_title)
    return fig


def per_setting_vs_users(valid: pd.DataFrame, styles: dict[str, SettingStyle], metric: str,
                         y_title: str, load: LoadAxis = USERS) -> go.Figure | None:
    agg = aggregate(valid, metric, ["setting", load.column])
    if agg.empty:
        return None
    fig = go.Figure()
    for style in styles.values():
        points = agg[agg["setting"] == style.setting]
        if not points.empty:
            fig.add_trace(_line(points, load.column, style.label, style.colour))
    return _layout(fig, load.axis(agg[load.column]), y_title)


def acceptance_vs_k(valid: pd.DataFrame, load: LoadAxis = USERS) -> go.Figure | None:
    agg = aggregate(valid, "acceptance_rate", [load.column, "k"])
    if agg.empty:
        return None
    fig = go.Figure()
    for index, (level, points) in enumerate(agg.groupby(load.column, sort=True)):
        fig.add_trace(_line(points, "k", load.label(level), PALETTE[index % len(PALETTE)]))
    fig = _layout(fig, k_axis(agg["k"]), "acceptance rate (accepted / drafted)")
    fig.update_yaxes(tickformat=".0%", rangemode="tozero")
    return fig


def real_batch_vs_users(valid: pd.DataFrame, styles: dict[str, SettingStyle],
                        max_num_seqs: int | None, load: LoadAxis = USERS) -> go.Figure | None:
    fig = per_setting_vs_users(valid, styles, "running_mean", "real batch: mean running sequences", load)
    if fig is None:
        return None
    if load is USERS:
        # Every stage level, so the reference stays the y = x line on a log users axis too.
        diagonal = sorted(column(valid, "users").dropna().unique().tolist())
        fig.add_trace(go.Scatter(x=diagonal, y=diagonal, mode="lines", name="users = concurrency",
                                 line={"color": REFERENCE_COLOUR, "dash": "dot", "width": 1.5}, hoverinfo="skip"))
    if max_num_seqs is not None:
        fig.add_hline(y=max_num_seqs, line={"color": REFERENCE_COLOUR, "dash": "dash", "width": 1},
                      annotation_text=f"{MAX_NUM_SEQS_FLAG} {max_num_seqs}", annotation_position="top left")
    return fig


def memory_vs_k(valid: pd.DataFrame) -> go.Figure | None:
    kv = aggregate(valid.assign(kv_pct=column(valid, "kv_usage_peak") * 100.0), "kv_pct", ["users", "k"])
    gpu = aggregate(valid, "gpu_mem_peak_mib", ["users", "k"])
    if kv.empty and gpu.empty:
        return None
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.12,
                        subplot_titles=("KV-cache usage peak (%)", "GPU memory peak (MiB)"))
    levels = sorted(set(kv["users"]).union(gpu["users"]))
    for index, users in enumerate(levels):
        colour, name = PALETTE[index % len(PALETTE)], f"{int(users)} users"
        shown = False
        for col, agg in ((1, kv), (2, gpu)):
            points = agg[agg["users"] == users]
            if not points.empty:
                fig.add_trace(_line(points, "k", name, colour, legendgroup=name, showlegend=not shown),
                              row=1, col=col)
                shown = True
    total_mib = column(valid, "gpu_mem_total_mib").max()
    if pd.notna(total_mib) and not gpu.empty:
        fig.add_hline(y=float(total_mib), row=1, col=2, line={"color": "#c0392b", "dash": "dash", "width": 1},
                      annotation_text="GPU total", annotation_position="bottom left")
    fig = _layout(fig, k_axis(pd.concat([kv["k"], gpu["k"]])), "", subplots=True)
    fig.update_yaxes(title_text="% of KV blocks", row=1, col=1, rangemode="tozero")
    fig.update_yaxes(title_text="MiB", row=1, col=2, rangemode="tozero")
    return fig


def memory_vs_load(valid: pd.DataFrame, styles: dict[str, SettingStyle], load: LoadAxis) -> go.Figure | None:
    """KV-cache and GPU memory peaks against the load, one line per K: where a K's KV pool fills up as the load
    grows (at a rate the real batch is the server's, not the client's, so the load is the axis)."""
    kv = aggregate(valid.assign(kv_pct=column(valid, "kv_usage_peak") * 100.0), "kv_pct", ["setting", load.column])
    gpu = aggregate(valid, "gpu_mem_peak_mib", ["setting", load.column])
    if kv.empty and gpu.empty:
        return None
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.12,
                        subplot_titles=("KV-cache usage peak (%)", "GPU memory peak (MiB)"))
    for style in styles.values():
        shown = False
        for col, agg in ((1, kv), (2, gpu)):
            points = agg[agg["setting"] == style.setting]
            if not points.empty:
                fig.add_trace(_line(points, load.column, style.label, style.colour, legendgroup=style.setting,
                                    showlegend=not shown), row=1, col=col)
                shown = True
    total_mib = column(valid, "gpu_mem_total_mib").max()
    if pd.notna(total_mib) and not gpu.empty:
        fig.add_hline(y=float(total_mib), row=1, col=2, line={"color": "#c0392b", "dash": "dash", "width": 1},
                      annotation_text="GPU total", annotation_position="bottom left")
    fig = _layout(fig, load.axis(pd.concat([kv[load.column], gpu[load.column]])), "", subplots=True)
    fig.update_yaxes(title_text="% of KV blocks", row=1, col=1, rangemode="tozero")
    fig.update_yaxes(title_text="MiB", row=1, col=2, rangemode="tozero")
    return fig


def served_vs_rate(valid: pd.DataFrame, styles: dict[str, SettingStyle]) -> go.Figure | None:
    """Achieved requests/s (solid) and goodput (dashed: the arrivals meeting every SLO, per s) against the offered
    rate, per K, beside the arrivals offered in the windows (dotted): a K that falls behind bends off it."""
    achieved = aggregate(valid, "achieved_per_s", ["setting", "rate"])
    if achieved.empty:
        return None
    goodput = aggregate(valid, "goodput_per_s", ["setting", "rate"])
    fig = go.Figure()
    for style in styles.values():
        for agg, dash, name in ((achieved, "solid", style.label), (goodput, "dash", f"{style.label} goodput")):
            points = agg[agg["setting"] == style.setting]
            if not points.empty:
                fig.add_trace(_line(points, "rate", name, style.colour, dash=dash, legendgroup=style.setting))
    offered = aggregate(valid, "offered_per_s", ["rate"])
    if not offered.empty:
        fig.add_trace(go.Scatter(x=offered["rate"].to_numpy(), y=offered["median"].to_numpy(), mode="lines",
                                 name="offered (arrivals in the window)", hoverinfo="skip",
                                 line={"color": REFERENCE_COLOUR, "dash": "dot", "width": 1.5}))
    fig = _layout(fig, RATE.axis(achieved["rate"]), "requests/s")
    fig.update_yaxes(rangemode="tozero")
    return fig


def latency_vs_users(valid: pd.DataFrame, styles: dict[str, SettingStyle], load: LoadAxis = USERS) -> go.Figure | None:
    panels = (("ttft", "TTFT (ms)"), ("itl", "inter-token latency (ms)"), ("e2e", "end-to-end latency (ms)"))
    aggs = {(metric, p): aggregate(valid, f"{metric}_{p}_ms", ["setting", load.column])
            for metric, _ in panels for p in ("p50", "p99")}
    if all(agg.empty for agg in aggs.values()):
        return None
    fig = make_subplots(rows=1, cols=len(panels), horizontal_spacing=0.07,
                        subplot_titles=[title for _, title in panels])
    for col, (metric, _) in enumerate(panels, start=1):
        for style in styles.values():
            for p, dash in (("p50", "solid"), ("p99", "dash")):
                agg = aggs[(metric, p)]
                points = agg[agg["setting"] == style.setting]
                if not points.empty:
                    # One legend entry per K toggles its p50 and p99 lines in both panels.
                    trace_name = style.label if p == "p50" else f"{style.label} p99"
                    fig.add_trace(_line(points, load.column, trace_name, style.colour, dash=dash,
                                        legendgroup=style.setting, showlegend=(col == 1 and p == "p50")),
                                  row=1, col=col)
    levels = pd.concat([agg[load.column] for agg in aggs.values()])
    fig = _layout(fig, load.axis(levels), "ms", height_px=420, subplots=True)
    fig.update_yaxes(rangemode="tozero")
    return fig


def rate_charts(valid: pd.DataFrame, styles: dict[str, SettingStyle], max_num_seqs: int | None) -> list[dict]:
    """The same comparison against the offered rate, from the rate stages' rows: the latency-throughput curve."""
    note, load = "median over valid repeats; bars span min to max", RATE
    return [
        figure_entry("rate-output-tokens", "Output tokens/s vs offered rate", note,
                     per_setting_vs_users(valid, styles, "output_tok_per_s", "output tokens/s", load)),
        figure_entry("rate-requests", "Achieved requests/s and goodput vs offered rate",
                     note + "; solid achieved, dashed goodput (arrivals meeting every SLO per s); a K below the "
                     "dotted offered line falls behind", served_vs_rate(valid, styles)),
        figure_entry("rate-acceptance", "Speculative acceptance rate vs K, per offered rate",
                     note + "; K=0 drafts nothing", acceptance_vs_k(valid, load),
                     empty="no data: no speculative setting reported an acceptance rate"),
        figure_entry("rate-real-batch", "Real batch (server running sequences) vs offered rate", note,
                     real_batch_vs_users(valid, styles, max_num_seqs, load)),
        figure_entry("rate-memory", "KV-cache and GPU memory peaks vs offered rate", note,
                     memory_vs_load(valid, styles, load)),
        figure_entry("rate-latency", "Latency percentiles vs offered rate: TTFT, inter-token, end-to-end",
                     note + "; solid p50, dashed p99", latency_vs_users(valid, styles, load)),
    ]


def load_charts(users_rows: pd.DataFrame, rate_rows: pd.DataFrame, styles: dict[str, SettingStyle],
                max_num_seqs: int | None) -> list[dict]:
    """The users charts over the user stages' rows, then the rate charts over the rate stages' rows; a run of one
    kind only gets its own set (the other would be empty charts)."""
    charts = summary_charts(users_rows, styles, max_num_seqs) if not users_rows.empty or rate_rows.empty else []
    return charts + (rate_charts(rate_rows, styles, max_num_seqs) if not rate_rows.empty else [])


def summary_charts(valid: pd.DataFrame, styles: dict[str, SettingStyle], max_num_seqs: int | None) -> list[dict]:
    """The comparison charts, in the order the engineer reads them."""
    note = "median over valid repeats; bars span min to max"
    return [
        figure_entry("output-tokens", "Output tokens/s vs concurrency", note,
                     per_setting_vs_users(valid, styles, "output_tok_per_s", "output tokens/s")),
        figure_entry("requests", "Completed requests/s vs concurrency", note,
                     per_setting_vs_users(valid, styles, "req_per_s", "requests/s")),
        figure_entry("acceptance", "Speculative acceptance rate vs K", note + "; K=0 drafts nothing",
                     acceptance_vs_k(valid), empty="no data: no speculative setting reported an acceptance rate"),
        figure_entry("real-batch", "Real batch (server running sequences) vs concurrency",
                     note + "; below the dotted diagonal the server runs fewer sequences than clients send",
                     real_batch_vs_users(valid, styles, max_num_seqs)),
        figure_entry("memory", "KV-cache and GPU memory peaks vs K", note, memory_vs_k(valid)),
        figure_entry("latency", "Latency percentiles vs concurrency: TTFT, inter-token, end-to-end",
                     note + "; solid p50, dashed p99", latency_vs_users(valid, styles)),
    ]
