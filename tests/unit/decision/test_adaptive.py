"""The adaptive sweep's chooser (decision/adaptive.py): which life next, or why it stops. Pure; the engine's own
standing is built from synthetic windows where the chooser must read it."""
from unit.synthetic import table, window

from lookahead_runner.decision.adaptive import Budget, ModelView, Prediction, Spent, choose, choose_batch, run_note
from lookahead_runner.decision.standing import Standing, standing_of, valid_lives
from lookahead_runner.config import DecisionConfig
from lookahead_runner.decision import decide, evidence
from lookahead_runner.decision.engine import contender_share, early_look

KS = [0, 2, 4, 8]
ROOMY = Budget(max_lives=20)
IN_THE_RUNNING = contender_share(DecisionConfig(), 1000)   # at 90 %: 2 %
# a model's held-out errors at the target (the largest 5 %) and the skip's level (the early-stop bar's error, 1 %):
# a K is given up to 8.0 % past its prediction (decision/perfmodel/prior.skip_bound)
HELD = {"heldout_error": 0.05, "heldout_errors": (0.05, -0.02, 0.02, -0.01, 0.01, -0.02),
        "skip_level": 1 - early_look(DecisionConfig()).confidence}


def spent(**lives_by_k) -> Spent:
    lives = {int(k[1:]): n for k, n in lives_by_k.items()}
    return Spent(lives, dict(lives), server_s=0.0)


def standing(status="not_decided", leader=None, shares=None, objective=None, **rest) -> Standing:
    return Standing(status, leader, shares or {}, objective or {}, **{"contender_share": IN_THE_RUNNING, **rest})


def test_starts_with_the_baseline_then_the_middle_of_the_grid_without_a_model():
    first = choose(KS, standing("no_measurement"), Spent(), ModelView(), ROOMY, 5)
    assert (first.k, first.all_stages) == (0, True) and "baseline" in first.why
    second = choose(KS, standing("not_decided", 0, {0: 1.0}, {0: 20.0}), spent(k0=1), ModelView(), ROOMY, 5)
    assert second.k == 4 and "middle of the grid" in second.why and "no performance model" in second.why


def test_a_trusted_model_picks_the_first_k_and_an_untrusted_one_does_not():
    predictions = {2: Prediction(40, 38, 42), 4: Prediction(45, 43, 47), 8: Prediction(60, 50, 70)}
    now = standing("not_decided", 0, {0: 1.0}, {0: 20.0})
    assert choose(KS, now, spent(k0=1), ModelView(True, predictions, ""), ROOMY, 5).k == 8
    untrusted = choose(KS, now, spent(k0=1), ModelView(False, predictions, "held-out error 31 % > 10 %"), ROOMY, 5)
    assert untrusted.k == 4 and "held-out error 31 %" in untrusted.why


def test_model_free_it_runs_only_the_k_between_those_measured_around_the_leader():
    # K=4 leads K=0: the best lies above 0, so both K=2 and K=8 could be it; grid order first
    now = standing("decided", 4, {4: 1.0}, {0: 20.0, 4: 50.0})
    assert choose(KS, now, spent(k0=1, k4=1), ModelView(), ROOMY, 5).k == 2
    # K=0 leads, K=4 is worse: the best lies below 4, so K=8 is never run; K=2 is
    now = standing("not_decided", 0, {0: 1.0}, {0: 20.0, 4: 15.0})
    assert choose(KS, now, spent(k0=1, k4=1), ModelView(), ROOMY, 5).k == 2
    now = standing("decided", 0, {0: 1.0}, {0: 20.0, 2: 19.0, 4: 15.0})
    repeat = choose(KS, now, spent(k0=1, k2=1, k4=1), ModelView(), ROOMY, 5)
    assert (repeat.k, repeat.all_stages) == (0, False) and "once more" in repeat.why


def test_a_k_still_winning_some_resamples_widens_the_bracket():
    # K=2 leads but K=4 still wins 30 %: K=8, above 4, could be the best too
    now = standing("not_decided", 2, {2: 0.7, 4: 0.3}, {0: 20.0, 2: 45.0, 4: 44.0})
    assert choose(KS, now, spent(k0=1, k2=1, k4=1), ModelView(), ROOMY, 5).k == 8
    alone = standing("not_decided", 2, {2: 1.0}, {0: 20.0, 2: 45.0, 4: 30.0})
    assert choose(KS, alone, spent(k0=1, k2=1, k4=1), ModelView(), ROOMY, 5).k == 2  # a repeat, not K=8


