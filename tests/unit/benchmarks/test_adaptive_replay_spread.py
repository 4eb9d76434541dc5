"""benchmarks/adaptive_replay.py's server spread modes and floor: the ledger mode hands the chooser a spread measured
on lives its trial does not reveal, through the product's own ledger code, and the floor follows the chooser's rules
(the replay itself runs over a recording by hand: benchmarks/decision_accuracy.py --adaptive-spread)."""
from __future__ import annotations


import pytest

from .scripts import load

replay = load("adaptive_replay")

TIGHT_KV = {0: 22.4, 2: 43.2, 4: 49.1, 8: 37.5}      # decision_scenarios.py's tight-kv: K=4, K=8 fills the pool
FLAT = {0: 20.0, 2: 19.9, 4: 19.8, 8: 19.6}          # not-the-lever: K=0 (every K within the tie band)


def test_the_floor_runs_what_the_model_free_bracket_keeps_and_the_repeats_each_stop_needs():
    assert replay.floor_ks(list(TIGHT_KV), TIGHT_KV, 0.03) == [0, 2, 4, 8]   # K=4 leads: K=2 and K=8 bracket it
    assert replay.floor_ks(list(FLAT), FLAT, 0.03) == [0, 2, 4]              # K=0 leads: K=4 closes the bracket
    # the spread unknown: the leader's second life measures it, the baseline's is never spared
    assert replay.floor_repeats("unknown", TIGHT_KV, 0.03) == [0, 4]
    # the simulator's stated spread: K=4 more than twice K=0's figure spares the baseline's second
    assert replay.floor_repeats("as-recorded", TIGHT_KV, 0.03) == [4]
    # the baseline leads: it and its nearest rival keep a second life either way (no rival at half its figure)
    assert replay.floor_repeats("unknown", {k: FLAT[k] for k in (0, 2, 4)}, 0.03) == [0, 2]
    assert replay.floor_repeats("as-recorded", {k: FLAT[k] for k in (0, 2, 4)}, 0.03) == [0, 2]
    assert replay.floor_repeats("ledger", TIGHT_KV, 0.03) == []
    floor = replay.floor_lives(list(TIGHT_KV), TIGHT_KV, 0.03, "unknown")
    assert floor == {0: [0, 1], 2: [0], 4: [0, 1], 8: [0]}
    price = {k: replay.Price(3.0, 9.0, 16.0) for k in TIGHT_KV}
    # every K's first life runs every stage, a repeat the target stage alone
    assert replay.server_seconds(floor, price, start_s=120.0) == 4 * (120 + 9 + 16) + 2 * (120 + 9)


@pytest.fixture()
def recorded():
    from unit.synthetic import window

    from lookahead_runner.config import config_from_dict
    from lookahead_runner.decision import evidence

    config = config_from_dict({"speculation": {"k": [0, 2, 4, 8]}, "decision": {"resamples": 200},
                               "load": {"stages": [{"users": 64, "duration_s": 7}]}})
    # four lives per K, each off its K's level by a few %: the restart spread the ledger is to measure
    offsets = [0.03, -0.02, 0.04, -0.05]
    windows = [window(k, 64, rate * (1 + offsets[r] * (1 + k / 10)), r) for k, rate in TIGHT_KV.items()
               for r in range(4)]
    return config, evidence(windows, 64)


def test_the_ledger_mode_hands_over_a_spread_measured_on_the_lives_the_trial_does_not_reveal(recorded):
    from lookahead_runner.decision import decide
    from lookahead_runner.decision.standing import standing_of

    config, recording = recorded
    server = replay.restarted(config)
    assert server.decision.spread_unknown and not server.decision.one_life_per_k
    assert config.decision.earlier_spread is None          # the recording's config is left as it was
    order = {k: [3, 1, 0, 2] for k in TIGHT_KV}
    trial = replay.with_ledger(server, recording, order)
    earlier = trial.decision.earlier_spread
    assert earlier is not None and earlier.runs == 1 and earlier.users == 64
    assert server.decision.earlier_spread is None           # each trial its own copy
    # the earlier run is lives 0 and 2 of every K (after the first GRID_REPEATS of the order): its levels theirs
    other = decide(recording.subset({k: [0, 2] for k in TIGHT_KV}), server.decision, {})
    assert earlier.levels == pytest.approx({str(c.k): c.objective for c in other.candidates})
    assert earlier.lives == 8 and earlier.df == 4
    # none of the lives the trial reveals is in it: changing them changes nothing the ledger holds
    swapped = replay.with_ledger(server, recording.subset({k: [0, 2] for k in TIGHT_KV}), order)
    assert swapped.decision.earlier_spread == earlier
    # the chooser sees it: one life per K borrows the ledger's spread
    standing = standing_of(recording.subset({k: [3] for k in TIGHT_KV}), trial.decision)
    assert standing.spread_measured and standing.spread_from_earlier
    assert not standing_of(recording.subset({k: [3] for k in TIGHT_KV}), server.decision).spread_measured


def test_the_ledger_modes_adaptive_sweep_draws_only_the_grids_lives(recorded):
    config, recording = recorded
    order = {k: [3, 1, 0, 2] for k in TIGHT_KV}
    trial = replay.with_ledger(replay.restarted(config), recording, order)
    price = {k: replay.Price(3.0, 7.0) for k in TIGHT_KV}
    run = replay.replay(recording, replay.grid_subset(order), trial, price, max_lives=8)
    assert run.lives >= 2 and all(set(r) <= {3, 1} for r in run.revealed.values())


def test_the_floor_is_no_more_than_the_chooser_runs_where_a_gate_fails_the_highest_level():
    """A K whose level is the highest but whose gate fails is never the leader: the chooser brackets the K the verdict
    names (K=4: K=2 and K=8 measured around it, K=16 never run), so a floor that takes K=8 as the leader (and runs
    K=16 and repeats K=8) is above what the chooser spends, no lower bound."""
    from unit.synthetic import window

    from lookahead_runner.config import config_from_dict
    from lookahead_runner.decision import decide, evidence

    levels = {0: 10.0, 2: 11.0, 4: 14.0, 8: 20.0, 16: 12.0}
    config = config_from_dict({"speculation": {"k": list(levels)}, "decision": {"resamples": 200},
                               "load": {"stages": [{"users": 64, "duration_s": 7}]}})
    recording = evidence([window(k, 64, rate * (1 + 0.01 * (-1) ** r), r, failures=60 if k == 8 else 0)
                          for k, rate in levels.items() for r in range(2)], 64)
    decision = decide(recording, config.decision, {})
    assert decision.recommended.k == 4 and [c.k for c in decision.candidates if c.blocked_by] == [8]
    run = replay.replay(recording, {k: [0, 1] for k in levels}, config, {k: replay.Price(3.0, 7.0) for k in levels},
                        max_lives=10)
    assert run.stop == "decided" and not run.revealed[16]
    floor = replay.floor_of(decision, sorted(levels), config.decision.tie_tolerance_frac, "as-recorded")
    assert set(floor) <= {k for k, r in run.revealed.items() if r}
    assert sum(map(len, floor.values())) <= run.lives


def test_the_ledger_mode_refuses_a_recording_too_short_to_measure_the_earlier_runs_spread(recorded):
    """Three lives per K leave the earlier run one life of each: no spread measured, no ledger entry, and the trial
    would run as "unknown" while its floor and printout said "with the ledger's spread"."""
    config, recording = recorded
    order = {k: [3, 1, 0] for k in TIGHT_KV}
    with pytest.raises(ValueError, match="--repeats 4"):
        replay.with_ledger(replay.restarted(config), recording.subset(order), order)
