"""Drafted tokens per step against what the setting promises (telemetry/drafting.py), and its place in a window."""
from __future__ import annotations

import math

import pandas as pd
import pytest

from lookahead_runner.runfolder.analysis import Drafting, WindowRules, stage_rows
from lookahead_runner.telemetry.drafting import (drafted_per_step, drafting_share, drafting_share_limit,
                                                 expected_drafts, not_in_effect, tolerance)
from unit.runfolder.test_analysis import life

DOWN_TO_2 = [[1, 84, 4], [85, 128, 2]]
OFF_ABOVE_84 = [[1, 84, 4], [85, 128, 0]]


def test_a_single_k_expects_k_whatever_the_batch_and_k0_expects_no_draft():
    assert expected_drafts(4, None, [3, 90]).value == 4.0 and expected_drafts(4).low == expected_drafts(4).high == 4
    zero = expected_drafts(0, None, [12])
    assert (zero.value, zero.drafts) == (0.0, False)


def test_a_schedule_expects_its_k_at_the_real_batch_on_either_side():
    assert expected_drafts(4, DOWN_TO_2, [60, 70, 80]).value == 4.0
    above = expected_drafts(4, DOWN_TO_2, [90, 91, 92])
    assert (above.value, above.low, above.high, above.batch) == (2.0, 2.0, 2.0, 91.0)


def test_a_batch_moving_across_a_boundary_mixes_the_two_k_by_the_drafts_on_each_side():
    # readings 80 and 90: steps at batch 80 make 80 drafts of 4, those at 90 make 90 drafts of 2
    mixed = expected_drafts(4, DOWN_TO_2, [80, 90])
    assert mixed.value == pytest.approx((80 * 4 + 90 * 2) / 170) and (mixed.low, mixed.high) == (2.0, 4.0)
    # three readings of four below: the mix leans to K=4
    assert expected_drafts(4, DOWN_TO_2, [83, 84, 84, 86]).value == pytest.approx((251 * 4 + 86 * 2) / 337)
    # anywhere between the two sides' K is in effect (the mix is approximate); beyond them, with the tolerance, not
    assert not_in_effect(4, 3.6, mixed, schedule=True) == "" and not_in_effect(4, 2.0, mixed, schedule=True) == ""
    assert not_in_effect(4, 1.5, mixed, schedule=True).startswith(
        "the schedule drafted 1.5 tokens per step at batch 85")


def test_k0_above_a_boundary_counts_no_draft_so_only_the_drafting_side_sets_the_ratio():
    assert expected_drafts(4, OFF_ABOVE_84, [80, 91]).value == 4.0      # the K=0 steps count no draft (vLLM)
    off = expected_drafts(4, OFF_ABOVE_84, [90, 91, 92])
    assert not off.drafts
    assert not_in_effect(4, 4.0, off, schedule=True) == \
        "the schedule drafted 4.0 tokens per step at batch 91 (expected no drafts: K=0 at that batch)"
    assert not_in_effect(4, 0.0, off, schedule=True) == ""


def test_off_by_more_than_the_tolerance_is_not_in_effect_with_the_reason_written():
    four = expected_drafts(4)
    assert tolerance(4) == pytest.approx(0.4) and tolerance(1) == 0.25
    assert not_in_effect(4, 2.1, four) == "K=4 drafted 2.1 tokens per step (expected 4)"
    assert not_in_effect(4, 3.7, four) == "" and not_in_effect(4, 4.0, four) == ""
    assert not_in_effect(4, 3.5, four) != "" and not_in_effect(4, None, four) == ""
    assert not_in_effect(0, 4.0, expected_drafts(0)) == "K=0 drafted 4.0 tokens per step (expected no drafts: K=0)"


@pytest.mark.parametrize("drafted, drafts, per_step", [(400, 100, 4.0), (200, 100, 2.0), (0, 0, None),
                                                         (None, 10, None), (math.nan, 10, None), (40, -3, None)])
def test_drafted_per_step_is_the_ratio_of_the_two_counters(drafted, drafts, per_step):
    assert drafted_per_step(drafted, drafts) == per_step


# --- in a stage window (runfolder/analysis.py) --------------------------------------------------------------
def rows(k, server_edit=None, drafting=None):
    reqs, stages, server, gpu = life()
    if server_edit:
        server_edit(server)
    return stage_rows(pd.DataFrame(reqs), stages, server, gpu, f"k{k}", k, 0, WindowRules(warmup_s=2.5, min_requests=5),
                      Drafting(k) if drafting is None else drafting)


