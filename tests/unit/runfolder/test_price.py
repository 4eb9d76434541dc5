"""What a verdict may cost (price.py): lives at best, expected (from a measured restart spread and the K's levels)
and at worst, in the dry run's line and the cost line."""
import numpy as np
import pytest
from scipy import stats

from lookahead_runner.config import config_from_dict
from lookahead_runner.config.decision import EarlierSpread
from lookahead_runner.decision.gates.looks import Looks, expected_look
from lookahead_runner.runfolder.cost import expected_text, run_cost
from lookahead_runner.runfolder.cost import life_costs
from lookahead_runner.runfolder.plan import LifeStatus, PlannedLife
from lookahead_runner.runfolder.price import dry_run_range, hardest_margin, lives_range, looks_of
from lookahead_runner.runfolder.spread_ledger import LedgerUse

STAGES = [{"users": 32, "duration_s": 60}]
ADAPTIVE = config_from_dict({"speculation": {"k": [0, 2, 4, 8]}, "sweep": {"strategy": "adaptive"},
                             "load": {"stages": STAGES}, "decision": {"target_users": 32}})
AUTO = config_from_dict({"speculation": {"k": [0, 4]}, "load": {"stages": STAGES, "repeats": "auto"},
                         "decision": {"target_users": 32}})


def test_at_worst_the_budget_at_best_the_first_look_that_can_decide():
    unknown = lives_range(ADAPTIVE, looks_of(ADAPTIVE))
    assert (unknown.best, unknown.expected, unknown.worst) == (3, None, 8)   # a second life measures the spread
    assert lives_range(ADAPTIVE, looks_of(ADAPTIVE), spread_known=True).best == 2
    auto = lives_range(AUTO, looks_of(AUTO))
    assert (auto.best, auto.worst) == (4, 10)                                 # 2 K x the first 2, x load.max_repeats
    grid = config_from_dict({"speculation": {"k": [0, 2, 4, 8]}, "load": {"stages": STAGES, "repeats": 2},
                             "decision": {"target_users": 32}})
    assert (lives_range(grid, None).best, lives_range(grid, None).worst) == (4, 8)   # the early stop after two K


def test_the_expected_look_is_where_the_looks_stop_on_average():
    """Measured against paths of the statistic with that drift, not derived again."""
    looks, drift = Looks(2, 8, 0.1), 3.0
    fractions = np.arange(2, 9) / 8
    steps = np.diff(np.concatenate([[0.0], fractions]))
    rng = np.random.default_rng(4)
    z = np.cumsum(rng.normal(drift * steps, np.sqrt(steps), (100_000, 7)), axis=1) / np.sqrt(fractions)
    crossed = z[:, :6] >= stats.norm.ppf([looks.bar(i) for i in range(2, 8)])
    stopped = np.where(crossed.any(axis=1), crossed.argmax(axis=1) + 2, 8)
    assert expected_look(looks, drift) == pytest.approx(stopped.mean(), abs=0.03)
    assert expected_look(looks, 0.0) > 7.5 and expected_look(looks, 10.0) < 2.1


def test_the_expected_lives_come_from_the_spread_and_the_levels():
    assert hardest_margin({0: 20.0, 4: 30.0}, 0.03) == pytest.approx(0.5 - 0.03)          # K=4 beats K=0
    assert hardest_margin({0: 20.0, 2: 20.1, 4: 19.9}, 0.03) == pytest.approx(0.025)      # a tie: K=0 kept
    wide = lives_range(ADAPTIVE, looks_of(ADAPTIVE), 0.05, {0: 20.0, 2: 40.0, 4: 48.0, 8: 36.0}, True)
    close = lives_range(ADAPTIVE, looks_of(ADAPTIVE), 0.05, {0: 20.0, 2: 40.0, 4: 42.0, 8: 36.0}, True)
    assert wide.best <= wide.expected < close.expected <= close.worst == 8
    assert "restart spread of 5.0%" in wide.basis


def test_the_dry_run_says_best_expected_and_worst_from_the_ledger():
    earlier = EarlierSpread(squares=0.0025 * 4, df=4, runs=1, lives=5, last="2026-12-01",
                            levels={"0": 20.0, "2": 40.0, "4": 48.0, "8": 36.0})
    use = LedgerUse(key="x", fingerprint={}).with_earlier(earlier)
    said = expected_text(ADAPTIVE, 8, dry_run_range(ADAPTIVE, use))
    assert "; at best 2 lives (~2.0 server-minutes of load), expected " in said and ", at worst 8 (~8.0)" in said
    assert "at a restart spread of 5.0%" in said
    vllm = ADAPTIVE.model_copy(deep=True)
    vllm.decision.for_server("vllm")                  # its restart spread unknown until a life measures it
    alone = expected_text(vllm, 8, dry_run_range(vllm, None))
    assert "at best 3 lives" in alone and "the expected number not known (no restart spread and levels" in alone
    assert "at best 2 lives" in expected_text(ADAPTIVE, 8, dry_run_range(ADAPTIVE, None))   # the simulator's: known


def test_the_cost_line_prices_best_expected_and_worst_at_a_lifes_mean_cost():
    lives = [PlannedLife(setting=f"k{k}", dir=f"k{k}/r0", k=k, repeat=0, argv=[]) for k in (0, 4)]
    statuses = {f"k{k}/r0": LifeStatus.model_validate({"state": "done", "start_s": 120.0, "measure_s": 60.0})
                for k in (0, 4)}
    priced = lives_range(ADAPTIVE, looks_of(ADAPTIVE), 0.05, {0: 20.0, 4: 48.0}, True)
    cost = run_cost(life_costs(lives, statuses), ADAPTIVE, "adaptive", "", priced)
    assert (cost.best_lives, cost.worst_lives, cost.life_s) == (2, 8, 180.0) and cost.expected_lives is not None
    assert "; a verdict like this one: at best 2 lives (~6.0 server-minutes), expected " in cost.text
    assert cost.text.endswith(", at worst 8 (~24)")


def test_at_best_is_never_past_at_worst():
    two = config_from_dict({"speculation": {"k": [0, 4]}, "sweep": {"strategy": "adaptive", "max_lives": 2},
                            "load": {"stages": STAGES}, "decision": {"target_users": 32}})
    priced = lives_range(two, looks_of(two))               # the spread unknown: a third life would measure it
    assert priced.best <= priced.worst == 2, priced


def test_the_dry_run_prices_only_the_k_it_runs_from_the_ledgers_levels():
    """The ledger holds each K's level as its runs measured them, a K this sweep does not run among them (and a
    hand-edited key that is no K at all was a ValueError): the margin is of the K this sweep runs."""
    ours = {"0": 20.0, "2": 40.0, "4": 48.0, "8": 36.0}
    earlier = EarlierSpread(squares=0.0025 * 4, df=4, runs=1, lives=5, last="2026-12-01", levels=ours)
    other = EarlierSpread(squares=0.0025 * 4, df=4, runs=1, lives=5, last="2026-12-01",
                          levels={**ours, "16": 47.5, "x": 1.0})
    priced = dry_run_range(ADAPTIVE, LedgerUse(key="x", fingerprint={}).with_earlier(other))
    assert priced == dry_run_range(ADAPTIVE, LedgerUse(key="x", fingerprint={}).with_earlier(earlier))