def test_no_k_at_or_above_an_agreed_stop_is_run():
    now = standing("not_decided", 4, {4: 1.0}, {0: 20.0, 4: 50.0}, stopped_at=8)
    assert choose(KS, now, spent(k0=1, k4=1, k2=1), ModelView(), ROOMY, 5).k == 4


def test_a_trusted_model_skips_a_k_it_predicts_cannot_reach_the_leader():
    model = ModelView(True, {2: Prediction(40, 38, 42), 8: Prediction(30, 25, 35)}, "", **HELD)
    now = standing("decided", 4, {4: 1.0}, {0: 20.0, 4: 50.0})
    # K=2, between the measured 0 and 4, cannot win; K=8, beyond every K measured, is an extrapolation: run
    assert choose(KS, now, spent(k0=1, k4=1), model, ROOMY, 5).k == 8
    measured = standing("decided", 4, {4: 1.0}, {0: 20.0, 4: 50.0, 8: 30.0})
    choice = choose(KS, measured, spent(k0=1, k4=1, k8=1), model, ROOMY, 5)
    assert choice.k == 4 and not choice.all_stages  # K=2 cannot win: a repeat of the leader
    hopeful = ModelView(True, {2: Prediction(40, 38, 49), 8: Prediction(30, 25, 35)}, "", **HELD)
    assert choose(KS, now, spent(k0=1, k4=1), hopeful, ROOMY, 5).k == 2  # 49 reaches 50 within the tie band
    production = ModelView(True, model.predictions, "", production_best=8)
    assert choose(KS, now, spent(k0=1, k4=1), production, ROOMY, 5).k == 8  # the best at production_users, unrun
    full = ModelView(True, {2: Prediction(40, 38, 42), 8: Prediction(70, 60, 80, preempting=True)}, "", **HELD)
    assert choose(KS, now, spent(k0=1, k4=1), full, ROOMY, 5).k == 4      # K=8 would fill the KV pool


def test_a_k_is_held_against_the_leader_as_the_model_predicts_both_so_its_bias_cancels():
    now = standing("decided", 4, {4: 1.0}, {0: 20.0, 4: 50.0, 8: 30.0})
    lives = spent(k0=1, k4=1, k8=1)
    high = ModelView(True, {2: Prediction(49, 46, 52), 4: Prediction(55, 53, 57), 8: Prediction(30, 25, 35)}, "", **HELD)
    assert choose(KS, now, lives, high, ROOMY, 5).k == 4   # K=2's top 52 is 5 % under the leader's 55
    low = ModelView(True, {2: Prediction(43, 41, 46), 4: Prediction(45, 43, 47), 8: Prediction(30, 25, 35)}, "", **HELD)
    assert choose(KS, now, lives, low, ROOMY, 5).k == 2    # 46 against 45: K=2 could be ahead


def test_it_stops_when_decided_on_a_leader_and_a_baseline_with_two_lives_each():
    now = standing("decided", 4, {4: 0.97, 2: 0.03}, {0: 30.0, 2: 45.0, 4: 50.0, 8: 38.0})
    done = choose(KS, now, spent(k0=2, k2=1, k4=2, k8=1), ModelView(), ROOMY, 5)
    assert done.k is None and done.stop == "decided" and "K=4 wins in 97%" in done.why
    leader_once = choose(KS, now, spent(k0=1, k2=1, k4=1, k8=1), ModelView(), ROOMY, 5)
    assert (leader_once.k, leader_once.all_stages) == (4, False) and "measures the restart spread" in leader_once.why
    assert leader_once.purpose == "spread"
    # one life of the baseline may be an outlier that every gain would be measured against
    base_once = choose(KS, now, spent(k0=1, k2=1, k4=2, k8=1), ModelView(), ROOMY, 5)
    assert base_once.k == 0 and "the baseline every gain is measured against on 1 life" in base_once.why


