"""Drafted tokens per step from the requests' own metrics (vLLM 0.32 --per-request-spec-decode-metrics): the
window's figure, the in-effect check falling back to it where the counters are missing, and the two figures
disagreeing (telemetry/drafting.py check_window; runfolder/analysis.py)."""
from __future__ import annotations

import dataclasses
import math

import pandas as pd
import pytest
from unit.decision.test_confirm import decided  # noqa: F401  (the fixture)
from unit.decision.test_confirm_in_effect import REQ, cells, confirm

from lookahead_runner.decision.confirmation.confirm import with_confirmation
from lookahead_runner.decision.gates.in_effect import findings_from
from lookahead_runner.report.confirmation import confirmation_view
from lookahead_runner.runfolder.analysis import SUMMARY_COLUMNS, Drafting, WindowRules, stage_rows, summary_frame
from lookahead_runner.telemetry.drafting import COUNTERS, REQUESTS, check_window, disagreement, expected_drafts
from unit.runfolder.test_analysis import life

COUNTER_NAMES = ("spec_draft_tokens_total", "spec_drafts_total", "spec_accepted_total")
SCHEDULE = [[1, 84, 4], [85, 128, 0]]


def rows(k=4, per_request=None, drop_counters=False, drafting=None):
    """The two stage windows of test_analysis's life; `per_request(i) -> (spec_steps, spec_draft_tokens)` or None
    (that request carries no metrics)."""
    reqs, stages, server, gpu = life()
    for i, req in enumerate(reqs):
        spec = per_request(i) if per_request else None
        req.update(spec_steps=spec[0] if spec else None, spec_draft_tokens=spec[1] if spec else None)
    if drop_counters:
        server = server.drop(columns=list(COUNTER_NAMES))
    return stage_rows(pd.DataFrame(reqs), stages, server, gpu, f"k{k}", k, 0,
                      WindowRules(warmup_s=2.5, min_requests=5), Drafting(k) if drafting is None else drafting)


def test_the_window_figure_pools_its_successful_requests_steps_not_their_ratios():
    # request i: 10 + i steps of 4 tokens, except every third one: 1 step of 1 token (a draft cut short)
    def metrics(i):
        return (1, 1) if i % 3 == 0 else (10 + i, 4 * (10 + i))
    first, second = rows(per_request=metrics)
    # window 0: requests done in [102.5, 110] are i = 4..19, ok, i = 5 failed (no metrics counted)
    done = [i for i in range(4, 20) if i != 5]
    steps = sum(metrics(i)[0] for i in done)
    assert first["drafted_per_step_requests"] == pytest.approx(sum(metrics(i)[1] for i in done) / steps)
    assert 3.5 < first["drafted_per_step_requests"] < 4.0          # not the mean of ratios (3.0)
    assert second["drafted_per_step_requests"] < 4.0 and first["drafted_source"] == COUNTERS


def test_no_request_carrying_metrics_leaves_it_empty_and_requests_that_never_drafted_read_0():
    first, _ = rows()
    assert math.isnan(first["drafted_per_step_requests"]) and first["drafted_source"] == COUNTERS
    nothing, _ = rows(per_request=lambda i: (0, 0))
    assert nothing["drafted_per_step_requests"] == 0.0
    some = rows(per_request=lambda i: (10, 40) if i % 2 else None)[0]    # only some carry them: those count
    assert some["drafted_per_step_requests"] == 4.0


def test_where_the_counters_are_missing_the_requests_figure_decides_and_says_so():
    first, _ = rows(per_request=lambda i: (10, 40), drop_counters=True)
    assert math.isnan(first["drafted_per_step"]) and first["drafted_per_step_requests"] == 4.0
    assert first["drafted_source"] == REQUESTS and first["in_effect"] and first["valid"]
    half, _ = rows(per_request=lambda i: (10, 20), drop_counters=True)
    assert half["drafted_source"] == REQUESTS and not half["in_effect"] and not half["valid"]
    assert half["invalid_reason"] == ("not in effect: K=4 drafted 2.0 tokens per step (expected 4, from the "
                                      "requests' own metrics: the counters missing)")
    assert findings_from([half])[0].reason == half["not_in_effect"]   # whole: the gate quotes it in the verdict
    neither, _ = rows(drop_counters=True)
    assert neither["drafted_source"] == "" and neither["in_effect"] and neither["valid"]


