"""Issue 38: the restart spread measured once, pooled over K, borrowed by single-life K; earlier runs on this
server join the pool; the verdict and the advice say where it came from and price the cheapest fact first."""
import math

import numpy as np
import pytest
from scipy import stats
from unit.synthetic import window

from lookahead_runner.config import DecisionConfig
from lookahead_runner.config.decision import EarlierSpread
from lookahead_runner.decision import decide, evidence
from lookahead_runner.decision.cells.restart_spread import chi2_bounds, half_width
from lookahead_runner.decision.engine import evaluate_stages

USERS = 4
EARLIER = EarlierSpread(squares=4 * 0.03 ** 2, df=4, runs=2, lives=6, last="2026-12-02")


def vllm(**fields) -> DecisionConfig:
    return DecisionConfig(resamples=400, **fields).for_server("vllm")


def lives(rates: dict[int, tuple[float, ...]], duration_s: float = 30.0):
    """Each K's restarted lives at these req/s (one window each at the target)."""
    return evidence([window(k, USERS, rate, r, duration_s=duration_s) for k, values in rates.items()
                     for r, rate in enumerate(values)], USERS)


def stage_of(ev, p):
    return evaluate_stages(ev, p)[USERS]


def test_one_repeated_life_measures_the_spread_for_every_k_and_a_single_life_k_borrows_it():
    ev = lives({0: (10.0, 10.3), 4: (12.5,)})  # +23 %: beyond a 3 % spread, within the 15 % assumed
    assert decide(lives({0: (10.0,), 4: (12.5,)}), vllm(), {}).status == "not_decided"   # one life each: unknown
    stage = stage_of(ev, vllm())
    origin = stage.noise.origin
    assert origin.lives == 2 and origin.ks == (0,) and origin.this_df == 1 and origin.earlier is None
    assert stage.noise_by_k[4] is stage.noise                               # K=4 borrows the pooled spread
    assert (origin.low, origin.high) == pytest.approx(chi2_bounds(origin.rel_sd, 1, 0.95))
    decision = decide(ev, vllm(), {})
    assert decision.status == "decided" and decision.recommended.k == 4
    assert "K=4 on one life, with the restart spread" in decision.verdict
    assert "from 2 lives of K=0 in this run" in decision.verdict
    said = next(r for r in decision.reasons if r.startswith("At 4 users, throughput noise"))
    assert f"restart spread {origin.rel_sd * 100:.1f} % [{origin.low * 100:.1f}, {origin.high * 100:.1f}]" in said


def test_the_spread_of_earlier_runs_on_this_server_decides_one_life_per_k_and_is_named():
    ev = lives({0: (10.0,), 4: (12.5,)})
    p = vllm().with_earlier(EARLIER)
    stage = stage_of(ev, p)
    assert stage.noise.source == "repeats" and stage.noise.df == 4 and not stage.noise.restart_unknown
    assert stage.noise.rel_sd == pytest.approx(0.03)
    decision = decide(ev, p, {})
    assert decision.status == "decided" and decision.recommended.k == 4
    low, high = chi2_bounds(0.03, 4, 0.95)
    assert (f"restart spread 3.0 % [{low * 100:.1f}, {high * 100:.1f}] per server life, from 2 earlier runs on this "
            "server (last 2026-12-02)") in decision.verdict


def test_earlier_runs_pool_with_this_runs_repeats_where_the_f_test_finds_them_alike():
    ev = lives({0: (10.0, 10.6), 4: (12.5,)})               # this run: about 4 % from one pair
    alone = stage_of(ev, vllm()).noise
    both = stage_of(ev, vllm().with_earlier(EARLIER)).noise
    assert both.df == alone.df + 4 and both.origin.earlier == EARLIER
    # the pooled 3.2 %, with the pool's degrees of freedom (issue 46: it was this run's 4.2 % shown with them)
    assert both.rel_sd == pytest.approx(math.sqrt((both.origin.squares + EARLIER.squares) / both.df))
    assert "2 lives of K=0 in this run and 2 earlier runs on this server" in both.origin.text()


