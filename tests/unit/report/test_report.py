"""The HTML report: view-model content, a self-contained page, escaping of everything that came from outside."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from plotly.offline import get_plotlyjs

from lookahead_runner.decision.schema import (AxisDecision, Candidate, CellSummary, Check, Decision, Knee, LifeNote,
                                              PerBatchSchedule, Percentile, Range, Recommended, StagePick)
from lookahead_runner.report import build_view, render_html, write_report
from lookahead_runner.runfolder.plan import LifeResult, LifeStatus, Plan, PlannedLife, RunRecord
from lookahead_runner.report.charts import script_safe_json

HOSTILE = "<script>alert(1)</script>"
ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;"
T0_UNIX_S = 1_760_000_000.0


def _setting(k: int) -> str:
    return f"k{k}{HOSTILE}" if k == 4 else f"k{k}"


def make_summary(ks=(0, 2, 4), users=(4, 16, 32), repeats=2, stage_s=60.0) -> pd.DataFrame:
    rows = []
    for k in ks:
        for repeat in range(repeats):
            for stage, n_users in enumerate(users):
                real_batch = min(n_users, round(24 / (1 + 0.1 * k)))
                tokens_per_s = 25.0 * real_batch * (1 + 0.15 * k) / (1 + 0.01 * k * k) + repeat
                rows.append({
                    "setting": _setting(k), "k": k, "repeat": repeat, "stage": stage, "users": n_users,
                    "duration_s": stage_s, "requests": int(tokens_per_s * stage_s / 64),
                    "req_per_s": tokens_per_s / 64, "output_tok_per_s": tokens_per_s,
                    "ttft_p50_ms": 40.0 + n_users, "ttft_p99_ms": 90.0 + 2 * n_users,
                    "itl_p50_ms": 12.0 + k, "itl_p99_ms": 30.0 + k, "e2e_p50_ms": 900.0, "e2e_p99_ms": 1500.0,
                    "failure_rate": 0.0, "acceptance_rate": math.nan if k == 0 else 0.8 * 0.95**k,
                    "mean_acceptance_length": math.nan if k == 0 else 1 + 0.7 * k,
                    "running_mean": float(real_batch), "running_peak": float(real_batch + 1),
                    "waiting_mean": float(n_users - real_batch), "kv_usage_mean": min(0.3 + 0.01 * k + 0.01 * n_users, 0.95),
                    "kv_usage_peak": min(0.5 + 0.01 * k + 0.01 * n_users, 0.99) - 0.04, "preemptions": 0, "gpu_mem_peak_mib": 70_000.0 + 500 * k,
                    "gpu_mem_total_mib": 81_559.0, "client_lag_p99_ms": 2.0, "valid": True, "invalid_reason": "",
                })
    rows[-1].update(valid=False, invalid_reason=f"client saturated {HOSTILE}")
    return pd.DataFrame(rows)


def make_plan(ks=(0, 2, 4), repeats=2, failed=("k2", 1)) -> RunRecord:
    lives = []
    for k in ks:
        for repeat in range(repeats):
            setting = _setting(k)
            argv = ["vllm", "serve", HOSTILE, "--max-num-seqs", "64"]
            if k:
                argv += ["--speculative-config", json.dumps({"method": "ngram", "num_speculative_tokens": k})]
            is_failed = (setting, repeat) == failed
            status = LifeStatus(state="failed" if is_failed else "done",
                                reason=f"server exited 1 {HOSTILE}" if is_failed else "")
            lives.append(LifeResult(planned=PlannedLife(setting=setting, k=k, repeat=repeat, argv=argv,
                                                        dir=f"k{k}/r{repeat}"), status=status))
    plan = Plan(run_id="20250101-000000", created="2025-01-01T00:00:00+00:00", target_users=32,
                probe={"version": "0.32.0", "help_source": "--help=all", "flags_count": 312,
                       "knob": "--speculative-config", "lookahead_flag": "absent", "command": ["vllm", "serve"]},
                config={"model": HOSTILE, "server": {"api_key": "***"}}, lives=[life.planned for life in lives])
    return RunRecord(plan=plan, lives=lives)


def check(name: str, status: str, evidence: str, kind: str = "gate") -> Check:
    return Check(name=name, kind=kind, status=status, evidence=evidence,
                 unknown_because="too little data" if status == "unknown" else "")


def make_decision() -> Decision:
    argv = ["vllm", "serve", HOSTILE, "--speculative-config", '{"method": "ngram", "num_speculative_tokens": 2}']
    return Decision(
        status="decided", verdict="set K=2", recommended=Recommended(k=2, setting="k2", argv=argv), leading_k=2,
        confidence=0.973, resamples=1000, target_users=32, baseline_k=0,
        per_stage=[StagePick(users=4, status="decided", k=4, leading_k=4, confidence=0.95, running_mean=4.0),
                   StagePick(users=32, status="decided", k=2, leading_k=2, confidence=0.97, running_mean=20.0,
                             argv=argv)],
        checklist=[check("repeat stability", "pass", "spread 1.2% <= 10%", "advice"),
                   check("failures and latency", "pass", "0.0% vs 0.0%"),
                   check("memory headroom", "fail", f"peak 98% of GPU {HOSTILE}"),
                   check("concurrency scaling", "pass", "grows 16 -> 32 users", "advice")],
        diagnoses=["real batch 20 < 32 users: KV cache or scheduler limits the batch"],
        reasons=[f"K=4 raised memory without req/s {HOSTILE}"], stopped_at_k=4,
        cells=[CellSummary(k=0, users=32, repeats=2, requests=600, failures=0, timeouts=0, req_per_s=10.0,
                           req_per_s_range=Range(low=9.8, high=10.2), output_tok_per_s=640.0,
                           percentiles=[Percentile(metric="ttft", q=0.99, value_ms=120.0, range=Range(low=110.0),
                                                   n=600, decisive=False)])])


def candidate(k: int, status: str, evidence: str, share: float) -> Candidate:
    return Candidate(k=k, objective=10.0 + k, objective_range=Range(low=9.0 + k, high=11.0 + k),
                     gain=None if k == 0 else 0.1 * k, gain_range=Range() if k == 0 else Range(low=0.05, high=0.3),
                     win_share=share, gates=[check("memory headroom", status, evidence)],
                     blocked_by=["memory headroom"] if status == "fail" else [])


def make_life_timeline(users=(4, 16, 32), stage_s=60, sample_s=1.0, t0_s=T0_UNIX_S) -> dict:
    total_s = stage_s * len(users)
    t_s = t0_s + np.arange(0.0, total_s, sample_s)
    phase = np.minimum((t_s - t0_s) // stage_s, len(users) - 1).astype(int)
    running = np.minimum(np.asarray(users)[phase], 20).astype(float)
    server = pd.DataFrame({"t_s": t_s, "running": running, "waiting": np.asarray(users)[phase] - running,
                           "kv_usage": running / 24, "preemptions_total": np.cumsum(running > 19),
                           "generation_tokens_total": np.cumsum(running * 25)})
    gpu = pd.DataFrame({"t_s": t_s, "used_mib": 70_000 + 10 * running, "total_mib": 81_559.0})
    stages = pd.DataFrame({"stage": range(len(users)), "users": list(users),
                           "t_start_s": [t0_s + i * stage_s for i in range(len(users))],
                           "t_end_s": [t0_s + (i + 1) * stage_s for i in range(len(users))]})
    return {"server": server, "gpu": gpu, "stages": stages}


def make_timelines(run: RunRecord, skip=("k0", 1)) -> dict:
    return {f"{life.planned.setting}/r{life.planned.repeat}": make_life_timeline()
            for life in run.lives if (life.planned.setting, life.planned.repeat) != skip}


@pytest.fixture()
def inputs():
    plan = make_plan()
    return make_summary(), make_decision(), plan, make_timelines(plan)


def _strip_plotly_js(page: str) -> str:
    js = get_plotlyjs()
    assert page.count(js[:400]) == 1, "plotly.js must be inlined exactly once"
    start = page.index(js[:400])
    return page[:start] + page[start + len(js):]


def test_view_carries_the_decision(inputs):
    view = build_view(*inputs)
    assert view["verdict"]["text"] == "set K=2"
    assert view["verdict"]["tone"] == "warn"  # one checklist item failed
    assert view["verdict"]["confidence"].startswith("K=2 was picked in 97% of 1000 resamples")
    assert view["recommended"]["k"] == 2
    assert view["recommended"]["argv_shell"].startswith("vllm serve '<script>alert(1)</script>' --speculative-config")
    assert [(row["name"], row["status"]) for row in view["checklist"]] == [
        ("repeat stability", "pass"), ("failures and latency", "pass"),
        ("memory headroom", "fail"), ("concurrency scaling", "pass")]
    assert view["evidence"][0]["ttft_p99"] == "120 [110, ∞] ⚠"
    assert view["checklist_passed"] == 3
    assert view["target_users"] == "32" and view["stopped_at_k"] == "4"
    assert view["invalid_count"] == 1 and view["row_count"] == 18


def test_view_charts_and_tables(inputs):
    view = build_view(*inputs)
    charts = {chart["id"]: chart for chart in view["charts"]}
    assert set(charts) == {"output-tokens", "requests", "acceptance", "real-batch", "memory", "latency"}
    assert all(chart["figure_json"] for chart in charts.values())
    output = json.loads(charts["output-tokens"]["figure_json"])
    assert [trace["name"] for trace in output["data"]] == ["K=0", "K=2", "K=4"]
    acceptance = json.loads(charts["acceptance"]["figure_json"])
    assert [trace["name"] for trace in acceptance["data"]] == ["4 users", "16 users", "32 users"]
    real_batch = json.loads(charts["real-batch"]["figure_json"])
    assert "users = concurrency" in [trace["name"] for trace in real_batch["data"]]

    table = view["summary_table"]
    assert table["columns"][:6] == ["setting", "k", "repeat", "stage", "users", "valid"]
    assert "invalid_reason" not in table["columns"]
    invalid = [row for row in table["rows"] if not row["valid"]]
    assert len(invalid) == 1 and invalid[0]["invalid_reason"] == f"client saturated {HOSTILE}"
    assert invalid[0]["cells"][5]["text"] == f"no: client saturated {HOSTILE}"
    k0_row = {name: cell["text"] for name, cell in zip(table["columns"], table["rows"][0]["cells"])}
    assert k0_row["acceptance_rate"] == "–" and k0_row["kv_usage_peak"] == "50.0%"
    assert k0_row["valid"] == "yes" and k0_row["requests"] == "93"
    assert [row["label"] for row in view["probe"]][:4] == ["vLLM version", "help source", "flags found",
                                                            "how K is written"]
    lives = view["lives"]
    assert len(lives) == 6 and lives[0]["dir_href"] == "k0/r0/"
    assert "k0/r0/requests.csv" in [f["href"] for f in lives[0]["files"]]


def test_view_timelines_follow_the_plan(inputs):
    view = build_view(*inputs)
    timelines = view["timelines"]
    assert [t["title"] for t in timelines][:2] == ["k0/r0 (K=0)", "k0/r1 (K=0)"]
    missing = timelines[1]
    assert missing["figure_json"] is None and missing["empty"].startswith("no data")
    figure = json.loads(timelines[0]["figure_json"])
    assert len(figure["layout"]["shapes"]) == 3  # one shaded band per stage
    assert figure["layout"]["shapes"][0]["x0"] == 0.0  # unix time put on a 0-based axis
    failed = next(t for t in timelines if t["status"] == "failed")
    assert failed["reason"].startswith("server exited 1")


def test_all_nan_acceptance_and_failed_life():
    plan = make_plan(failed=("k0", 0))
    summary = make_summary().assign(acceptance_rate=math.nan, mean_acceptance_length=math.nan)
    view = build_view(summary, make_decision(), plan, {})
    acceptance = next(chart for chart in view["charts"] if chart["id"] == "acceptance")
    assert acceptance["figure_json"] is None and "no data" in acceptance["empty"]
    assert view["lives"][0]["status"] == "failed"
    assert all(t["figure_json"] is None for t in view["timelines"])


EMPTY = Decision(status="no_measurement", verdict="")


def test_degenerate_inputs_still_build():
    view = build_view(pd.DataFrame(), EMPTY, None, {})
    assert view["recommended"] is None and view["verdict"]["tone"] == "bad"
    assert all(chart["figure_json"] is None for chart in view["charts"])
    partial = {"k0/r0": {"server": pd.DataFrame(), "gpu": None},
               "k2/r0": {"gpu": make_life_timeline()["gpu"]}}
    entries = build_view(make_summary(), make_decision(), None, partial)["timelines"]
    assert [e["figure_json"] is None for e in entries] == [True, False]


def test_rendered_page_is_self_contained_and_escaped(tmp_path: Path, inputs):
    path = write_report(tmp_path, *inputs)
    assert path == tmp_path / "report.html"
    page = path.read_text(encoding="utf-8")
    rest = _strip_plotly_js(page)
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", rest, re.IGNORECASE)
    assert not re.search(r"<link\b|@import", rest, re.IGNORECASE)
    for tag in re.findall(r"<script\b[^>]*>", rest):
        assert tag == "<script>" or re.fullmatch(r'<script type="application/json" data-chart="[\w-]+">', tag)
    assert HOSTILE not in page
    assert "alert(1)</script" not in page.lower()
    assert ESCAPED in rest  # model name, reasons, evidence, argv shown as text
    assert "set K=2" in rest and "memory headroom" in rest
    assert "no data: no server or GPU samples" in rest
    assert rest.count('data-chart="') == 6 + 5  # six summary charts, five lives with samples


def test_render_missing_everything(tmp_path: Path):
    render_html(build_view(pd.DataFrame(), EMPTY, None, {}), tmp_path / "empty" / "report.html")
    page = (tmp_path / "empty" / "report.html").read_text(encoding="utf-8")
    assert "no data: the summary is empty" in page and "No recommendation" in page


def test_script_safe_json_round_trips():
    raw = json.dumps({"name": "</script><!-- & >"})
    safe = script_safe_json(raw)
    assert "<" not in safe and ">" not in safe and "&" not in safe
    assert json.loads(safe) == json.loads(raw)


def test_timelines_found_by_life_folder():
    plan = make_plan(ks=(0,), repeats=1)
    plan.lives[0] = LifeResult(planned=plan.lives[0].planned.model_copy(update={"dir": "custom/place"}))  # no status
    view = build_view(make_summary(ks=(0,)), make_decision(), plan, {"custom/place": make_life_timeline()})
    assert [(t["title"], t["status"], t["figure_json"] is not None) for t in view["timelines"]] == [
        ("k0/r0 (K=0)", "missing", True)]


def test_view_shows_per_stage_commands_and_the_schedule():
    decision = make_decision()
    plan = make_plan()
    view = build_view(make_summary(), decision, plan, {})
    assert view["per_stage"][1]["argv_shell"].startswith("vllm serve '<script>alert(1)</script>' --speculative")
    assert [(row["users"], row["k"], row["confidence"]) for row in view["per_stage"]] == [("4", "4", "95%"),
                                                                                         ("32", "2", "97%")]
    assert not view["per_batch_size"]["available"]

    ranges = [[1, 12, 4], [13, 1_000_000, 0]]
    decision.per_batch_size = PerBatchSchedule(
        num_speculative_tokens_per_batch_size=ranges, ranges=ranges, anchored_on_users=[4, 32], left_out_users=[],
        form="list", argv=["vllm", "serve", "m", "--speculative-config", json.dumps(
            {"num_speculative_tokens": 4, "num_speculative_tokens_per_batch_size": ranges})])
    schedule = build_view(make_summary(), decision, plan, {})["per_batch_size"]
    assert schedule["available"] and schedule["ranges"] == ["batch 1 to 12: K=4", "batch 13 and up: K=0"]
    assert json.loads(schedule["json"]) == {"num_speculative_tokens_per_batch_size": ranges}
    assert schedule["argv_shell"].startswith("vllm serve m --speculative-config '{")


def test_view_lists_candidates_failed_lives_tokens_and_invalid_windows():
    decision = make_decision().model_copy(update={
        "candidates": [candidate(0, "pass", "ok", 0.02), candidate(2, "fail", HOSTILE, 0.97)],
        "failed_lives": [LifeNote(life="k2/r1", reason="server exited 1")]})
    plan = make_plan()
    plan.lives[0].tokens = {"client_output_tokens": 1000, "server_generation_tokens": 1010,
                            "difference": 10, "cut_requests": 2}
    plan.lives[1].tokens = {"client_output_tokens": 1000, "server_generation_tokens": 1010,
                            "difference": 10, "cut_requests": 0}
    view = build_view(make_summary(), decision, plan, {})
    assert [(c["k"], c["chosen"], c["win_share"], c["state"]) for c in view["candidates"]] == [
        ("0", False, "2%", "passes every gate"), ("2", True, "97%", "blocked: memory headroom")]
    assert view["candidates"][1]["gain"] == "+20.0%" and view["candidates"][1]["gain_range"] == "[+5.0%, +30.0%]"
    assert [f["life"] for f in view["failed_lives"]] == ["k2/r1"]
    assert view["failed_lives"][0]["reason"].startswith("server exited 1")
    assert view["lives"][0]["tokens"] == {"text": "client 1,000 / server 1,010 (difference +10, 2 cut)", "status": ""}
    assert view["lives"][1]["tokens"]["status"] == "check"  # more tokens served than seen, and nothing was cut
    assert view["lives"][2]["tokens"]["text"] == "–"
    assert [(w["setting"], w["users"], w["reason"]) for w in view["invalid_windows"]] == [
        (f"k4{HOSTILE}", "32", f"client saturated {HOSTILE}")]
    probe = {row["label"]: row["value"] for row in view["probe"]}
    assert probe["flags used by this run"] == "--max-num-seqs --speculative-config"
    assert "lives.csv" in [f["name"] for f in view["run_files"]]
    assert "first max(2 s, 25%)" in view["window_rule"]


def test_rendered_page_has_the_new_sections_escaped(tmp_path: Path, inputs):
    summary, decision, plan, timelines = inputs
    summary = summary.assign(timeout_rate=0.0125, timeouts=1)
    decision = decision.model_copy(update={
        "failed_lives": [LifeNote(life="k2/r1", reason=f"boom {HOSTILE}")],
        "candidates": [candidate(2, "fail", HOSTILE, 0.5)], "next_runs": [f"run more {HOSTILE}"],
        "knee": Knee(k=2, reason=f"no knee {HOSTILE}")})
    page = _strip_plotly_js(write_report(tmp_path, summary, decision, plan, timelines).read_text(encoding="utf-8"))
    assert HOSTILE not in page and ESCAPED in page
    for text in ("Decision per concurrency stage", "Candidates at the target concurrency", "Invalid windows",
                 "without results", "timeout_rate", "1.2%", "What to run next", "Concurrency knee at K=2",
                 "Evidence", "Thresholds of this run"):
        assert text in page, text
    # Only files that exist are linked: this run folder holds no life folders and no run files yet.
    assert 'href="k0/r0/' not in page and 'href="summary.csv"' not in page


def test_only_existing_raw_files_are_linked(tmp_path: Path, inputs):
    summary, decision, plan, timelines = inputs
    (tmp_path / "k0" / "r0").mkdir(parents=True)
    (tmp_path / "k0" / "r0" / "requests.csv").write_text("stage\n")
    (tmp_path / "summary.csv").write_text("k\n")
    page = write_report(tmp_path, summary, decision, plan, timelines).read_text(encoding="utf-8")
    assert 'href="k0/r0/requests.csv"' in page and 'href="k0/r0/server.log"' not in page
    assert 'href="summary.csv"' in page and 'href="lives.csv"' not in page


def test_grid_axis_and_ramp_mode(tmp_path: Path):
    decision = make_decision().model_copy(update={"by_axis": [
        AxisDecision(flag="--max-num-seqs", value="64", status="decided", verdict="Set K=2", k=2, objective=11.5),
        AxisDecision(flag="--max-num-seqs", value="128", status="no_measurement", verdict="No valid measurement")]})
    view = build_view(make_summary(), decision, make_plan(), {})
    assert [(a["value"], a["k"], a["objective"]) for a in view["by_axis"]] == [("64", "2", "11.50"), ("128", "–", "–")]
    ramp = Decision(mode="ramp", status="decided", verdict="The knee at K=2 is 16 users.", target_users=16,
                    per_stage=[StagePick(users=16, status="decided", k=2, running_mean=15.0, objective=900.0)],
                    recommended=Recommended(k=2, setting="k2", argv=["vllm", "serve", "m"]), knee=Knee(k=2, users=16))
    view = build_view(make_summary(), ramp, make_plan(), {})
    assert view["mode"] == "ramp" and view["by_axis"] == []
    render_html(view, tmp_path / "report.html")
    page = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert "Throughput per concurrency stage" in page and "Candidates at the target" not in page


def test_confirmation_section_near_the_verdict_escaped(tmp_path: Path, inputs):
    from lookahead_runner.decision.schema import Boundary, ConfirmStage, Confirmation

    summary, decision, plan, timelines = inputs
    ranges = [[1, 18, 4], [19, 1_000_000, 0]]
    argv = ["vllm", "serve", "m", "--speculative-config", json.dumps({"num_speculative_tokens_per_batch_size": ranges})]
    confirmation = Confirmation(
        status="not confirmed", kind="schedule", life="confirm/r0", argv=argv, k=4, ranges=ranges, single_k=2,
        scope=f"1 life {HOSTILE}", boundaries=[Boundary(batch=18, k_below=4, k_above=0, note=f"no side {HOSTILE}")],
        crossings=[f"req/s falls 44% crossing batch 18 -> 19 {HOSTILE}"],
        stages=[ConfirmStage(users=21, role="above", k=0, objective=14.0, expected=26.5, difference=-0.47,
                             difference_range=Range(low=-0.5, high=-0.44), outcome="collapse", text=HOSTILE)],
        verdict=f"Not confirmed: {HOSTILE}. K=2 alone stands (the command above).")
    decision = decision.model_copy(update={"confirmation": confirmation, "per_batch_size": PerBatchSchedule(
        ranges=ranges, argv=argv, form="list", anchored_on_users=[4, 32], left_out_users=[])})
    view = build_view(summary, decision, plan, timelines)["confirmation"]
    assert (view["status"], view["tone"], view["use_schedule"], view["single_k"]) == ("not confirmed", "bad", "", "2")
    assert view["stages"][0]["difference"] == "-47.0% [-50.0%, -44.0%]" and view["stages"][0]["tone"] == "fail"
    page = _strip_plotly_js(write_report(tmp_path, summary, decision, plan, timelines).read_text(encoding="utf-8"))
    assert HOSTILE not in page and ESCAPED in page
    assert page.index('id="confirmation"') < page.index("Acceptance checklist") and 'href="#confirmation"' in page
    assert "K=2 alone stands</strong>" in page and "req/s falls 44% crossing batch 18 -&gt; 19" in page
    confirmed = decision.model_copy(update={"confirmation": confirmation.model_copy(update={"status": "confirmed"})})
    assert build_view(summary, confirmed, plan, timelines)["confirmation"]["use_schedule"].startswith(
        "vllm serve m --speculative-config '{")


def test_the_report_says_what_the_verdict_cost(tmp_path: Path, inputs):
    from lookahead_runner.decision.schema import Cost

    summary, decision, plan, timelines = inputs
    decision = decision.model_copy(update={"cost": Cost(
        strategy="adaptive", lives=5, text="5 lives, 2.1 server-minutes (0.3 starting, 1.8 measuring); the full grid: "
                                           "8 lives, ~3.4 server-minutes",
        stopped_because="decided: K=2 wins in 97% <of> the resamples")})
    view = build_view(summary, decision, plan, timelines)
    assert view["cost"].startswith("5 lives, 2.1 server-minutes") and view["cost_stopped"].startswith("decided")
    page = write_report(tmp_path, summary, decision, plan, timelines).read_text(encoding="utf-8")
    assert "the full grid: 8 lives, ~3.4 server-minutes" in page and "97% &lt;of&gt; the resamples" in page
    assert build_view(*inputs)["cost"] == "–" and not build_view(*inputs)["cost_stopped"]


def test_the_report_names_the_look_the_sweep_stopped_at_and_its_boundary(tmp_path: Path, inputs):
    from lookahead_runner.decision.schema import LookStop

    summary, decision, plan, timelines = inputs
    looked = decision.model_copy(update={"looks": LookStop(
        rule="error spending (O'Brien-Fleming type)", look=5, at_most=8, boundary=0.9689, stopped_by="boundary",
        text="stopped at look 5 of at most 8: boundary 96.9 %")})
    shown = build_view(summary, looked, plan, timelines)["verdict"]["confidence"]
    assert "stopped at look 5 of at most 8: boundary 96.9 %" in shown and "a verdict needs" not in shown
    assert "the 10% error a verdict at 90% may make" in shown
    page = write_report(tmp_path, summary, looked, plan, timelines).read_text(encoding="utf-8")
    assert "stopped at look 5 of at most 8: boundary 96.9 %" in page
    assert "a verdict needs 90%" in build_view(*inputs)["verdict"]["confidence"]   # one look: no looks named
    at_level = looked.model_copy(update={"looks": looked.looks.model_copy(update={"interval_level": 0.9837})})
    assert ("Its gain and restart spread intervals are at 98.4 % there, so they hold at 95 % over the looks together"
            in build_view(summary, at_level, plan, timelines)["verdict"]["confidence"])


def test_the_level_the_looks_intervals_hold_together_is_stated_as_set_and_an_older_file_states_none(inputs):
    """Issue 46 (review): decision.interval_level = 0.975 was said as "they hold at 98%", a level no interval was
    formed for; a decision.json written before the looks' interval level (no `interval_level` in `looks`) reads as
    it did, no level named."""
    from lookahead_runner.decision.schema import Decision, LookStop

    summary, decision, plan, timelines = inputs
    stop = LookStop(rule="error spending (O'Brien-Fleming type)", look=3, at_most=5, unit="repeats", boundary=0.9926,
                    stopped_by="boundary", text="stopped at look 3 of at most 5: boundary 99.3 %",
                    interval_level=0.9963)
    looked = decision.model_copy(update={"looks": stop, "thresholds": {**decision.thresholds,
                                                                      "interval_level": 0.975}})
    shown = build_view(summary, looked, plan, timelines)["verdict"]["confidence"]
    assert "intervals are at 99.6 % there, so they hold at 97.5 % over the looks together" in shown
    early = looked.model_copy(update={"looks": stop.model_copy(update={"interval_level": 1 - 1.47e-5})})
    shown = build_view(summary, early, plan, timelines)["verdict"]["confidence"]
    assert "intervals are at 99.999 % there" in shown and "100.0 %" not in shown   # not said as certainty
    older = json.loads(looked.model_dump_json())
    del older["looks"]["interval_level"]
    shown = build_view(summary, Decision.model_validate(older), plan, timelines)["verdict"]["confidence"]
    assert "stopped at look 3 of at most 5: boundary 99.3 %" in shown and "intervals are at" not in shown


def test_performance_model_section_with_curves_and_held_out_escaped(tmp_path: Path, inputs):
    from lookahead_runner.decision.perfmodel.summary import Curve, CurvePoint, HeldOutRow, ModelSummary, ProductionPoint

    summary, decision, plan, timelines = inputs
    decision.performance_model = ModelSummary(
        trusted=False, reason=f"not trusted: held-out error 14% {HOSTILE}", error_bound=0.1,
        acceptance_source="per-position counters", tokens_per_step={"0": 1.0, "2": 2.4},
        held_out=[HeldOutRow(scheme="stage", k=2, users=32, predicted_requests_per_s=11.4,
                             measured_requests_per_s=10.0, error=0.14)],
        curves=[Curve(k=k, measured_k=k != 1, points=[CurvePoint(users=u, requests_per_s=u / 2.0 + k,
                                                                 requests_per_s_low=u / 2.2, requests_per_s_high=u / 1.8)
                                                      for u in (4, 16, 32, 48)]) for k in (0, 1, 2)],
        production=ProductionPoint(users=48, statement=f"No prediction at 48 users {HOSTILE}"))
    page = write_report(tmp_path, summary, decision, plan, timelines).read_text(encoding="utf-8")
    rest = _strip_plotly_js(page)
    assert HOSTILE not in page and ESCAPED in rest
    section = rest[rest.index('<section id="perf-model">'):]
    section = section[:section.index("</section>")]
    assert "not trusted" in section and "drives nothing" in section
    assert ">+14.0%<" in section and "stage left out" in section
    assert "No prediction at 48 users" in section
    figure = json.loads(re.search(r'data-chart="perf-model-chart">(.*?)</script>', section, re.S).group(1))
    names = [t.get("name") for t in figure["data"]]
    assert "K=1 predicted (not measured)" in names and "K=0 measured" in names
    assert rest.count('data-chart="') == 6 + 5 + 1


def test_capacity_table_and_the_verdict_at_the_rate_escaped(tmp_path: Path, inputs):
    from lookahead_runner.decision.schema import Capacity

    summary, decision, plan, timelines = inputs
    row = Capacity(k=4, variant=HOSTILE, rate=12.0, rate_text=f"12.0 req/s [< 8, {HOSTILE}]", rate_from=HOSTILE,
                   users_text=HOSTILE, users_from=HOSTILE, text=HOSTILE)
    at_rate = decision.model_copy(update={"verdict": f"At 14 req/s {HOSTILE}", "target_rate": 14.0,
                                          "reasons": [HOSTILE], "next_runs": [HOSTILE]})
    decision = decision.model_copy(update={"capacity": [row], "capacity_target": 0.99, "at_rate": at_rate,
                                           "target_rate": 14.0})
    page = _strip_plotly_js(write_report(tmp_path, summary, decision, plan, timelines).read_text(encoding="utf-8"))
    assert HOSTILE not in page and "alert(1)</script" not in page.lower()
    assert 'id="capacity-table"' in page and f"12.0 req/s [&lt; 8, {ESCAPED}]" in page
