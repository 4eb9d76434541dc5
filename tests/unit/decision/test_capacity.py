"""Capacity within the SLO (decision/capacity/): where each K's attainment leaves its target, in rate and users,
with an interval from the attainment's uncertainty and the bracket; the capacity search's next probe (bracket, then
bisect, under the budget) and its clearly-over rule."""
from __future__ import annotations

import math

import numpy as np
import pytest

from lookahead_runner.config import DecisionConfig
from lookahead_runner.decision.adaptive import Budget, Spent
from lookahead_runner.decision.capacity.estimate import (Point, capacities, crossing, holds_at, non_increasing,
                                                            rate_points, with_over)
from lookahead_runner.decision.capacity.search import clearly_over, next_probe, plan_for
from lookahead_runner.decision.cells.evidence import Cell, Evidence, Window

from .rate_windows_factory import rate_window

P = DecisionConfig(slo={"ttft_p99_ms": 500.0})


def _cross(points, target=0.99):
    return crossing(points, target, 0.95, np.random.default_rng(0))


def test_the_crossing_lies_on_the_line_between_the_last_rate_that_holds_and_the_first_that_does_not():
    c = _cross([Point(10, 1000, 1000), Point(14, 999, 1000), Point(18, 975, 1000)])
    assert c.bracket == (14, 18)
    assert c.value == pytest.approx(14 + (0.999 - 0.99) / (0.999 - 0.975) * 4, rel=1e-6)
    assert c.low < c.value < c.high and 13 < c.low and c.high < 18.5
    assert c.text("req/s").startswith(f"{c.value:.1f} req/s [")


def test_a_cliff_keeps_the_estimate_inside_the_brackets_middle_half_and_behind_alone_its_middle():
    cliff = _cross([Point(10, 1000, 1000), Point(20, 0, 1000)])
    assert cliff.value == pytest.approx(10 * 2 ** 0.25)
    behind = _cross([Point(10, 1000, 1000), Point(20, 1000, 1000, behind=True)])
    assert behind.value == pytest.approx(10 * math.sqrt(2)) and behind.bracket == (10, 20)


def test_the_interval_is_never_narrower_than_the_bracket_nothing_between_two_rates_being_measured():
    c = _cross([Point(10, 1000, 1000), Point(20, 0, 1000)])
    assert (c.low, c.high) == (10, 20)


def test_few_arrivals_widen_the_interval_a_rate_that_holds_by_chance_is_not_proof():
    sure = _cross([Point(8, 2000, 2000), Point(10, 2000, 2000), Point(12, 0, 2000)], 0.99)
    thin = _cross([Point(8, 40, 40), Point(10, 40, 40), Point(12, 0, 40)], 0.99)
    # sure: the interval starts at the last rate that holds; thin: 40 of 40 met is no proof of 99 % at 10 or 8
    assert sure.low == 10 and (thin.low is None or thin.low < 10)


def test_a_noisy_low_rate_is_pooled_with_the_next_the_attainment_falling_as_the_rate_rises():
    assert non_increasing(np.array([0.97, 1.0, 0.2]), np.array([30, 300, 100])).tolist() == \
        pytest.approx([(0.97 * 30 + 300) / 330] * 2 + [0.2])
    c = _cross([Point(4, 29, 30), Point(8, 300, 300), Point(16, 10, 100)], 0.95)
    assert c.bracket == (8, 16)


def test_every_rate_holding_or_none_is_a_side_unbounded():
    above = _cross([Point(4, 500, 500), Point(8, 500, 500)])
    below = _cross([Point(4, 10, 500), Point(8, 0, 500)])
    assert above.value is None and above.bracket == (8, None) and above.text("req/s") == "> 8 req/s"
    assert below.value is None and below.bracket == (None, 4) and below.text("req/s") == "< 4 req/s"