def test_a_measured_restart_spread_is_borrowed_by_every_k_measured_once():
    """Issue 38: once one repeated life measured the spread, a K measured once borrows it: the leader needs no
    second life; the baseline keeps its second (an outlier life of it moves every gain) unless earlier runs on this
    server measured the spread, then one life per K is the whole sweep."""
    measured = standing("decided", 4, {4: 0.97, 2: 0.03}, {0: 30.0, 2: 45.0, 4: 50.0, 8: 38.0},
                        spread_measured=True)
    done = choose(KS, measured, spent(k0=2, k2=1, k4=1, k8=1), ModelView(), ROOMY, 5)
    assert done.k is None and done.stop == "decided"                     # the leader borrows
    base = choose(KS, measured, spent(k0=1, k2=1, k4=2, k8=1), ModelView(), ROOMY, 5)
    assert base.k == 0 and base.purpose == "" and "guards against one outlier life" in base.why
    remembered = standing("decided", 4, {4: 0.97, 2: 0.03}, {0: 30.0, 2: 45.0, 4: 50.0, 8: 38.0},
                          spread_measured=True, spread_from_earlier=True)
    once = choose(KS, remembered, spent(k0=1, k2=1, k4=1, k8=1), ModelView(), ROOMY, 5)
    assert once.k is None and once.stop == "decided" and "the baseline on 1 life" not in once.why
    hanging = standing("not_decided", 4, {4: 0.8, 2: 0.2}, {0: 30.0, 2: 48.0, 4: 50.0}, wanted=(2, 4),
                       spread_measured=True)
    more = choose(KS, hanging, spent(k0=2, k2=1, k4=1, k8=1), ModelView(), ROOMY, 5)
    assert more.k in (2, 4) and more.purpose == "" and "restart spread" not in more.why


def test_the_baseline_is_spared_its_second_life_only_where_half_its_figure_could_not_turn_the_verdict():
    far = standing("decided", 4, {4: 1.0}, {0: 20.0, 2: 38.0, 4: 42.0, 8: 30.0})
    done = choose(KS, far, spent(k0=1, k2=1, k4=2, k8=1), ModelView(), ROOMY, 5)
    assert done.k is None and done.stop == "decided"                    # 42 >= 20 x 2 x 1.03
    assert done.why.endswith("(the baseline on 1 life: K=4 is more than twice as fast)")
    near = standing("decided", 4, {4: 1.0}, {0: 21.0, 2: 38.0, 4: 42.0, 8: 30.0})
    assert choose(KS, near, spent(k0=1, k2=1, k4=2, k8=1), ModelView(), ROOMY, 5).k == 0  # 42 < 21 x 2 x 1.03
    leader_short = choose(KS, far, spent(k0=1, k2=1, k4=1, k8=1), ModelView(), ROOMY, 5)
    assert leader_short.k == 4                                            # the leader still needs its second
    undecided = standing("not_decided", 4, {4: 0.8, 2: 0.2}, {0: 10.0, 2: 38.0, 4: 42.0, 8: 30.0}, wanted=(2, 4))
    assert choose(KS, undecided, spent(k0=1, k2=2, k4=2, k8=1), ModelView(), ROOMY, 5).k == 0


def test_not_decided_repeats_the_k_with_fewest_lives_among_those_the_verdict_hangs_on():
    now = standing("not_decided", 4, {4: 0.8, 2: 0.2}, {0: 20.0, 2: 48.0, 4: 50.0, 8: 38.0}, wanted=(2, 4))
    assert choose(KS, now, spent(k0=2, k2=1, k4=2, k8=1), ModelView(), ROOMY, 5).k == 2
    capped = choose(KS, now, spent(k0=2, k2=5, k4=5, k8=1), ModelView(), ROOMY, 5)
    assert capped.k is None and capped.stop == "exhausted" and "max_repeats" in capped.why


def test_budgets_stop_it_and_say_which():
    now = standing("not_decided", 4, {4: 0.8, 2: 0.2}, {0: 20.0, 2: 48.0, 4: 50.0, 8: 38.0}, wanted=(2, 4))
    lives = choose(KS, now, spent(k0=1, k2=1, k4=2, k8=1), ModelView(), Budget(max_lives=5), 5)
    assert lives.k is None and lives.stop == "budget" and "sweep.max_lives = 5" in lives.why
    time_spent = Spent({0: 1, 2: 1, 4: 2, 8: 1}, {0: 1, 2: 1, 4: 2, 8: 1}, server_s=560.0, next_life_s=120.0)
    minutes = choose(KS, now, time_spent, ModelView(), Budget(20, max_server_s=600.0), 5)
    assert minutes.k is None and "sweep.max_server_minutes = 10" in minutes.why
    # within the budget a life is chosen: the baseline's second (no stop comes while it is on one life) before K=2's
    assert choose(KS, now, time_spent, ModelView(), Budget(20, max_server_s=700.0), 5).k == 0


