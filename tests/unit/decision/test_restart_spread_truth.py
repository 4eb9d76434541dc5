"""Issue 46: the restart spread's claims checked against the truth of synthetic lives (decision/cells/restart_spread.py,
the engine's stages, the adaptive chooser's outlier guard). Each story is the issue's own figures, decided by the
product's engine on synthetic windows as benchmarks/spread_calibration.py does."""
import math

import numpy as np
import pytest
from scipy import stats
from unit.synthetic import window

from lookahead_runner.config import DecisionConfig
from lookahead_runner.config.decision import EarlierSpread
from lookahead_runner.decision import decide, evidence
from lookahead_runner.decision.adaptive import Budget, ModelView, Spent, choose
from lookahead_runner.decision.standing import standing_of
from lookahead_runner.decision.cells.measure import ThroughputNoise
from lookahead_runner.decision.cells.restart_spread import chi2_bounds, off_earlier, outlier_false_alarm
from lookahead_runner.decision.engine import repeats_wanted
from lookahead_runner.decision.engine import evaluate_stages


def vllm(**fields) -> DecisionConfig:
    return DecisionConfig(resamples=1000, **fields).for_server("vllm")


def test_a_spread_measured_at_the_target_is_not_borrowed_by_a_stage_at_other_users():
    """(1) The ledger's 0.7 % was measured at 64 users; at 1 user vLLM #53436 saw 7.5-19.7 % from run to run. A
    1-user stage with one life per K and K=4 +6 % read "decided, K=4, 97.8 %" on the borrowed 0.7 % (53 % without
    the ledger): each stage now judges on its own, the target on the ledger."""
    earlier = EarlierSpread(4 * 0.007 ** 2, 4, 2, 4, "2026-12-02")   # taken at the run's target, 64 users
    ev = evidence([window(k, users, rate * (1.06 if k else 1.0), 0, duration_s=30.0)
                   for k in (0, 4) for users, rate in ((1, 10.0), (64, 20.0))], 64)
    with_ledger = decide(ev, vllm().with_earlier(earlier), {})
    without = decide(ev, vllm(), {})
    one_user = {s.users: s for s in with_ledger.per_stage}[1]
    assert one_user.status != "decided", f"1 user: {one_user.status} K={one_user.k} at {one_user.confidence}"
    assert one_user.confidence == pytest.approx({s.users: s for s in without.per_stage}[1].confidence, abs=0.01)
    stages = evaluate_stages(ev, vllm().with_earlier(earlier))
    assert stages[1].noise.restart_unknown and stages[1].noise.origin is None
    assert stages[64].noise.origin.earlier == earlier                # the target stage still borrows it
    measured_elsewhere = EarlierSpread(4 * 0.007 ** 2, 4, 2, 4, "2026-12-02", users=1)
    assert evaluate_stages(ev, vllm().with_earlier(measured_elsewhere))[64].noise.origin is None


def _outlier_baseline(second_k0: float | None = None):
    """The issue's story: earlier runs on this server measured 1 % and the levels K=0 20.0, K=4 20.4 (truth +2 %,
    inside the 3 % tie band); this run's K=0 life landed 15 % slow (a restart in a slow regime, vLLM #39903)."""
    windows = [window(0, 32, 20.0 * 0.85, 0, duration_s=30.0), window(4, 32, 20.4, 0, duration_s=30.0)]
    if second_k0 is not None:
        windows.append(window(0, 32, second_k0, 1, duration_s=30.0))
    return evidence(windows, 32)


EARLIER_1PCT = EarlierSpread(4 * 0.01 ** 2, 4, 2, 8, "2026-12-02", levels={"0": 20.0, "4": 20.4})


def test_an_outlier_baseline_life_is_measured_again_where_the_ledger_spread_is_far_narrower():
    """(2) It was "decided K=4, 100 %": the guard's 25 % floor let a 15 % outlier pass, and with a ledger the
    baseline's second life is never bought. The guard is now max(4 spreads, 2 tie bands): 6 % here."""
    p = vllm().with_earlier(EARLIER_1PCT)
    now = standing_of(_outlier_baseline(), p)
    choice = choose([0, 4], now, Spent({0: 1, 4: 1}, {0: 1, 4: 1}), ModelView(), Budget(4), 2, 2, p.tie_tolerance_frac)
    assert choice.k == 0, choice.why
    assert now.off_earlier == {0: pytest.approx(-0.15, abs=0.005)} and "an outlier life?" in choice.why
    # its second life lands at the true level: the verdict is no longer a confident K=4
    after = decide(_outlier_baseline(second_k0=20.0), p, {})
    assert not (after.status == "decided" and after.recommended.k == 4), after.verdict


def test_a_verdict_resting_on_one_life_off_the_ledgers_level_waits_for_its_second():
    """The issue's story at the verdict itself (a grid of one life per K borrowing the ledger): it read "Set K=4 ...
    K=4 wins in 100% of 1000 resamples" with "an outlier life?" as a footnote, the truth +2 % (a tie). A life the
    spread does not describe makes the share drawn with that spread say nothing: not decided, K=0 measured again."""
    p = vllm().with_earlier(EARLIER_1PCT)
    d = decide(_outlier_baseline(), p, {})
    assert d.status != "decided", d.verdict
    assert "K=0's one life reads -15% off the level earlier runs on this server measured for it" in d.verdict
    assert 0 in repeats_wanted(_outlier_baseline(), p)


