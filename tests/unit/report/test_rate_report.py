"""The report of a rate sweep (issue 46): its charts, decision rows, evidence and timelines read the offered rate.

The run folder is a recorded one (tests/fixtures/rate-sweep-sim/: the simulator's tight-kv scenario, K 0 / 4,
rate stages 12 / 36 / 48 req/s of 20 s, 2 repeats, decision.target_rate 36, TTFT p99 <= 1000 ms): 12 valid rate
windows, K=4's acceptance 0.58-0.60 at every rate, K=0 falling behind at 48 req/s. Before issue 46 its report
said "no data" in six charts, "no per-stage result", "no valid window" and labelled every band "0 users".
"""
from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pandas as pd
import pytest

from lookahead_runner.decision.schema import Decision
from lookahead_runner.report import build_view, write_report
from lookahead_runner.report.timelines import timeline_figure
from lookahead_runner.runfolder.plan import LifeResult, RunRecord, read_plan, read_status

from .test_report import ESCAPED, HOSTILE, _strip_plotly_js, make_decision, make_plan, make_summary

RATES = (12.0, 36.0, 48.0)


def recorded(fixtures_dir: Path) -> tuple[pd.DataFrame, Decision, RunRecord, dict]:
    folder = fixtures_dir.parent / "rate-sweep-sim"
    plan = read_plan(folder)
    lives = [LifeResult(planned=p, status=read_status(folder / p.dir)) for p in plan.lives]
    timelines = {p.dir: {"stages": pd.read_csv(folder / p.dir / "stages.csv"),
                         "server": pd.read_csv(folder / p.dir / "server_metrics.csv"),
                         "gpu": pd.read_csv(folder / p.dir / "gpu.csv")} for p in plan.lives}
    decision = Decision.model_validate_json((folder / "decision.json").read_text(encoding="utf-8"))
    return pd.read_csv(folder / "summary.csv"), decision, RunRecord(plan=plan, lives=lives), timelines


@pytest.fixture()
def run(fixtures_dir):
    return recorded(fixtures_dir)


def _figure(view: dict, chart_id: str) -> dict:
    entry = next(c for c in view["charts"] if c["id"] == chart_id)
    assert entry["figure_json"] is not None, f"{chart_id}: {entry['empty']}"
    return json.loads(entry["figure_json"])


def _values(array) -> list[float]:
    """A trace's x or y as numbers: plotly writes numpy arrays in its typed form."""
    if isinstance(array, dict):
        import base64

        import numpy as np

        return np.frombuffer(base64.b64decode(array["bdata"]), dtype=np.dtype(array["dtype"])).tolist()
    return list(array)


def test_no_chart_of_a_rate_sweep_is_empty(run):
    view = build_view(*run)
    assert view["charts"] and all(c["figure_json"] for c in view["charts"]), \
        [c["title"] for c in view["charts"] if not c["figure_json"]]


def test_acceptance_vs_k_is_drawn_at_each_rate(run):
    summary = run[0]
    figure = _figure(build_view(*run), "rate-acceptance")
    by_name = {t["name"]: t for t in figure["data"]}
    assert sorted(by_name) == ["12 req/s", "36 req/s", "48 req/s"]
    for rate in RATES:
        trace = by_name[f"{rate:g} req/s"]
        measured = summary[(summary["k"] == 4) & (summary["rate"] == rate)]["acceptance_rate"]
        assert _values(trace["x"]) == [4] and _values(trace["y"]) == [pytest.approx(measured.median())]
        assert 0.58 <= _values(trace["y"])[0] <= 0.60


