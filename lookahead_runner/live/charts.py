"""The live tabs' charts as data (pure): what each chart draws, and the one-second history as series.

The page's script (static/live_charts.js) draws them with plotly.js, the library the report uses,
served from the installed plotly package (no network). It asks `/lookahead/charts.json?after=T` every
two seconds and gets only what is newer than T (`chart_update`): a long session holds hours of ticks,
and the process answering also times the streams. Stage boundaries and preemptions are `Mark`s,
found as the ticks arrive (`marks_between`), and drawn on every chart (stages) or on the KV chart. A run
with rate stages gets one chart more: the offered against the achieved rate, with the server's waiting queue
and the requests outstanding (values.RateProgress).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from lookahead_runner.live.values import LiveValues


@dataclass(frozen=True)
class Series:
    column: str  # a key of `chart_point`
    name: str
    axis: str = "y"  # "y2": the chart's right-hand axis
    dash: str = "solid"
    shape: str = "linear"  # "hv": a step, for counts that jump (users)


@dataclass(frozen=True)
class Chart:
    key: str
    title: str
    y_title: str
    series: tuple[Series, ...]
    y2_title: str = ""
    y_max: float | None = None  # a fixed top (percentages); None: the data's
    preemptions: bool = False  # mark preemptions on this chart, at its first series' value
    rate_stages: bool = False  # drawn only for a run with rate stages (open loop)


CHARTS: tuple[Chart, ...] = (
    Chart("acceptance", "Acceptance (last 10 s)", "acceptance rate %",
          (Series("acceptance_pct", "acceptance rate %"),
           Series("mean_acceptance_length", "mean acceptance length", axis="y2", dash="dot")),
          y2_title="tokens per step", y_max=100.0),
    Chart("batch", "Real batch vs Locust users", "requests",
          (Series("running", "running"), Series("waiting", "waiting"),
           Series("locust_users", "Locust users", dash="dash", shape="hv"))),
    Chart("kv", "KV cache usage (x: preemptions)", "% of KV cache",
          (Series("kv_usage_pct", "KV usage %"),), y_max=100.0, preemptions=True),
    Chart("throughput", "Generation throughput (last 10 s)", "tokens/s",
          (Series("generation_tokens_per_s", "generation tok/s"),)),
    Chart("gpu", "GPU memory", "MiB",
          (Series("gpu_used_mib", "used"), Series("gpu_total_mib", "total", dash="dash"))),
    Chart("rate", "Rate stage: offered vs achieved (last 10 s), and the queue", "requests/s",
          (Series("offered_per_s", "offered req/s", dash="dash"), Series("achieved_per_s", "achieved req/s"),
           Series("waiting", "server waiting", axis="y2", dash="dot"),
           Series("outstanding", "outstanding (client)", axis="y2", dash="dashdot")),
          y2_title="requests queued", rate_stages=True),
)

CHART_COLUMNS = ("t_s", "acceptance_pct", "mean_acceptance_length", "running", "waiting", "locust_users",
                 "kv_usage_pct", "generation_tokens_per_s", "gpu_used_mib", "gpu_total_mib", "offered_per_s",
                 "achieved_per_s", "outstanding")


def _known(value: float | None, scale: float = 1.0) -> float | None:
    """None for unknown (JSON null: a gap in the line); NaN never reaches JSON."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return round(value * scale, 4)


def chart_point(values: LiveValues) -> tuple[float | None, ...]:
    """One tick as the values of CHART_COLUMNS; t_s unrounded: the page asks for what is newer than it."""
    v = values
    return (v.t_s, _known(v.acceptance_rate, 100.0), _known(v.mean_acceptance_length), _known(v.running),
            _known(v.waiting), _known(v.locust_users), _known(v.kv_usage, 100.0), _known(v.generation_tokens_per_s),
            _known(v.gpu_used_mib), _known(v.gpu_total_mib), _known(v.offered_per_s), _known(v.achieved_per_s),
            _known(v.outstanding))


@dataclass(frozen=True, slots=True)
class Mark:
    kind: str  # "stage" (a stage began) or "preemptions" (the counter grew since the previous tick)
    t_s: float
    label: str
    value: float | None = None  # preemptions: the KV usage % then, where the mark sits


def marks_between(previous: LiveValues | None, current: LiveValues) -> list[Mark]:
    """What happened between two ticks: a stage that began, preemptions that occurred."""
    marks = []
    stage = current.stage
    if stage.index is not None and (previous is None or previous.stage.index != stage.index):
        marks.append(Mark("stage", current.t_s, f"stage {stage.index + 1}: {stage.load}"
                          + (f", {stage.variant}" if stage.variant else "")))
    before = None if previous is None else previous.preemptions_total
    now = current.preemptions_total
    if before is not None and now is not None and now > before:
        count = int(now - before)
        marks.append(Mark("preemptions", current.t_s, f"{count} preemption{'s' * (count != 1)}",
                          _known(current.kv_usage, 100.0)))
    return marks


def chart_specs(rate_stages: bool = False) -> list[dict]:
    """The charts the page draws: the rate stage's only where the stages have one."""
    return [asdict(chart) for chart in CHARTS if rate_stages or not chart.rate_stages]


def chart_update(history: Sequence[LiveValues], marks: Sequence[Mark], after_t_s: float, session: str,
                 setting: str) -> dict:
    """The charts' JSON: the ticks and marks newer than `after_t_s`, as columns, with the setting.

    `session` changes when the history restarts (Locust's Reset Stats): the page then drops what it holds.
    """
    newer = []
    for values in reversed(history):  # newest first: a poll reads only its last two seconds
        if values.t_s <= after_t_s:
            break
        newer.append(chart_point(values))
    newer.reverse()
    new_marks = []
    for mark in reversed(marks):
        if mark.t_s <= after_t_s:
            break
        new_marks.append(asdict(mark))
    new_marks.reverse()
    return {
        "session": session,
        "setting": setting,
        "columns": {name: [point[i] for point in newer] for i, name in enumerate(CHART_COLUMNS)},
        "marks": new_marks,
    }
