"""What a verdict cost (cost.py): server lives and server-seconds per life, and the full grid beside them."""
from lookahead_runner.config import config_from_dict
from lookahead_runner.runfolder.cost import cost_text, expected_text, grid_lives, life_costs as costs_of, run_cost
from lookahead_runner.runfolder.plan import LifeStatus, PlannedLife

CONFIG = config_from_dict({"speculation": {"k": [0, 2, 4, 8]}, "load": {"repeats": 2, "stages": [
    {"users": 16, "duration_s": 10}, {"users": 64, "duration_s": 10}]}})


def entry(k: int, repeat: int, **extra) -> PlannedLife:
    return PlannedLife(setting=f"k{k}", dir=f"k{k}/r{repeat}", k=k, repeat=repeat, argv=[], **extra)


def life_costs(lives: list[PlannedLife], statuses: dict[str, dict]):
    """cost.life_costs over status.json contents as written (plan.LifeStatus)."""
    return costs_of(lives, {life: LifeStatus.model_validate(s) for life, s in statuses.items()})


def test_each_life_books_its_start_and_its_load_a_skipped_one_nothing():
    lives = [entry(0, 0), entry(4, 0), entry(4, 1, stages=[64]), entry(8, 0), entry(2, 0)]
    statuses = {"k0/r0": {"state": "done", "start_s": 100.0, "measure_s": 21.0},
                "k4/r0": {"state": "done", "start_s": 120.0, "measure_s": 20.0},
                "k4/r1": {"state": "done", "start_s": 110.0, "measure_s": 10.0},
                "k8/r0": {"state": "failed", "start_s": 30.0},              # a start that failed costs too
                "k2/r0": {"state": "skipped"}}
    costs = life_costs(lives, statuses)
    assert [c.life for c in costs] == ["k0/r0", "k4/r0", "k4/r1", "k8/r0"]
    assert [c.all_stages for c in costs] == [True, True, False, True]
    cost = run_cost(costs, CONFIG, "adaptive", "decided: K=4 wins in 97% of the resamples")
    assert (cost.lives, cost.starts, cost.start_s, cost.measure_s) == (4, 4, 360.0, 51.0)
    # the grid: 4 K x 2 repeats, each started at the mean start that got ready (110 s), loaded as a full life (20.5 s)
    assert cost.grid_lives == 8 and cost.grid_server_s == 8 * 110.0 + 8 * 20.5
    assert cost.gpu_s == 411.0 and cost.wall_s is None            # one GPU a life here; no start time recorded
    assert cost.text == ("4 lives, 6.8 server-minutes (6.0 starting, 0.8 measuring), 6.8 GPU-minutes; "
                         "the full grid: 8 lives, ~17 server-minutes")


def test_same_server_repeats_share_one_start():
    config = config_from_dict(CONFIG.model_dump() | {"load": CONFIG.load.model_dump() | {"repeat_mode": "same-server"}})
    lives = [entry(0, 0), entry(0, 1)]
    statuses = {"k0/r0": {"state": "done", "start_s": 50.0, "measure_s": 20.0, "server_life": "k0/r0"},
                "k0/r1": {"state": "done", "start_s": 50.0, "measure_s": 20.0, "server_life": "k0/r0"}}
    cost = run_cost(life_costs(lives, statuses), config)
    assert (cost.lives, cost.starts, cost.start_s, cost.measure_s) == (2, 1, 50.0, 40.0)
    assert grid_lives(config) == (8, 4)
    assert cost.grid_server_s == 4 * 50.0 + 8 * 20.0


def test_a_grid_that_ran_everything_says_only_what_it_cost():
    config = config_from_dict({"speculation": {"k": [0, 4]}})
    lives = [entry(0, 0), entry(4, 0)]
    statuses = {life.dir: {"state": "done", "start_s": 3.0, "measure_s": 60.0} for life in lives}
    cost = run_cost(life_costs(lives, statuses), config)
    assert cost_text(cost) == cost.text == "2 lives, 2.1 server-minutes (0.1 starting, 2.0 measuring), 2.1 GPU-minutes"


def test_a_run_without_a_measured_start_cannot_price_the_grid():
    cost = run_cost(life_costs([entry(0, 0)], {"k0/r0": {"state": "done", "measure_s": 5.0}}), CONFIG, "adaptive")
    assert cost.grid_server_s is None and cost.text.endswith("the full grid: 8 lives, its starts unmeasured")


