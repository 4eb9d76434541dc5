"""The probe that sets two K's capacities within the SLO apart where the adaptive sweep's verdict at a rate hangs on
them (decision/capacity/separate.py): the shakier of the two ends that decide it firmed up first, at a rate that
still decides it; nothing where the brackets as measured leave room for the rival (bisection's case)."""
import math

from lookahead_runner.decision.capacity.estimate import Point
from lookahead_runner.decision.capacity.separate import open_as_measured, separations

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
    assert math.isclose(found[0].rate, math.sqrt(40.0 / 1.03 * 57.5))
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
    assert open_as_measured(leader, P90, rival, P90, TIE)
    assert separations(4, leader, P90, 0, rival, P90, TIE, {}) == []


def test_a_rate_already_probed_is_not_asked_again():
    leader = [held(16.0), held(57.5, good=462, deff=8.0)]
    rival = [held(16.0), behind(40.0)]
    first = separations(4, leader, P90, 0, rival, P90, TIE, {})[0]
    assert all(s.rate != first.rate for s in separations(4, leader, P90, 0, rival, P90, TIE, {4: [first.rate]}))


def test_firm_ends_want_no_probe():
    leader = [held(16.0), held(57.5)]
    rival = [held(16.0), behind(40.0)]
    assert separations(4, leader, P90, 0, rival, P90, TIE, {}) == []


def test_ends_within_the_tie_band_of_each_other_want_bisection_not_a_rate_between():
    # K=4 holds 57.5 where K=0 fails at 57.5 (its bracket 16 to 57.5): a rate between them is within the tie band
    # of both; bisecting K=0's bracket sets them apart
    leader = [held(16.0), held(57.5, good=462, deff=8.0)]
    rival = [held(16.0), behind(57.5)]
    assert not open_as_measured(leader, P90, rival, P90, TIE)
    assert separations(4, leader, P90, 0, rival, P90, TIE, {}) == []
