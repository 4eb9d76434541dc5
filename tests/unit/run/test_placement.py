"""Placement planning (pure): CPU lists, the auto split, the user's own placement, vLLM's OpenMP binding,
processes "auto", and the advice a lagging client's reason carries."""
import math

import pandas as pd
import pytest

from lookahead_runner.config import ConfigError, config_from_dict
from lookahead_runner.contracts.cpus import format_cpus, parse_cpus
from lookahead_runner.runfolder.lag_advice import lag_reason
from lookahead_runner.run.life.placement import (Placement, PlacementError, plan_placement, processes_for,
                                           slot_placement)
from lookahead_runner.runfolder.lag_advice import advice_for
from lookahead_runner.vllm.cpu_binding import OMP_BIND_ENV, omp_bind_cpus
from lookahead_runner.run.life.preflight import LoadedFigures, loaded_figures, resized
from lookahead_runner.runfolder.preflight import PlacementRecord


@pytest.fixture(autouse=True)
def placement_as_configured(monkeypatch):
    """The config's placement, not a parallel test run's host-wide override (tests/conftest.py)."""
    monkeypatch.delenv("LOOKAHEAD_RUNNER_PLACEMENT", raising=False)


def config(**sections):
    return config_from_dict(sections)


@pytest.mark.parametrize("text, cpus, back", [("0", (0,), "0"), ("0-3,6", (0, 1, 2, 3, 6), "0-3,6"),
                                              ("6, 0-1 ,3", (0, 1, 3, 6), "0-1,3,6"), ("2-2", (2,), "2")])
def test_cpu_lists_read_and_write_as_taskset_does(text, cpus, back):
    assert parse_cpus(text) == cpus and format_cpus(cpus) == back


@pytest.mark.parametrize("bad", ["a", "1-", "-1", "3-1", "1,,2", "0x1"])
def test_bad_cpu_lists_are_one_config_line(bad):
    with pytest.raises(ConfigError) as err:
        config(load={"cpus": bad})
    assert "load.cpus" in str(err.value) and "\n" not in str(err.value)


def test_bad_cpu_list_names_the_fix():
    with pytest.raises(ValueError, match=r"write e.g. \"0-3,6\""):
        parse_cpus("x")


def test_auto_on_two_cores_gives_locust_one_and_the_server_the_other():
    placed = plan_placement(config(), [0, 1])
    assert (placed.mode, placed.server_cpus, placed.load_cpus, placed.processes) == ("auto", (0,), (1,), 1)
    assert placed.server_env == {OMP_BIND_ENV: "0"}
    assert placed.describe().startswith(f"placement auto: server on CPU 0 ({OMP_BIND_ENV}=0), Locust (1 process) on "
                                        "CPU 1 of 0-1")


def test_the_environment_overrides_placement_host_wide_and_a_bad_value_is_one_line(monkeypatch):
    monkeypatch.setenv("LOOKAHEAD_RUNNER_PLACEMENT", "off")
    assert plan_placement(config(), [0, 1]).mode == "off"
    monkeypatch.setenv("LOOKAHEAD_RUNNER_PLACEMENT", "auto")
    assert plan_placement(config(load={"placement": "off"}), [0, 1]).mode == "auto"
    monkeypatch.setenv("LOOKAHEAD_RUNNER_PLACEMENT", "of")
    with pytest.raises(PlacementError, match="LOOKAHEAD_RUNNER_PLACEMENT='of': use auto or off"):
        plan_placement(config(), [0, 1])


def test_auto_gives_the_load_the_cores_its_processes_need_and_the_server_the_rest():
    # 1024 users at the prior's 100 chunks/s and 25 us a chunk: 2.56 cores of work, 60% each -> 5 processes
    big = config(load={"stages": [{"users": 1024, "duration_s": 10}]})
    placed = plan_placement(big, range(16))
    assert placed.processes == processes_for(1024, 100.0, 25.0) == 5
    assert placed.load_cpus == (11, 12, 13, 14, 15) and placed.server_cpus == tuple(range(11))
    # on 4 cores the server keeps one: the load gets 3, and auto runs 3 processes (sharing a core is no headroom)
    small_host = plan_placement(big, range(4))
    assert small_host.load_cpus == (1, 2, 3) and small_host.server_cpus == (0,) and small_host.processes == 3
    assert "5 planned" in small_host.processes_why and "3 CPUs for the load" in small_host.processes_why
    # a fixed count is kept, and gets a core each where there are enough
    fixed = plan_placement(config(load={"processes": 2}), range(8))
    assert (fixed.processes, fixed.load_cpus, fixed.processes_auto) == (2, (6, 7), False)