def test_a_life_without_a_valid_window_is_retried_once_then_given_up():
    now = standing("not_decided", 0, {0: 1.0}, {0: 20.0})
    failed_once = Spent({0: 1, 4: 1}, {0: 1}, 0.0)
    assert choose(KS, now, failed_once, ModelView(), ROOMY, 5).k == 4
    failed_twice = Spent({0: 1, 4: 2}, {0: 1}, 0.0)
    assert choose(KS, now, failed_twice, ModelView(), ROOMY, 5).k == 2  # K=4 given up; 2 is in the bracket
    base_failed = choose(KS, standing("no_measurement"), Spent({0: 2}, {}, 0.0), ModelView(), ROOMY, 5)
    assert base_failed.k is None and "baseline K=0 gave no valid window" in base_failed.why


def test_standing_reads_the_engines_target_stage():
    p = DecisionConfig(resamples=200)
    ev = table({0: {64: 20.0}, 4: {64: 50.0}}, target=64, repeats=2)
    now = standing_of(ev, p)
    assert now.status == "decided" and now.leader == 4 and now.shares[4] >= 0.9
    assert now.measured == [0, 4] and now.objective[4] > now.objective[0] and not now.blocked
    assert valid_lives(ev, 64) == {0: 2, 4: 2}
    close = evidence([window(0, 64, 20.0, 0), window(2, 64, 45.0, 0), window(4, 64, 45.5, 0),
                      window(2, 64, 46.0, 1), window(4, 64, 44.5, 1)], 64)
    assert standing_of(close, p).leader == 2  # within the tie band: the smaller K
    assert standing_of(evidence([], 64), p).status == "no_measurement"


def test_the_run_note_says_what_ran_what_was_left_out_and_why_it_stopped():
    note = run_note(KS, {0: 1, 2: 1, 4: 2}, "decided: K=4 wins in 96% of the resamples", "decided")
    assert note == ("Adaptive sweep: 4 lives chosen one at a time (K=0, K=2, K=4 x2); K 8 not run: when it "
                    "stopped, none could be the best on what was measured (or predicted by a trusted model); "
                    "stopped: decided: K=4 wins in 96% of the resamples.")
    assert "not run" not in run_note([0, 4], {0: 1, 4: 2}, "") and run_note([0, 4], {0: 1}, "").endswith(
        "K 4 not run: the sweep has not finished; stopped: not yet (interrupted).")
    assert "K 2, 8 not run: the budget ran out first" in run_note(KS, {0: 1, 4: 1}, "budget: ...", "budget")
    assert "4 lives chosen up to 2 at a time (one per slot)" in run_note(KS, {0: 1, 2: 1, 4: 2}, "decided", slots=2)
    probed = run_note(KS, {0: 3, 4: 3}, "decided", "decided", probes=3, ended_early=1)
    assert "3 of them capacity probes, one rate stage each at a rate the config does not list, 1 ended early, " \
        "clearly over capacity)" in probed
    assert "ended early" not in run_note(KS, {0: 3, 4: 3}, "decided", "decided", probes=3)


def in_flight(done: Spent, **pending) -> Spent:
    return Spent(done.lives, done.valid, done.server_s, done.next_life_s, {int(k[1:]): n for k, n in pending.items()})


SITUATIONS = [  # (standing, spent) met along a serial sweep, and where it stops
    (standing("no_measurement"), Spent()),
    (standing("not_decided", 0, {0: 1.0}, {0: 20.0}), spent(k0=1)),
    (standing("not_decided", 0, {0: 1.0}, {0: 20.0, 4: 15.0}), spent(k0=1, k4=1)),
    (standing("decided", 4, {4: 1.0}, {0: 20.0, 4: 50.0}), spent(k0=1, k4=1)),
    (standing("decided", 4, {4: 0.97, 2: 0.03}, {0: 30.0, 2: 45.0, 4: 50.0, 8: 38.0}), spent(k0=1, k2=1, k4=2, k8=1)),
    (standing("decided", 4, {4: 0.97, 2: 0.03}, {0: 30.0, 2: 45.0, 4: 50.0, 8: 38.0}), spent(k0=2, k2=1, k4=2, k8=1)),
    (standing("not_decided", 4, {4: 0.8, 2: 0.2}, {0: 20.0, 2: 48.0, 4: 50.0, 8: 38.0}, wanted=(2, 4)),
     spent(k0=2, k2=5, k4=5, k8=1)),
]


