"""The simulator's restart spread (sim/restart.py): each server life draws its speed (and acceptance) from the
seed and its name; the truth function knows each life's figure and the spread."""
from __future__ import annotations

import statistics

import pytest

from lookahead_runner.sim.cli import parse_serve
from lookahead_runner.sim.closed_loop import restart_spread, steady_req_per_s
from lookahead_runner.sim.profiles import get_profile
from lookahead_runner.sim.restart import draw, for_life
from lookahead_runner.sim.scenarios import get_scenario, with_overrides

SPREAD = ["--sim-scenario", "tight-kv", "--sim-restart-spread", "0.08"]


def test_the_flag_sets_the_scenario_field_and_a_bad_value_is_refused(capsys):
    args = parse_serve(["m", *SPREAD], get_profile())
    assert args.scenario.restart_spread_frac == 0.08
    assert restart_spread(SPREAD) == 0.08 and restart_spread(["--sim-scenario", "tight-kv"]) == 0.0
    with pytest.raises(SystemExit) as exit_:
        parse_serve(["m", "--sim-restart-spread", "1.5"], get_profile())
    assert exit_.value.code == 2
    assert "--sim-restart-spread 1.5: give the relative SD" in capsys.readouterr().err


def test_a_life_draws_from_the_seed_and_its_name_alone():
    scenario = with_overrides(get_scenario("tight-kv"), {"restart_spread_frac": "0.08", "restart_alpha_sd": "0.05"})
    first = draw(scenario, 0, "run-a/k4/r0")
    assert draw(scenario, 0, "run-a/k4/r0") == first                      # the same life: the same luck
    assert draw(scenario, 0, "run-a/k4/r1").speed != first.speed          # another life: its own
    assert draw(scenario, 1, "run-a/k4/r0").speed != first.speed          # another seed: its own
    assert first.alpha_offset != 0.0
    still = draw(get_scenario("tight-kv"), 0, "run-a/k4/r0")                 # no spread: no luck
    assert (still.speed, still.alpha_offset) == (1.0, 0.0)


def test_speeds_have_mean_one_and_the_spread_asked_for():
    scenario = with_overrides(get_scenario("tight-kv"), {"restart_spread_frac": "0.08"})
    speeds = [draw(scenario, 0, f"life-{i}").speed for i in range(4000)]
    assert statistics.mean(speeds) == pytest.approx(1.0, abs=0.005)
    assert statistics.stdev(speeds) == pytest.approx(0.08, rel=0.05)


def test_a_life_runs_every_step_time_over_its_speed_and_its_acceptance_offset():
    scenario = with_overrides(get_scenario("tight-kv"), {"restart_spread_frac": "0.1", "restart_alpha_sd": "0.1"})
    luck = draw(scenario, 0, "some-life")
    life = for_life(scenario, luck)
    assert life.fixed_ms == pytest.approx(scenario.fixed_ms / luck.speed)
    assert life.weight_read_ms == pytest.approx(scenario.weight_read_ms / luck.speed)
    assert life.alpha == pytest.approx(min(max(scenario.alpha + luck.alpha_offset, 0), 1))
    assert life.startup_s == scenario.startup_s


def test_the_truth_of_one_life_is_the_servers_times_its_speed():
    args = ["--max-num-seqs", "128", "--sim-scenario", "roomy-kv", "--sim-restart-spread", "0.1"]
    server = steady_req_per_s(args, 4, 128, 32, 0.0, 16, engine_s=20)
    luck = draw(parse_serve(["m", *args], get_profile()).scenario, 0, "run/k4/r0")
    one = steady_req_per_s(args, 4, 128, 32, 0.0, 16, engine_s=20, life="run/k4/r0")
    assert one / server == pytest.approx(luck.speed, rel=0.03)


@pytest.mark.parametrize("args", [
    ["--sim-restart-spread", "0.05"], ["--sim-restart-spread=0.05"], ["--sim-restart=0.05"],
    ["--sim-set", "restart_spread_frac=0.05"], ["--sim-set=restart_spread_frac=0.05"],
    ["--sim-set", "restart_alpha_sd=0.05"], ["--sim-restart-spread", "0", "--sim-restart-spread", "0.05"],
    ["--sim-restart-spread", "0.05", "--sim-set", "restart_spread_frac=0"]])
def test_every_spelling_the_simulator_reads_draws_a_spread_and_the_runner_sees_it(args):
    """The runner judges such a simulator as real vLLM (its spread unknown): it must read the flags as the simulator
    does (config/server.py draws_restart_spread against sim/cli.py)."""
    from lookahead_runner.config.server import draws_restart_spread

    scenario = parse_serve(["m", *args], get_profile()).scenario
    assert scenario.restart_spread_frac > 0 or scenario.restart_alpha_sd > 0
    assert draws_restart_spread(args)


@pytest.mark.parametrize("args", [
    [], ["--sim-restart-spread", "0"], ["--sim-restart-spread", "0.05", "--sim-restart-spread", "0"],
    ["--sim-set", "restart_spread_frac=0.05", "--sim-restart-spread", "0"], ["--sim-set", "alpha=0.5"],
    ["--sim-restart-spread", "x"], ["--sim-set", "restart_spread_frac"]])
def test_flags_that_draw_no_spread_are_not_taken_for_one(args):
    from lookahead_runner.config.server import draws_restart_spread

    assert not draws_restart_spread(args)


def test_no_named_scenario_draws_a_spread_of_its_own():
    """draws_restart_spread (config/server.py, which may not import the simulator) reads only the flags."""
    from lookahead_runner.sim.scenarios import SCENARIOS

    assert all(s.restart_spread_frac == 0 and s.restart_alpha_sd == 0 for s in SCENARIOS.values())
