"""What a verdict cost (cost.py): server lives and server-seconds per life, and the full grid beside them."""
from lookahead_runner.config import config_from_dict
from lookahead_runner.runfolder.cost import cost_text, grid_lives, life_costs as costs_of, run_cost
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
    assert cost.text == "4 lives, 6.8 server-minutes (6.0 starting, 0.8 measuring); the full grid: 8 lives, ~17 server-minutes"


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
    assert cost_text(cost) == cost.text == "2 lives, 2.1 server-minutes (0.1 starting, 2.0 measuring)"


def test_a_run_without_a_measured_start_cannot_price_the_grid():
    cost = run_cost(life_costs([entry(0, 0)], {"k0/r0": {"state": "done", "measure_s": 5.0}}), CONFIG, "adaptive")
    assert cost.grid_server_s is None and cost.text.endswith("the full grid: 8 lives, its starts unmeasured")
