"""The report's performance-model section: predicted against measured req/s per K (plotly, offline like every
chart), the held-out predictions with their errors, and what the model says when it is trusted. Pure:
decision.json's `performance_model` in, plain values for the template out (the template escapes them)."""
from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from ..decision.schema import Decision
from ..decision.explanation.text import pct, rate
from .charts import PALETTE, _layout, figure_entry, plot_text, users_axis

BAND_ALPHA = "33"   # hex alpha of an interval band


def _colour(k: int) -> str:
    return PALETTE[k % len(PALETTE)]


def predicted_vs_measured(decision: Decision) -> go.Figure | None:
    m = decision.performance_model
    if m is None or not m.curves:
        return None
    fig = go.Figure()
    for curve in m.curves:
        users = [p.users for p in curve.points]
        colour, shown = _colour(curve.k), True if curve.measured_k else "legendonly"
        if curve.measured_k:
            fig.add_trace(go.Scatter(
                x=users + users[::-1], y=[p.requests_per_s_high for p in curve.points]
                + [p.requests_per_s_low for p in curve.points][::-1], fill="toself", fillcolor=colour + BAND_ALPHA,
                line={"width": 0}, hoverinfo="skip", showlegend=False, legendgroup=f"k{curve.k}"))
        fig.add_trace(go.Scatter(
            x=users, y=[p.requests_per_s for p in curve.points], mode="lines", visible=shown,
            name=plot_text(f"K={curve.k} predicted" + ("" if curve.measured_k else " (not measured)")),
            line={"color": colour, "dash": "solid" if curve.measured_k else "dot"}, legendgroup=f"k{curve.k}",
            hovertemplate="%{x} users: %{y:.3g} req/s predicted<extra>%{fullData.name}</extra>"))
    for k in sorted({c.k for c in decision.cells}):
        cells = sorted((c for c in decision.cells if c.k == k), key=lambda c: c.users)
        fig.add_trace(go.Scatter(
            x=[c.users for c in cells], y=[c.req_per_s for c in cells], mode="markers",
            name=plot_text(f"K={k} measured"),
            marker={"color": _colour(k), "size": 9, "symbol": "circle-open", "line": {"width": 2}},
            legendgroup=f"k{k}", hovertemplate="%{x} users: %{y:.3g} req/s measured<extra>%{fullData.name}</extra>"))
    return _layout(fig, users_axis(pd.Series([p.users for p in m.curves[0].points])), "requests/s")


def model_view(decision: Decision) -> dict | None:
    m = decision.performance_model
    if m is None:
        return None
    production = m.production
    return {
        "trusted": m.trusted, "status": "trusted" if m.trusted else "not trusted", "reason": m.reason,
        "bound": pct(m.error_bound), "acceptance_source": m.acceptance_source,
        "production": production.statement if production else "",
        "schedule_note": m.schedule_note, "diagnosis": m.diagnosis,
        "tokens_per_step": ", ".join(f"K={k}: {v:.2f}" for k, v in m.tokens_per_step.items()),
        "kv_limits": ", ".join(f"K={k}: {v:.0f}" for k, v in m.kv_batch_limit.items()),
        "preemptions": ", ".join(f"K={k}: from {u} users" for k, u in m.preemptions_from_users.items() if u),
        "held_out": [{"scheme": "stage left out" if h.scheme == "stage" else "K left out", "k": h.k, "users": h.users,
                      "predicted": rate(h.predicted_requests_per_s), "measured": rate(h.measured_requests_per_s),
                      "error": pct(h.error, signed=True, digits=1), "over": abs(h.error) > m.error_bound}
                     for h in m.held_out],
        "chart": figure_entry("perf-model-chart", "Predicted against measured requests/s",
                              "lines: the model fitted on every window, bands its 95 % interval; circles: measured "
                              "cells; dotted K were not measured (click the legend)", predicted_vs_measured(decision)),
    }
