"""The live tabs' values and tables (live/values.py, live/tables.py), pure: windows, stage text, rows, CSV."""

from __future__ import annotations

import csv
import dataclasses
import io
import math

import pytest

from lookahead_runner.contracts.records import CUT_ERROR, RequestRecord
from lookahead_runner.live.tables import (
    HISTORY_COLUMNS,
    HISTORY_TAB_COLUMNS,
    NOW_COLUMNS,
    csv_text,
    history_row,
    history_tab_row,
    now_rows,
)
from lookahead_runner.live.values import (
    CounterWindow,
    LatencySample,
    LatencyWindow,
    LiveValues,
    RateProgress,
    StageNow,
    arrival_of_row,
    live_values,
    sample_of_row,
    signal_lines,
    stage_now,
    stage_text,
)
from lookahead_runner.telemetry.prometheus import parse
from lookahead_runner.telemetry.signals import CounterSignals
from lookahead_runner.workload.stages import Stage


def _spec(drafts: float, draft_tokens: float, accepted: float, generated: float, preempted: float = 0.0) -> dict:
    return {"spec_drafts_total": drafts, "spec_draft_tokens_total": draft_tokens, "spec_accepted_total": accepted,
            "generation_tokens_total": generated, "preemptions_total": preempted,
            "running": 8.0, "waiting": 2.0, "kv_usage": 0.5}


def test_acceptance_comes_from_counter_deltas_over_the_window_not_from_totals():
    window = CounterWindow(window_s=10.0)
    # a long history before the window: 1000 drafts of 4 tokens, 10 % accepted
    window.add(0.0, _spec(1000, 4000, 400, 10_000))
    window.add(95.0, _spec(1000, 4000, 400, 10_000))
    # inside the last 10 s: 100 drafts of 4 tokens, 300 accepted -> 75 %, length 1 + 300/100 = 4
    window.add(100.0, _spec(1050, 4200, 550, 10_500, 1))
    window.add(105.0, _spec(1100, 4400, 700, 11_000, 3))
    signals = window.signals()
    assert signals.acceptance_rate == pytest.approx(300 / 400)
    assert signals.mean_acceptance_length == pytest.approx(4.0)
    assert signals.drafted_per_step == pytest.approx(4.0)  # 400 draft tokens over the window's 100 drafts
    assert signals.generation_tokens_per_s == pytest.approx(1000 / 10.0)
    assert signals.preemptions == 3
    assert window.latest()["running"] == 8.0


def test_the_base_scrape_is_the_newest_one_older_than_the_window():
    window = CounterWindow(window_s=10.0)
    for t in range(0, 30):
        window.add(float(t), _spec(t, 4 * t, 2 * t, 10 * t))
    signals = window.signals()  # 10 s of 1 draft (4 tokens, 2 accepted) and 10 tokens a second
    assert (signals.acceptance_rate, signals.mean_acceptance_length) == (0.5, 3.0)
    assert signals.generation_tokens_per_s == 10.0


def test_no_speculation_counters_or_no_drafts_give_unknown_not_zero():
    window = CounterWindow()
    window.add(0.0, {"running": 1.0, "generation_tokens_total": 0.0})
    window.add(1.0, {"running": 1.0, "generation_tokens_total": 50.0})
    assert window.signals().acceptance_rate is None
    assert window.signals().mean_acceptance_length is None
    idle = CounterWindow()
    idle.add(0.0, _spec(10, 40, 20, 100))
    idle.add(1.0, _spec(10, 40, 20, 100))
    assert idle.signals().acceptance_rate is None
    assert idle.signals().generation_tokens_per_s == 0.0


def test_a_counter_reset_is_unknown_rather_than_negative():
    window = CounterWindow()
    window.add(0.0, _spec(100, 400, 200, 1000))
    window.add(1.0, _spec(5, 20, 10, 50))  # the server restarted
    assert window.signals().acceptance_rate is None
    assert window.signals().generation_tokens_per_s is None


def test_one_scrape_is_not_enough_for_a_rate():
    window = CounterWindow()
    assert window.signals() == CounterSignals()
    window.add(0.0, _spec(1, 4, 2, 10))
    assert window.signals() == CounterSignals()


