"""The report's frontier (report/frontier.py): one line per K, the recommended point at the verdict's target
(users or a rate), the TPOT SLO as a vertical line at 1000 / TPOT ms, the Pareto frontier, escaped labels."""
from __future__ import annotations

import json

import pytest

from lookahead_runner.config.slo import parse_slos
from lookahead_runner.decision.schema import Decision, RateKnee, Recommended
from lookahead_runner.report.charts import SettingStyle
from lookahead_runner.report.frontier import (FrontierMark, frontier_charts, frontier_figure, frontier_rows, pareto,
                                              recommended_point, slo_lines)
from lookahead_runner.runfolder.frontier import RATE, USERS, FrontierPoint


def point(k: int, kind: str, load: float, per_gpu: float, tpot_ms: float, setting: str = "", **extra) -> FrontierPoint:
    return FrontierPoint(setting=setting or f"k{k}", k=k, kind=kind, load=load, tokens_per_s_per_gpu=per_gpu,
                         tokens_per_s_per_user=1000.0 / tpot_ms, tpot_p50_ms=tpot_ms, gpus=1, repeats=2, **extra)


POINTS = [point(0, USERS, 8, 300, 20), point(0, USERS, 64, 1100, 50), point(0, RATE, 4, 200, 18),
          point(0, RATE, 16, 700, 40), point(4, USERS, 8, 320, 10), point(4, USERS, 64, 1000, 30),
          point(4, RATE, 4, 210, 9), point(4, RATE, 16, 760, 25, keeps_up=False)]
STYLES = {"k0": SettingStyle("k0", 0, "K=0", "#4e79a7"), "k4": SettingStyle("k4", 4, "K=4", "#f28e2b")}


def test_the_recommended_point_is_the_recommended_k_at_the_verdicts_target_of_either_kind():
    at_users = recommended_point(POINTS, FrontierMark(k=4, users=64))
    assert (at_users.k, at_users.kind, at_users.load) == (4, USERS, 64)
    at_rate = recommended_point(POINTS, FrontierMark(k=0, users=64, rate=16.0))  # a rate verdict names its rate
    assert (at_rate.k, at_rate.kind, at_rate.load) == (0, RATE, 16)
    nearest = recommended_point(POINTS, FrontierMark(k=4, rate=5.0))   # not a stage: the nearest rate stage
    assert (nearest.kind, nearest.load) == (RATE, 4)
    assert recommended_point(POINTS, FrontierMark(k=None, users=64)) is None       # not decided: nothing marked
    assert recommended_point(POINTS, FrontierMark(k=8, users=64)) is None           # its K has no point
    assert recommended_point(POINTS, FrontierMark(k=4, setting="other", users=64)) is None  # a grid's other value


def test_the_mark_comes_from_a_verdict_at_users_or_a_rate_ramps_knee():
    chosen = Recommended(k=4, setting="k4", argv=[])
    sweep = Decision(status="decided", verdict="Set K=4 at 64 users", target_users=64, recommended=chosen)
    assert FrontierMark.of(sweep) == FrontierMark(k=4, setting="k4", users=64, rate=None)
    ramp = Decision(status="decided", verdict="knee", mode="ramp", recommended=chosen,
                    rate_knee=RateKnee(k=4, rate=8.0, next_rate=16.0))
    assert FrontierMark.of(ramp) == FrontierMark(k=4, setting="k4", users=None, rate=8.0)
    undecided = Decision(status="not_decided", verdict="Not decided", target_users=64)
    assert FrontierMark.of(undecided).k is None


def test_a_tpot_slo_is_a_vertical_line_at_1000_over_its_limit_and_other_slos_are_named_not_drawn():
    slos = parse_slos((("tpot_p99_ms", 40.0), ("ttft_p99_ms", 500.0)))
    assert slo_lines(slos) == [(25.0, "TPOT p99 <= 40 ms: 25.0 tok/s per user")]
    fig = frontier_figure(POINTS, STYLES, FrontierMark(k=4, users=64), slos)
    (line,) = [shape for shape in fig.layout.shapes if shape.type == "line"]
    assert (line.x0, line.x1, line.yref) == (25.0, 25.0, "y domain")
    (entry,) = frontier_charts(POINTS, STYLES, Decision(status="decided", verdict="v", target_users=64,
                                                        recommended=Recommended(k=4, setting="k4", argv=[])), slos)
    assert "not drawable on these axes: TTFT p99 <= 500 ms" in entry["note"]
    assert "the star: the recommended K=4 at 64 users" in entry["note"]


