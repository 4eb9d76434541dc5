"""The slots a Ray cluster holds, counted node by node (run/cluster/start.py): a life's GPUs and CPUs are all on
one node; Ray stopped once, beside the report or on the way out."""
import sys
import threading
from importlib.machinery import ModuleSpec
from types import SimpleNamespace

import pytest

from lookahead_runner.run.cluster.start import lives_on, no_fit_line, ray_slots, slots_on


@pytest.mark.parametrize("resources, gpus, cpus, slots", [
    ({"CPU": 16, "GPU": 8}, 1, 1, 8), ({"CPU": 16, "GPU": 8}, 4, 1, 2), ({"CPU": 4, "GPU": 8}, 1, 2, 2),
    ({"CPU": 2}, 1, 1, 0), ({"CPU": 2}, 0, 1, 2), ({"CPU": 2, "GPU": 2}, 3, 1, 0), ({"CPU": 3, "GPU": 4}, 1, 1.5, 2)])
def test_lives_one_node_holds_by_gpus_and_cpus(resources, gpus, cpus, slots):
    assert lives_on(resources, gpus, cpus) == slots


def test_slots_are_counted_per_node_not_from_the_clusters_totals():
    """2 nodes x 3 GPUs at 2 GPUs a life: 2 slots (the totals, 6 GPUs, would say 3, and the third would never be
    placed: the sweep waited for it forever)."""
    nodes = [{"CPU": 8, "GPU": 3}, {"CPU": 8, "GPU": 3}]
    assert slots_on(nodes, 2, 1) == 2
    assert slots_on(nodes, 4, 1) == 0  # a life larger than any node: none, though the totals hold one
    assert slots_on([{"CPU": 1, "GPU": 4}, {"CPU": 4, "GPU": 1}], 1, 1) == 2  # CPUs on one node, GPUs on the other


def test_a_life_that_fits_on_no_node_is_one_line_with_the_largest_node_and_the_fix():
    line = no_fit_line([{"CPU": 8, "GPU": 3}, {"CPU": 8, "GPU": 3}], 4, 1, "ray://head:10001")
    assert line == ("cluster.gpus_per_life = 4, cluster.cpus_per_life = 1: no node of the Ray cluster at "
                    "ray://head:10001 holds one life (2 nodes, the largest with 3 GPUs and 8 CPUs); lower them (a "
                    "life's GPUs are on one node)")
    here = no_fit_line([{"CPU": 2, "GPU": 2}], 4, 1, "")
    assert "no node of the Ray started here" in here and "set cluster.gpus" in here and "\n" not in here


class FakeRay:
    """What ray_slots calls of Ray, on one node of 2 GPU slots; its shutdown waits for `let_stop` (a local Ray's
    waits a second or more for its GCS and raylet), or raises `shutdown_error`."""

    __spec__ = ModuleSpec("ray", None)  # the config checks Ray is installed

    class exceptions:
        RayError = RuntimeError

    def __init__(self, shutdown_error: Exception | None = None) -> None:
        self.calls, self.lock, self.let_stop = [], threading.Lock(), threading.Event()
        self.shutdown_error = shutdown_error

    def _call(self, what: str) -> None:
        with self.lock:
            self.calls.append((what, threading.current_thread().name))

    def init(self, **_):
        self._call("init")

    def nodes(self):
        return [{"Alive": True, "Resources": {"CPU": 2, "GPU": 2}}]

    def remote(self, **_):
        class Actor:
            def __init__(self, n):
                self.n = n
                self.where = SimpleNamespace(remote=lambda: n)

        class Remote:
            count = 0

            def remote(self):
                Remote.count += 1
                return Actor(Remote.count)

        return lambda cls: Remote()

    def wait(self, refs, num_returns, timeout):
        return list(refs), []

    def get(self, ref):
        return SimpleNamespace(slot=f"node/{ref} [gpu:{ref}]", node_id="node")

    def kill(self, actor, no_restart):
        self._call(f"kill {actor.n}")

    def shutdown(self):
        assert self.let_stop.wait(10)
        if self.shutdown_error is not None:
            raise self.shutdown_error
        self._call("shutdown")


def _sweep_config():
    from lookahead_runner.config import config_from_dict

    return config_from_dict({"speculation": {"k": [0, 4]}, "cluster": {"engine": "ray", "gpus": 2}})


STOPPED_BESIDE = [("init", "MainThread"), ("kill 1", "ray-stop"), ("kill 2", "ray-stop"), ("shutdown", "ray-stop")]
STOPPED_INLINE = [("init", "MainThread"), ("kill 1", "MainThread"), ("kill 2", "MainThread"),
                  ("shutdown", "MainThread")]


def test_slots_whose_lives_are_over_stop_ray_beside_the_report_once_and_the_way_out_waits_for_it(monkeypatch):
    ray = FakeRay()
    monkeypatch.setitem(sys.modules, "ray", ray)
    with ray_slots(_sweep_config(), 4, lambda line: None) as slots:
        assert len(slots.slots) == 2 and ray.calls == [("init", "MainThread")]
        slots.lives_over()
        slots.lives_over()  # a second call starts no second stop
        assert ("shutdown", "ray-stop") not in ray.calls  # the report is written while Ray stops
        with pytest.raises(RuntimeError, match="used after the sweep's lives were over"):
            slots.pool(None, None, None, None, None)
        ray.let_stop.set()
    assert ray.calls == STOPPED_BESIDE  # the way out waited for the stop, and stopped nothing twice


def test_a_sweep_that_ends_in_an_error_stops_ray_on_the_way_out_once(monkeypatch):
    ray = FakeRay()
    ray.let_stop.set()
    monkeypatch.setitem(sys.modules, "ray", ray)
    with pytest.raises(KeyError):
        with ray_slots(_sweep_config(), 4, lambda line: None):
            raise KeyError("a life failed")
    assert ray.calls == STOPPED_INLINE
    ray = FakeRay()
    ray.let_stop.set()
    monkeypatch.setitem(sys.modules, "ray", ray)
    with pytest.raises(KeyError):
        with ray_slots(_sweep_config(), 4, lambda line: None) as slots:
            slots.lives_over()
            raise KeyError("the report could not be written")
    assert ray.calls == STOPPED_BESIDE


def test_a_stop_that_fails_in_its_thread_is_one_line_not_a_traceback(monkeypatch, capsys):
    ray = FakeRay(shutdown_error=RuntimeError("the GCS did not answer"))
    ray.let_stop.set()
    monkeypatch.setitem(sys.modules, "ray", ray)
    said = []
    with ray_slots(_sweep_config(), 4, said.append) as slots:
        slots.lives_over()
    assert said[-1] == "Ray: its stop failed (the GCS did not answer); a Ray started here ends with this process"
    assert "Traceback" not in capsys.readouterr().err
