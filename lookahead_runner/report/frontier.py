"""The report's frontier: output tokens/s per GPU against tokens/s per user, one line per K over every stage of
either kind (the points: runfolder/frontier.py), the recommended point marked and the SLO drawn.

The chart the field reads (InferenceMAX's throughput per GPU against interactivity, 1000 / median TPOT; vLLM's
`vllm bench sweep plot_pareto` draws the same frontier with output throughput / concurrency as tokens/s per
user): up and to the right is better, and speculation moves
a K's line right (each user sees tokens sooner) at a cost up (fewer tokens per GPU) or not. The recommended point
comes from the verdict as inputs (`FrontierMark`: its K and the target it was decided at, a users count or a
rate), so a verdict at a users stage, at a target rate or a ramp's knee marks it alike. A TPOT SLO is a vertical
line at 1000 / TPOT ms: a point left of it has a median TPOT over the limit, so the SLO's percentile is broken
there too (a point right of it can still break a p99; the rate-stages table gives the attainment). Pure: points
and the verdict's figures in, chart entries and display rows out (the template escapes them; plot text is
escaped by charts.plot_text).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import plotly.graph_objects as go

from ..config.slo import Slo
from ..decision.schema import Decision
from ..runfolder.frontier import RATE, USERS, FrontierPoint
from .charts import PALETTE, REFERENCE_COLOUR, TEMPLATE, SettingStyle, figure_entry, plot_text

SLO_COLOUR = "#c0392b"
MARK_COLOUR = "#111111"
X_TITLE = "tokens/s per user (1000 / median TPOT ms)"
Y_TITLE = "output tokens/s per GPU"
Y_TITLE_PER_SERVER = "output tokens/s per server life (its GPUs not known)"
UNKNOWN_GPUS = ("the GPUs of a server life are not known here (a running server, server.url, or "
                "cluster.gpus_per_life = 0): those points are output tokens/s per server life")
NOTE = ("one point per K and stage, user and rate stages alike (circles: users, diamonds: a rate; open: the K fell "
        "behind that rate); median over valid repeats; up and to the right is better; the grey dotted line is the "
        "Pareto frontier over every K")


@dataclass(frozen=True)
class FrontierMark:
    """What the verdict recommends, and where: its K (and setting, with a grid) at a users count or a rate."""

    k: int | None = None
    setting: str = ""
    users: int | None = None
    rate: float | None = None

    @classmethod
    def of(cls, decision: Decision) -> "FrontierMark":
        """From a verdict of any kind: the users stage it was decided at, the rate it was decided at (a target
        rate, or a rate ramp's knee) where it has one."""
        chosen = decision.recommended
        knee = decision.rate_knee
        rate = knee.rate if knee is not None else getattr(decision, "target_rate", None)  # issue 37 item 3's
        return cls(k=None if chosen is None else chosen.k, setting="" if chosen is None else chosen.setting,
                   users=decision.target_users or None, rate=rate)


def recommended_point(points: Sequence[FrontierPoint], mark: FrontierMark) -> FrontierPoint | None:
    """The recommended K's point at the verdict's target: a rate's where it names a rate, else a users count's;
    the stage nearest the target where none is at it exactly. None without a recommendation or its points."""
    if mark.k is None or (mark.rate is None and mark.users is None):
        return None
    kind, target = (RATE, float(mark.rate)) if mark.rate is not None else (USERS, float(mark.users))
    mine = [p for p in points if p.k == mark.k and p.kind == kind and (not mark.setting or p.setting == mark.setting)]
    if not mine:
        return None
    return min(mine, key=lambda p: (abs(p.load - target), p.load))


def slo_lines(slos: Sequence[Slo]) -> list[tuple[float, str]]:
    """(x, label) of each TPOT SLO: tokens/s per user = 1000 / its limit in ms."""
    return [(1000.0 / slo.max_ms, f"{slo.text()}: {1000.0 / slo.max_ms:.1f} tok/s per user")
            for slo in slos if slo.metric == "tpot"]


def not_drawn(slos: Sequence[Slo]) -> list[str]:
    """The SLOs this chart's axes cannot show (TTFT, ITL, e2e)."""
    return [slo.text() for slo in slos if slo.metric != "tpot"]


def pareto(points: Sequence[FrontierPoint]) -> list[FrontierPoint]:
    """The points no other point beats on both axes (vLLM's plot_pareto rule), by rising tokens/s per user."""
    best, front = float("-inf"), []
    for point in sorted(points, key=lambda p: (-p.tokens_per_s_per_user, -p.tokens_per_s_per_gpu)):
        if point.tokens_per_s_per_gpu >= best:
            front.append(point)
            best = point.tokens_per_s_per_gpu
    return front[::-1]


def _hover(point: FrontierPoint, label: str) -> str:
    behind = " (fell behind)" if not point.keeps_up else " (keeping up not judged: stage too short)" \
        if point.too_short else ""
    return plot_text(f"{label} · {point.stage_text}{behind}: {point.tokens_per_s_per_gpu:,.0f} tok/s per GPU, "
                     f"{point.tokens_per_s_per_user:.1f} tok/s per user (TPOT p50 {point.tpot_p50_ms:.1f} ms); "
                     f"{point.repeats} repeat{'s' if point.repeats != 1 else ''}, {_gpus_text(point)}")


def _gpus_text(point: FrontierPoint) -> str:
    return "GPUs not known" if not point.gpus else f"{point.gpus} GPU{'s' if point.gpus != 1 else ''}"


def _symbol(point: FrontierPoint) -> str:
    shape = "diamond" if point.kind == RATE else "circle"
    return shape if point.keeps_up else f"{shape}-open"


def frontier_figure(points: Sequence[FrontierPoint], styles: Mapping[str, SettingStyle], mark: FrontierMark,
                    slos: Sequence[Slo]) -> go.Figure | None:
    """One line per setting (K) through its points by rising tokens/s per user, the Pareto frontier over them
    all, the recommended point and each TPOT SLO's line."""
    if not points:
        return None
    fig = go.Figure()
    settings = sorted({p.setting for p in points}, key=lambda s: (styles[s].k if s in styles else 0, s))
    for index, setting in enumerate(settings):
        mine = sorted((p for p in points if p.setting == setting), key=lambda p: p.tokens_per_s_per_user)
        style = styles.get(setting) or SettingStyle(setting, mine[0].k, f"K={mine[0].k}",
                                                    PALETTE[index % len(PALETTE)])
        fig.add_trace(go.Scatter(
            x=[p.tokens_per_s_per_user for p in mine], y=[p.tokens_per_s_per_gpu for p in mine],
            name=plot_text(style.label), mode="lines+markers", line={"color": style.colour, "width": 2},
            marker={"size": 9, "symbol": [_symbol(p) for p in mine], "color": style.colour},
            text=[_hover(p, style.label) for p in mine], hovertemplate="%{text}<extra></extra>"))
    front = pareto(points)
    if len(front) > 1:
        fig.add_trace(go.Scatter(x=[p.tokens_per_s_per_user for p in front], y=[p.tokens_per_s_per_gpu for p in front],
                                 name="Pareto frontier (all K)", mode="lines", hoverinfo="skip",
                                 line={"color": REFERENCE_COLOUR, "dash": "dot", "width": 1.5}))
    chosen = recommended_point(points, mark)
    if chosen is not None:
        fig.add_trace(go.Scatter(
            x=[chosen.tokens_per_s_per_user], y=[chosen.tokens_per_s_per_gpu], mode="markers",
            name=plot_text(f"recommended: K={chosen.k} at {chosen.stage_text}"),
            marker={"symbol": "star", "size": 18, "color": "rgba(0,0,0,0)", "line": {"color": MARK_COLOUR, "width": 2}},
            text=[_hover(chosen, f"recommended K={chosen.k}")], hovertemplate="%{text}<extra></extra>"))
    for x, label in slo_lines(slos):
        fig.add_vline(x=x, line={"color": SLO_COLOUR, "dash": "dash", "width": 1.5},
                      annotation_text=plot_text(label), annotation_position="top right",
                      annotation_font={"color": SLO_COLOUR, "size": 11})
    fig.update_layout(template=TEMPLATE, height=440)
    fig.update_xaxes(title_text=X_TITLE)
    fig.update_yaxes(title_text=Y_TITLE_PER_SERVER if all(not p.gpus for p in points) else Y_TITLE,
                     rangemode="tozero")
    return fig


def frontier_note(mark: FrontierMark, points: Sequence[FrontierPoint], slos: Sequence[Slo]) -> str:
    note = NOTE
    chosen = recommended_point(points, mark)
    if chosen is not None:
        note += f"; the star: the recommended K={chosen.k} at {chosen.stage_text}"
    elif mark.k is None:
        note += "; no recommendation: no point marked"
    lines = slo_lines(slos)
    if lines:
        note += "; dashed red: the TPOT SLO (left of it the median TPOT is over the limit)"
    if others := not_drawn(slos):
        note += f"; not drawable on these axes: {', '.join(others)}"
    if any(not p.gpus for p in points):
        note += f"; {UNKNOWN_GPUS}"
    return note


def frontier_entry(points: Sequence[FrontierPoint], styles: Mapping[str, SettingStyle], decision: Decision,
                   slos: Sequence[Slo], suffix: str = "", title_suffix: str = "") -> dict:
    """The frontier's chart entry for one decision (the sweep's, or one workload variant's with its points)."""
    mark = FrontierMark.of(decision)
    return figure_entry(f"frontier{suffix}", f"Throughput per GPU vs tokens/s per user{title_suffix}",
                        frontier_note(mark, points, slos), frontier_figure(points, styles, mark, slos),
                        empty="no data: no valid window with a TPOT measured")


def frontier_charts(points: Sequence[FrontierPoint], styles: Mapping[str, SettingStyle], decision: Decision,
                    slos: Sequence[Slo]) -> list[dict]:
    """The frontier; with workload variants one per variant, each with that variant's verdict and points."""
    if not decision.by_variant:
        return [frontier_entry(points, styles, decision, slos)]
    return [frontier_entry([p for p in points if p.variant == d.variant], styles, d, slos, f"-v{i}", f" · {d.variant}")
            for i, d in enumerate(decision.by_variant)]


def frontier_rows(points: Sequence[FrontierPoint], styles: Mapping[str, SettingStyle]) -> list[dict]:
    """The chart's points as a table: K, stage, both axes, TPOT, GPUs, repeats."""
    rows = []
    for p in sorted(points, key=lambda p: (p.variant, p.k, p.setting, p.kind != USERS, p.load)):
        style = styles.get(p.setting)
        rows.append({"k": style.label if style else f"K={p.k}", "variant": p.variant, "stage": p.stage_text,
                     "per_gpu": f"{p.tokens_per_s_per_gpu:,.1f}", "per_user": f"{p.tokens_per_s_per_user:.2f}",
                     "tpot": f"{p.tpot_p50_ms:.1f}", "gpus": str(p.gpus) if p.gpus else "not known",
                     "repeats": str(p.repeats),
                     "keeps_up": "" if p.kind == USERS else ("no" if not p.keeps_up else
                                                             f"cannot tell: {p.too_short}" if p.too_short else "yes")})
    return rows
