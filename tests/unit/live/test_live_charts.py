"""The live tabs' charts as data (live/charts.py), pure: series per tick, stage and preemption marks, incremental updates."""

from __future__ import annotations

import json
import math

from lookahead_runner.live.charts import (
    CHART_COLUMNS,
    CHARTS,
    Mark,
    chart_point,
    chart_specs,
    chart_update,
    marks_between,
)
from lookahead_runner.live.values import LiveValues, StageNow


def _tick(t_s: float, stage: int | None = 0, users: int = 4, preemptions: float | None = 0.0, **values) -> LiveValues:
    stage_now = StageNow("running", stage, users, 2, 1.0, 10.0) if stage is not None else StageNow("ready")
    return LiveValues(t_s=t_s, setting="k4/r1", stage=stage_now, preemptions_total=preemptions, **values)


def test_every_series_of_every_chart_is_a_column_of_the_ticks():
    columns = set(CHART_COLUMNS)
    for chart in CHARTS:
        assert {series.column for series in chart.series} <= columns, chart.key
    assert {chart.key for chart in CHARTS} == {"acceptance", "batch", "kv", "throughput", "gpu", "rate"}
    # the rate stage's chart only for stages with a rate stage
    assert [chart["key"] for chart in json.loads(json.dumps(chart_specs()))] == [
        chart.key for chart in CHARTS if chart.key != "rate"]
    assert [chart["key"] for chart in chart_specs(rate_stages=True)] == [chart.key for chart in CHARTS]


def test_a_tick_becomes_percentages_counts_and_gaps_for_what_is_unknown():
    point = dict(zip(CHART_COLUMNS, chart_point(_tick(
        100.25, acceptance_rate=0.625, mean_acceptance_length=3.5, running=12.0, waiting=3.0, locust_users=16,
        kv_usage=0.875, generation_tokens_per_s=812.5, gpu_used_mib=61_000.0, gpu_total_mib=None))))
    assert point == {"t_s": 100.25, "acceptance_pct": 62.5, "mean_acceptance_length": 3.5, "running": 12.0,
                     "waiting": 3.0, "locust_users": 16, "kv_usage_pct": 87.5, "generation_tokens_per_s": 812.5,
                     "gpu_used_mib": 61_000.0, "gpu_total_mib": None, "offered_per_s": None, "achieved_per_s": None,
                     "outstanding": None}
    nan = chart_point(_tick(1.0, kv_usage=float("nan")))
    assert nan[CHART_COLUMNS.index("kv_usage_pct")] is None  # NaN would not be JSON


def test_a_stage_that_begins_is_marked_once_with_its_users():
    first = _tick(10.0, stage=0, users=4)
    assert marks_between(None, first) == [Mark("stage", 10.0, "stage 1: 4 users")]
    assert marks_between(first, _tick(11.0, stage=0, users=4)) == []
    assert marks_between(_tick(11.0), _tick(12.0, stage=1, users=32)) == [Mark("stage", 12.0, "stage 2: 32 users")]
    assert marks_between(None, _tick(1.0, stage=None)) == []  # before the shape's first tick


def test_preemptions_are_marked_where_the_counter_grew_at_the_kv_usage_then():
    marks = marks_between(_tick(20.0, preemptions=5.0), _tick(21.0, preemptions=8.0, kv_usage=0.97))
    assert marks == [Mark("preemptions", 21.0, "3 preemptions", 97.0)]
    assert marks_between(_tick(21.0, preemptions=8.0), _tick(22.0, preemptions=8.0)) == []
    assert marks_between(_tick(21.0, preemptions=None), _tick(22.0, preemptions=9.0)) == []  # no base: unknown
    assert marks_between(_tick(21.0, preemptions=8.0), _tick(22.0, preemptions=9.0))[0].label == "1 preemption"


def test_the_page_polling_with_the_last_time_it_got_receives_each_tick_and_mark_once():
    """The page sends back the last t_s it got (JSON numbers round-trip exactly): nothing repeats, nothing is lost."""
    history, marks, received_t, received_marks = [], [], [], []
    after = 0.0
    t_s = 1_796_044_341.2012508  # a clock with more digits than a rounding would keep
    for tick in range(12):
        previous = history[-1] if history else None
        values = _tick(t_s + tick * 1.0003, stage=tick // 6, users=4 * (1 + tick // 6), preemptions=float(tick // 3))
        history.append(values)
        marks.extend(marks_between(previous, values))
        if tick % 2:  # the page asks every two ticks
            update = json.loads(json.dumps(chart_update(history, marks, after, "s1", "k4/r1")))
            received_t += update["columns"]["t_s"]
            received_marks += update["marks"]
            after = update["columns"]["t_s"][-1]
            assert set(update["columns"]) == set(CHART_COLUMNS) and update["setting"] == "k4/r1"
    assert received_t == [v.t_s for v in history]
    assert [m["label"] for m in received_marks] == [m.label for m in marks]
    assert [m["kind"] for m in received_marks].count("stage") == 2


def test_an_update_with_nothing_new_is_empty_and_keeps_the_session():
    history = [_tick(1.0), _tick(2.0)]
    update = chart_update(history, [], 2.0, "abc", "k4/r1")
    assert update == {"session": "abc", "setting": "k4/r1", "columns": {name: [] for name in CHART_COLUMNS},
                      "marks": []}
    everything = chart_update(history, [], 0.0, "abc", "k4/r1")
    assert everything["columns"]["t_s"] == [1.0, 2.0]
    assert not any(isinstance(v, float) and math.isnan(v) for column in everything["columns"].values() for v in column)
