"""A futile look (decision/gates/futility.py, read by the adaptive chooser): conditional power against a simulated
truth, the most hopeful information ratio, and the stop it makes, never where the verdict would stand."""
import math

import numpy as np
from scipy import stats

from lookahead_runner.decision.adaptive import Budget, ModelView, Spent, choose
from lookahead_runner.decision.engine import contender_share
from lookahead_runner.config import DecisionConfig
from lookahead_runner.decision.gates.futility import FUTILITY_POWER, conditional_power, info_ratio
from lookahead_runner.decision.gates.looks import Looks
from lookahead_runner.decision.standing import Standing

KS = [0, 2, 4, 8]
LOOKS = Looks(2, 8, 0.10)


def test_conditional_power_is_the_share_of_simulated_futures_that_clear_the_bar():
    # the statistic's B-value walks with the drift the look measured; its futures from the look on are simulated
    rng = np.random.default_rng(0)
    for share, ratio, bar in ((0.70, 2.0, 0.927), (0.90, 3.0, 0.95), (0.55, 1.5, 0.90), (0.97, 2.0, 0.99)):
        t = 1 / ratio
        b_now = stats.norm.ppf(share) * math.sqrt(t)
        drift = b_now / t
        futures = b_now + drift * (1 - t) + rng.normal(0, math.sqrt(1 - t), 200_000)
        simulated = float(np.mean(futures >= stats.norm.ppf(bar)))
        assert abs(conditional_power(share, ratio, bar, 1000) - simulated) < 0.005, (share, ratio, bar)


def test_no_life_left_means_the_verdict_stays_where_it_is_and_no_tie_means_no_power():
    assert conditional_power(0.95, 1.0, 0.927, 1000) == 1.0
    assert conditional_power(0.90, 1.0, 0.927, 1000) == 0.0
    assert conditional_power(None, 4.0, 0.927, 1000) == 0.0
    assert 0 < conditional_power(0.0, 4.0, 0.5, 1000) < conditional_power(0.2, 4.0, 0.5, 1000)


def test_the_information_ratio_gives_each_next_life_to_the_k_on_fewer_within_the_cap():
    assert info_ratio((1, 1), 4, 2) == 2.0            # both to 2 lives: variance 2 -> 1
    assert math.isclose(info_ratio((1, 1), 4, 4), 3.0)  # 3 and 3: 2 -> 2/3
    assert info_ratio((2, 1), 1, 4) == 1.5           # the one on fewer first: 1.5 -> 1
    assert info_ratio((2, 2), 3, 2) == 1.0           # both at the cap: nothing to gain
    assert info_ratio((1, 1), 0, 2) == 1.0


def looked(leader_share: float, tie: float | None, decided_at_last_look: bool = False, **rest) -> Standing:
    fields = dict(status="not_decided", leader=0, shares={0: leader_share, 2: 1 - leader_share},
                  objective={0: 20.0, 2: 20.1, 4: 20.05, 8: 19.9}, spread_measured=True,
                  decided_at_last_look=decided_at_last_look, wanted=(0, 2),
                  contender_share=contender_share(DecisionConfig(), 1000), look=LOOKS.at(4),
                  last_look=LOOKS.at(4, last=True), share_alone=True, tie_share=tie, looks=LOOKS,
                  resamples=1000)
    return Standing(**{**fields, **rest})


def one_each() -> Spent:
    return Spent({k: 1 for k in KS}, {k: 1 for k in KS}, server_s=0.0)


def test_a_tie_the_lives_left_cannot_tell_stops_futile_and_one_they_may_tell_runs_on():
    budget = Budget(max_lives=8)
    # 4 lives left, two per K at most: a pair's information doubles at most, with the sweep ending at look 6 at the
    # soonest (its bar as the last 90.5 %, the most hopeful); 55 % and a tie at 60 % reach it in under 10 %
    stop = choose(KS, looked(0.55, 0.60), one_each(), ModelView(), budget, 2)
    assert (stop.k, stop.stop) == (None, "futile") and "look 4 of at most 8" in stop.why
    assert f"ending at look 6: {LOOKS.last_bar(6) * 100:.1f} %" in stop.why and "4 more lives" in stop.why
    assert conditional_power(0.60, 2.0, LOOKS.last_bar(6), 1000) < FUTILITY_POWER
    # a tie at 80 % reaches it in about two fifths of its futures: a life is bought
    assert conditional_power(0.80, 2.0, LOOKS.last_bar(6), 1000) > FUTILITY_POWER
    assert choose(KS, looked(0.55, 0.80), one_each(), ModelView(), budget, 2).k is not None
    # more lives per K leave more information to gain: the same look is not futile with a cap of 4
    assert choose(KS, looked(0.55, 0.60), one_each(), ModelView(), Budget(max_lives=16), 4).k is not None