def test_one_free_slot_chooses_what_the_serial_chooser_does():
    stops = []
    for now, done in SITUATIONS:
        single, batch = choose(KS, now, done, ModelView(), ROOMY, 5), choose_batch(1, KS, now, done, ModelView(), ROOMY, 5)
        if single.k is None:
            assert (batch.lives, batch.reason, batch.ends_sweep) == ((), single, True), (now, done)
        else:
            assert (batch.lives, batch.reason, batch.in_flight) == ((single,), None, 1), (now, done)
        stops.append(single.stop)
    assert stops == ["", "", "", "", "", "decided", "exhausted"]   # lives of each kind, and both stops


def test_two_free_slots_start_with_the_baseline_and_the_first_k_and_wait_for_the_baselines_window():
    start = choose_batch(2, KS, standing("no_measurement"), Spent(), ModelView(), ROOMY, 5)
    assert [(c.k, c.all_stages) for c in start.lives] == [(0, True), (4, True)] and start.reason is None
    assert "baseline" in start.lives[0].why and "middle of the grid" in start.lives[1].why
    more = choose_batch(4, KS, standing("no_measurement"), Spent(), ModelView(), ROOMY, 5)
    assert [c.k for c in more.lives] == [0, 4] and more.reason.stop == "wait" and "K=0's first window" in more.reason.why


def test_a_life_in_flight_is_not_proposed_again_for_the_same_reason():
    base_only = standing("not_decided", 0, {0: 1.0}, {0: 20.0})
    # K=4's first life runs: K=2 (between the baseline and it) comes next either way; K=8 waits for K=4's window
    batch = choose_batch(3, KS, base_only, in_flight(spent(k0=1), k4=1), ModelView(), ROOMY, 5)
    assert [c.k for c in batch.lives] == [2] and batch.reason.stop == "wait" and "K 2, 4" in batch.reason.why
    # the leader's second life runs, measuring the restart spread; the baseline's second is the other end of the
    # gain, a different proposal
    near = standing("decided", 4, {4: 1.0}, {0: 30.0, 2: 45.0, 4: 50.0, 8: 38.0})
    both = choose_batch(2, KS, near, spent(k0=1, k2=1, k4=1, k8=1), ModelView(), ROOMY, 5)
    assert [(c.k, c.all_stages, c.purpose) for c in both.lives] == [(4, False, "spread"), (0, False, "")]
    running = choose_batch(2, KS, near, in_flight(spent(k0=1, k2=1, k4=1, k8=1), k4=1), ModelView(), ROOMY, 5)
    assert [c.k for c in running.lives] == [0] and "life 2" in running.lives[0].why
    hanging = standing("not_decided", 4, {4: 0.8, 2: 0.2}, {0: 20.0, 2: 48.0, 4: 50.0, 8: 38.0}, wanted=(2, 4))
    repeats = choose_batch(3, KS, hanging, in_flight(spent(k0=2, k2=1, k4=2, k8=1), k2=1), ModelView(), ROOMY, 5)
    assert [c.k for c in repeats.lives] == [4] and repeats.reason.stop == "wait"    # K=2's repeat runs already
    assert "in flight" in repeats.reason.why


def test_budgets_count_the_lives_in_flight():
    leads = standing("not_decided", 4, {4: 1.0}, {0: 20.0, 4: 50.0})
    batch = choose_batch(2, KS, leads, spent(k0=1, k4=1), ModelView(), Budget(max_lives=3), 5)
    assert [c.k for c in batch.lives] == [2] and batch.reason.stop == "budget"       # 2 done + 1 in flight = 3
    assert "sweep.max_lives = 3 lives run, 1 of them in flight" in batch.reason.why
    assert len(choose_batch(2, KS, leads, spent(k0=1, k4=1), ModelView(), Budget(max_lives=4), 5).lives) == 2
    hanging = standing("not_decided", 4, {4: 0.8, 2: 0.2}, {0: 20.0, 2: 48.0, 4: 50.0, 8: 38.0}, wanted=(2, 4))
    timed = Spent({0: 1, 2: 1, 4: 1, 8: 1}, {0: 1, 2: 1, 4: 1, 8: 1}, server_s=480.0, next_life_s=120.0)
    minutes = choose_batch(3, KS, hanging, timed, ModelView(), Budget(20, max_server_s=660.0), 5)
    assert len(minutes.lives) == 1 and minutes.reason.stop == "budget"     # 480 + 120 in flight + 120 > 660
    assert "(8.0 spent, ~2.0 in flight;" in minutes.reason.why