def test_latency_percentiles_use_the_raw_requests_of_the_window_only():
    window = LatencyWindow(window_s=10.0)
    window.add(0.0, [LatencySample(True, 9999.0, 999.0, 999.0)])  # too old by t = 20
    window.add(15.0, [LatencySample(True, float(ttft), 10.0 + ttft / 100, 50.0 + ttft / 10) for ttft in range(1, 101)])
    window.add(16.0, [LatencySample(False, None, None, None), LatencySample(True, None, None, None)])
    summary = window.summary(20.0)
    assert summary["ttft_p50_ms"] == pytest.approx(50.5)
    assert summary["ttft_p99_ms"] == pytest.approx(99.01)
    assert summary["itl_p50_ms"] == pytest.approx(10.505)  # median of the per-request medians
    assert summary["itl_p99_ms"] == pytest.approx(59.901)  # p99 of the per-request p99s
    assert summary["requests_ok"] == 101
    assert summary["requests_failed"] == 1
    assert window.summary(100.0)["ttft_p50_ms"] is None


def _record(**overrides) -> RequestRecord:
    values = dict(stage=0, users=4, t_send_s=1.0, t_first_token_s=1.1, t_done_s=2.0, ttft_ms=100.0, e2e_ms=1000.0,
                  itl_p50_ms=10.0, itl_p99_ms=30.0, tpot_ms=12.0, prompt_tokens=32, output_tokens=64, chunks=20,
                  ok=True, error="", lag_p99_ms=0.1)
    return RequestRecord(**{**values, **overrides})


def test_a_requests_csv_row_becomes_a_sample():
    assert sample_of_row(_record().as_row()) == LatencySample(True, 100.0, 10.0, 30.0)
    failed = _record(ok=False, error="timeout", ttft_ms=None, itl_p50_ms=None, itl_p99_ms=None)
    assert sample_of_row(failed.as_row()) == LatencySample(False, None, None, None)


def test_cut_requests_and_malformed_rows_are_not_sampled():
    assert sample_of_row(_record(ok=False, error=CUT_ERROR).as_row()) is None
    assert sample_of_row(["1", "2"]) is None


@pytest.mark.parametrize(
    ("run_time_s", "current", "finished", "expected"),
    [
        (0.0, None, False, "not started (ready); 2 stages planned"),
        (3.2, (0, 4), False, "1 of 2: 4 users, 3 of 20 s"),
        (27.0, (1, 16), False, "2 of 2: 16 users, 7 of 30 s"),
        (80.0, (1, 16), True, "all 2 stages done (ready)"),
    ],
)
def test_stage_text_says_where_the_schedule_is(run_time_s, current, finished, expected):
    stages = [Stage(4, 20.0), Stage(16, 30.0)]
    assert stage_text(stage_now("ready", stages, current, run_time_s, finished)) == expected


def _values(**overrides) -> LiveValues:
    counters, latency = CounterWindow(), LatencyWindow()
    counters.add(100.0, _spec(0, 0, 0, 0))
    counters.add(110.0, _spec(100, 400, 300, 2000, 2))
    latency.add(109.0, [LatencySample(True, 120.0, 11.0, 40.0), LatencySample(False, None, None, None)])
    values = live_values(110.5, "k4/r0", StageNow("running", 1, 16, 2, 5.0, 20.0), counters, latency,
                         (61_000.0, 81_920.0), "", "")
    return dataclasses.replace(values, **overrides)


def test_the_now_tab_shows_every_signal_with_its_meaning():
    rows = {row["signal"]: row for row in now_rows(_values())}
    drafted = rows["Drafted tokens per step"]
    assert drafted["value"] == "4.00" and "not in effect" in drafted["meaning"]
    assert [key for key, _ in NOW_COLUMNS] == ["signal", "value", "meaning"]
    assert rows["Setting"]["value"] == "k4/r0"
    assert rows["Stage"]["value"] == "2 of 2: 16 users, 5 of 20 s"
    assert rows["Acceptance rate"]["value"] == "75.0 %"
    assert rows["Mean acceptance length"]["value"] == "4.00"
    assert rows["Real batch (running / waiting)"]["value"] == "8 / 2"
    assert rows["KV cache usage"]["value"] == "50.0 %"
    assert rows["Preemptions"]["value"] == "2 (+2 in last 10 s)"
    assert rows["Generation throughput"]["value"] == "200 tok/s"
    assert rows["GPU memory"]["value"] == "61,000 / 81,920 MiB (74.5 %)"
    assert rows["TTFT p50 / p99"]["value"] == "120 / 120 ms"
    assert rows["ITL p50 / p99"]["value"] == "11.0 / 40.0 ms"
    assert rows["Requests (ok / failed)"]["value"] == "1 / 1"
    assert rows["Server /metrics"]["value"] == "ok, 0.5 s ago"
    assert all(row["meaning"] for row in rows.values())