def test_latency_throughput_batch_and_kv_are_against_the_offered_rate(run):
    summary = run[0]
    view = build_view(*run)
    for chart_id in ("rate-output-tokens", "rate-requests", "rate-real-batch", "rate-memory", "rate-latency"):
        figure = _figure(view, chart_id)
        assert "offered" in figure["layout"]["xaxis"]["title"]["text"], chart_id
        xs = {x for t in figure["data"] for x in _values(t["x"])}
        assert set(RATES) <= xs, (chart_id, xs)
    requests = _figure(view, "rate-requests")
    k0 = next(t for t in requests["data"] if t["name"] == "K=0")
    behind = summary[(summary["k"] == 0) & (summary["rate"] == 48.0)]["achieved_per_s"].median()
    assert dict(zip(_values(k0["x"]), _values(k0["y"])))[48.0] == pytest.approx(behind)
    assert behind < 40  # K=0 falls behind at 48 req/s: the curve bends off the diagonal
    latency = _figure(view, "rate-latency")
    ttft_p99 = next(t for t in latency["data"] if t["name"] == "K=0 p99" and t["xaxis"] in ("x", None))
    assert dict(zip(_values(ttft_p99["x"]), _values(ttft_p99["y"])))[48.0] > 4000


def test_a_decision_row_per_rate(run):
    decision = build_view(*run)["decisions"][0]
    rows = decision["per_rate"]
    assert [row["rate"] for row in rows] == ["12", "36", "48"]
    at_target = rows[1]
    assert at_target["target"] and (at_target["status_text"], at_target["k"]) == ("decided", "0")
    assert at_target["confidence"] == "100%" and "K=0" in at_target["holds"] and "K=4" in at_target["holds"]
    top = rows[2]
    assert not top["target"] and "K=4" in top["holds"] and "K=0" not in top["holds"]
    assert "K=0 falls behind at 48 req/s" in top["behind"] and "2 of 2 windows" in top["behind"]


def test_evidence_counts_the_valid_rate_windows(run):
    summary = run[0]
    rows = build_view(*run)["decisions"][0]["rate_evidence"]
    assert [(row["k"], row["rate"]) for row in rows] == [(k, r) for k in ("0", "4") for r in ("12", "36", "48")]
    assert sum(int(row["windows"]) for row in rows) == int(summary["valid"].sum()) == 12
    k4_36 = rows[4]
    arrivals = summary[(summary["k"] == 4) & (summary["rate"] == 36.0)]["arrivals"].sum()
    assert k4_36["arrivals"] == f"{arrivals:,.0f}" and k4_36["acceptance"].startswith("58.")
    assert rows[2]["keeps_up"].startswith("no: falls behind in 2 of 2 windows")


def test_timeline_bands_are_labelled_by_their_rate(run):
    for entry in build_view(*run)["timelines"]:
        labels = [a["text"] for a in json.loads(entry["figure_json"])["layout"]["annotations"]]
        assert labels == ["12 req/s", "36 req/s", "48 req/s"], labels


def test_a_band_of_users_keeps_its_users_label():
    stages = pd.DataFrame({"stage": [0, 1], "users": [8, 0], "rate": [math.nan, 36.0],
                           "t_start_s": [0.0, 10.0], "t_end_s": [10.0, 20.0]})
    server = pd.DataFrame({"t_s": [0.0, 20.0], "running": [1.0, 2.0]})
    figure = timeline_figure({"stages": stages, "server": server})
    assert [a["text"] for a in figure["layout"]["annotations"]] == ["8 users", "36 req/s"]


def test_the_page_of_a_rate_sweep_has_no_empty_section_and_stays_escaped(tmp_path, run):
    summary, decision, record, timelines = run
    summary = summary.assign(setting=summary["setting"].where(summary["k"] == 0, f"k4{HOSTILE}"),
                             behind=summary["behind"].where(summary["behind"].isna(), f"falls behind {HOSTILE}"))
    page = _strip_plotly_js(write_report(tmp_path, summary, decision, record, timelines).read_text(encoding="utf-8"))
    assert HOSTILE not in page and ESCAPED in page
    assert re.findall(r'class="empty">([^<]*)<', page) == ["none: every window passed the validity gates"]
    assert 'id="per-rate"' in page and 'id="rate-evidence"' in page and "0 users" not in page
    assert "Candidates at the target rate (36 req/s)" in page