def test_one_side_given_the_other_gets_the_rest():
    placed = plan_placement(config(load={"cpus": "0"}), range(4))
    assert (placed.mode, placed.load_cpus, placed.server_cpus) == ("manual", (0,), (1, 2, 3))
    placed = plan_placement(config(server={"cpus": "2-3"}), range(4))
    assert (placed.load_cpus, placed.server_cpus) == ((0, 1), (2, 3))
    with pytest.raises(PlacementError, match="takes every CPU of this host; leave at least one for the server"):
        plan_placement(config(load={"cpus": "0-3"}), range(4))


def test_off_leaves_both_to_the_os_and_a_cpu_not_here_is_refused():
    placed = plan_placement(config(load={"placement": "off"}), [0, 1])
    assert (placed.mode, placed.server_cpus, placed.load_cpus, placed.server_env) == ("off", (), (), {})
    with pytest.raises(PlacementError) as err:
        plan_placement(config(server={"cpus": "0-7"}), [0, 1])
    assert str(err.value) == ("server.cpus = '0-7': CPU 2-7 is not usable here (this host's CPUs: 0-1); "
                              "pick CPUs from that list")


def test_a_server_the_user_places_keeps_its_placement():
    template = {"argv_template": ["docker", "run", "--cpuset-cpus", "0", "-p", "{port}:8000", "img", "{args}"],
                "model": "org/target"}
    for server in (template, {"command": ["taskset", "-c", "1", "vllm"], "model": "org/target"}):
        placed = plan_placement(config(server=server, load={"cpus": "1"}, speculation={"draft_model": "org/d"}),
                                [0, 1])
        assert (placed.mode, placed.server_cpus, placed.load_cpus, placed.server_env) == ("user", (), (1,), {})
        assert "placed by its own command" in placed.describe()
    with pytest.raises(ConfigError, match="server.cpus cannot reach this server; .*--cpuset-cpus"):
        config(server=template | {"cpus": "0"}, speculation={"draft_model": "org/d"})
    with pytest.raises(ConfigError, match="server.cpus cannot reach this server; server.url"):
        config(server={"url": "http://127.0.0.1:8000", "cpus": "0"}, speculation={"k": [2]})


def test_vllm_openmp_binding_follows_the_server_or_is_refused_when_it_reaches_the_load():
    assert omp_bind_cpus("0-3|4-7") == tuple(range(8)) and omp_bind_cpus("auto") is None
    # the user's binding inside the server's CPUs is kept; "auto" is replaced by the server's CPUs
    kept = plan_placement(config(server={"env": {OMP_BIND_ENV: "0-1"}}), range(4))
    assert kept.server_env == {} and kept.server_cpus == (0, 1, 2)
    auto = plan_placement(config(server={"env": {OMP_BIND_ENV: "auto"}}), range(4))
    assert auto.server_env == {OMP_BIND_ENV: "0-2"}
    with pytest.raises(PlacementError) as err:
        plan_placement(config(server={"env": {OMP_BIND_ENV: "0-1"}}), [0, 1])
    assert str(err.value) == (f"server.env.{OMP_BIND_ENV} = '0-1' binds vLLM's compute threads to CPU 1, which "
                              "load.cpus gives Locust; set it to the server's CPUs '0' or remove it (placement sets it)")
    # one list per vLLM worker (tensor x pipeline parallel), as vLLM asserts
    tp = plan_placement(config(server={"extra_args": ["--tensor-parallel-size", "2", "-pp=2"]}), range(10))
    assert tp.server_cpus == tuple(range(9)) and tp.server_env == {OMP_BIND_ENV: "0-1|2-3|4-5|6-7"}
    with pytest.raises(PlacementError, match="for 2 vLLM workers"):
        plan_placement(config(server={"extra_args": ["-tp", "2"]}), [0, 1])
    with pytest.raises(PlacementError, match="is not a CPU list"):
        plan_placement(config(server={"env": {OMP_BIND_ENV: "zero"}}), [0, 1])


def test_server_and_load_cpus_must_not_overlap():
    with pytest.raises(ConfigError, match="server.cpus and load.cpus share CPU 1"):
        config(server={"cpus": "0-1"}, load={"cpus": "1"})


def test_processes_accepts_a_count_or_auto_only():
    assert config(load={"processes": 3}).load.processes == 3 and config().load.processes == "auto"
    for bad in (0, 65, "two", 1.5, True):
        with pytest.raises(ConfigError, match=r"load.processes: .*write a count from 1 to 64, or \"auto\""):
            config(load={"processes": bad})


def test_placement_round_trips_through_plan_json():
    placed = plan_placement(config(), range(8))
    record = placed.to_record()
    assert record.description == placed.describe() and record.load_cpus == "7" and record.host_cpus == "0-7"
    assert Placement.from_record(record) == placed
    # as plan.json holds it: through JSON and back
    assert Placement.from_record(PlacementRecord.model_validate_json(record.model_dump_json())) == placed