def test_decided_with_lives_in_flight_proposes_nothing_and_is_asked_again():
    won = standing("decided", 4, {4: 0.97, 2: 0.03}, {0: 30.0, 2: 45.0, 4: 50.0, 8: 38.0})
    waiting = choose_batch(2, KS, won, in_flight(spent(k0=2, k2=1, k4=2, k8=1), k2=1), ModelView(), ROOMY, 5)
    assert waiting.lives == () and waiting.reason.stop == "decided" and waiting.in_flight == 1
    assert not waiting.ends_sweep                          # the loop waits for K=2's life and asks again
    assert choose_batch(2, KS, won, spent(k0=2, k2=1, k4=2, k8=1), ModelView(), ROOMY, 5).ends_sweep


def test_on_a_real_server_the_baseline_is_never_spared_and_an_outlier_life_is_measured_again():
    """Issue 38, real vLLM on a busy host: one baseline life read 40 % of its level, K=4 "more than twice as fast"
    spared it and the verdict "Set K=4" was confident and wrong. Where the spread is unknown the baseline keeps its
    second life; a life far from what earlier runs on this server measured for its K gets a second one."""
    far = standing("decided", 4, {4: 1.0}, {0: 5.2, 4: 12.0}, spread_measured=True)
    spared = choose([0, 4], far, spent(k0=1, k4=2), ModelView(), ROOMY, 5)
    assert spared.k is None and "more than twice as fast" in spared.why                 # the simulator's rule
    real = standing("decided", 4, {4: 1.0}, {0: 5.2, 4: 12.0}, spread_measured=True, spare_baseline=False)
    kept = choose([0, 4], real, spent(k0=1, k4=2), ModelView(), ROOMY, 5)
    assert kept.k == 0 and "guards against one outlier life" in kept.why
    remembered = standing("decided", 4, {4: 1.0}, {0: 5.2, 4: 12.0}, spread_measured=True, spread_from_earlier=True,
                          spare_baseline=False, off_earlier={0: -0.6})
    again = choose([0, 4], remembered, spent(k0=1, k4=1), ModelView(), ROOMY, 5)
    assert again.k == 0 and "its one life reads -60% off what earlier runs on this server measured" in again.why
    usual = standing("decided", 4, {4: 1.0}, {0: 12.5, 4: 17.0}, spread_measured=True, spread_from_earlier=True,
                     spare_baseline=False)
    assert choose([0, 4], usual, spent(k0=1, k4=1), ModelView(), ROOMY, 5).stop == "decided"


def test_where_the_baseline_leads_its_nearest_rival_on_one_life_keeps_its_second():
    """Issue 46: with K=0 leading, K=4 stood on one life, which no outlier guard saw: a 20 %-slow life of a K truly at
    +3.5 % (past the tie band) read "decided, K=0, 99 %" and the sweep stopped. A slow life hides a rival's gain as
    one hides the baseline's loss, so the K nearest the baseline it leads keeps its second life too."""
    p = DecisionConfig(resamples=1000).for_server("vllm")
    ev = evidence([window(0, 32, 20.0, 0, duration_s=30.0), window(0, 32, 20.1, 1, duration_s=30.0),
                   window(4, 32, 16.0, 0, duration_s=30.0)], 32)
    now = standing_of(ev, p)
    assert now.status == "decided" and now.leader == 0
    again = choose([0, 4], now, Spent({0: 2, 4: 1}, {0: 2, 4: 1}), ModelView(), Budget(8), 4, 2, p.tie_tolerance_frac)
    assert again.k == 4 and "outlier" in again.why, again.why
    both = Spent({0: 2, 4: 2}, {0: 2, 4: 2})
    assert choose([0, 4], now, both, ModelView(), Budget(8), 4, 2, p.tie_tolerance_frac).stop == "decided"
    # on the simulator (a documented spread) a rival so far behind that a life at half its figure could not turn
    # the verdict is spared, as the baseline is
    far = standing("decided", 0, {0: 1.0}, {0: 20.0, 4: 9.0}, spread_measured=True)
    assert choose([0, 4], far, spent(k0=2, k4=1), ModelView(), ROOMY, 5).stop == "decided"