def test_a_window_that_drafted_k_is_in_effect_beside_its_acceptance():
    first, second = rows(4)
    assert (first["drafted_per_step"], first["drafted_expected"]) == (4.0, 4.0)
    assert first["in_effect"] and first["valid"] and not second["invalid_reason"]


def test_a_window_drafting_half_of_k_is_not_in_effect_and_invalid_with_the_reason():
    def half(server):
        server["spec_draft_tokens_total"] = server["spec_drafts_total"] * 2
    first, _ = rows(4, half)
    assert first["drafted_per_step"] == 2.0 and not first["in_effect"] and not first["valid"]
    assert first["invalid_reason"] == "not in effect: K=4 drafted 2.0 tokens per step (expected 4)"


def test_a_k0_life_that_drafts_is_flagged_the_same_way():
    first, _ = rows(0)
    assert not first["valid"] and first["invalid_reason"] == \
        "not in effect: K=0 drafted 4.0 tokens per step (expected no drafts: K=0)"


def test_a_k_life_whose_counters_stand_still_under_load_drafted_nothing():
    def frozen(server):
        for name in ("spec_draft_tokens_total", "spec_drafts_total", "spec_accepted_total"):
            server[name] = 0
    first, _ = rows(4, frozen)
    assert first["drafted_per_step"] == 0.0 and "K=4 drafted 0.0 tokens per step" in first["invalid_reason"]


def test_the_confirmation_life_is_checked_but_not_invalidated_and_without_a_check_nothing_changes():
    first, _ = rows(4, drafting=Drafting(4, ((1, 1, 4), (2, 64, 0)), invalidates=False))
    assert first["valid"] and not first["in_effect"] and "expected no drafts" in first["not_in_effect"]
    reqs, stages, server, gpu = life()
    plain = stage_rows(pd.DataFrame(reqs), stages, server, gpu, "k4", 4, 0, WindowRules(warmup_s=2.5, min_requests=5))
    assert plain[0]["in_effect"] and plain[0]["valid"] and math.isnan(plain[0]["drafted_expected"])


def test_where_no_draft_is_expected_a_few_drafts_from_dips_under_the_boundary_are_let_go():
    off = expected_drafts(4, OFF_ABOVE_84, [90, 91, 92])
    # 30 drafts in 1000 decode steps: the batch dipped under 85 between two scrapes
    dips = drafting_share(30, 1060, 60)
    assert dips == pytest.approx(0.03) and not_in_effect(4, 4.0, off, schedule=True, share=dips) == ""
    # a server ignoring the schedule drafts in nearly every step (the first token of each request is a step too)
    ignored = drafting_share(250, 1000, 750)
    assert ignored == 1.0 and not_in_effect(4, 4.0, off, schedule=True, share=ignored) != ""
    assert not_in_effect(4, 4.0, off, schedule=True, share=None) != ""      # unknown: the ratio alone
    assert drafting_share(10, None, 3) is None and drafting_share(10, 5, 5) is None


def test_a_window_straddling_a_k0_boundary_that_made_no_draft_is_in_effect():
    # readings 19 and 22 around a K=0 range from 21: the steps may all have run at K=0 (a scrape caught a dip)
    straddle = expected_drafts(4, [[1, 20, 4], [21, 128, 0]], [19, 22, 22])
    assert straddle.drafts and straddle.skips and not_in_effect(4, 0.0, straddle, schedule=True) == ""
    assert not_in_effect(4, 4.0, straddle, schedule=True) == ""
    assert not_in_effect(4, 2.0, straddle, schedule=True) != ""          # drafted, but not the K=4 of that side
    assert not expected_drafts(4, DOWN_TO_2, [80, 90]).skips               # no K=0 side: 0 is not in effect
    assert not_in_effect(4, 0.0, expected_drafts(4, DOWN_TO_2, [80, 90]), schedule=True) != ""


