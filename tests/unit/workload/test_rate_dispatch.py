"""Rate stages under Locust's shape and the dispatcher's in-flight cap, driven by hand (no Locust run, no sleep
but gevent's own switches): a run of rate stages on its own schedule, the drain when the kind of stage
changes, and max_in_flight's held arrivals."""
from __future__ import annotations

import time
from types import SimpleNamespace

import pytest


class _Users:  # stand-ins for the locustfile's two user classes
    pass


class _Dispatcher:
    pass


def _shape(stages: str, monkeypatch, clock: list[float]):
    from lookahead_runner.workload import shape as shape_module

    class Shape(shape_module.StagedShape):
        user_class = _Users
        dispatcher_class = _Dispatcher

    monkeypatch.setattr(shape_module, "time", SimpleNamespace(time=lambda: clock[0]))
    shape = Shape()
    shape.runner = SimpleNamespace(environment=SimpleNamespace(parsed_options=SimpleNamespace(stages=stages)))
    ended, runs = [], []
    shape.stage_sink = ended.append
    shape.on_rate_run = runs.append
    return shape, ended, runs


def _at(shape, clock: list[float], run_time_s: float):
    clock[0] = 1000.0 + run_time_s            # wall clock and run time move together
    shape.start_time = time.perf_counter() - run_time_s
    return shape.tick()


def test_a_run_of_rate_stages_keeps_its_own_schedule_and_kinds_change_through_zero_users(monkeypatch):
    from lookahead_runner.workload.shape import DRAIN_SPAWN_RATE

    clock = [0.0]
    shape, ended, runs = _shape("2:3,4/s:2,8/s:2,3:2", monkeypatch, clock)
    shape.reset_time()
    assert _at(shape, clock, 0.0) == (2, 2.0, [_Users])
    # the rate stage is due: Locust would keep the users (it only adds of a new class), so they stop first
    assert _at(shape, clock, 3.4) == (0, DRAIN_SPAWN_RATE)
    assert [(r.stage, r.t_end_s) for r in ended] == [(0, 1003.4)]
    # the next tick opens it with its whole length from then: one dispatcher here
    assert _at(shape, clock, 4.4) == (1, 1.0, [_Dispatcher])
    (run,) = runs
    assert (run.first, run.last, run.t_start_s, run.dispatchers) == (1, 2, 1004.4, 1)
    assert run.start_s(2) == pytest.approx(1006.4) and run.end_s == pytest.approx(1008.4)
    assert _at(shape, clock, 6.0) == (1, 1.0, [_Dispatcher])   # still stage 1 (it runs 2 s from 1004.4)
    # stage 2 opens at the tick after its time, but its record starts on the run's schedule
    assert _at(shape, clock, 6.9) == (1, 1.0, [_Dispatcher]) and shape.current_stage() == (2, 0)
    assert (ended[1].stage, ended[1].rate, ended[1].t_start_s) == (1, 4.0, 1004.4)
    assert ended[1].t_end_s == pytest.approx(1006.4)
    # the user stage after the run: stage 2 ends on schedule, not at the tick, and users come after a drain
    assert _at(shape, clock, 8.9) == (0, DRAIN_SPAWN_RATE)
    assert (ended[2].stage, ended[2].rate) == (2, 8.0)
    assert (ended[2].t_start_s, ended[2].t_end_s) == pytest.approx((1006.4, 1008.4))
    assert _at(shape, clock, 9.9) == (3, 3.0, [_Users])
    assert len(runs) == 1 and shape.rate_run is None
    assert _at(shape, clock, 11.8) == (3, 3.0, [_Users])       # its 2 s count from 1009.9
    assert _at(shape, clock, 12.0) is None and shape.finished
    assert [(r.stage, r.users, r.rate) for r in ended] == [(0, 2, None), (1, 0, 4.0), (2, 0, 8.0), (3, 3, None)]
    assert ended[3].t_start_s == 1009.9 and ended[3].t_end_s == 1012.0


def test_a_stage_of_the_other_kind_waits_until_the_last_kinds_users_have_stopped(monkeypatch):
    # a rate stage's dispatcher stops once its arrivals in flight are done (Locust waits up to --stop-timeout),
    # closed-loop users once their requests are: the next stage opens on a drained server, with its whole length
    from lookahead_runner.workload.shape import DRAIN_SPAWN_RATE

    clock = [0.0]
    shape, ended, _runs = _shape("4/s:2,3:2", monkeypatch, clock)
    shape.runner.user_count = 1
    shape.runner.environment.stop_timeout = 60.0
    shape.reset_time()
    assert _at(shape, clock, 0.0) == (1, 1.0, [_Dispatcher])
    assert _at(shape, clock, 2.4) == (0, DRAIN_SPAWN_RATE)
    assert _at(shape, clock, 3.4) == (0, DRAIN_SPAWN_RATE)      # its arrivals' requests are still in flight
    assert _at(shape, clock, 9.4) == (0, DRAIN_SPAWN_RATE) and shape.current_stage() == (0, 0)
    shape.runner.user_count = 0
    assert _at(shape, clock, 10.4) == (3, 3.0, [_Users])
    assert _at(shape, clock, 12.3) == (3, 3.0, [_Users])       # its 2 s count from 1010.4
    assert _at(shape, clock, 12.5) is None
    assert [(r.stage, r.t_start_s) for r in ended] == [(0, 1000.0), (1, 1010.4)]