def test_the_outlier_guard_flags_lives_the_spread_describes_at_its_stated_false_alarm_rate():
    """A life the spread describes deviates from the earlier runs' level by Student's t with the spread's degrees of
    freedom: the guard flags it at its stated rate (1 - interval_level over the K it checks), whatever the spread;
    and a life far past what a narrow spread explains is flagged (the floor follows the spread, no fixed band)."""
    rng = np.random.default_rng(46)
    level, trials = 0.95, 20_000
    for sigma, df, runs in ((0.05, 2, 1), (0.01, 6, 3)):
        flagged = 0
        for _ in range(trials):
            s = sigma * math.sqrt(rng.chisquare(df) / df)
            noises = {k: ThroughputNoise(s, df, "repeats") for k in (0, 4)}
            earlier = EarlierSpread(s * s * df, df, runs, 2 * runs, "2026-12-02", levels={"0": 10.0, "4": 10.0})
            lives = 10.0 * (1 + sigma * math.sqrt(1 + 1 / runs) * rng.standard_normal(2))
            flagged += len(off_earlier({0: lives[0], 4: lives[1]}, {0: 1, 4: 1}, noises, earlier, level))
        stated = outlier_false_alarm(level, 2)
        low, high = stats.binom.ppf([0.005, 0.995], 2 * trials, stated) / (2 * trials)
        assert low <= flagged / (2 * trials) <= high, (sigma, df, flagged / (2 * trials), stated)
    narrow = {k: ThroughputNoise(0.01, 4, "repeats") for k in (0, 4)}
    # 5 % slow under a 1 % spread over two runs (limit 4.3 %; the old fixed floor of two tie bands, 6 %, let it by)
    assert off_earlier({0: 20.0 * 0.95, 4: 20.4}, {0: 1, 4: 1}, narrow, EARLIER_1PCT, level) == \
        {0: pytest.approx(-0.05)}
    assert off_earlier({0: 20.0 * 0.97, 4: 20.4}, {0: 1, 4: 1}, narrow, EARLIER_1PCT, level) == {}


def test_the_outlier_guard_stays_quiet_on_lives_within_the_ledgers_spread():
    p = vllm().with_earlier(EARLIER_1PCT)
    usual = evidence([window(0, 32, 20.0 * 0.99, 0, duration_s=30.0), window(4, 32, 20.4 * 1.01, 0, duration_s=30.0)],
                     32)
    now = standing_of(usual, p)
    assert now.off_earlier == {}
    choice = choose([0, 4], now, Spent({0: 1, 4: 1}, {0: 1, 4: 1}), ModelView(), Budget(4), 2, 2, p.tie_tolerance_frac)
    assert choice.k is None or choice.k != 0 or "outlier" not in choice.why


def test_a_verdict_end_the_ledger_holds_no_level_for_keeps_its_second_life():
    """No level to hold its one life against: the guard cannot see an outlier there, so the ledger spares it nothing."""
    p = vllm().with_earlier(EarlierSpread(4 * 0.01 ** 2, 4, 2, 8, "2026-12-02", levels={"0": 20.0}))
    ev = evidence([window(0, 32, 20.0, 0, duration_s=30.0), window(4, 32, 24.0, 0, duration_s=30.0)], 32)
    now = standing_of(ev, p)
    assert now.status == "decided" and now.leader == 4 and now.unchecked == frozenset({4})
    choice = choose([0, 4], now, Spent({0: 1, 4: 1}, {0: 1, 4: 1}), ModelView(), Budget(4), 2, 2, p.tie_tolerance_frac)
    assert choice.k == 4 and "no level" in choice.why


def _clumped(w, share: float):
    """The window with `share` of each odd bin's completions moved into the bin before (noisier bins, same count)."""
    t = w.t_done_s.copy()
    step = 1.6
    bins = np.floor(t / step).astype(int)
    odd = np.nonzero(bins % 2 == 1)[0]
    moved = odd[: int(len(odd) * share)]
    t[moved] -= step
    w.t_done_s[:] = np.sort(np.clip(t, 0, w.duration_s * 0.999))
    return w


def test_a_borrowed_spread_adds_a_noisier_windows_own_noise_instead_of_replacing_it():
    """(3) Earlier runs measured 2 % on long quiet windows; this run's K=4 window is short and its bins noisy. Its
    noise was the borrowed 2 % alone (its window noise below the spread's F test); it is now the spread less the
    window part of the lives that measured it, plus its own window's."""
    earlier = EarlierSpread(4 * 0.02 ** 2, 4, 2, 8, "2026-12-02")    # a ledger entry that kept no window part
    noise, own = _noisy_k4(earlier)
    assert 0.02 ** 2 < own < 0.045 ** 2          # noisier than the whole spread, not beyond the F test against it
    assert noise.rel_sd == pytest.approx(math.sqrt(earlier.squares / earlier.df + own), rel=1e-6)
    assert noise.rel_sd > max(math.sqrt(own), earlier.rel_sd)