def test_one_line_per_k_by_rising_tokens_per_user_the_star_and_the_pareto_frontier():
    fig = frontier_figure(POINTS, STYLES, FrontierMark(k=4, rate=16.0), ())
    by_name = {trace.name: trace for trace in fig.data}
    k4 = by_name["K=4"]
    assert list(k4.x) == sorted(k4.x) and len(k4.x) == 4
    assert list(k4.y) == [1000, 760, 320, 210]    # by rising tokens/s per user: 33.3, 40, 100, 111.1
    # circles for users stages, diamonds for rates; open where the K fell behind the rate
    assert list(k4.marker.symbol) == ["circle", "diamond-open", "circle", "diamond"]
    star = by_name["recommended: K=4 at 16 req/s"]
    assert (star.x[0], star.y[0], star.marker.symbol) == (40.0, 760, "star")
    front = by_name["Pareto frontier (all K)"]
    # K=4 is better at every speed per user but the slowest: there K=0 (64 users, TPOT 50 ms) serves the most per GPU
    assert [(round(x, 1), y) for x, y in zip(front.x, front.y)] == [(20.0, 1100), (33.3, 1000), (40.0, 760),
                                                                    (100.0, 320), (111.1, 210)]
    assert pareto([]) == [] and frontier_figure([], STYLES, FrontierMark(), ()) is None


def test_labels_are_escaped_and_the_points_table_is_display_text():
    hostile = 'k4"><img src=x onerror=alert(1)>'
    points = [point(4, USERS, 8, 320, 10, setting=hostile), point(4, USERS, 64, 1000, 30, setting=hostile)]
    styles = {hostile: SettingStyle(hostile, 4, f"K=4 ({hostile})", "#f28e2b")}
    (entry,) = frontier_charts(points, styles, Decision(status="not_decided", verdict="v"), ())
    assert "<img" not in entry["figure_json"] and "no recommendation: no point marked" in entry["note"]
    assert json.loads(entry["figure_json"])["data"][0]["name"].startswith("K=4 (k4&quot;&gt;&lt;img")
    rows = frontier_rows(points, styles)
    assert [row["stage"] for row in rows] == ["8 users", "64 users"]
    assert rows[0] | {"k": ""} == {"k": "", "variant": "", "stage": "8 users", "per_gpu": "320.0", "per_user": "100.00",
                                   "tpot": "10.0", "gpus": "1", "repeats": "2", "keeps_up": ""}


def test_points_whose_gpus_are_not_known_are_per_server_life_and_say_so():
    points = [FrontierPoint(**{**vars(p), "gpus": 0}) for p in POINTS[:2]]
    (entry,) = frontier_charts(points, STYLES, Decision(status="not_decided", verdict="v"), ())
    figure = json.loads(entry["figure_json"])
    assert figure["layout"]["yaxis"]["title"]["text"] == "output tokens/s per server life (its GPUs not known)"
    assert "GPUs not known" in figure["data"][0]["text"][0] and "server.url" in entry["note"]
    assert {row["gpus"] for row in frontier_rows(points, STYLES)} == {"not known"}
    known = frontier_figure(POINTS, STYLES, FrontierMark(), ())
    assert known.layout.yaxis.title.text == "output tokens/s per GPU"


@pytest.mark.parametrize("variants", [("short", "long")])
def test_with_workload_variants_one_frontier_each_with_its_own_verdicts_mark(variants):
    points = [point(0, USERS, 8, 300, 20, variant=variants[0]), point(4, USERS, 8, 350, 10, variant=variants[1])]
    parts = [Decision(status="decided", verdict="v", variant=name, target_users=8,
                      recommended=Recommended(k=k, setting=f"k{k}", argv=[])) for name, k in zip(variants, (0, 4))]
    decision = Decision(status="decided", verdict="v", by_variant=parts)
    charts = frontier_charts(points, STYLES, decision, ())
    assert [c["id"] for c in charts] == ["frontier-v0", "frontier-v1"]
    assert [c["title"].rsplit(" · ", 1)[1] for c in charts] == list(variants)
    assert "recommended K=0 at 8 users" in charts[0]["note"] and "recommended K=4 at 8 users" in charts[1]["note"]


def test_a_rate_point_whose_stage_was_too_short_to_tell_says_so_not_that_it_kept_up():
    short = "stage too short for answers of 25 s; lengthen to 50 s"
    (row,) = frontier_rows([point(4, RATE, 4, 210, 9, too_short=short)], STYLES)
    assert row["keeps_up"] == f"cannot tell: {short}"
    (entry,) = frontier_charts([point(4, RATE, 4, 210, 9, too_short=short), point(4, RATE, 8, 400, 12)], STYLES,
                               Decision(status="not_decided", verdict="v"), ())
    texts = json.loads(entry["figure_json"])["data"][0]["text"]
    assert sum("4 req/s (keeping up not judged: stage too short)" in text for text in texts) == 1