def test_a_drain_that_never_ends_is_given_up_after_the_stop_timeout(monkeypatch):
    from lookahead_runner.workload.shape import DRAIN_GRACE_S, DRAIN_SPAWN_RATE

    clock = [0.0]
    shape, _ended, _runs = _shape("3:2,4/s:2", monkeypatch, clock)
    shape.runner.user_count = 3
    shape.runner.environment.stop_timeout = 5.0
    shape.reset_time()
    assert _at(shape, clock, 0.0) == (3, 3.0, [_Users])
    assert _at(shape, clock, 2.0) == (0, DRAIN_SPAWN_RATE)
    assert _at(shape, clock, 2.0 + 5.0 + DRAIN_GRACE_S - 0.1) == (0, DRAIN_SPAWN_RATE)
    assert _at(shape, clock, 2.0 + 5.0 + DRAIN_GRACE_S + 0.1) == (1, 1.0, [_Dispatcher])


def test_a_rate_stage_cut_short_ends_where_it_was_cut(monkeypatch):
    clock = [0.0]
    shape, ended, _runs = _shape("5/s:10", monkeypatch, clock)
    shape.reset_time()
    assert _at(shape, clock, 0.5) == (1, 1.0, [_Dispatcher])
    clock[0] = 1004.0
    shape.close_open_stage()          # a stop from the web UI, or Ctrl-C
    assert (ended[0].t_start_s, ended[0].t_end_s, ended[0].rate) == (1000.5, 1004.0, 5.0)


def test_the_in_flight_cap_holds_arrivals_in_order_and_drops_those_left_at_the_end():
    import gevent

    from lookahead_runner.workload.in_flight import InFlightCap, NotSent

    cap = InFlightCap(2)
    assert cap.take() and cap.take() and not cap.take()
    order: list[str] = []

    def held(name: str) -> None:
        try:
            cap.wait()
        except NotSent:
            order.append(f"{name} not sent")
            return
        order.append(name)

    waiting = [gevent.spawn(held, name) for name in ("a", "b", "c")]
    gevent.sleep(0)
    assert cap.held == 3 and order == []
    cap.give()                 # a request ended: its slot goes to the first held arrival
    gevent.sleep(0)
    assert order == ["a"] and cap.in_flight == 2
    waiting[1].kill()          # killed while held: it gives up its place, not a slot
    cap.give()
    gevent.sleep(0)
    assert order == ["a", "c"]
    cap.give(), cap.give()
    assert cap.in_flight == 0 and cap.take()
    assert cap.drop_waiting() == 0

    late = InFlightCap(1)
    late.take()
    leftover = gevent.spawn(lambda: late.wait())
    gevent.sleep(0)
    assert late.drop_waiting() == 1
    with pytest.raises(NotSent):
        leftover.get()


def test_an_arrival_that_comes_to_a_full_cap_after_the_stages_ended_is_not_sent():
    # its timer fired a loop tick after the dispatcher's end of run: it must not wait for a slot and go out
    # in the next stage, with its rate stage's tag
    import gevent

    from lookahead_runner.workload.in_flight import InFlightCap, NotSent

    cap = InFlightCap(1)
    assert cap.take()
    assert cap.drop_waiting() == 0
    late = gevent.spawn(cap.wait)
    gevent.sleep(0)
    cap.give()                 # the request in flight ends: a waiting arrival would get its slot here
    gevent.sleep(0)
    with pytest.raises(NotSent):
        late.get(timeout=1)
    assert cap.in_flight == 0


def test_no_cap_never_holds():
    from lookahead_runner.workload.in_flight import InFlightCap

    cap = InFlightCap(0)
    assert all(cap.take() for _ in range(10_000)) and cap.held == 0


@pytest.mark.parametrize("cap, dispatchers", [(10, 3), (2, 4), (64, 1), (0, 5), (1, 7), (5, 4)])
def test_max_in_flight_is_split_across_dispatchers_exactly(cap, dispatchers):
    from lookahead_runner.workload.arrivals import slots_per_process

    shares = list(slots_per_process(cap, [3 * index for index in range(dispatchers)]).values())  # indexes with gaps
    # the processes together never hold more than the cap: a cap below the processes leaves some without a slot
    assert shares == [0] * dispatchers if cap == 0 else sum(shares) == cap
    assert max(shares) - min(shares) <= 1
