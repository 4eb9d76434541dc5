"""Counter-delta signals (telemetry/signals.py): one definition that analysis, progress and the live tabs share."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from lookahead_runner.runfolder.analysis import WindowRules, stage_rows
from lookahead_runner.live.values import CounterWindow
from lookahead_runner.run.progress import SweepProgress
from lookahead_runner.telemetry.signals import CounterSignals, counter_signals


def test_acceptance_and_mean_length_come_from_the_growth_of_three_counters():
    signals = counter_signals({"spec_accepted_total": 300, "spec_draft_tokens_total": 400, "spec_drafts_total": 100})
    assert signals.acceptance_rate == pytest.approx(0.75)
    assert signals.mean_acceptance_length == pytest.approx(4.0)  # 1 + 300 accepted over 100 drafts
    assert signals.generation_tokens_per_s is None  # no interval length given: no rate


def test_rates_are_growth_per_second_and_need_time_to_pass():
    deltas = {"generation_tokens_total": 1000, "requests_success_total": 30, "preemptions_total": 2}
    signals = counter_signals(deltas, 10.0)
    assert (signals.generation_tokens_per_s, signals.requests_per_s, signals.preemptions) == (100.0, 3.0, 2.0)
    assert counter_signals(deltas, 0.0).generation_tokens_per_s is None
    assert counter_signals(deltas, None).requests_per_s is None


@pytest.mark.parametrize("accepted", [None, float("nan"), -5.0])
def test_a_missing_or_reset_counter_is_unknown_not_zero_or_negative(accepted):
    deltas = {"spec_draft_tokens_total": 400, "spec_drafts_total": 100, "generation_tokens_total": -50}
    if accepted is not None:
        deltas["spec_accepted_total"] = accepted
    signals = counter_signals(deltas, 1.0)
    assert signals.acceptance_rate is None and signals.mean_acceptance_length is None
    assert signals.generation_tokens_per_s is None  # the counter went down: the server restarted


def test_no_drafts_in_the_interval_is_no_acceptance_rather_than_zero():
    idle = counter_signals({"spec_accepted_total": 0, "spec_draft_tokens_total": 0, "spec_drafts_total": 0})
    assert idle == CounterSignals()


def _samples() -> list[tuple[float, dict[str, float]]]:
    """A server sampled once a second for 20 s: acceptance 50 % for 10 s, then 80 %."""
    rows, drafts, accepted, generated = [], 0.0, 0.0, 0.0
    for t in range(21):
        rows.append((1000.0 + t, {"spec_drafts_total": drafts, "spec_draft_tokens_total": 4 * drafts,
                                  "spec_accepted_total": accepted, "generation_tokens_total": generated,
                                  "requests_success_total": t * 2.0}))
        accept = 0.5 if t < 10 else 0.8
        drafts, accepted, generated = drafts + 10, accepted + 40 * accept, generated + 10 + 40 * accept
    return rows


def test_analysis_progress_and_the_live_view_give_the_same_numbers_over_the_same_interval():
    samples = _samples()
    # analysis: a stage from t = 1010 to 1020 with no warm-up
    server = pd.DataFrame([{"t_s": t, **values} for t, values in samples])
    stages = pd.DataFrame([{"stage": 0, "users": 4, "t_start_s": 1010.0, "t_end_s": 1020.0}])
    requests = pd.DataFrame(columns=["t_done_s", "ok", "output_tokens", "error"])
    row = stage_rows(requests, stages, server, pd.DataFrame(), "k4", 4, 0, WindowRules(warmup_s=0.0))[0]
    # the live view: its ten-second window ends at the same sample
    window = CounterWindow(window_s=10.0)
    for t, values in samples:
        window.add(t, values)
    live = window.signals()
    # the progress line: two refreshes at the window's edges
    progress = SweepProgress([], 1, enabled=False)
    progress._rates(samples[10][1] | {"t_s": samples[10][0]})
    line = progress._rates(samples[20][1] | {"t_s": samples[20][0]})

    assert row["acceptance_rate"] == pytest.approx(0.8) == pytest.approx(live.acceptance_rate)
    assert row["mean_acceptance_length"] == pytest.approx(1 + 3.2) == pytest.approx(live.mean_acceptance_length)
    assert live.generation_tokens_per_s == pytest.approx(42.0)
    assert line == ", 2.0 req/s, 42 tok/s"


def test_analysis_keeps_nan_where_the_signal_is_unknown():
    stages = pd.DataFrame([{"stage": 0, "users": 4, "t_start_s": 0.0, "t_end_s": 10.0}])
    server = pd.DataFrame([{"t_s": 0.0, "running": 1.0}, {"t_s": 10.0, "running": 2.0}])  # K = 0: no spec series
    requests = pd.DataFrame(columns=["t_done_s", "ok", "output_tokens", "error"])
    row = stage_rows(requests, stages, server, pd.DataFrame(), "k0", 0, 0, WindowRules(warmup_s=0.0))[0]
    assert math.isnan(row["acceptance_rate"]) and math.isnan(row["mean_acceptance_length"])