def test_a_run_of_both_kinds_charts_users_and_rates():
    users = make_summary()
    rates = users[users["users"] == 16].assign(users=0, rate=24.0, offered_per_s=24.2, achieved_per_s=23.9)
    view = build_view(pd.concat([users, rates], ignore_index=True), make_decision(), make_plan(), {})
    ids = [c["id"] for c in view["charts"]]
    assert ids[:6] == ["output-tokens", "requests", "acceptance", "real-batch", "memory", "latency"]
    assert ids[6:] == ["rate-output-tokens", "rate-requests", "rate-acceptance", "rate-real-batch", "rate-memory",
                       "rate-latency"]
    users_only = json.loads(view["charts"][0]["figure_json"])
    assert {x for t in users_only["data"] for x in _values(t["x"])} == {4, 16, 32}
    assert view["decisions"][0]["evidence"] and view["decisions"][0]["per_rate"]


def test_a_rate_window_has_no_users_and_an_invalid_one_names_its_rate(run):
    summary, *rest = run
    summary = summary.astype({"invalid_reason": object})
    summary.loc[(summary["k"] == 4) & (summary["repeat"] == 0) & (summary["rate"] == 48.0),
                ["valid", "invalid_reason"]] = [False, "dispatcher late"]
    view = build_view(summary, *rest)
    table = view["summary_table"]
    users = table["columns"].index("users")
    assert {row["cells"][users]["text"] for row in table["rows"]} == {"–"}
    assert [(w["k"], w["users"], w["reason"]) for w in view["invalid_windows"]] == [("4", "48 req/s",
                                                                                   "dispatcher late")]
    assert [row["windows"] for row in view["decisions"][0]["rate_evidence"]][3:] == ["2", "2", "1"]


def test_a_rate_ramp_answers_per_rate_with_its_knee_not_an_unjudged_table(run):
    from lookahead_runner.decision.schema import RateKnee

    summary, decision, record, timelines = run
    ramp = decision.model_copy(update={"mode": "ramp", "target_rate": None,
                                       "rate_knee": RateKnee(k=4, reason="holds every rate")})
    view = build_view(summary[summary["k"] == 4], ramp, record, timelines)["decisions"][0]
    assert view["per_rate"] == [] and view["rate_knee"]["k"] == "4" and len(view["rate_evidence"]) == 3


def test_a_window_too_short_to_tell_is_not_shown_as_keeping_up(run):
    summary, *rest = run
    short = "the window holds 12 arrivals: too few to tell a queue from its noise"
    summary = summary.assign(too_short="").astype({"too_short": object})
    summary.loc[(summary["k"] == 4) & (summary["rate"] == 12.0) & (summary["repeat"] == 1), "too_short"] = short
    rows = build_view(summary, *rest)["decisions"][0]["rate_evidence"]
    assert rows[3]["keeps_up"] == f"cannot tell in 1 of 2 windows: {short}" and rows[4]["keeps_up"] == "yes"


def test_a_rate_is_placed_against_a_capacity_bracket_at_the_rate_its_windows_were_offered():
    # issue 46: a capacity bracket is of offered rates (decision/capacity/estimate.rate_points): configured at
    # 11.314 req/s, one Poisson draw offered 10.2 and K=0 held it; 12.338 offered 11.3 and it missed the SLO
    from lookahead_runner.decision.schema import Capacity, Range
    from lookahead_runner.report.rate_evidence import per_rate_rows

    windows = pd.DataFrame([{"k": 0, "rate": 11.314, "arrivals": 306, "duration_s": 30.0, "offered_per_s": 10.2,
                             "keeps_up": True, "slo_attainment": 0.9902},
                            {"k": 0, "rate": 12.338, "arrivals": 339, "duration_s": 30.0, "offered_per_s": 11.3,
                             "keeps_up": True, "slo_attainment": 0.5516}])
    row = Capacity(k=0, rate=10.46, rate_range=Range(low=8.0, high=11.3), rate_bracket=[10.2, 11.3],
                   rate_text="10.5 req/s [8.0, 11.3]")
    rows = per_rate_rows(windows, Decision(status="not_decided", verdict="v"), [row])
    assert [(r["rate"], r["holds"], r["short"]) for r in rows] == [
        ("11.314", "K=0", ""), ("12.338", "none", "K=0 (capacity 10.5 req/s [8.0, 11.3]: every SLO met by 55.2% of "
                                                   "its arrivals)")]