def test_it_never_stops_where_the_look_decides_as_the_last_or_a_life_can_still_change_the_leader():
    budget = Budget(max_lives=8)
    for standing in (looked(0.55, 0.60, decided_at_last_look=True),   # the verdict stands there: not a futile stop
                     looked(0.55, 0.60, spread_measured=False),       # the spread first
                     looked(0.55, 0.60, share_alone=False),           # something else holds it back
                     looked(0.55, 0.60, off_earlier={2: -0.3})):      # an outlier life to check
        assert choose(KS, standing, one_each(), ModelView(), budget, 2).stop != "futile", standing
    # a K not run yet that could be the best is run first (its life may change the leader)
    three = Spent({0: 1, 4: 1, 8: 1}, {0: 1, 4: 1, 8: 1}, server_s=0.0)
    first = choose(KS, looked(0.55, 0.60, objective={0: 20.0, 4: 20.05, 8: 19.9}), three, ModelView(), budget, 2)
    assert first.k == 2 and first.all_stages


def test_the_server_minutes_left_bound_the_lives_it_projects():
    # one life's worth of minutes left: the pair's information grows 4/3 times at most, not 2 times
    spent = Spent({k: 1 for k in KS}, {k: 1 for k in KS}, server_s=400.0, next_life_s=100.0)
    hopeful = looked(0.55, 0.70)
    assert (conditional_power(0.70, 2.0, LOOKS.last_bar(6), 1000) > FUTILITY_POWER
            > conditional_power(0.70, 4 / 3, LOOKS.last_bar(5), 1000))
    assert choose(KS, hopeful, spent, ModelView(), Budget(max_lives=8), 2).k is not None
    assert choose(KS, hopeful, spent, ModelView(), Budget(max_lives=8, max_server_s=550.0), 2).stop == "futile"


def _swept(levels: dict[int, float], seed: int, max_lives: int = 8, per_k: int = 2):
    """The chooser run to its stop on synthetic lives (each life's level off the truth by a 4 % restart spread),
    each look judged by the error-spending rule; the stop, and the final verdict as the sweep states it."""
    from unit.synthetic import window

    from lookahead_runner.decision import decide, evidence
    from lookahead_runner.decision.engine import verdict_at_end
    from lookahead_runner.decision.standing import standing_of, valid_lives

    p, looks, rng = DecisionConfig(), Looks(2, max_lives, 0.10), np.random.default_rng(seed)
    windows, lives = [], {}
    while True:
        ev = evidence(windows, 32)
        choice = choose(KS, standing_of(ev, p, looks=looks), Spent(dict(lives), valid_lives(ev, 32)), ModelView(),
                        Budget(max_lives), per_k)
        if choice.k is None:
            config, stop, tie_bar = verdict_at_end(ev, p, looks)
            return choice, decide(ev, config, {}, tie_bar=tie_bar), stop
        lives[choice.k] = lives.get(choice.k, 0) + 1
        windows.append(window(choice.k, 32, levels[choice.k] * float(rng.lognormal(0, 0.04)), lives[choice.k] - 1))


def test_a_real_tie_the_budget_cannot_tell_stops_futile_short_of_it_and_the_verdict_says_not_decided():
    tie = {0: 20.0, 2: 20.1, 4: 20.0, 8: 19.9}   # every K within 1 % of the baseline: no verdict past the band's edge
    stops = [_swept(tie, seed) for seed in range(3)]
    assert [choice.stop for choice, _, _ in stops] == ["futile"] * 3
    for choice, decision, stop in stops:
        # judged as the last look, at the look it stopped at: not decided, as the stop said
        assert decision.status == "not_decided" and stop.stopped_by == "last look"
        assert f"futile at look {stop.look} of at most 8" in choice.why and stop.look < 8
