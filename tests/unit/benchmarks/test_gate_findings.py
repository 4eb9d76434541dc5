"""benchmarks/calibration/gate_findings.py and drafting_findings.py: the truths the knee, the gates and the
drafts-short flag are scored against (the suite's CI slice runs their trials: test_calibration_slice.py)."""
from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from benchmarks.calibration import adapters, drafting_findings, gate_findings, run  # noqa: E402
from benchmarks.calibration.regimes import Named  # noqa: E402
from benchmarks.calibration.tally import Tallies  # noqa: E402


def test_a_sharp_curve_buys_a_doubling_below_its_bend_and_nothing_past_it():
    r = gate_findings.KneeRegime(12.0, 8.0, 20.0, 0.05, 60.0, 1, Named())
    gains = r.gains()                                 # 4->8, 8->16, 16->32, 32->64
    assert gains[0] == pytest.approx(1.0, abs=0.01) and gains[2] == pytest.approx(0.0, abs=0.02)
    assert r.rate(1000) == pytest.approx(20.0, rel=1e-3)


def test_a_knee_named_early_is_stated_over_the_steps_the_ramp_judged_not_those_its_invalid_stages_left_out(
        monkeypatch):
    # bend far past the ramp (every step doubles req/s), 10 req/s at the bend's peak, 10 s windows: 4 and 8 users
    # complete 1-2 requests, under the runner's minimum, so the ramp judges at most the steps from 16 users up
    regime = gate_findings.KneeRegime(200.0, 8.0, 10.0, 0.01, 10.0, 1, Named())
    monkeypatch.setattr(gate_findings, "draw_knee", lambda rng: regime)
    tallies = Tallies()
    gate_findings.score_knee(np.random.default_rng(0), tallies)
    claim = tallies.claims["knee: named before the true knee"]
    one_step = (1 - adapters.decision_config().interval_level) / 2
    assert claim.trials == 1 and claim.stated_rate <= 1 - (1 - one_step) ** 2 + 1e-12


def _regime(**changes) -> drafting_findings.DraftRegime:
    base = drafting_findings.DraftRegime(
        k=4, schedule=((1, 16, 4), (17, 64, 2), (65, 1024, 0)), fault="none", short_share=0.5, cut_share=0.0,
        batch_mean=30.0, batch_sd=0.1, tau_s=2.0, window_s=30.0, counters=True, request_span_s=10.0, acceptance=0.7,
        steps_per_request=100.0, repeats=1, named=Named())
    return dataclasses.replace(base, **changes)


def test_a_server_running_its_schedule_drafts_its_k_and_one_ignoring_it_drafts_off_it_in_every_step():
    rng = np.random.default_rng(0)
    applied = drafting_findings.draft_window(_regime(), rng)
    assert applied.mismatch == 0 and applied.counters == pytest.approx(2.0, abs=0.05)
    ignored = drafting_findings.draft_window(_regime(fault="ignore-spec-schedule"), rng)
    assert ignored.mismatch > 0.9 and ignored.counters == pytest.approx(4.0)
    short = drafting_findings.draft_window(_regime(schedule=(), fault="drafts-short", short_share=0.5), rng)
    assert short.mismatch == 1.0 and short.counters == pytest.approx(2.0)
    # a schedule whose batch sits in its largest K's range: ignoring it changes nothing, so nothing is off
    assert drafting_findings.draft_window(_regime(fault="ignore-spec-schedule", batch_mean=8.0), rng).mismatch == 0


def test_the_findings_groups_run_and_are_no_longer_listed_as_not_yet_measured():
    assert {"knee", "gates", "drafting"} <= set(run.GROUPS)
    assert not any("knee" in name or "drafts-short" in name for name, _ in run.NOT_YET)
    tallies = Tallies()
    rng = np.random.default_rng(46)
    for _ in range(20):
        drafting_findings.score_drafting(rng, tallies)
    assert {"drafts-short flag: false alarm", "drafts-short flag: miss"} <= set(tallies.claims)


def test_counters_that_saw_no_draft_read_zero_drafted_tokens_per_step_as_the_runners_window_reads_them():
    # the batch held past the schedule's last boundary: every step on its K=0 side, the counters there all along
    window = drafting_findings.draft_window(_regime(batch_mean=500.0, batch_sd=0.05), np.random.default_rng(0))
    assert window.mismatch == 0 and window.counters == 0.0 and window.requests == 0.0
    assert drafting_findings.draft_window(_regime(batch_mean=500.0, counters=False),
                                          np.random.default_rng(0)).counters is None


def test_a_gate_left_unknown_where_its_truth_clearly_fires_is_shown_beside_its_misses_not_hidden():
    tallies = Tallies()
    for status in ("unknown", "pass", "fail"):
        gate_findings._judge(tallies, "latency", status, True, True, 0.025, {}, "within", "beyond")
    miss, unknown = (tallies.claims[f"latency gate: {what}"] for what in ("miss", "clearly beyond, left unknown"))
    assert (miss.hits, miss.trials) == (1, 3) and (unknown.hits, unknown.trials, unknown.kind) == (1, 3, "shown")


def test_a_ramp_with_one_valid_stage_is_neither_a_miss_nor_a_repeat_asked(monkeypatch):
    from lookahead_runner.decision.schema import Knee

    regime = gate_findings.KneeRegime(2.0, 8.0, 20.0, 0.01, 60.0, 1, Named())   # a clear knee at 4 -> 8 users
    monkeypatch.setattr(gate_findings, "draw_knee", lambda rng: regime)
    monkeypatch.setattr(gate_findings.adapters_findings, "ramp_knee",
                        lambda *args: Knee(k=4, reason="one stage only at K=4: no ramp to judge"))
    tallies = Tallies()
    gate_findings.score_knee(np.random.default_rng(0), tallies)
    assert tallies.claims["knee: miss (says no knee)"].hits == 0
    assert tallies.claims["knee: true knee unsure (repeat asked)"].hits == 0