def test_capacities_per_k_in_rate_and_users_and_gain_over_the_baseline():
    windows = [rate_window(0, r, 600, met, behind=r > 12) for r, met in ((8, 600), (12, 598), (16, 200))] + \
              [rate_window(4, r, 600, met) for r, met in ((8, 600), (12, 600), (16, 599), (24, 300))]

    def window(k, users, met, total):
        latency = np.array([[100.0 if i < met else 900.0, 20, 25, 1000] for i in range(total)])
        return Window(k, 0, users, 10.0, np.linspace(0, 9, total), np.full(total, 16.0), latency, total, 0, 0)

    cells = {(k, u): Cell(k, u, (window(k, u, met, 500),))
             for k, u, met in ((0, 16, 500), (0, 32, 400), (4, 16, 500), (4, 32, 500), (4, 64, 300))}
    rows = capacities(windows, Evidence(cells, 16), P)
    k0, k4 = rows
    assert k0.rate_bracket == [12, 16] and 12 < k0.rate < 16 and k4.rate_bracket == [16, 24]
    assert k0.users_bracket == [16, 32] and k4.users_bracket == [32, 64] and k0.users_from == "user stages"
    assert k4.gain == pytest.approx(k4.rate / k0.rate - 1)
    assert k4.text.startswith(f"K=4 {k4.rate:.1f} req/s [") and " / " in k4.text and k4.text.endswith(")")
    assert holds_at(k4, 10.0) is True and holds_at(k0, 30.0) is False


def test_without_user_stages_the_concurrency_is_littles_law_at_the_rate_capacity():
    windows = [rate_window(0, r, n, met) for r, n, met in ((8, 80, 80), (16, 160, 20))]
    (row,) = capacities(windows, None, P)
    # the open loop's mean requests in the system at its rate capacity, named so: not a closed loop's users (one
    # of U users never waits while U fits the server's slots, so that L sits well below the users capacity)
    assert row.users_from == "Little's law" and "(Little's law" in row.text
    assert row.users_text.startswith(f"about {row.users:.0f} requests in flight at that capacity")
    assert "not the users a closed loop holds" in row.text and " users (Little's law)" not in row.text
    # requests in the system: the arrival rate times the mean time in it (about 1.1 s at 8 req/s: 8.8 of them)
    in_system = [float(np.nansum(w.latency_ms[:, 3])) / 1000 / w.duration_s for w in windows]
    assert in_system[0] == pytest.approx(8.8, rel=0.01)
    assert 8 < row.rate < 16 and row.users == pytest.approx(np.interp(row.rate, [8, 16], in_system), rel=1e-6)


def test_no_capacity_without_an_slo():
    assert capacities([rate_window(0, 8.0, 100, 100)], None, DecisionConfig()) == []


# ------------------------------------------------------------------ the search

REACH = (0.1, 1000.0)


def test_the_search_doubles_while_every_rate_holds_halves_while_none_does_and_bisects_a_bracket():
    assert plan_for(0, [Point(8, 100, 100)], 0.9, 0.1, REACH).rate == 16
    assert plan_for(0, [Point(8, 10, 100)], 0.9, 0.1, REACH).rate == 4
    bisect = plan_for(0, [Point(8, 100, 100), Point(16, 10, 100)], 0.9, 0.1, REACH)
    assert bisect.rate == pytest.approx(math.sqrt(128), abs=1e-3) and "bisecting [8, 16]" in bisect.why
    done = plan_for(0, [Point(10, 100, 100), Point(10.5, 10, 100)], 0.9, 0.1, REACH)
    assert done.rate is None and "within 10%" in done.why


def test_the_next_probe_is_the_ks_with_fewest_probes_and_stops_when_bracketed_or_over_budget():
    points = {0: [Point(8, 100, 100), Point(16, 10, 100)], 4: [Point(8, 100, 100), Point(16, 100, 100)]}
    budget = Budget(max_lives=10)
    first = next_probe([0, 4], points, {0: 2, 4: 1}, Spent({0: 3, 4: 2}), budget, 0.9, 0.1, REACH)
    assert (first.k, first.rate) == (4, 32)
    over = next_probe([0, 4], points, {}, Spent({0: 5, 4: 5}), budget, 0.9, 0.1, REACH)
    assert over.k is None and over.stop == "budget" and "sweep.max_lives = 10" in over.why
    narrow = {k: [Point(10, 100, 100), Point(10.5, 10, 100)] for k in (0, 4)}
    done = next_probe([0, 4], narrow, {}, Spent({0: 2, 4: 2}), budget, 0.9, 0.1, REACH)
    assert done.k is None and done.stop == "decided" and done.why.startswith("every K's capacity is bracketed")
    minutes = next_probe([0, 4], points, {}, Spent({0: 1, 4: 1}, server_s=590, next_life_s=20),
                         Budget(10, max_server_s=600), 0.9, 0.1, REACH)
    assert minutes.stop == "budget" and "sweep.max_server_minutes" in minutes.why