def test_unknown_values_show_a_dash_or_the_reason():
    rows = {row["signal"]: row["value"] for row in now_rows(_values(
        acceptance_rate=None, mean_acceptance_length=None, gpu_used_mib=None, gpu_total_mib=None,
        gpu_note="NVML unavailable (NVMLError: no driver)", metrics_error="ConnectionRefusedError: refused",
        ttft_p50_ms=None, ttft_p99_ms=None, preemptions_total=None))}
    assert rows["Acceptance rate"] == "–"
    assert rows["Mean acceptance length"] == "–"
    assert rows["GPU memory"] == "n/a (NVML unavailable (NVMLError: no driver))"
    assert rows["Server /metrics"] == "failing: ConnectionRefusedError: refused"
    assert rows["TTFT p50 / p99"] == "–"
    assert rows["Preemptions"] == "–"


def test_the_history_csv_has_one_numeric_row_per_tick_with_unit_bearing_columns():
    text = csv_text([key for key, _ in HISTORY_COLUMNS], [history_row(_values()), history_row(_values(kv_usage=None))])
    rows = list(csv.DictReader(io.StringIO(text)))
    assert len(rows) == 2
    first = rows[0]
    assert first["setting"] == "k4/r0"
    assert (first["stage"], first["users"]) == ("1", "16")
    assert float(first["acceptance_rate"]) == pytest.approx(0.75)
    assert float(first["mean_acceptance_length"]) == pytest.approx(4.0)
    assert float(first["drafted_per_step"]) == pytest.approx(4.0)  # 400 draft tokens in 100 drafts
    assert float(first["gpu_used_mib"]) == 61_000.0
    assert float(first["ttft_p50_ms"]) == 120.0
    assert rows[1]["kv_usage"] == ""
    assert all(not math.isnan(float(v)) for k, v in first.items() if k not in ("setting",) and v)


def test_the_history_tab_row_has_a_cell_for_every_column():
    row = history_tab_row(_values(), "12:03:04")
    assert set(row) == {key for key, _ in HISTORY_TAB_COLUMNS}
    assert row["time"] == "12:03:04"
    assert row["stage"] == "2 (16)"
    assert row["acceptance"] == "75.0 %"


def test_a_rate_arrivals_row_says_when_it_was_scheduled_and_whether_it_succeeded_whatever_its_end():
    assert arrival_of_row(_record().as_row()) is None   # a users stage's request
    assert arrival_of_row(_record(t_scheduled_s=1000.25).as_row()) == (1000.25, True)
    assert arrival_of_row(_record(t_scheduled_s=1000.5, ok=False, error=CUT_ERROR).as_row()) == (1000.5, False)
    assert arrival_of_row(["1", "2"]) is None


def test_a_rate_run_offers_its_schedule_and_counts_what_succeeded_and_what_is_outstanding():
    # 10 req/s from t=1000: one arrival every 0.1 s, each answered in 2 s, one in five failing
    progress = RateProgress(1000.0, [1000.0 + 0.1 * (1 + i) for i in range(200)])
    assert progress.values(1000.0) == (None, None, 0.0)   # its first instant: no span to rate over
    for i in range(30):                                     # the first 30 arrivals finished
        progress.observe(1002.1 + 0.1 * i, 1000.1 + 0.1 * i, ok=i % 5 != 4)
    progress.observe(1003.5, 990.0, ok=True)                # an earlier run's straggler: not this run's
    offered, achieved, outstanding = progress.values(1005.0)
    assert offered == pytest.approx(10.0) and achieved == pytest.approx(8.0, rel=0.05) and outstanding == 20.0
    # later, over the last 10 s only: nothing more succeeded, 120 arrived since
    offered, achieved, outstanding = progress.values(1015.0)
    assert offered == pytest.approx(10.0) and achieved == 0.0 and outstanding == 150 - 30


