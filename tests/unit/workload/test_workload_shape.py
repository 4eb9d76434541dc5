"""StagedShape as Locust drives it: stage records, the master's second clock reset, stage announcements.

Locust is imported inside the tests (importing it patches the process with gevent), and the clock is
driven by hand through `start_time`, so no test sleeps.
"""

from __future__ import annotations

import time
from types import SimpleNamespace


def _shape(stages: str):
    from lookahead_runner.workload.shape import StagedShape

    class Shape(StagedShape):
        pass

    shape = Shape()
    shape.runner = SimpleNamespace(environment=SimpleNamespace(parsed_options=SimpleNamespace(stages=stages)))
    ended, started = [], []
    shape.stage_sink = ended.append
    shape.on_stage_start = lambda stage, users: started.append((stage, users))
    return shape, ended, started


def _at(shape, run_time_s: float):
    shape.start_time = time.perf_counter() - run_time_s
    return shape.tick()


def test_ticks_follow_the_schedule_and_record_each_stage():
    shape, ended, started = _shape("2:3,4:3")
    shape.reset_time()
    assert _at(shape, 0.0) == (2, 2.0)
    assert started == [(0, 2)] and shape.current_stage() == (0, 2)
    assert _at(shape, 2.9) == (2, 2.0) and started == [(0, 2)]
    assert _at(shape, 3.1) == (4, 4.0)
    assert started == [(0, 2), (1, 4)] and [(r.stage, r.users) for r in ended] == [(0, 2)]
    assert _at(shape, 6.2) is None and shape.finished
    assert [(r.stage, r.users) for r in ended] == [(0, 2), (1, 4)]
    assert ended[0].t_end_s == ended[1].t_start_s
    assert shape.current_stage() == (1, 4)  # requests sent after the end still belong to the last stage


def test_the_masters_second_reset_keeps_stage_0_and_the_clock():
    shape, ended, started = _shape("2:3,4:3")
    shape.reset_time()
    _at(shape, 0.0)
    opened, clock = shape._open, shape.start_time
    shape.reset_time()  # MasterRunner.start() right after the first tick
    assert shape._open is opened and shape.start_time == clock
    assert shape.tick() == (2, 2.0) and started == [(0, 2)]  # not announced twice
    assert ended == []


def test_a_new_run_after_a_stop_starts_afresh():
    shape, ended, started = _shape("2:3,4:3")
    shape.reset_time()
    _at(shape, 3.5)
    shape.close_open_stage()  # test_stop
    assert [(r.stage, r.users) for r in ended] == [(1, 4)]
    shape.reset_time()
    assert shape.current_stage() is None
    assert _at(shape, 0.0) == (2, 2.0) and started[-1] == (0, 2)