def test_the_adaptive_sweeps_probes_bisect_a_bracket_before_doubling_a_k_that_holds_every_rate():
    # K=0 bracketed (8, 16) with a probe already, K=4 holding every rate: the capacity search spreads its probes
    # over K (K=4's doubling first); the adaptive sweep's, whose verdict a bracket narrowed apart settles, bisects
    points = {0: [Point(8, 100, 100), Point(16, 10, 100)], 4: [Point(8, 100, 100), Point(16, 100, 100)]}
    spread = next_probe([0, 4], points, {0: 1}, Spent({0: 2, 4: 1}), Budget(10), 0.9, 0.01, REACH)
    assert (spread.k, spread.rate) == (4, 32)
    verdict = next_probe([0, 4], points, {0: 1}, Spent({0: 2, 4: 1}), Budget(10), 0.9, 0.01, REACH,
                         bracketed_first=True, lives_named="the verdict's lives and its 4 capacity probes")
    assert verdict.k == 0 and 8 < verdict.rate < 16
    over = next_probe([0, 4], points, {}, Spent({0: 5, 4: 5}), Budget(10), 0.9, 0.01, REACH, bracketed_first=True,
                      lives_named="the verdict's lives and its 4 capacity probes")
    assert "budget: the verdict's lives and its 4 capacity probes = 10 lives run" in over.why


def test_a_k_without_a_valid_window_in_two_lives_is_given_up():
    probe = next_probe([0], {}, {}, Spent({0: 2}), Budget(10), 0.9, 0.1, REACH)
    assert probe.stop == "exhausted" and "K=0 gave no valid rate window in 2 lives" in probe.why


def test_a_probe_is_clearly_over_once_its_queue_grows_past_a_fifth_of_the_arrivals_and_not_before():
    t = np.arange(0, 6, 0.5)
    growing = 5 + 10 * t          # 10 more waiting per second at 20 req/s: serving half the rate
    assert clearly_over(t, growing, 20.0, 1.0, 10.0).startswith("clearly over capacity at 20 req/s: waiting ")
    assert clearly_over(t[t < 2.5], growing[t < 2.5], 20.0, 1.0, 10.0) == ""     # too soon to say
    steady = 3 + (t * 7 % 3)       # a queue that comes and goes
    assert clearly_over(t, steady, 20.0, 1.0, 10.0) == ""
    slow = 5 + 2 * t               # 10 % behind: a finding for the window, not clearly over
    assert clearly_over(t, slow, 20.0, 1.0, 10.0) == ""


def test_an_interval_end_is_a_rate_measured_around_or_unbounded_never_a_number_mixed_with_an_unbounded_draw():
    # about 2.5 % of the draws fall below the lowest rate (16 holds by a hair): the 2.5 % quantile once lay between
    # a finite draw and the "below every rate" stand-in (-1e300) and came out as -2.5e298 req/s
    points = [Point(8, 200, 200), Point(16, 198, 200)]
    for seed in range(60):
        c = crossing(points, 0.99, 0.95, np.random.default_rng(seed))
        for end in (c.low, c.high):
            assert end is None or 8 <= end <= 16, (seed, c)


def test_an_unbounded_interval_end_says_beyond_the_loads_measured_not_a_question_mark():
    thin = _cross([Point(8, 30, 30), Point(16, 25, 30)], 0.95)
    assert thin.value is not None and thin.low is None
    assert "?" not in thin.text("req/s") and "below 8 (the lowest measured)" in thin.text("req/s")
    top = _cross([Point(8, 400, 400), Point(16, 28, 30)], 0.95)
    assert top.value is not None and top.high is None
    assert "?" not in top.text("req/s") and "beyond 16 (the highest measured)" in top.text("req/s")