def test_a_single_k_whose_counters_and_requests_disagree_is_not_in_effect_naming_both():
    first, _ = rows(per_request=lambda i: (10, 20))       # the counters read 4.0 (test_analysis's life)
    assert first["drafted_per_step"] == 4.0 and first["drafted_source"] == COUNTERS
    assert not first["in_effect"] and not first["valid"]
    assert first["invalid_reason"] == ("not in effect: K=4: the counters read 4.0 drafted tokens per step, the "
                                       "requests' own metrics 2.0")
    assert findings_from([first])[0].reason == first["not_in_effect"]
    agree, _ = rows(per_request=lambda i: (10, 38))       # 3.8: within the tolerance (0.4 at K=4)
    assert agree["in_effect"] and agree["valid"]


def test_both_off_say_the_counters_reason_and_the_requests_figure():
    four = expected_drafts(4)
    check = check_window(4, 2.0, 4.0, four)
    assert check.reason == "K=4 drafted 2.0 tokens per step (expected 4), the requests' own metrics 4.0"
    assert check_window(4, 2.0, 2.0, four).reason == "K=4 drafted 2.0 tokens per step (expected 4)"
    assert check_window(4, None, None, four) == check_window(4, None, None, four, schedule=SCHEDULE)
    assert check_window(4, None, None, four).source == "" and not check_window(4, None, None, four).reason
    assert disagreement(1.0, 1.25) == "" and disagreement(1.0, 1.3) != "" and disagreement(None, 3.0) == ""


def test_on_a_schedule_a_disagreement_is_a_note_not_a_fault():
    off = expected_drafts(4, SCHEDULE, [90, 91, 92])         # the K=0 side
    check = check_window(4, 4.0, 0.0, off, schedule=SCHEDULE, share=0.02)   # a few drafts from dips
    assert check.reason == "" and check.note.startswith(
        "the counters read 4.0 drafted tokens per step, the requests' own metrics 0.0 (on a schedule the two can "
        "differ: a request's steps reach outside the window")
    first, _ = rows(per_request=lambda i: (10, 20), drafting=Drafting(4, ((1, 128, 4),), invalidates=False))
    assert first["in_effect"] and first["valid"] and "the requests' own metrics 2.0" in first["drafted_note"]


def test_on_a_schedule_without_counters_or_a_batch_read_the_requests_figure_is_judged_against_any_of_its_k():
    """The requests' own figure cannot say what a schedule drafted at the window's batch alone (their steps reach
    outside the window, at other batches and so other K, as the module's docstring says): with no batch read while
    they ran (no `request_batches`) it is judged against every K the schedule runs, never with the single-K
    tolerance around the K at the window's batch."""
    down = [[1, 20, 4], [21, 128, 2]]
    at_30 = expected_drafts(4, down, [30, 31, 30])                   # K=2 at the window's batch
    mixed = check_window(4, None, 3.0, at_30, schedule=down)         # requests that started below 21 drafted 4
    assert mixed.source == REQUESTS and mixed.measured == 3.0 and mixed.reason == ""
    assert check_window(4, None, 3.0, at_30).reason != ""            # a single K: judged as before
    none = check_window(4, None, 0.0, at_30, schedule=down)          # no K=0 range: drafting nothing is a fault
    assert none.reason == ("the schedule drafted 0.0 tokens per step (expected between 2 and 4, from the requests' "
                           "own metrics: the counters missing)")
    assert check_window(4, None, 6.0, at_30, schedule=down).reason != ""
    off = expected_drafts(4, SCHEDULE, [90, 91, 92])                  # the K=0 side
    assert check_window(4, None, 4.0, off, schedule=SCHEDULE).reason == ""   # requests whose steps ran below 85
    assert check_window(4, None, 0.0, off, schedule=SCHEDULE).reason == ""
    assert check_window(4, None, 1.0, off, schedule=SCHEDULE).reason != ""   # no K of the schedule drafts 1