def test_the_window_part_of_the_lives_behind_the_spread_is_not_counted_twice():
    """The ledger keeps the window part of the lives that measured the spread: a window like theirs adds nothing
    beyond the spread, a noisier one adds only what the restart part does not hold already."""
    part = 4 * 0.004 ** 2
    earlier = EarlierSpread(4 * 0.02 ** 2, 4, 2, 8, "2026-12-02", window_squares=part)
    noise, own = _noisy_k4(earlier)
    assert noise.rel_sd == pytest.approx(math.sqrt((earlier.squares - part) / earlier.df + own), rel=1e-6)


def test_a_ledger_measured_on_longer_windows_is_stated_with_this_runs_window_noise():
    """Issue 46, a ledger from unlike conditions: earlier runs measured 4.1 % on 40 s windows (2 % from the restart,
    the rest their windows' Poisson noise, which the ledger keeps); this run's windows last 10 s, so one of its lives
    varies by 7.3 %. The spread was stated as the ledger's, 4.1 % [3.1, 5.9]: now the ledger's restart part with this
    run's window noise, and its interval holds this run's spread."""
    rng = np.random.default_rng(46)
    windows = []
    for k, rate in ((0, 20.0), (4, 20.6)):
        w = window(k, 32, rate, 0, duration_s=10.0)
        w.t_done_s[:] = np.sort(rng.uniform(0, 10.0, len(w.t_done_s)))     # Poisson completions
        windows.append(w)
    restart, theirs, df = 0.02 ** 2, 1 / (20.0 * 40.0), 20
    earlier = EarlierSpread((restart + theirs) * df, df, 5, 30, "2026-12-02", levels={"0": 20.0, "4": 20.6},
                            window_squares=theirs * df, window_df=30 * 39)
    truth = math.sqrt(restart + 1 / (20.3 * 10.0))
    stated = decide(evidence(windows, 32), vllm().with_earlier(earlier), {}).restart_spread
    assert stated.low <= truth <= stated.high, (stated.rel_sd, stated.low, stated.high, truth)
    assert "window part this run's" in stated.text


def _noisy_k4(earlier):
    """K=4's noise at a stage where its only window is short and clumpy, K=0's long and even; and K=4's window
    variance (of its mean, from its bins)."""
    quiet = window(0, 32, 20.0, 0, duration_s=30.0)
    noisy = _clumped(window(4, 32, 21.6, 0, duration_s=12.0), 0.06)
    stage = evaluate_stages(evidence([quiet, noisy], 32), vllm().with_earlier(earlier))[32]
    bins = stage.prepared[4].windows[0].bins_req
    return stage.noise_by_k[4], float(np.var(bins / bins.mean(), ddof=1) / len(bins))


def test_the_spread_shown_is_the_estimate_its_degrees_of_freedom_and_interval_belong_to():
    """(5) This run's pair (4.2 %) is wider than the pool with earlier runs (3.2 %) but not beyond the F test: the
    figure was this run's own shown with the pool's 5 degrees of freedom and an interval neither belongs to."""
    earlier = EarlierSpread(4 * 0.03 ** 2, 4, 2, 6, "2026-12-02")
    ev = evidence([window(0, 4, 10.0, 0, duration_s=30.0), window(0, 4, 10.6, 1, duration_s=30.0),
                   window(4, 4, 12.5, 0, duration_s=30.0)], 4)
    origin = evaluate_stages(ev, vllm().with_earlier(earlier))[4].noise.origin
    behind = origin.squares + (origin.earlier.squares if origin.earlier else 0.0)
    assert origin.rel_sd ** 2 * origin.df == pytest.approx(behind, rel=1e-6)
    assert (origin.low, origin.high) == pytest.approx(chi2_bounds(origin.rel_sd, origin.df, 0.95))


def test_an_outlier_pair_set_apart_at_the_stage_is_not_written_to_the_ledger():
    """(5) K=4's two lives 28 % apart are set apart by the F test (the stage pools K=0's pair alone): the ledger
    kept them too, and the next 10 runs on this server borrowed a spread inflated by them."""
    ev = evidence([window(0, 4, 10.0, 0, duration_s=30.0), window(0, 4, 10.1, 1, duration_s=30.0),
                   window(4, 4, 12.5, 0, duration_s=30.0), window(4, 4, 16.0, 1, duration_s=30.0),
                   window(8, 4, 11.0, 0, duration_s=30.0)], 4)
    spread = decide(ev, vllm(), {}).restart_spread
    assert spread.ks == [0, 4]        # the spread stated is of every restarted life (issue 46); the ledger's, K=0's
    assert spread.ledger_squares == pytest.approx(2 * (0.05 / 10.05) ** 2) and \
        (spread.ledger_df, spread.ledger_lives) == (1, 2)
