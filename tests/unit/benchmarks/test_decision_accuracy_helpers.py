"""benchmarks/decision_accuracy.py's pure parts: demo-sized subsets of a recording and how a verdict is scored
(the benchmark itself records with real processes and is run by hand)."""
from __future__ import annotations

import sys

import numpy as np
import pytest

from .scripts import load

bench = load("decision_accuracy")


def test_disjoint_subsets_share_no_window_and_skip_what_an_invalid_window_leaves_short():
    repeats = {0: [0, 1, 2, 3, 4, 5], 4: [0, 1, 2, 3, 5]}   # K=4's repeat 4 was invalid
    subsets = bench.disjoint_subsets(repeats)
    assert subsets == [{0: [0, 1], 4: [0, 1]}, {0: [2, 3], 4: [2, 3]}]
    windows = [(k, r) for s in subsets for k, rs in s.items() for r in rs]
    assert len(windows) == len(set(windows))


def test_random_subsets_draw_two_distinct_valid_repeats_per_k():
    repeats = {0: [0, 1, 2, 3, 4, 5], 2: [1, 4], 8: [3]}
    subsets = bench.random_subsets(repeats, 50, np.random.default_rng(0))
    assert len(subsets) == 50
    for s in subsets:
        assert len(set(s[0])) == 2 and set(s[0]) <= set(repeats[0])
        assert s[2] == [1, 4] and s[8] == [3]                # all there is
    assert len({tuple(s[0]) for s in subsets}) > 5          # drawn, not fixed


@pytest.mark.parametrize("status, k, truth, expected", [
    ("decided", 4, 4, bench.RIGHT),
    ("decided", 0, 0, bench.RIGHT),                        # "Keep K=0" where K=0 is best
    ("decided", 2, 4, bench.WRONG),
    ("decided", 0, None, bench.WRONG),
    ("no_eligible", None, None, bench.RIGHT),              # only where no K passes
    ("no_eligible", None, 0, bench.WRONG),
    ("not_decided", None, 4, bench.NOT_DECIDED),
    ("no_measurement", None, 4, bench.NOT_DECIDED),
])
def test_outcome(status, k, truth, expected):
    assert bench.outcome(status, k, truth) == expected


def test_a_verdict_without_a_valid_window_of_the_truth_is_unscored_not_wrong():
    assert bench.outcome("no_eligible", None, 0, measured={2, 4, 8}) == bench.UNSCORED
    assert bench.outcome("no_eligible", None, None, measured={2, 4}) == bench.RIGHT
    assert bench.outcome("decided", 2, 0, measured={0, 2}) == bench.WRONG
    t = bench.tally([bench.Verdict("no_eligible", None, None, None, bench.UNSCORED),
                     bench.Verdict("decided", 0, 0.99, None, bench.RIGHT)])
    assert t["decisions"] == 1 and t["unscored"] == 1 and t["right"]["share"] == 1.0


def test_tally_puts_stated_confidence_beside_the_hit_rate_of_decided_verdicts():
    verdicts = ([bench.Verdict("decided", 4, 0.98, None, bench.RIGHT, leading_k=4, truth=4) for _ in range(9)]
                + [bench.Verdict("decided", 2, 0.92, None, bench.WRONG, leading_k=2, truth=4)]
                + [bench.Verdict("not_decided", None, 0.6, None, bench.NOT_DECIDED) for _ in range(2)])
    t = bench.tally(verdicts)
    assert t["decisions"] == 12 and t["right"]["n"] == 9 and t["wrong"]["n"] == 1 and t["not_decided"]["n"] == 2
    assert t["confident_wrong"] == 1
    assert t["right_or_not_decided"]["share"] == round(11 / 12, 3)
    low, high = t["right"]["ci95"]
    assert low < 9 / 12 < high
    assert t["calibration"] == {"decided": 10, "stated_confidence_mean": 0.974, "hit_rate": 0.9,
                                "hit_rate_ci95": t["calibration"]["hit_rate_ci95"]}
    assert t["verdicts"] == {"K=4": 9, "not_decided": 2, "K=2": 1}
    bins = bench.calibration_bins(verdicts)
    assert [(b["stated"][0], b["verdicts"], b["leader_right"]) for b in bins] == [(0.9, 1, 0.0), (0.95, 9, 1.0)]
    leader = bench.Verdict("not_decided", None, 0.6, None, bench.NOT_DECIDED, leading_k=4, truth=4)
    bins = bench.calibration_bins([leader])
    assert bins == [{"stated": [0.5, 0.7], "verdicts": 1, "decided": 0, "stated_mean": 0.6, "leader_right": 1.0,
                     "ci95": bins[0]["ci95"]}]