def test_a_window_straddling_a_k0_boundary_is_judged_by_the_share_of_steps_that_drafted():
    """The ratio sees drafting steps only, so a window whose batch dipped under the boundary now and then reads the
    drafting side's K whether or not the schedule was applied: the share of decode steps that drafted tells."""
    # a stage at 34 users on a host that starves the client: 2 of 10 readings under the boundary of 20
    dipping = expected_drafts(4, [[1, 20, 4], [21, 128, 0]], [27, 28, 18, 27, 26, 28, 19, 27, 28, 27])
    assert dipping.skips and dipping.share == pytest.approx(37 / 255)
    applied = drafting_share(60, 460, 60)            # 15 % of the decode steps drafted: the dips
    assert not_in_effect(4, 4.0, dipping, schedule=True, share=applied) == ""
    ignored = drafting_share(350, 850, 450)          # 88 %: every step but the requests' first tokens
    reason = not_in_effect(4, 4.0, dipping, schedule=True, share=ignored)
    assert reason == "the schedule drafted in 88% of its decode steps at batch 26 (expected about 15%: K=0 in the others)"
    assert not_in_effect(4, 4.0, dipping, schedule=True, share=None) == ""      # unknown share: the ratio alone
    # mostly on the drafting side (72 %): the 28 % of steps expected at K=0 drafted but for 12 % (first tokens)
    mostly = expected_drafts(4, [[1, 20, 4], [21, 128, 0]], [18, 19, 20, 22])
    assert mostly.share == pytest.approx(57 / 79) and not_in_effect(4, 4.0, mostly, schedule=True, share=ignored) != ""


@pytest.mark.parametrize("expected_share", [0.15, 0.5, 0.75, 0.8, 0.9])
def test_an_ignored_schedule_is_flagged_whatever_share_of_its_steps_should_draft(expected_share):
    """The share's limit scales with the steps expected at K=0 (1 - s): an additive margin (s + 0.25) can never be
    passed once s is above 0.75, though an ignored schedule still drafts in every step but the first tokens."""
    first_tokens = 0.02                                   # long outputs: 2 % of the steps are first tokens
    at_k0 = round((1 - expected_share) * 100)             # readings at batch 21 (K=0 side) of 100, the rest at 20
    window = expected_drafts(4, [[1, 20, 4], [21, 128, 0]], [20] * (100 - at_k0) + [21] * at_k0)
    s = window.share
    assert s == pytest.approx(expected_share, abs=0.02)
    applied, ignored = s * (1 - first_tokens), 1 - first_tokens
    assert drafting_share_limit(s) == pytest.approx(s + 0.25 * (1 - s))
    assert not_in_effect(4, 4.0, window, schedule=True, share=applied) == ""
    assert not_in_effect(4, 4.0, window, schedule=True, share=ignored).startswith(
        f"the schedule drafted in {ignored:.0%} of its decode steps")
    # readings that overstate the K=0 steps by less than 4/3 are let go: the batch approximation's room
    assert not_in_effect(4, 4.0, window, schedule=True, share=1 - (1 - s) / 1.3) == ""
    assert drafting_share_limit(None) == drafting_share_limit(0.0) == 0.25   # where no draft is expected at all


def test_a_schedule_ignored_across_a_boundary_between_two_drafting_k_is_not_in_effect():
    """Issue 46 (the calibration suite's drafts-short flag, benchmarks/calibration/drafting_findings.py): a window
    whose batch crosses from K=4 to K=2 accepted anything between 2 and 4, so a server drafting its largest K in every
    step (--sim-fault ignore-spec-schedule, vLLM #51510) read 4.0 and passed: half of such windows were missed. With
    60 readings half each side the mix is known to a few per cent: 4.0 is not it, nor half of it (drafts short)."""
    readings = [80] * 30 + [90] * 30
    mixed = expected_drafts(4, DOWN_TO_2, readings)
    assert mixed.value == pytest.approx((80 * 4 + 90 * 2) / 170)
    assert not_in_effect(4, mixed.value, mixed, schedule=True) == ""             # the schedule applied
    assert not_in_effect(4, 0.97 * mixed.value, mixed, schedule=True) == ""      # a few drafts cut near the end
    assert not_in_effect(4, 4.0, mixed, schedule=True).startswith(
        "the schedule drafted 4.0 tokens per step at batch 85 (expected about 2.9: 2.5 to 3.4 by its 60 readings")
    assert not_in_effect(4, 0.7 * mixed.value, mixed, schedule=True) != ""       # drafts-short=0.7
    # two readings tell the mix only roughly: anywhere between the two sides' K stays in effect
    assert not_in_effect(4, 3.6, expected_drafts(4, DOWN_TO_2, [80, 90]), schedule=True) == ""