def test_a_burst_of_misses_at_a_rate_that_holds_widens_the_capacity_interval_below_it():
    p = DecisionConfig(slo={"ttft_p97_ms": 500.0})

    def row(burst):
        windows = [rate_window(0, 8.0, 600, 600, p=p), rate_window(0, 12.0, 600, 590, p=p, burst=burst),
                   rate_window(0, 16.0, 600, 300, p=p)]
        (capacity,) = capacities(windows, None, p)
        assert capacity.rate_bracket == [12, 16]
        return capacity

    assert row(False).rate_range.low == 12 and row(True).rate_range.low < 12


def test_a_probe_ended_early_clearly_over_counts_as_failing_its_rate_even_where_its_short_window_is_invalid():
    # at 1.5 req/s a probe cut 6 s past its warm-up holds 9 arrivals: an invalid window (too few requests); without
    # a point there the search doubled from 1 req/s to the same 2 req/s probe until the budget ran out
    windows = [rate_window(0, 1.0, 60, 60), rate_window(0, 2.0, 9, 2, behind=True, valid=False)]
    assert plan_for(0, rate_points(windows)[0], 0.99, 0.1, REACH).rate == 2.0   # the same probe again
    points = with_over(rate_points(windows), {0: [2.0]})
    assert [(pt.x, pt.behind) for pt in points[0]] == [(1.0, False), (2.0, True)]
    assert plan_for(0, points[0], 0.99, 0.1, REACH).rate == pytest.approx(math.sqrt(2), abs=1e-3)
    assert with_over(rate_points([rate_window(0, 2.0, 60, 10, behind=True)]), {0: [2.0]})[0][0].n == 60
    (row,) = capacities(windows, None, P, over={0: [2.0]})
    assert row.rate_bracket == [1.0, 2.0] and row.rate is not None


def test_the_probes_that_ended_early_are_read_from_the_plan_and_their_status():
    from lookahead_runner.run.verdict.rate_verdict import ended_over
    from lookahead_runner.runfolder.plan import LifeStatus, PlannedLife

    def life(k, repeat, rates):
        return PlannedLife(setting=f"k{k}", k=k, repeat=repeat, argv=[], dir=f"k{k}/r{repeat}", rates=rates)

    lives = [life(0, 0, None), life(0, 1, [4.0]), life(0, 2, [8.0]), life(4, 0, [16.0])]
    statuses = {"k0/r0": LifeStatus(state="done", ended_early="clearly over"),
                "k0/r1": LifeStatus(state="done"), "k0/r2": LifeStatus(state="done", ended_early="clearly over at 8"),
                "k4/r0": LifeStatus(state="done", ended_early="clearly over at 16")}
    assert ended_over(lives, statuses) == {0: [8.0], 4: [16.0]}


def test_a_bisection_probes_a_rate_strictly_inside_its_bracket_at_any_scale():
    # rounded to 3 decimals, the middle of [0.001, 0.0015] was 0.001: the same rate probed again until the budget
    low_rates = plan_for(0, [Point(0.001, 100, 100), Point(0.0015, 10, 100)], 0.9, 0.1, (1e-5, 1000.0))
    assert 0.001 < low_rates.rate < 0.0015
    fine = plan_for(0, [Point(10, 100, 100), Point(10.002, 10, 100)], 0.9, 0.0001, REACH)
    assert 10 < fine.rate < 10.002


def test_the_search_reaches_no_rate_whose_stage_would_hold_more_arrivals_than_a_schedule_may():
    from lookahead_runner.config import SweepConfig
    from lookahead_runner.run.strategies.probes import probe_config, reach

    config = SweepConfig.model_validate({
        "server": {"model": "m"}, "speculation": {"k": [0]}, "decision": {"slo": {"ttft_p99_ms": 500.0}},
        "sweep": {"strategy": "capacity"}, "load": {"stages": [{"rate": 2000.0, "duration_s": 600}]}})
    low, high = reach(config)
    probe_config(config, [high])   # a valid stage, not a traceback in the middle of the search
    assert high * 600 <= 10_000_000