def test_the_adaptive_replay_reveals_the_recorded_repeats_in_the_drawn_order_and_prices_them():
    from unit.synthetic import window

    from lookahead_runner.config import config_from_dict
    from lookahead_runner.decision import evidence
    from lookahead_runner.runfolder.plan import LifeStatus, PlannedLife

    replay = sys.modules["adaptive_replay"]
    config = config_from_dict({"speculation": {"k": [0, 2, 4, 8]}, "decision": {"resamples": 200},
                               "load": {"stages": [{"users": 64, "duration_s": 7}]}})
    rates = {0: 20.0, 2: 35.0, 4: 50.0, 8: 30.0}  # K=4 clear past the early-stop bar
    recording = evidence([window(k, 64, rate * (1 + r / 100), r) for k, rate in rates.items() for r in range(6)], 64)
    lives = [PlannedLife(setting=f"k{k}", dir=f"k{k}/r{r}", k=k, repeat=r, argv=[]) for k in rates for r in range(6)]
    statuses = {f"k{k}/r0": LifeStatus(state="done", ready_s=2.0 + k) for k in rates}  # before cost.py: no start_s
    price = replay.prices(lives, statuses, config)
    assert price[8] == replay.Price(10.0, 7.0)                   # ready_s of the K's server life, the stage's 7 s
    order = {k: [5, 3, 1, 0, 2, 4] for k in rates}
    run = replay.replay(recording, order, config, price, max_lives=8)
    assert run.stop == "decided" and run.lives < 8
    # the leader twice, in the drawn order; the baseline once, spared where K=4 (more than twice as fast) clears the
    # early-stop bar, or its second recorded repeat next: one pair measures the spread with one degree of freedom,
    # whose Student's t has Cauchy tails, so a one-life K=0 still wins ~1 % of 200 resamples (decision/adaptive.py)
    assert run.revealed[4] == [5, 3] and run.revealed[0] in ([5], [5, 3])
    assert replay.server_seconds(run.revealed, price, start_s=120.0) == run.lives * 127.0
    tight = replay.replay(recording, {k: [5] for k in rates}, config, price, max_lives=8)
    assert tight.stop == "recording exhausted"                    # it wanted a second life of the leader
    capped = replay.replay(recording, order, config, price, max_lives=3)
    assert capped.stop == "budget" and capped.lives == 3


def test_lower_stages_are_priced_on_every_grid_life_and_on_an_adaptive_ks_first_and_seen_with_its_k():
    from unit.synthetic import window

    from lookahead_runner.decision import evidence

    replay = sys.modules["adaptive_replay"]
    price = replay.with_lower_stages({0: replay.Price(2.0, 7.0), 4: replay.Price(3.0, 7.0)},
                                     {0: replay.Price(2.5, 14.0)})
    assert price == {0: replay.Price(2.0, 7.0, 14.0), 4: replay.Price(3.0, 7.0, 0.0)}  # K=4 has no first-lives record
    revealed = {0: [1, 4], 4: [2]}
    assert replay.server_seconds(revealed, price) == (2 + 7 + 14) + (2 + 7) + (3 + 7)
    assert replay.server_seconds(revealed, price, start_s=120.0, every_life_all_stages=True) == \
        (120 + 7 + 14) * 2 + (120 + 7)
    target = evidence([window(k, 64, 20.0, r) for k in (0, 4) for r in range(2)], 64)
    lower = evidence([window(k, users, 10.0, 0) for k in (0, 2, 4) for users in (16, 32)], 32)
    seen = replay.with_lower(target.subset({0: [0]}), lower)
    assert sorted(seen.cells) == [(0, 16), (0, 32), (0, 64)] and seen.target_users == 64
    assert replay.with_lower(target.subset({}), lower).cells == {}


def test_a_first_lives_config_runs_the_lower_stages_once_per_k():
    import tomllib

    scenarios = sys.modules["decision_scenarios"]
    tight = next(s for s in scenarios.SCENARIOS if s.name == "tight-kv")
    config = tomllib.loads(scenarios.config_toml(tight, 6, 7.0, 2.0, first_lives=True))
    assert [stage["users"] for stage in config["load"]["stages"]] == [16, 32]
    assert config["load"]["repeats"] == 1 and config["decision"]["target_users"] == 32
    with_lower = next(s for s in scenarios.SCENARIOS if s.lower_stages)
    assert scenarios.first_life_stages(with_lower) == ()        # its repeats run its lower stages already


def test_the_spread_studys_goal_counts_undecided_trials_as_never_decided():
    """benchmarks/spread_study.py: lives to a decided verdict, median over trials, an undecided trial infinite."""
    import spread_study

    rows = [{"outcome": "right", "lives": 3, "confidence": 0.95}, {"outcome": "right", "lives": 4, "confidence": 0.99},
            {"outcome": "not decided", "lives": 4, "confidence": 0.6}]
    summary = spread_study._summary(rows)
    assert summary["lives_when_decided"] == {"median": 3.5, "max": 4} and summary["lives_to_decided_median"] == 4.0
    assert summary["decided_stated_mean"] == 0.97
    assert spread_study._summary(rows[2:] * 2 + rows[:1])["lives_to_decided_median"] is None
    scenario = {name: {"right": 1, "not_decided": 0, "wrong": 0} for name in spread_study.STRATEGIES}
    met = spread_study.totals({"a": scenario | {"goal_applies": True, "goal_met": True},
                               "b": scenario | {"goal_applies": False}})
    assert met["goal_met"] and met["goal"]["scenarios"] == ["a"]
    wrong = spread_study.totals({"a": scenario | {"goal_applies": False, "adaptive": {"right": 0, "not_decided": 0,
                                                                                       "wrong": 1}}})
    assert not wrong["goal_met"] and wrong["confident_wrong"]["adaptive"] == 1