def test_the_confirmation_stage_reads_the_requests_figure_where_the_counters_are_missing_and_keeps_the_note(
        decided):  # noqa: F811
    by_users = cells({u: math.nan for u in REQ})
    noted = {u: dataclasses.replace(cell, windows=tuple(
        dataclasses.replace(w, server={**w.server, "drafted_per_step_requests": 4.0},
                            drafted_note="the counters read 4.0 drafted tokens per step, the requests' own metrics "
                                         "0.0 (on a schedule ...)" if u == 32 else "")
        for w in cell.windows)) for u, cell in by_users.items()}
    c = confirm(decided, noted)
    assert [s.drafted_per_step for s in c.stages] == [4.0] * 4 and "not in effect" not in c.verdict
    assert [(s.users, s.drafted_note) for s in c.stages if s.drafted_note] == [
        (32, "the counters read 4.0 drafted tokens per step, the requests' own metrics 0.0 (on a schedule ...)")]
    view = confirmation_view(with_confirmation(decided[1], c))
    assert view["drafted_notes"] == ["32 users: the counters read 4.0 drafted tokens per step, the requests' own "
                                     "metrics 0.0 (on a schedule ...)"]


def test_the_summary_keeps_both_figures_and_the_source_beside_the_counters():
    names = list(SUMMARY_COLUMNS)
    assert names.index("drafted_per_step_requests") == names.index("drafted_per_step") + 1
    frame = summary_frame(rows(per_request=lambda i: (10, 40), drop_counters=True))
    assert frame["drafted_source"].tolist() == [REQUESTS, REQUESTS]
    assert frame["drafted_per_step_requests"].tolist() == [4.0, 4.0] and "drafted_note" not in frame


DEMO_SCHEDULE = ((1, 24, 8), (25, 84, 4), (85, 1_000_000, 0))   # the demo's (16 users K=8, 64 K=4, 128 K=0)


def _confirm_rows(running: list[float], per_request, send_before_s: float = 1.0):
    """The confirmation life's two windows on the demo's schedule with the counters missing (the requests' own figure
    decides): `running` the real batch read at test_analysis's six scrapes, each request sent `send_before_s` before
    it finished."""
    reqs, stages, server, gpu = life()
    for i, req in enumerate(reqs):
        req.update(t_send_s=req["t_done_s"] - send_before_s, spec_steps=per_request(i)[0],
                   spec_draft_tokens=per_request(i)[1])
    server = server.drop(columns=list(COUNTER_NAMES)).assign(running=running)
    return stage_rows(pd.DataFrame(reqs), stages, server, gpu, "confirm", 8, 0,
                      WindowRules(warmup_s=2.5, min_requests=5), Drafting(8, DEMO_SCHEDULE, invalidates=False))


def test_a_schedule_the_server_ignores_is_not_in_effect_by_the_requests_own_figure():
    """The demo with --sim-fault ignore-spec-schedule (vLLM #51510) and its confirmation judged by the requests' own
    metrics: every step drafts num_speculative_tokens, the schedule's largest K (8), at a real batch of ~52 where the
    schedule runs K=4, and above its K=0 boundary. Judged against any K of the schedule, 8.0 passed at every stage
    (it is one of them: an ignored schedule could never be caught so), and the verdict blamed a fall in req/s. The
    requests' figure is judged against the K at the batches read while they ran: there K=4, or no draft."""
    ignored = _confirm_rows([0, 51, 52, 53, 90, 91], lambda i: (10, 80))
    first, second = ignored
    assert first["drafted_source"] == REQUESTS and first["drafted_per_step_requests"] == 8.0
    assert not first["in_effect"] and first["not_in_effect"] == (
        "the schedule drafted 8.0 tokens per step at batch 52 (expected 4, from the requests' own metrics: the "
        "counters missing)")
    assert not second["in_effect"] and second["not_in_effect"].startswith(
        "the schedule drafted 8.0 tokens per step at batch 90 (expected no drafts: K=0 at that batch")
    applied = _confirm_rows([0, 51, 52, 53, 90, 91], lambda i: (10, 40))
    assert applied[0]["in_effect"] and applied[0]["not_in_effect"] == ""


def test_a_schedules_requests_that_ran_below_a_boundary_before_the_window_are_in_effect():
    """Issue 36's case kept: requests finishing in a window on the K=0 side ran part of their steps before it, at a
    batch below the boundary (read at 105 s, before the second window's start at 112.5 s), and drafted K=4 there."""
    reqs_ran_below = _confirm_rows([0, 51, 52, 80, 90, 91], lambda i: (10, 40), send_before_s=8.0)
    assert reqs_ran_below[1]["in_effect"], reqs_ran_below[1]["not_in_effect"]
    same_but_short = _confirm_rows([0, 51, 52, 80, 90, 91], lambda i: (10, 40), send_before_s=1.0)
    assert not same_but_short[1]["in_effect"]    # no reading below the boundary while they ran