def test_a_rate_whose_probes_gave_no_valid_window_twice_is_not_probed_again():
    # a probe at 16 req/s invalid twice (e.g. the dispatcher late at that rate): the search gives K=0 up, not the budget
    points = {0: [Point(8, 100, 100)]}
    again = next_probe([0], points, {0: 2}, Spent({0: 3}), Budget(20), 0.9, 0.1, REACH, tried={0: [16.0]})
    assert (again.k, again.rate) == (0, 16.0)      # once may have been bad luck (a server that failed)
    stuck = next_probe([0], points, {0: 3}, Spent({0: 4}), Budget(20), 0.9, 0.1, REACH, tried={0: [16.0, 16.0]})
    assert stuck.k is None and stuck.stop == "exhausted" and "K=0's probes at 16 req/s gave no valid window" in stuck.why


# ------------------------------------------------------------------ the interval against the truth (issue 46)


def _point(rate: float, truth: float, target: float, n: int, shape: str, rng: np.random.Generator) -> Point:
    """One load measured with `n` arrivals against a K whose capacity is `truth`. "behind": the K meets every SLO
    until its queue grows without bound past `truth` (the simulator's K=0 on tight-kv meets it at 44 req/s, its
    truth 34); "slope": its misses grow by (rate / truth) ** 20, crossing `target` at `truth`."""
    if shape == "behind":
        return Point(rate, n, n, behind=rate > truth)
    attained = float(np.clip(1 - (1 - target) * (rate / truth) ** 20, 0.0, 1.0))
    return Point(rate, int(rng.binomial(n, attained)), n)


@pytest.mark.parametrize("shape", ["behind", "slope"])
@pytest.mark.parametrize("where", [0.01, 0.1, 0.5, 0.9, 0.99])
def test_the_stated_interval_contains_the_truth_at_its_level_wherever_the_truth_sits_in_the_bracket(where, shape):
    # rates 8, 16, 32 measured, 600 arrivals each; the truth at `where` (geometric) between 8 and 16. The interval
    # once placed each draw uniformly inside its bracket: 95 % of the bracket's middle, missing a truth near its ends
    target, level, trials, n = 0.99, 0.95, 60, 600
    truth = 8 * 2 ** where
    rng = np.random.default_rng(int(where * 1000))
    covered = 0
    for _ in range(trials):
        c = crossing([_point(x, truth, target, n, shape, rng) for x in (8.0, 16.0, 32.0)], target, level, rng,
                     draws=400)
        low, high = -math.inf if c.low is None else c.low, math.inf if c.high is None else c.high
        covered += low <= truth <= high
    # at least the level, less three standard errors of a coverage measured over `trials` trials
    assert covered / trials >= level - 3 * math.sqrt(level * (1 - level) / trials), (truth, covered)


def test_probes_sitting_near_the_target_below_the_capacity_do_not_place_it_where_one_reads_below_by_chance():
    # a capacity search's probes below a capacity of 20 req/s, where the attainment is 95.1 % against a 95 % target,
    # and one past it: with eight such probes one reads below 95 % by chance in most searches, and a bootstrap of
    # the crossing put the capacity under it (it held the truth in 80 of 100 searches)
    target, level, truth = 0.95, 0.95, 20.0
    rng = np.random.default_rng(46)
    held = 0
    for _ in range(100):
        points = [Point(x, int(rng.binomial(300, 0.951)), 300) for x in np.geomspace(4, 16, 8)]
        c = crossing([*points, Point(24.0, int(rng.binomial(300, 0.5)), 300)], target, level, rng, draws=400)
        held += (c.low is None or c.low <= truth) and (c.high is None or truth <= c.high)
    assert held >= 90       # the binomial's 99 % band for 95 % over 100 searches starts at 89 %


# ------------------------------------------------------------------ keeping up as the rate windows judge it (issue 46)