def test_gpu_minutes_count_the_gpus_each_life_held_and_wall_minutes_the_lives_in_parallel_once():
    lives = [entry(0, 0), entry(4, 0), entry(4, 1, stages=[64])]
    slot = {"node": "10.0.0.1", "slot": "10.0.0.1/abcd [GPU-a, GPU-b]"}
    statuses = {  # two slots of 2 GPUs: k0/r0 and k4/r0 at once (t 1000-1120, 1010-1130), then k4/r1 (1130-1190)
        "k0/r0": {"state": "done", "start_s": 60.0, "measure_s": 60.0, "gpus": ["GPU-a", "GPU-b"], "t_start_s": 1000.0,
                  "t_s": 1120.0, **slot},
        "k4/r0": {"state": "done", "start_s": 60.0, "measure_s": 60.0, "gpus": ["ray-gpu:2", "ray-gpu:3"],
                  "t_start_s": 1010.0, "t_s": 1130.0, **slot},
        "k4/r1": {"state": "failed", "start_s": 60.0, "measure_s": 0.0, "gpus": ["GPU-a", "GPU-b"],
                  "t_start_s": 1130.0, "t_s": 1190.0, **slot}}
    cost = run_cost(life_costs(lives, statuses), CONFIG, "adaptive")
    assert (cost.start_s + cost.measure_s, cost.gpu_s, cost.wall_s) == (300.0, 600.0, 190.0)
    assert "5.0 server-minutes (3.0 starting, 2.0 measuring), 10 GPU-minutes, 3.2 wall minutes; the full grid" in cost.text
    # here: tensor x pipeline parallel of the server's args; one life without a recorded start leaves the wall out
    tp2 = config_from_dict(CONFIG.model_dump() | {"server": {"extra_args": ["--tensor-parallel-size", "2"]}})
    here = {"k0/r0": {"state": "done", "start_s": 30.0, "measure_s": 90.0, "t_start_s": 1000.0, "t_s": 1120.0},
            "k4/r0": {"state": "done", "start_s": 30.0, "measure_s": 90.0, "t_start_s": 1125.0, "t_s": 1245.0}}
    serial = run_cost(life_costs(lives[:2], here), tp2)
    assert (serial.gpu_s, serial.wall_s) == (480.0, 245.0) and ", 8.0 GPU-minutes, 4.1 wall minutes" in serial.text
    older = run_cost(life_costs(lives[:2], here | {"k4/r0": {"state": "done", "start_s": 30.0, "measure_s": 90.0}}), tp2)
    assert older.wall_s is None and "wall" not in older.text


def test_a_decision_json_cost_from_before_gpu_and_wall_minutes_still_reads():
    from lookahead_runner.decision.schema import SCHEMA_VERSION, Cost

    old = {"strategy": "grid", "lives": 2, "starts": 2, "start_s": 6.0, "measure_s": 120.0, "grid_lives": 2,
           "text": "2 lives, 2.1 server-minutes (0.1 starting, 2.0 measuring)"}
    cost = Cost.model_validate(old)
    assert (cost.gpu_s, cost.wall_s, cost.text) == (None, None, old["text"]) and SCHEMA_VERSION == 5  # issue 49: looks
    assert cost_text(cost) == old["text"]


def test_the_dry_run_says_the_lives_and_server_minutes_before_any_start():
    """CONFIG: 4 K x 2 repeats, 20 s of stages a life: 8 lives, 160 s of load; each start at most 600 s."""
    assert expected_text(CONFIG) == (
        "expected: 8 server lives (4 K x 2 repeats; the early stop may skip larger K), 8 server starts: 2.7 "
        "server-minutes of load (20 s of stages a life) plus each start's time to ready (at most "
        "server.ready_timeout_s = 600 s: 80 server-minutes at worst)")


def test_the_dry_run_counts_variants_same_server_repeats_auto_repeats_and_the_adaptive_cap():
    variants = config_from_dict({"speculation": {"k": [0, 4]}, "load": {
        "prompt_tokens": [64, 512], "repeats": 3, "repeat_mode": "same-server", "stages": [
            {"users": 8, "duration_s": 30}]}, "server": {"ready_timeout_s": 120}})
    assert expected_text(variants).startswith("expected: 6 server lives (2 K x 3 repeats; the early stop may skip "
                                              "larger K), 2 server starts: 6.0 server-minutes of load (60 s of stages")
    auto = config_from_dict({"speculation": {"k": [0, 4]}, "load": {"repeats": "auto", "stages": [
        {"users": 8, "duration_s": 60}]}})
    assert expected_text(auto).startswith(
        "expected: 4 server lives (2 K x 2 repeats), up to 10 (load.repeats = \"auto\": more repeats of a K the verdict "
        "hangs on), 4 server starts: 4.0 server-minutes of load (up to 10)")
    assert expected_text(CONFIG, adaptive_max_lives=6).startswith(
        "expected: at most 6 server lives (adaptive: each chosen on what is measured), 6 server starts: 2.0")
def test_the_lives_that_measured_the_restart_spread_are_counted_apart():
    """Issue 38: the one fact a server start buys once is priced on its own."""
    lives = [entry(0, 0), entry(4, 0), entry(4, 1, stages=[64], purpose="spread"), entry(0, 1, stages=[64])]
    statuses = {life.dir: {"state": "done", "start_s": 60.0, "measure_s": 20.0} for life in lives}
    cost = run_cost(life_costs(lives, statuses), CONFIG, "adaptive", "decided")
    assert cost.spread_lives == 1
    assert cost.text.startswith("4 lives, 5.3 server-minutes (4.0 starting, 1.3 measuring), 5.3 GPU-minutes; 1 life "
                                "measured the restart spread; the full grid: 8 lives")


def test_a_failed_spread_life_measured_nothing():
    """A life chosen to measure the restart spread that failed (its server never came up) is not "1 life measured
    the restart spread"; the one chosen again in its place that ended is."""
    lives = [entry(0, 0), entry(4, 0), entry(4, 1, stages=[64], purpose="spread"),
             entry(4, 2, stages=[64], purpose="spread")]
    statuses = {life.dir: {"state": "done", "start_s": 60.0, "measure_s": 20.0} for life in lives}
    statuses["k4/r1"] = {"state": "failed", "start_s": 30.0, "measure_s": 0.0}
    cost = run_cost(life_costs(lives, statuses), CONFIG, "adaptive", "decided")
    assert cost.spread_lives == 1 and "; 1 life measured the restart spread;" in cost.text
    statuses["k4/r2"] = {"state": "failed", "start_s": 30.0, "measure_s": 0.0}
    cost = run_cost(life_costs(lives, statuses), CONFIG, "adaptive", "decided")
    assert cost.spread_lives == 0 and "restart spread" not in cost.text
