"""What a verdict may cost (price.py): lives at best, expected (from a measured restart spread and the K's levels)
and at worst, in the dry run's line and the cost line."""
import numpy as np
import pytest
from scipy import stats

from lookahead_runner.config import config_from_dict
from lookahead_runner.config.decision import EarlierSpread
from lookahead_runner.decision.gates.looks import Looks, expected_look
from lookahead_runner.runfolder.cost import capacity_probes, expected_text, run_cost
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
    assert (unknown.best, unknown.expected, unknown.worst) == (4, None, 8)   # two lives of each end: below
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
    assert "at best 4 lives" in alone and "the expected number not known (no restart spread and levels" in alone
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


# rate stages only on a server drawing a restart spread per life: the measure-until-decided default, at 16 req/s
RATE = config_from_dict({"server": {"extra_args": ["--sim-restart-spread", "0.05"]}, "speculation": {"k": [0, 2, 4]},
                         "load": {"stages": [{"rate": r, "duration_s": 60} for r in (8.0, 16.0, 24.0)]},
                         "decision": {"target_rate": 16.0, "slo": {"ttft_p99_ms": 500}}})


def test_a_rate_plan_prices_a_repeat_at_the_one_stage_it_runs():
    """A K's first life runs every rate stage (180 s), a repeat the target rate's alone (60 s): at best the baseline
    and one K twice each (2 x 180 + 2 x 60 s), at worst 3 K x 2 lives (3 x 180 + 3 x 60 s) and, with an SLO, two
    capacity probes per K beside them, each one rate stage as long as the longest (6 x 60 s)."""
    assert RATE.sweep.strategy == "adaptive" and RATE.adaptive_by_default
    priced = dry_run_range(RATE, None)
    assert (priced.best, priced.expected, priced.worst) == (4, None, 12)
    assert priced.seconds == (480.0, None, 720.0 + 360.0)
    said = expected_text(RATE, 6, priced)
    assert said.startswith("expected: at most 6 server lives (adaptive: each chosen on what is measured), and up to 6 "
                           "capacity probes beside them, 12 server starts: at most 18 server-minutes of load (a K's "
                           "first life 180 s of stages, a repeat 60 s: the 16 req/s stage alone, a capacity probe 60 "
                           "s) plus each start's"), said
    no_slo = config_from_dict({"server": {"extra_args": ["--sim-restart-spread", "0.05"]},
                               "speculation": {"k": [0, 2, 4]},
                               "load": {"stages": [{"rate": r, "duration_s": 60} for r in (8.0, 16.0, 24.0)]},
                               "decision": {"target_rate": 16.0}})
    assert no_slo.sweep.strategy == "adaptive"
    assert dry_run_range(no_slo, None).worst == 6    # no SLO: no capacity decides, no probe
    assert said.endswith("; at best 4 lives (~8.0 server-minutes of load), the expected number not known (no restart "
                         "spread and levels measured on this server yet), at worst 12 (~18)"), said


def test_an_adaptive_repeat_at_a_rate_is_no_life_of_every_stage():
    lives = [PlannedLife(setting="k4", dir="k4/r1", k=4, repeat=1, argv=[], rates=[16.0])]
    statuses = {"k4/r1": LifeStatus.model_validate({"state": "done", "start_s": 120.0, "measure_s": 60.0})}
    assert [c.all_stages for c in life_costs(lives, statuses)] == [False]


def test_at_a_rate_only_a_stated_spread_spares_the_life_that_measures_it():
    """The chooser at a rate buys the spread with a repeated life whatever earlier runs (or this one) measured, so a
    verdict like this one costs at best the baseline, one K and that life; a spread the config states spares it."""
    assert lives_range(RATE, looks_of(RATE), 0.05, {0: 1.5, 4: 3.0}, spread_known=True).best == 4
    stated = config_from_dict(RATE.model_dump(mode="json") | {"sweep": {"strategy": "adaptive"},
                                                              "decision": {"target_rate": 16.0, "restart_spread": 0.05,
                                                                           "slo": {"ttft_p99_ms": 500}}})
    assert lives_range(stated, looks_of(stated), spread_known=False).best == 2


def test_at_best_on_an_unknown_spread_both_ends_of_the_first_gain_have_two_lives():
    """Where the restart spread is unknown the chooser never stops with the baseline (or the leader) on one life: the
    leader's second life measures the spread, the baseline's guards against one outlier life of it (never spared
    there). So no verdict comes before the first look's two K have two lives each."""
    from lookahead_runner.decision.adaptive import Budget, ModelView, Spent, choose
    from lookahead_runner.decision.standing import Standing

    decided = Standing("decided", 4, {4: 1.0}, {0: 1.0, 4: 3.0}, spread_measured=True, spare_baseline=False,
                       contender_share=0.02)
    assert choose([0, 4], decided, Spent({0: 1, 4: 2}, {0: 1, 4: 2}), ModelView(), Budget(8), 5).k == 0
    assert choose([0, 4], decided, Spent({0: 2, 4: 2}, {0: 2, 4: 2}), ModelView(), Budget(8), 5).stop == "decided"
    assert lives_range(RATE, looks_of(RATE)).best == 4 and lives_range(ADAPTIVE, looks_of(ADAPTIVE)).best == 4


def test_the_cost_line_prices_a_repeat_at_its_one_stage_and_a_start():
    """After the run, as in the dry run: a K's first life at a start and the load measured of a life of every stage
    (120 + 180 s here), a repeat at a start and the target rate's stage alone (120 + 60 s): at best 2 firsts and 2
    repeats, 960 s (not 4 whole lives, 1200 s), at worst 3 and 3, 1440 s (not 1800), and with an SLO 6 capacity
    probes at a start and one 60 s rate stage each, 1080 s."""
    def life(k, repeat, rates=None):
        return PlannedLife(setting=f"k{k}", dir=f"k{k}/r{repeat}", k=k, repeat=repeat, argv=[], rates=rates)

    lives = [life(0, 0), life(4, 0), life(4, 1, [16.0]), life(0, 1, [16.0])]
    statuses = {l.dir: LifeStatus.model_validate({"state": "done", "start_s": 120.0,
                                                  "measure_s": 60.0 if l.rates else 180.0}) for l in lives}
    cost = run_cost(life_costs(lives, statuses), RATE, "adaptive", "", lives_range(RATE, looks_of(RATE),
                                                                                    spread_known=True))
    assert (cost.best_lives, cost.worst_lives) == (4, 12), cost
    assert "; a verdict like this one: at best 4 lives (~16 server-minutes), the expected number not known" in \
        cost.text, cost.text
    assert cost.text.endswith(", at worst 12 (~42)"), cost.text


def test_a_sweep_of_one_rate_stage_prices_its_probes_in_the_dry_run_line_too():
    # a review found "at most 4 server lives ... 4 server starts: 4.0 server-minutes" beside "at worst 8 (~8.0)"
    one = config_from_dict({"server": {"extra_args": ["--sim-restart-spread", "0.05"]}, "speculation": {"k": [0, 4]},
                            "load": {"stages": [{"rate": 16.0, "duration_s": 60}]},
                            "decision": {"slo": {"ttft_p99_ms": 500}}})
    assert one.sweep.strategy == "adaptive" and capacity_probes(one) == 4
    said = expected_text(one, 4, dry_run_range(one, None))
    assert said.startswith("expected: at most 4 server lives (adaptive: each chosen on what is measured), and up to "
                           "4 capacity probes beside them, 8 server starts: 8.0 server-minutes of load (60 s of "
                           "stages a life, a capacity probe 60 s)"), said
    assert said.endswith("at worst 8 (~8.0)"), said