def test_a_too_short_window_is_neither_a_hold_nor_a_fail_in_the_capacity_bracket():
    from . import queue_findings_factory as found

    # 8 req/s met every SLO in a stage too short to tell whether K=0 kept up: the bracket is [4, 16], not [8, 16]
    windows = [found.with_queue(rate_window(0, 4.0, 60, 60), found.keeps_up()),
               found.with_queue(rate_window(0, 8.0, 120, 120), found.too_short()),
               found.with_queue(rate_window(0, 16.0, 240, 240), found.behind())]
    (row,) = capacities(windows, None, P)
    assert row.rate_bracket == [4.0, 16.0] and 4.0 < row.rate < 16.0
    points = rate_points(windows)[0]
    assert [(pt.x, pt.behind, pt.unjudged) for pt in points] == [(4.0, False, False), (8.0, False, True),
                                                                (16.0, True, False)]
    assert (row.rate_range.low or 0.0) <= 4.0 and row.rate_range.high >= 16.0
    # its SLO missed, a too-short window still fails: the attainment is measured whatever the queue
    missed = windows[:1] + [found.with_queue(rate_window(0, 8.0, 120, 60), found.too_short())] + windows[2:]
    (row,) = capacities(missed, None, P)
    assert row.rate_bracket == [4.0, 8.0]
    # the search bisects [4, 32], not [8, 32]; and does not probe again a rate whose stage was too short to tell
    wider = points[:2] + [Point(32.0, 240, 240, behind=True)]
    assert plan_for(0, wider, 0.99, 0.1, REACH).rate == pytest.approx(math.sqrt(4 * 32), abs=1e-3)
    again = plan_for(0, points, 0.99, 0.1, REACH)
    assert again.rate is None and "stage too short" in again.why
    assert next_probe([0], {0: points}, {0: 1}, Spent({0: 2}), Budget(20), 0.99, 0.1, REACH).stop == "exhausted"


def test_repeats_at_a_rate_are_judged_pooled_in_the_capacity_bracket_one_excursion_not_marking_the_k():
    from . import queue_findings_factory as found

    repeats = [found.with_queue(rate_window(0, 8.0, 120, 120, repeat=i), f) for i, f in enumerate(found.excursion())]
    windows = [found.with_queue(rate_window(0, 4.0, 60, 60), found.keeps_up())] + repeats + \
              [found.with_queue(rate_window(0, 16.0, 240, 240), found.behind())]
    assert not repeats[2].keeps_up     # the third repeat alone reads behind
    assert [pt.behind for pt in rate_points(windows)[0]] == [False, False, True]
    (row,) = capacities(windows, None, P)
    assert row.rate_bracket == [8.0, 16.0]


def test_a_probe_is_clearly_over_by_its_queues_own_noise_whatever_the_queues_size():
    # a probe at 10 req/s serving half of it, its waiting queue already long: 350 -> 400 through 10 s, read twice
    # a second with a little jitter. Three square roots of the queue (60) hid a growth of 50 twice beyond the fifth
    # of the arrivals (20)
    rng = np.random.default_rng(3)
    t = np.arange(0, 11, 0.5)
    long_queue = 345 + 5 * t + rng.integers(-2, 3, len(t))
    assert clearly_over(t, long_queue, 10.0, 1.0, 10.0).startswith("clearly over capacity at 10 req/s: waiting ")
    # a queue coming and going by whole waves (answers admitted together end together) is not over
    waves = 20 + 30 * (np.arange(len(t)) % 2)
    assert clearly_over(t, waves, 4.0, 1.0, 10.0) == ""


def test_a_rate_is_placed_at_the_rate_its_windows_were_offered_not_the_configured_one():
    # one Poisson draw (seed 0, stage 0) offers 9 % fewer arrivals than configured in a 30 s window at 9-12 req/s:
    # 10 configured is 9.1 offered. The server held 9.1 req/s, not 10: the capacity is placed in what it held
    windows = [rate_window(0, 10.0, 273, 273, duration_s=30.0), rate_window(0, 12.0, 330, 100, duration_s=30.0)]
    (row,) = capacities(windows, None, P)
    assert row.rate_bracket == [9.1, 11.0] and 9.1 < row.rate < 11.0
    points = rate_points(windows)[0]
    assert [(pt.x, pt.rate) for pt in points] == [(9.1, 10.0), (11.0, 12.0)]
    # the search narrows the bracket of offered rates, probing the configured rate between its ends'
    plan = plan_for(0, points, 0.99, 0.1, REACH)
    assert plan.rate == pytest.approx(math.sqrt(120), abs=1e-3) and "[9.1, 11] req/s offered" in plan.why
    # a configured rate already probed is not probed again, whatever it offered
    again = points + [Point(9.0, 270, 270, rate=round(math.sqrt(120), 3))]
    assert plan_for(0, again, 0.99, 0.1, REACH).rate is None
