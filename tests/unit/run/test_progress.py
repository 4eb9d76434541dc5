"""The sweep's progress line: rates from the server's own counters between refreshes."""
import time

from lookahead_runner.config import StageConfig
from lookahead_runner.run.progress import SweepProgress


def test_rates_are_deltas_of_the_servers_counters_between_refreshes():
    progress = SweepProgress([StageConfig(users=8, duration_s=10)], 1, enabled=False)
    assert progress._rates({}) == ""
    assert progress._rates({"t_s": 1.0, "requests_success_total": 10, "generation_tokens_total": 100}) == ""
    assert progress._rates({"t_s": 3.0, "requests_success_total": 20, "generation_tokens_total": 300}) == \
        ", 5.0 req/s, 100 tok/s"
    assert progress._rates({"t_s": 3.0, "requests_success_total": 20}) == ""  # no time passed
    assert progress._rates({"t_s": 4.0, "requests_success_total": 23}) == ", 3.0 req/s"  # a counter missing
    progress.life_started("k2/r0")
    assert progress._rates({"t_s": 9.0, "requests_success_total": 99}) == ""  # a new life starts afresh


def test_a_life_with_its_own_stages_counts_and_shows_them():
    """The confirmation life runs the sweep's stages plus threshold stages: the bar and the stage line follow its own."""
    sweep = [StageConfig(users=8, duration_s=10)]
    progress = SweepProgress(sweep, 1, enabled=False)
    confirm = [StageConfig(users=8, duration_s=10), StageConfig(users=19, duration_s=10),
               StageConfig(users=21, duration_s=10)]
    progress.add_lives(1, confirm, ["confirm/r0"])
    assert progress._progress.tasks[0].total == 10 + 30
    progress.life_started("confirm/r0")
    progress._load_started = time.monotonic() - 15  # 15 s into the life's load: its second stage
    text, elapsed = progress._describe()
    assert text == "confirm/r0 stage 2/3 (19 users)" and elapsed >= 15
    progress.life_finished("confirm/r0")
    assert progress._done_s == 30
    progress.life_started("k0/r1")  # a life of the sweep: the sweep's stages again
    assert progress._now == sweep


def test_the_life_that_finished_is_credited_and_named_not_the_last_one_started():
    """On a Ray cluster lives end in any order: a sweep life ending while a confirmation life (its own, longer stages)
    runs is credited with the sweep's stages and named, and a skipped life that never started with its own."""
    sweep = [StageConfig(users=8, duration_s=10)]
    progress = SweepProgress(sweep, 2, enabled=False)
    confirm = [StageConfig(users=8, duration_s=10), StageConfig(users=19, duration_s=10)]
    progress.add_lives(1, confirm, ["confirm/r0"])
    progress.life_started("k0/r0")
    progress.life_started("confirm/r0")
    progress.life_finished("k0/r0")
    assert progress._done_s == 10 and progress._progress.tasks[0].description == "k0/r0 finished"
    progress.life_finished("k4/r0")  # skipped: never started
    assert progress._done_s == 20
    progress.life_finished("confirm/r0")
    assert progress._done_s == 40 and progress._progress.tasks[0].description == "confirm/r0 finished"