def test_earlier_runs_narrower_than_this_runs_repeats_beyond_the_f_test_are_left_out():
    ev = lives({0: (10.0, 14.0), 4: (12.5, 17.0)})          # lives 30 % apart: the server changed
    noise = stage_of(ev, vllm().with_earlier(EarlierSpread(8 * 0.01 ** 2, 8, 4, 12, "2026-11-01"))).noise
    assert noise.origin.earlier is None and noise.df == 2
    assert "narrower beyond an F test: left out" in noise.origin.note


def test_an_explicit_restart_spread_wins_over_the_ledger_and_the_simulator_has_none():
    assert vllm(restart_spread=0.05).with_earlier(EARLIER).earlier_spread is None
    assert DecisionConfig().with_earlier(EARLIER).earlier_spread is None   # the simulator's documented 1 %
    assert DecisionConfig().for_server("simulator drawing a restart spread").spread_unknown


def test_a_single_life_k_whose_windows_are_noisier_inside_adds_their_noise():
    quiet = [window(0, USERS, 10.0, r, duration_s=30.0) for r in range(2)]
    noisy = window(4, USERS, 12.5, 0, duration_s=30.0)
    noisy.t_done_s[: len(noisy.t_done_s) // 2] *= 0.1       # half its completions in the first 3 s: bursty bins
    noisy.t_done_s[len(noisy.t_done_s) // 2:: 2] = 29.5
    stage = stage_of(evidence(quiet + [noisy], USERS), vllm())
    own = stage.noise_by_k[4]
    assert own is not stage.noise and own.rel_sd > stage.noise.rel_sd
    assert own.scope == "K=4's: the restart spread with its own noisier windows" and own.origin is None
    calm = stage_of(lives({0: (10.0, 10.3), 4: (12.5,)}), vllm())     # an even window: borrows the spread
    assert calm.noise_by_k[4] is calm.noise


def test_advice_prices_more_lives_from_the_measured_spread():
    ev = lives({0: (10.0, 10.9), 4: (10.6,)})               # +3 %... within a 6 % spread: not decided
    decision = decide(ev, vllm(), {})
    assert decision.status == "not_decided"
    step = next(s for s in decision.next_runs if s.startswith("K="))
    assert "from the measured " in step and "restart spread" in step and "one more life of K=" in step
    assert "repeats of both (load.repeats = " in step
    assert not any(s.startswith("The cheapest next fact") for s in decision.next_runs)


def test_half_width_shrinks_with_lives_and_degrees_of_freedom():
    assert half_width(0.05, 1, 1, 2, 0.95) > half_width(0.05, 2, 2, 2, 0.95) > half_width(0.05, 8, 4, 4, 0.95)
    assert math.isinf(half_width(0.05, 0, 1, 1, 0.95))


def test_same_server_repeats_take_the_earlier_spread_as_the_prior_at_its_upper_end():
    """Repeats on one server life show the noise inside it; the spread from one life to the next is the prior term:
    the earlier runs' (its chi-square upper end, being an estimate), not the 15 % assumed."""
    ev = lives({0: (10.0, 10.05), 4: (12.5, 12.55)})
    p = DecisionConfig(resamples=400).for_server("vllm", one_life_per_k=True).with_earlier(EARLIER)
    noise = stage_of(ev, p).noise
    assert noise.one_life and not noise.restart_unknown
    assert noise.restart_sd == pytest.approx(chi2_bounds(0.03, 4, 0.95)[1])
    assert "from 2 earlier runs on this server (last 2026-12-02), its upper end" in noise.restart_source


def test_a_single_life_far_from_the_level_earlier_runs_measured_is_named_an_outlier():
    from lookahead_runner.decision.cells.restart_spread import off_earlier

    earlier = EarlierSpread(4 * 0.03 ** 2, 4, 2, 6, "2026-12-02", levels={"0": 13.0, "4": 13.3})
    p = vllm().with_earlier(earlier)
    decision = decide(lives({0: (5.2,), 4: (12.9,)}), p, {})
    assert any(d.startswith("K=0's one life reads -60% off the level earlier runs on this server measured for it "
                            "(13, last 2026-12-02), more than the restart spread explains: an outlier life?")
               for d in decision.diagnoses)
    stage = stage_of(lives({0: (12.1,), 4: (12.9,)}), p)
    noises, level = stage.noise_by_k, p.interval_level
    assert off_earlier({0: 12.1, 4: 12.9}, {0: 1, 4: 1}, noises, earlier, level) == {}   # within what 3 % explains
    assert off_earlier({0: 5.2}, {0: 2}, noises, earlier, level) == {}                    # two lives: measured


def test_a_single_life_k_that_keeps_its_own_window_has_that_windows_degrees_of_freedom():
    """The quiet pair behind the spread shows no restart part: K=4's noise is its window's bins' alone, and their
    degrees of freedom make its Student's t (Satterthwaite's of a nil restart part, as uncertain as the quiet pair's
    spread it was taken from, which K=4's window noise dwarfs, and its window's: one fewer)."""
    quiet = [window(0, USERS, 10.0, r, duration_s=30.0) for r in range(2)]
    noisy = window(4, USERS, 12.5, 0, duration_s=30.0)
    noisy.t_done_s[: len(noisy.t_done_s) // 2] *= 0.1
    noisy.t_done_s[len(noisy.t_done_s) // 2:: 2] = 29.5
    stage = stage_of(evidence(quiet + [noisy], USERS), vllm())
    own = stage.noise_by_k[4]
    bins = len(stage.prepared[4].windows[0].bins_req) - 1
    assert own.scope.startswith("K=4's: the restart spread with") and bins - 2 <= own.df <= bins
    assert own.df != stage.noise.df


def test_the_stated_spread_is_of_every_restarted_life_where_the_f_test_sets_a_k_apart():
    """Issue 46: under one spread for every K, a pair of lives that reads close by chance sets the other K's pair
    apart (the F test on one degree of freedom each: in 10 % of two-K stages), and the stage stated the close pair's
    spread alone: 0.0 % [0.0, 0.0] in 8 of the calibration suite's 135 two-life trials (seed 1), where the truth was
    1-20 %. The K that agree stay the pool each is resampled with; the spread stated, with its interval, is of
    every restarted life."""
    ev = lives({0: (10.0, 10.0), 4: (12.0, 12.6)})           # K=0's pair reads no spread at all
    stage = stage_of(ev, vllm())
    assert stage.noise_by_k[4] is not stage.noise and stage.noise.rel_sd == 0.0   # set apart: K=0 pools alone
    spread = decide(ev, vllm(), {}).restart_spread
    every = math.sqrt(2 * ((12.6 - 12.0) / (12.6 + 12.0)) ** 2 / 2)   # two pairs, one degree of freedom each
    assert spread.rel_sd == pytest.approx(every, rel=1e-6) and spread.df == 2 and spread.ks == [0, 4]
    assert (spread.low, spread.high) == pytest.approx(chi2_bounds(every, 2, 0.95))
    assert (spread.ledger_squares, spread.ledger_df, spread.ledger_lives) == (0.0, 1, 2)   # the ledger: the pool


def test_a_single_life_k_borrows_the_spread_stated_where_the_f_test_sets_a_k_apart():
    """Issue 46: K=0's two lives read close, K=8's far apart (the F test sets K=8 apart), K=4 ran once. The stage
    stated the spread of every restarted life (2.4 %) while K=4's one life was resampled with the close pair's pool
    (0.2 %, its own windows' noise added: 0.7 %): a verdict on K=4 drawn far narrower than the spread its words
    gave. A K on one life borrows the spread stated, with its degrees of freedom."""
    ev = lives({0: (10.0, 10.02), 8: (12.0, 12.6), 4: (12.5,)})
    p = vllm()
    stage = stage_of(ev, p)
    assert stage.noise_by_k[8] is not stage.noise and stage.noise.rel_sd < 0.005     # K=8 set apart, K=0 pools alone
    spread = decide(ev, p, {}).restart_spread
    assert spread.ks == [0, 8] and spread.rel_sd > 0.02 and f"K=4 on one life with the {spread.rel_sd:.1%} stated" \
        in spread.text
    borrowing = stage.noise_by_k[4]   # the spread stated (its window a little noisier than theirs: with it added)
    assert spread.rel_sd <= borrowing.rel_sd == pytest.approx(spread.rel_sd, rel=0.05) and borrowing.df == spread.df
    # and K=4's resamples are drawn with it: their interquartile range that of se x Student's t with its df
    draws = stage.objective_draws(4, p.objective)
    q25, q50, q75 = np.quantile(draws, (0.25, 0.5, 0.75))
    expected = 2 * stats.t.ppf(0.75, spread.df) * spread.rel_sd
    assert 0.6 * expected < (q75 - q25) / q50 < 1.6 * expected


def test_a_spread_measured_as_nil_on_one_degree_of_freedom_leaves_the_outlier_limit_the_windows_noise():
    """Issue 46: an earlier run whose two lives read alike (spread 0.0 % on 1 degree of freedom, their windows' noise
    kept) and this run's bins of equal counts made the limit 0: a life 0.1 % off its level was held for a second life
    (8 lives of the not-the-lever replay). The level's own window noise stays in the limit; a life 30 % off is still
    flagged."""
    earlier = EarlierSpread(0.0, 1, 1, 2, "2026-12-02", levels={"0": 10.0 / 1.001, "4": 12.0 / 1.001},
                            window_squares=0.01 ** 2, window_df=30)
    p = vllm().with_earlier(earlier)
    assert stage_of(lives({0: (10.0,), 4: (12.0,)}), p).off_earlier == {}
    off = stage_of(lives({0: (10.0 / 1.001 * 1.3,), 4: (12.0,)}), p).off_earlier
    assert list(off) == [0] and off[0] == pytest.approx(0.3, abs=0.01)


def test_a_life_off_its_level_holds_the_verdict_only_where_the_verdict_hangs_on_it():
    """Issue 46 (tight-kv, 7 lives): K=2 read 9 % below its level but is behind the leader beyond the tie band at
    either reading: a second life of it cannot change the verdict, which does not wait for it; the leader off its
    level still holds it."""
    earlier = EarlierSpread(4 * 0.01 ** 2, 4, 2, 6, "2026-12-02", levels={"0": 6.0, "2": 11.0, "4": 13.0})
    p = vllm().with_earlier(earlier)
    behind = stage_of(lives({0: (6.0,), 2: (10.0,), 4: (13.0,)}), p)
    assert set(behind.off_earlier) == {2} and (behind.status, behind.pick) == ("decided", 4)
    leader = stage_of(lives({0: (6.0,), 2: (11.0,), 4: (14.5,)}), p)
    assert set(leader.off_earlier) == {4} and leader.status == "not_decided"
    assert any(w.startswith("K=4's one life reads +12% off the level") for w in leader.why_not_decided)


def test_the_adaptive_sweep_buys_no_life_for_a_k_off_its_level_the_verdict_does_not_hang_on():
    """Review (issue 46): K=2 reads 9 % below its level, behind the leader K=4 beyond the tie band either way; the
    verdict is decided without it, and the chooser stops there instead of buying K=2 a second life."""
    from lookahead_runner.decision.adaptive import Budget, ModelView, Spent, choose
    from lookahead_runner.decision.standing import standing_of

    earlier = EarlierSpread(4 * 0.01 ** 2, 4, 2, 6, "2026-12-02", levels={"0": 6.0, "2": 11.0, "4": 13.0})
    p = vllm().with_earlier(earlier)
    rates = {0: (6.0, 6.0), 2: (10.0,), 4: (13.0, 13.0)}
    now = standing_of(lives(rates), p)
    assert now.status == "decided" and now.leader == 4 and not now.off_earlier
    spent = {k: len(values) for k, values in rates.items()}
    stop = choose([0, 2, 4], now, Spent(spent, dict(spent), server_s=0.0), ModelView(), Budget(max_lives=20), 5)
    assert (stop.k, stop.stop) == (None, "decided"), stop.why


def test_an_off_level_life_with_no_pick_holds_the_verdict_and_raises_nothing():
    """No K eligible (pick None): which K the verdict hangs on is unknown, so every off-level K is held (before: a
    KeyError on the missing pick's figures, from the adaptive chooser's standing)."""
    from types import SimpleNamespace
    from lookahead_runner.decision.gates.stage import off_earlier_held
    stage = SimpleNamespace(pick=None, base_k=0, off_earlier={4: 0.2}, stats={}, users=64)
    assert off_earlier_held(stage, SimpleNamespace(tie_tolerance_frac=0.02)) == {4: 0.2}
