"""The probe that sets two K's capacities within the SLO apart where the adaptive sweep's verdict at a rate hangs on
them (decision/capacity/separate.py): the shakier of the two ends that decide it firmed up first, at a rate that
still decides it; nothing where the brackets as measured leave room for the rival (bisection's case)."""
import math

from lookahead_runner.decision.capacity.estimate import Point
from lookahead_runner.decision.capacity.estimate import measured_bracket
from lookahead_runner.decision.capacity.separate import separations

P90, TIE = 0.9, 0.03


def held(x, good=500, n=500, deff=1.0):
    return Point(x=x, good=good, n=n, design_effect=deff, rate=x)


def behind(x):
    return Point(x=x, good=100, n=500, behind=True, rate=x)


def test_a_shaky_hold_of_the_leader_is_firmed_up_at_a_lower_rate_still_high_enough():
    leader = [held(16.0), held(57.5, good=462, deff=8.0)]     # 92.4 % at p90 over 62 independent arrivals
    rival = [held(16.0), behind(40.0)]
    found = separations(4, leader, P90, 0, rival, P90, TIE, {})
    assert found and found[0].k == 4, found
    assert math.isclose(found[0].rate, math.sqrt(40.0 / 1.03 * 57.5), rel_tol=1e-3)   # 4 significant figures
    assert 40.0 / 1.03 < found[0].rate < 57.5                  # lower than its hold, still enough
    assert all(s.k != 0 for s in found)                        # the rival's fail (behind) is firm: no probe of it


def test_a_shaky_fail_of_the_rival_is_firmed_up_at_a_higher_rate_still_low_enough():
    leader = [held(16.0), held(57.5), behind(80.0)]
    rival = [held(16.0), held(40.0, good=440, deff=8.0)]      # 88 %: fails p90, barely
    found = separations(4, leader, P90, 0, rival, P90, TIE, {})
    assert found and found[0].k == 0, found
    assert 40.0 < found[0].rate < 57.5 * 1.03


def test_brackets_that_leave_room_for_the_rival_are_the_bisections_not_a_separation():
    leader = [held(16.0), behind(48.0)]
    rival = [held(16.0), behind(48.0)]
    assert measured_bracket(rival, P90)[1] > measured_bracket(leader, P90)[0] * (1 + TIE)   # room for the rival
    assert separations(4, leader, P90, 0, rival, P90, TIE, {}) == []


def test_a_rate_already_probed_is_not_asked_again():
    leader = [held(16.0), held(57.5, good=462, deff=8.0)]
    rival = [held(16.0), behind(40.0)]
    first = separations(4, leader, P90, 0, rival, P90, TIE, {})[0]
    again = separations(4, leader, P90, 0, rival, P90, TIE, {4: [first.rate]})
    assert first.k == 4 and all(s.rate != first.rate for s in again)


def test_firm_ends_want_no_probe():
    leader = [held(16.0), held(57.5)]
    rival = [held(16.0), behind(40.0)]
    assert separations(4, leader, P90, 0, rival, P90, TIE, {}) == []


def test_ends_within_the_tie_band_of_each_other_want_bisection_not_a_rate_between():
    # K=4 holds 57.5 where K=0 fails at 57.5 (its bracket 16 to 57.5): a rate between them is within the tie band
    # of both; bisecting K=0's bracket sets them apart
    leader = [held(16.0), held(57.5, good=462, deff=8.0)]
    rival = [held(16.0), behind(57.5)]
    assert separations(4, leader, P90, 0, rival, P90, TIE, {}) == []


def test_a_probe_runs_the_middle_of_the_ends_offered_rates_and_a_low_one_is_not_asked_twice():
    # windows that offered 10 % under their configured rates: the middle of the rates offered, whatever was configured
    leader = [Point(x=14.4, good=500, n=500, rate=16.0), Point(x=51.75, good=462, n=500, design_effect=8.0, rate=57.5)]
    rival = [Point(x=14.4, good=500, n=500, rate=16.0), Point(x=36.0, good=100, n=500, behind=True, rate=40.0)]
    first = separations(4, leader, P90, 0, rival, P90, TIE, {})[0]
    assert first.rate == float(f"{math.sqrt(36.0 / 1.03 * 51.75):.4g}")
    # at a fraction of a request per second the rate run is the rate compared: not asked again (a review found a
    # probe at 0.0945 req/s, run as 0.095 and compared unrounded, asked again until the allowance ran out)
    slow_leader = [held(0.016), held(0.0575, good=462, deff=8.0)]
    slow_rival = [held(0.016), behind(0.040)]
    low = separations(4, slow_leader, P90, 0, slow_rival, P90, TIE, {})[0]
    assert low.rate == float(f"{math.sqrt(0.040 / 1.03 * 0.0575):.4g}")
    assert all(s.rate != low.rate for s in separations(4, slow_leader, P90, 0, slow_rival, P90, TIE,
                                                         {4: [low.rate]}))


def test_a_probe_whose_answer_leaves_the_ends_as_they_are_is_not_asked_again_nearby():
    # the leader's probe held, shakily, at a rate a little off the one configured: the ends are unchanged, so the
    # same separation is not asked again at a rate a few percent away (a review found it asked again at 44.6-50.3,
    # scaled by the probe's own offered rate, until the allowance ran out)
    leader = [held(16.0), held(57.5, good=462, deff=8.0)]
    rival = [held(16.0), behind(40.0)]
    first = separations(4, leader, P90, 0, rival, P90, TIE, {})[0]
    for offered in (0.94, 1.0, 1.06):
        answered = leader + [Point(x=first.rate * offered, good=470, n=500, design_effect=8.0, rate=first.rate)]
        again = separations(4, answered, P90, 0, rival, P90, TIE, {4: [first.rate]})
        assert all(s.k != 4 for s in again), (offered, again)