def test_advice_names_the_exact_setting_for_each_placement():
    off = advice_for(Placement("off", host_cpus=(0, 1, 2, 3)).to_record())
    assert off.starved == 'set load.placement = "auto" (here: server.cpus = "0-2", load.cpus = "3")'
    user = advice_for(Placement("user", host_cpus=(0, 1)).to_record())
    assert '--cpuset-cpus "0"' in user.starved and 'load.cpus = "1"' in user.starved
    auto = advice_for(Placement("auto", (0,), (1,), 1, host_cpus=(0, 1)).to_record())
    assert "other processes run on the load's CPUs 1" in auto.starved
    assert "cannot read this many streams" in auto.saturated  # one CPU for the load, and no more to give
    assert lag_reason(80, 95, 50, auto).startswith("client saturated: Locust's loop lag p99 80 ms > 50 ms with its "
                                                   "busiest process at 95% of a core; ")
    assert lag_reason(80, 4, 50, auto).startswith("client starved: Locust's loop lag p99 80 ms > 50 ms while it used "
                                                  "only 4% of a core (other processes took its CPU); other processes")


def _requests(cpu: float, lags: list[float], chunks: int = 16) -> pd.DataFrame:
    return pd.DataFrame({"t_done_s": [101.0 + i * 0.1 for i in range(len(lags))], "ok": 1, "lag_p99_ms": lags,
                         "client": "h:1", "client_cpu_pct": cpu, "chunks": chunks})


def test_preflight_figures_and_auto_resize_from_the_measured_cost():
    stages = pd.DataFrame({"stage": [0], "users": [64], "t_start_s": [100.0], "t_end_s": [103.0]})
    figures = loaded_figures(_requests(48.0, [2.0] * 20), stages, 64)
    # the window opens 0.9 s in (30% of 3 s): 20 requests x 16 chunks done by 102.9 -> 160 chunks/s at 48%
    assert figures.requests == 20 and math.isclose(figures.chunks_per_s, 160.0)
    assert math.isclose(figures.chunk_cpu_us, 0.48 / 160.0 * 1e6)
    placed = Placement("auto", (0,), (1, 2, 3), 1, True, host_cpus=(0, 1, 2, 3))
    # 48% at the highest stage: under 60%, one process
    assert resized(figures, placed, 64)[0] == 1
    busy = LoadedFigures(64, 20, 300.0, 280.0, 97.0, 97.0, 168.0, 1)
    processes, why = resized(busy, placed, 64)  # saturated: its rate is a lower bound, so at least one more
    assert processes == 2 and why.startswith("processes auto: 2 from the pre-flight")
    assert resized(busy, Placement("auto", (0,), (1,), 1, True, host_cpus=(0, 1)), 64)[0] == 1  # one CPU: one
    assert loaded_figures(_requests(48.0, [2.0])[0:0], stages, 64) is None


def test_a_ray_slot_plans_locust_on_the_cpus_the_slot_holds_and_the_preflight_resizes_within_them(ray_installed):
    """On a cluster the pre-flight used to get a placement that could not re-size (processes_auto off, no CPUs):
    the slot's own placement keeps load.processes = "auto" and gives Locust up to a process per CPU the life holds,
    not the driver's."""
    cluster = config(cluster={"engine": "ray", "gpus": 2, "cpus_per_life": 3},
                     load={"stages": [{"users": 400, "duration_s": 10}]})
    slot = slot_placement(cluster)
    assert (slot.mode, slot.processes_auto, slot.load_room(), slot.server_cpus, slot.load_cpus) == \
        ("slot", True, 3, (), ())
    assert slot.processes == 2 and "processes auto: 2 planned for 400 users" in slot.processes_why
    assert slot.describe().startswith("placement slot: server and Locust unpinned on a Ray slot's 3 CPUs "
                                      "(cluster.cpus_per_life), Locust (2 processes) on any CPU")
    busy = LoadedFigures(400, 20, 300.0, 280.0, 97.0, 194.0, 40_000.0, 2)  # 48.5 us a chunk: 4 processes wanted
    processes, why = resized(busy, slot, 400)
    assert processes == 3 and why.endswith("4 wanted, 3 CPUs for the load")  # the slot's CPUs bound it
    assert Placement.from_record(PlacementRecord.model_validate_json(slot.to_record().model_dump_json())) == slot
    advice = advice_for(slot.to_record())
    assert "raise cluster.cpus_per_life (now 3" in advice.saturated and "cluster.cpus_per_life" in advice.starved
    one = slot_placement(config(cluster={"engine": "ray", "gpus": 2, "cpus_per_life": 0.5}))
    assert one.load_room() == 1 and one.processes == 1
    fixed = slot_placement(config(cluster={"engine": "ray", "gpus": 2}, load={"processes": 4}))
    assert (fixed.processes, fixed.processes_auto) == (4, False)