def _k0_twice_and_k4_once(k4_req_per_s: float, second_k0: float = 20.6):
    return evidence([window(0, 32, 20.0, 0, duration_s=5.0), window(0, 32, second_k0, 1, duration_s=5.0),
                     window(4, 32, k4_req_per_s, 0, duration_s=5.0)], 32)


def test_a_verdict_decided_short_of_the_early_stop_bar_buys_the_life_it_hangs_on():
    """Each look that could still buy a life is one more chance for a lucky streak: an early stop needs 99 % of the
    resamples (at a confidence of 90 %), the last look decides at 90 % as a single look would."""
    p = DecisionConfig(resamples=400).for_server("vllm")
    ev = _k0_twice_and_k4_once(18.0)                     # K=0 leads in ~94 % with K=4 on one life
    assert decide(ev, p, {}).status == "decided"        # one look, at 90 %
    now = standing_of(ev, p)
    assert now.status == "not_decided" and now.decided_at_last_look and now.wanted == (0, 4)
    lives = Spent({0: 2, 4: 1}, {0: 2, 4: 1}, server_s=0.0)
    more = choose([0, 4], now, lives, ModelView(), Budget(6), 5)
    assert more.k == 4                                  # the fewest lives of the K the verdict hangs on
    spent_budget = choose([0, 4], now, lives, ModelView(), Budget(3), 5)
    assert spent_budget.k is None and spent_budget.stop == "budget"
    capped = choose([0, 4], now, Spent({0: 2, 4: 2}, {0: 2, 4: 2}, server_s=0.0), ModelView(), Budget(6), 2)
    assert capped.stop == "exhausted" and capped.why.startswith("decided at decision.confidence, short of")
    clear = standing_of(_k0_twice_and_k4_once(10.0, second_k0=20.1), p)
    assert clear.status == "decided" and clear.shares[0] >= 0.99
    # K=4 on one life is the baseline's nearest rival: it keeps its second (a slow life could hide its gain)
    assert choose([0, 4], clear, lives, ModelView(), Budget(6), 5).k == 4
    assert choose([0, 4], clear, Spent({0: 2, 4: 2}, {0: 2, 4: 2}, server_s=0.0), ModelView(), Budget(6),
                  5).stop == "decided"


def test_a_rivals_small_share_is_written_to_a_tenth_of_a_percent_not_as_0():
    from lookahead_runner.decision.adaptive import _share_text

    standing = Standing("not_decided", leader=4, shares={4: 0.985, 2: 0.006}, contender_share=IN_THE_RUNNING)
    assert _share_text(standing, 2) == "wins in 0.6% of the resamples"
    assert _share_text(standing, 4) == "leads in 98% of the resamples"


def test_a_k_above_a_stop_short_of_the_early_stop_bar_is_not_left_out():
    """The adaptive sweep never runs a K at or above an agreed stop: agreed past the early-stop bar (99 %), as its
    verdict is, not at 90 % (a stop firing in 94 % of the resamples left K=8 out)."""
    from unit.decision.test_decision import _stop_at_k4_in_94_percent

    assert standing_of(_stop_at_k4_in_94_percent(), DecisionConfig(resamples=1000)).stopped_at is None


def test_a_rival_holding_back_the_early_stop_bar_widens_the_bracket():
    """K=2 leads in ~99 % and K=4 wins ~1.3 %: judged at the early-stop bar K=4 is still in the running (a fifth of the
    1 % the bar leaves, at least 5 draws), so K=8, above it, could be the best and is run before more repeats (a
    hard-coded 2 % held the bracket below 4 while the verdict's own look wanted K=4's next life)."""
    p = DecisionConfig(resamples=1000)
    now = standing_of(table({0: {32: 20.0}, 2: {32: 45.0}, 4: {32: 39.0}}, 32, spread=0.06), p)
    assert now.status == "not_decided" and now.decided_at_last_look and 0.005 <= now.shares[4] < 0.02
    lives = Spent({0: 2, 2: 2, 4: 2}, {0: 2, 2: 2, 4: 2})
    assert choose(KS, now, lives, ModelView(), ROOMY, 5).k == 8