def _served(progress: RateProgress, schedule, served_per_s: float, latency_s: float, until_s: float) -> None:
    """A server answering the schedule first come first served, `served_per_s` at most, each answer `latency_s`
    once begun: every end up to `until_s` observed."""
    free_s = 0.0
    for scheduled in schedule:
        free_s = max(free_s, scheduled) + 1.0 / served_per_s
        if free_s - 1.0 / served_per_s + latency_s <= until_s:
            progress.observe(free_s - 1.0 / served_per_s + latency_s, scheduled, ok=True)


def test_the_achieved_rate_is_this_stages_arrivals_served_in_step_as_the_rate_windows_is():
    # stage 0: 10 req/s for 20 s; stage 1 from t=20: 5 req/s. Answers take 2 s. The last 10 s at t=25 hold
    # stage 0's last answers: counting every success there read 8.5 req/s served at a rate of 5
    schedule = [0.1 * (1 + i) for i in range(199)] + [20.0 + 0.2 * (1 + i) for i in range(99)]
    progress = RateProgress(0.0, schedule, stage_starts_s=(0.0, 20.0))
    _served(progress, schedule, 100.0, 2.0, 25.0)
    assert progress.values(21.0)[1] is None                   # stage 1's first answers not in yet: filling up
    assert progress.values(25.0)[1] == pytest.approx(5.0, rel=0.05)
    # a server that serves 4 of stage 1's 5 req/s reads 4 once its own answers come in
    behind = RateProgress(0.0, schedule, stage_starts_s=(0.0, 20.0))
    _served(behind, schedule[:199], 100.0, 2.0, 40.0)
    _served(behind, schedule[199:], 4.0, 2.0, 40.0)
    assert behind.values(38.0)[1] == pytest.approx(4.0, rel=0.1)


def test_the_rate_values_are_read_in_a_rate_stage_only_and_shown_there():
    progress = RateProgress(100.0, [100.5 + 0.25 * i for i in range(40)])
    progress.observe(109.0, 100.5, ok=True)
    rate_stage = StageNow("running", 1, 0, 2, 10.0, 20.0, rate=4.0)
    values = live_values(110.5, "k0/r0", rate_stage, CounterWindow(), LatencyWindow(), None, "", "", rate=progress)
    # the last 10 s hold 39 of the 40 arrivals (the first, at 100.5, is just older); all 40 arrived, one finished,
    # 8.5 s in the system: served since 108.5 s, one of the 6 arrivals due in step (100.5-101.75 s) at 4 req/s
    assert (values.offered_per_s, values.outstanding) == (3.9, 39.0)
    assert values.achieved_per_s == pytest.approx(4.0 / 6)
    rows = {row["signal"]: row["value"] for row in now_rows(values)}
    assert rows["Rate (offered / achieved)"] == "3.9 / 0.7 req/s" and rows["Outstanding requests"] == "39"
    assert history_tab_row(values, "12:00:00")["rate"] == "3.9 / 0.7"
    assert history_row(values)["offered_per_s"] == "3.90"
    users_stage = live_values(110.5, "k0/r0", StageNow("running", 0, 8, 2, 1.0, 20.0), CounterWindow(),
                              LatencyWindow(), None, "", "", rate=progress)
    assert users_stage.offered_per_s is None and "Rate (offered / achieved)" not in {
        row["signal"] for row in now_rows(users_stage)}


@pytest.mark.parametrize("name", ["metrics-specdecode.txt", "metrics-nospec.txt"])
def test_the_trimmed_metrics_text_parses_like_the_whole_one(fixtures_dir, name):
    text = (fixtures_dir / name).read_text()
    trimmed = signal_lines(text)
    assert parse(trimmed) == parse(text)
    assert len(trimmed) < len(text) / 10  # the histograms are what costs, and they go
