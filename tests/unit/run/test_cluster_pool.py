"""Lives on Ray slots (run/cluster/pool.py), with Ray's calls answered in this process: each slot's life runs at once
through cluster_life.run_here (its server life stubbed), or its actor fails as Ray says it does."""
import tempfile
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import pytest

ray = pytest.importorskip("ray", reason="the pool waits on Ray: pip install 'lookahead-runner[ray]'")

from lookahead_runner.config import config_from_dict  # noqa: E402
from lookahead_runner.run.cluster import pool as cluster_pool, worker_life as cluster_life  # noqa: E402
from lookahead_runner.run.life import preflight_turn  # noqa: E402
from lookahead_runner.run.cluster.slots import RaySlots  # noqa: E402
from lookahead_runner.run.cluster.files import read_chunk  # noqa: E402
from lookahead_runner.run.cluster.worker_life import Where, run_here  # noqa: E402
from lookahead_runner.run.cluster.pool import ClusterError, Slot, SlotPool  # noqa: E402
from lookahead_runner.run.life.launch import Life  # noqa: E402
from lookahead_runner.run.life.placement import slot_placement  # noqa: E402
from lookahead_runner.run.life.preflight_turn import PreflightTurn  # noqa: E402
from lookahead_runner.runfolder import results  # noqa: E402
from lookahead_runner.runfolder.plan import read_status, write_status  # noqa: E402
from lookahead_runner.vllm.knob import Setting  # noqa: E402

K0, K4 = Setting(0, False), Setting(4, False)


@dataclass(eq=False)  # a reference, hashed by identity as Ray's are
class Ref:
    value: object = None
    error: BaseException | None = None
    ready: bool = True
    hangs: bool = False   # its task never ends (a slot stuck, its node not declared dead)


class Method:
    def __init__(self, call):
        self.call = call

    def remote(self, *args):
        return self.call(*args)


class FakeActor:
    """A slot's actor answered here: `life` = "run" runs each life as the worker does, else each run gives it."""

    def __init__(self, name: str, scratch: Path, life=None):
        self.where = Where("10.0.0.1", f"{name * 8}node", (f"ray-gpu:{name}",))
        self.scratch, self.life, self.archive = scratch / name, life, None
        self.run = Method(self._run)
        self.chunk = Method(lambda offset: Ref(read_chunk(self.archive, offset)))
        self.release = Method(lambda: Ref())

    def _run(self, order):
        if self.life != "run":
            return self.life
        self.scratch.mkdir(parents=True, exist_ok=True)
        files = run_here(order, self.where, Path(tempfile.mkdtemp(dir=self.scratch)))
        self.archive = Path(files.archive)
        return Ref(files)


@pytest.fixture
def fake_ray(monkeypatch):
    state = SimpleNamespace(killed=[], alive={})

    def get(ref, timeout=None):
        if ref.hangs:
            if timeout is None:
                raise AssertionError("ray.get without a timeout waits forever on a task that never ends")
            raise ray.exceptions.GetTimeoutError(f"Get timed out: some object(s) not ready after {timeout} s.")
        if ref.error is not None:
            raise ref.error
        return ref.value

    monkeypatch.setattr(ray, "get", get)
    monkeypatch.setattr(ray, "wait", lambda refs, num_returns=1, timeout=None: (
        [r for r in refs if r.ready], [r for r in refs if not r.ready]))
    monkeypatch.setattr(ray, "kill", lambda actor, no_restart=True: state.killed.append(actor))
    monkeypatch.setattr(ray, "nodes", lambda: [{"NodeID": node, "Alive": up} for node, up in state.alive.items()])
    monkeypatch.setattr(cluster_pool, "record_cluster", lambda *args, **kwargs: None)  # plan.json is not under test
    monkeypatch.setattr(cluster_pool, "WAIT_S", 0.01)
    return state


def make_pool(tmp_path, fake_ray, *lives, due=False):
    config = config_from_dict({"cluster": {"engine": "ray", "gpus": 2}})
    actors = [FakeActor(name, tmp_path / "nodes", life) for name, life in zip("ab", lives)]
    for actor in actors:
        fake_ray.alive[actor.where.node_id] = True
    owner = RaySlots([Slot(actor, actor.where) for actor in actors], seed=0, say=lambda text: None)
    said = []
    sweep = SimpleNamespace(caps=None, server=SimpleNamespace(load_env={}),
                            preflight=PreflightTurn(due, slot_placement(config)))
    progress = SimpleNamespace(life_started=lambda key: None, life_finished=lambda key: said.append(f"credit {key}"))
    pool = SlotPool(owner, tmp_path / "run", sweep, lambda life: life.key, said.append, progress, list(owner.slots))
    (tmp_path / "run").mkdir()
    return pool, config, said


def status(tmp_path, key: str):
    setting, repeat = key.split("/")
    return read_status(results.life_dir(tmp_path / "run", setting, int(repeat[1:])))


def test_a_life_that_raises_on_its_worker_keeps_the_repeats_it_finished(tmp_path, fake_ray, monkeypatch,
                                                                         ray_installed):
    """Same-server repeats: r0 done, then the life code raises. r0 comes back done; r1 fails with the error (before,
    the archive was never packed and the whole group failed, r0 included)."""
    def server_life(config, caps, setting, repeats, run_dir, say, server, **kwargs):
        done = results.life_dir(run_dir, setting.name, repeats[0])
        done.mkdir(parents=True)
        (done / "requests.csv").write_text("t_done_s\n1.0\n")
        write_status(done, "done")
        raise RuntimeError("boom in the sampler")

    monkeypatch.setattr(cluster_life, "run_server_life", server_life)
    pool, config, said = make_pool(tmp_path, fake_ray, "run")
    pool.start(config, [Life(K0, 0), Life(K0, 1)], pool.idle[0])
    assert [[life.key for life in group] for group in pool.wait_some()] == [["k0/r0", "k0/r1"]]
    assert status(tmp_path, "k0/r0").state == "done"
    assert (tmp_path / "run" / "k0" / "r0" / "requests.csv").read_text() == "t_done_s\n1.0\n"
    failed = status(tmp_path, "k0/r1")
    assert failed.state == "failed" and failed.reason == ("the life failed on 10.0.0.1: RuntimeError: boom in the "
                                                          "sampler") and failed.slot, failed
    assert "k0/r0: done" in said and "credit k0/r1" in said and pool.free() == 1  # the slot is free again


def test_each_slot_runs_its_own_preflight_at_once_and_keeps_it_due_when_its_server_died_before_it(
        tmp_path, fake_ray, monkeypatch, ray_installed):
    """Both slots take a life at once, each with its own pre-flight due (before, the first life ran alone for the
    sweep's one pre-flight while the other slot idled: a whole round of idle GPUs). Slot a's server dies before its
    pre-flight: a's next life runs it (the driver never drops it), and each slot's later lives get the Locust its own
    pre-flight re-sized."""
    ran = []

    def server_life(config, caps, setting, repeats, run_dir, say, server, placement=None, preflight=None, **kwargs):
        ran.append((setting.k, repeats[0], preflight is not None, placement.processes))
        out = results.life_dir(run_dir, setting.name, repeats[0])
        out.mkdir(parents=True)
        if (setting.k, repeats[0]) == (0, 0):  # died while starting: the pre-flight never ran
            write_status(out, "failed", "the server died during startup")
            return
        if preflight is not None:
            preflight(SimpleNamespace(external=True, base_url="http://127.0.0.1:9"), placement)
        write_status(out, "done")

    measured = iter([3, 2])
    monkeypatch.setattr(cluster_life, "run_server_life", server_life)
    monkeypatch.setattr(preflight_turn, "run_preflight",
                        lambda config, url, placement, *args: placement.with_processes(n := next(measured),
                                                                                       f"measured: {n}"))
    pool, config, _ = make_pool(tmp_path, fake_ray, "run", "run", due=True)
    a, b = pool.owner.slots
    assert pool.free() == 2                      # no slot waits for another's pre-flight
    pool.start(config, [Life(K0, 0)], a)
    assert pool.free() == 1
    pool.start(config, [Life(K4, 0)], b)
    assert pool.free() == 0
    pool.wait_some()
    assert a.turn.due and not b.turn.due and b.turn.placement.processes == 3
    pool.start(config, [Life(K4, 1)], a)         # a's pre-flight, still due
    pool.start(config, [Life(K0, 1)], b)
    pool.wait_some()
    assert not a.turn.due and a.turn.placement.processes == 2
    pool.start(config, [Life(K0, 2)], a)
    pool.wait_some()
    assert ran == [(0, 0, True, 1), (4, 0, True, 1), (4, 1, True, 1), (0, 1, False, 3), (0, 2, False, 2)]


def test_a_slot_that_stops_answering_is_killed_and_the_driver_goes_on_meanwhile(tmp_path, fake_ray, ray_installed):
    """ActorUnavailableError: the slot's server and Locust may still hold its GPU, so it is killed at once; its life
    fails "node lost" once Ray declares the node dead, and the other slot's life is collected meanwhile (the
    driver used to block up to 60 s on any actor death)."""
    unavailable = ray.exceptions.ActorUnavailableError("The actor is temporarily unavailable: RpcError: Socket closed",
                                                       None)
    pool, config, said = make_pool(tmp_path, fake_ray, Ref(error=unavailable), Ref(ready=False))
    a, b = pool.owner.slots
    pool.start(config, [Life(K0, 0)], a)
    pool.start(config, [Life(K4, 0)], b)
    assert pool.wait_some() == []                 # no verdict yet, and no waiting for one
    assert fake_ray.killed == [a.actor] and pool.owner.slots == [b] and status(tmp_path, "k0/r0").state == "running"
    assert [life.key for life in pool.in_flight()] == ["k4/r0", "k0/r0"] and pool.busy
    fake_ray.alive[a.where.node_id] = False       # Ray's health checks declare the node dead
    assert [[life.key for life in group] for group in pool.wait_some()] == [["k0/r0"]]
    lost = status(tmp_path, "k0/r0")
    assert lost.state == "failed" and lost.reason == "node lost: 10.0.0.1 (Ray node aaaaaaaa)", lost
    assert "k0/r0: failed - node lost: 10.0.0.1 (Ray node aaaaaaaa)" in said and "credit k0/r0" in said


def test_a_slot_whose_process_died_on_a_live_node_fails_at_once_with_the_cause(tmp_path, fake_ray, monkeypatch,
                                                                                ray_installed):
    died = ray.exceptions.ActorDiedError()
    died.error_msg = ("The actor died unexpectedly before finishing this task.\n\tclass_name: SlotWorker\n"
                      "The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR")
    pool, config, _ = make_pool(tmp_path, fake_ray, Ref(error=died))
    pool.start(config, [Life(K0, 0)], pool.idle[0])
    with pytest.raises(ClusterError, match="every Ray slot was lost"):  # its only slot: the sweep cannot go on
        pool.wait_some()
    assert status(tmp_path, "k0/r0").reason == ("the Ray slot on 10.0.0.1 died: The actor is dead because its worker "
                                                "process has died. Worker exit type: SYSTEM_ERROR")


def test_a_slot_unanswered_on_a_live_node_fails_at_the_deadline(tmp_path, fake_ray, monkeypatch, ray_installed):
    monkeypatch.setattr(cluster_pool, "NODE_DEATH_WAIT_S", 0.0)
    unavailable = ray.exceptions.ActorUnavailableError("RpcError: Socket closed", None)
    pool, config, _ = make_pool(tmp_path, fake_ray, Ref(error=unavailable), Ref(ready=False))
    pool.start(config, [Life(K0, 0)], pool.idle[0])
    assert len(pool.wait_some()) == 1
    assert status(tmp_path, "k0/r0").reason.startswith("the Ray slot on 10.0.0.1 stopped answering: The actor None "
                                                       "is unavailable: RpcError: Socket closed")


def test_a_submitted_life_takes_a_free_slot_that_has_not_run_its_setting(tmp_path, fake_ray, ray_installed):
    pool, config, _ = make_pool(tmp_path, fake_ray, Ref(ready=False), Ref(ready=False))
    a, b = pool.owner.slots
    a.ran.add(K4)
    pool.submit(config, Life(K4, 1))
    assert [life.key for life in pool.in_flight()] == ["k4/r1"] and pool.idle == [a]
    assert K4 in b.ran and status(tmp_path, "k4/r1").slot == b.where.slot


def done_at_once(config, caps, setting, repeats, run_dir, say, server, **kwargs):
    """A server life that ends done at once (cluster_life.run_server_life's place)."""
    out = results.life_dir(run_dir, setting.name, repeats[0])
    out.mkdir(parents=True)
    write_status(out, "done")


def test_a_node_lost_while_its_files_come_back_is_a_lost_slot_not_a_crash(tmp_path, fake_ray, monkeypatch,
                                                                          ray_installed):
    """Ray 2.11 says "System error: Broken pipe" (RaySystemError) when the node goes while the driver pulls a chunk:
    the slot is let go like one that stops answering, and the sweep goes on (it ended in a traceback)."""
    monkeypatch.setattr(cluster_life, "run_server_life", done_at_once)
    pool, config, _ = make_pool(tmp_path, fake_ray, "run", Ref(ready=False))
    a = pool.owner.slots[0]
    a.actor.chunk = Method(lambda offset: Ref(error=ray.exceptions.RaySystemError("Broken pipe")))
    pool.start(config, [Life(K0, 0)], a)
    assert pool.wait_some() == [] and fake_ray.killed == [a.actor] and status(tmp_path, "k0/r0").state == "running"
    fake_ray.alive[a.where.node_id] = False
    pool.wait_some()
    assert status(tmp_path, "k0/r0").reason.startswith("node lost: ")


def test_waiting_with_no_life_in_flight_and_every_slot_lost_ends_the_sweep(tmp_path, fake_ray, ray_installed):
    """The adaptive sweep waits for a free slot (`while not pool.free(): pool.wait()`): with every slot lost and none
    in flight that must end in the one-line ClusterError, not loop."""
    pool, config, _ = make_pool(tmp_path, fake_ray, Ref(ready=False))
    pool.owner.let_go(pool.idle.pop())
    assert pool.free() == 0 and not pool.busy
    with pytest.raises(ClusterError, match="every Ray slot was lost"):
        pool.wait()


def test_a_chunk_that_never_comes_lets_the_slot_go_and_the_sweep_goes_on(tmp_path, fake_ray, monkeypatch,
                                                                         ray_installed):
    """A slot that returned its life but never answers the pull (stuck, its node still counted alive): the driver
    waited on that chunk forever, every other slot idle behind it. It is let go like a slot that stops answering."""
    monkeypatch.setattr(cluster_pool, "NODE_DEATH_WAIT_S", 0.0)

    monkeypatch.setattr(cluster_life, "run_server_life", done_at_once)
    pool, config, _ = make_pool(tmp_path, fake_ray, "run", Ref(ready=False))
    a = pool.owner.slots[0]
    a.actor.chunk = Method(lambda offset: Ref(hangs=True))
    pool.start(config, [Life(K0, 0)], a)
    pool.wait_some()
    assert fake_ray.killed == [a.actor] and len(pool.owner.slots) == 1 and a not in pool.owner.slots
    assert status(tmp_path, "k0/r0").reason.startswith("the Ray slot on 10.0.0.1 stopped answering: Get timed out")
    assert not list((tmp_path / "run").glob(".unpacking-*"))


def _preflight_writing(verdict_of):
    """run_preflight stubbed: writes a preflight.json (and one Locust run's file) naming the slot's node, as the real
    one does on the slot's scratch run folder; `verdict_of(run_dir)` may raise the stop."""
    from lookahead_runner.runfolder.preflight import PreflightRecord, write_preflight

    def run_preflight(config, url, placement, run_dir, say, *args):
        (run_dir / "preflight" / "run0").mkdir(parents=True)
        (run_dir / "preflight" / "run0" / "requests.csv").write_text(f"{url}\n")
        write_preflight(run_dir, PreflightRecord(verdict="ok", reason=url))
        verdict_of(url)
        return placement
    return run_preflight


def _life_running_preflight(config, caps, setting, repeats, run_dir, say, server, placement=None, preflight=None,
                            where=None, **kwargs):
    out = results.life_dir(run_dir, setting.name, repeats[0])
    out.mkdir(parents=True)
    if preflight is not None:
        preflight(SimpleNamespace(external=True, base_url=where["slot"]), placement)
    write_status(out, "done")


def test_each_slots_preflight_is_kept_not_only_the_last_to_come_back(tmp_path, fake_ray, monkeypatch, ray_installed):
    """Two slots, each its own pre-flight: the run folder keeps both (before, the second's preflight.json and
    preflight/ replaced the first's: slot a's evidence was lost); preflight.json is still the last to come back."""
    from lookahead_runner.runfolder.preflight import read_preflight

    monkeypatch.setattr(cluster_life, "run_server_life", _life_running_preflight)
    monkeypatch.setattr(preflight_turn, "run_preflight", _preflight_writing(lambda url: None))
    pool, config, _ = make_pool(tmp_path, fake_ray, "run", "run", due=True)
    a, b = pool.owner.slots
    pool.start(config, [Life(K0, 0)], a)
    pool.start(config, [Life(K4, 0)], b)
    pool.wait_some()
    run = tmp_path / "run"
    assert read_preflight(run).reason == b.where.slot
    kept = sorted(run.glob(f"{cluster_pool.SLOT_PREFLIGHTS}/*/preflight.json"))
    assert [read_preflight(path.parent).reason for path in kept] == [a.where.slot, b.where.slot]
    assert [(path.parent / "preflight" / "run0" / "requests.csv").read_text() for path in kept] == [
        f"{a.where.slot}\n", f"{b.where.slot}\n"]


def test_a_slots_preflight_stop_marks_the_other_slots_lives_in_flight_not_measured(tmp_path, fake_ray, monkeypatch,
                                                                                  ray_installed):
    """Slot a's pre-flight stops the sweep while slot b's life is still running: the sweep stops (the slots are
    killed on the way out), and b's lives say so, failed "not measured" so that --resume reruns them (before, they
    were left "running" in the run folder, as if still measured)."""
    def stop(url):
        raise cluster_pool.PreflightError("pre-flight at 8 users: Locust lags")

    monkeypatch.setattr(cluster_life, "run_server_life", _life_running_preflight)
    monkeypatch.setattr(preflight_turn, "run_preflight", _preflight_writing(stop))
    pool, config, _ = make_pool(tmp_path, fake_ray, "run", Ref(ready=False), due=True)
    a, b = pool.owner.slots
    pool.start(config, [Life(K0, 0)], a)
    pool.start(config, [Life(K4, 0), Life(K4, 1)], b)
    with pytest.raises(cluster_pool.PreflightError):
        pool.wait_some()
    assert status(tmp_path, "k0/r0").state == "failed"
    for key in ("k4/r0", "k4/r1"):
        cut = status(tmp_path, key)
        assert cut.state == "failed" and cut.reason.startswith("not measured: the sweep stopped "
                                                               f"on {a.where.slot}: pre-flight at 8 users"), cut


def test_a_slots_preflight_is_kept_after_the_highest_number_there(tmp_path, ray_installed):
    """preflight-slots/ with a gap (002 removed by hand): the next takes 004, not a number already there (before, it
    took 003 beside 003-b: the order they came back in was lost)."""
    run = tmp_path / "run"
    for name in ("001-a", "003-b"):
        (run / cluster_pool.SLOT_PREFLIGHTS / name).mkdir(parents=True)
    (run / "preflight.json").write_text("{}")
    where = Where("10.0.0.1", "ccccccccnode", ("GPU-1", "GPU-2"))
    cluster_pool.keep_slot_preflight(run, Slot(None, where))
    assert sorted(p.name for p in (run / cluster_pool.SLOT_PREFLIGHTS).iterdir()) == [
        "001-a", "003-b", "004-10.0.0.1_cccccccc_GPU-1_GPU-2"]
    assert (run / cluster_pool.SLOT_PREFLIGHTS / "004-10.0.0.1_cccccccc_GPU-1_GPU-2" / "preflight.json").exists()


def test_a_slots_preflight_stop_collects_the_lives_that_ended_on_the_other_slots(tmp_path, fake_ray, monkeypatch,
                                                                                 ray_installed):
    """Slot a's pre-flight stops the sweep while slot b's life has ended but is not collected yet (its reference is
    ready behind a's): b's life is collected as it ended, done with its files, not marked failed "not measured"
    for --resume to run again (before, every life of the other slots was cut, finished or not)."""
    def stop(url):
        if "ray-gpu:a" in url:
            raise cluster_pool.PreflightError("pre-flight at 8 users: Locust lags")

    def life(config, caps, setting, repeats, run_dir, say, server, placement=None, preflight=None, where=None,
             **kwargs):
        out = results.life_dir(run_dir, setting.name, repeats[0])
        out.mkdir(parents=True)
        if preflight is not None and "ray-gpu:a" in where["slot"]:
            preflight(SimpleNamespace(external=True, base_url=where["slot"]), placement)
        (out / "requests.csv").write_text("t_done_s\n1.0\n")
        write_status(out, "done")

    monkeypatch.setattr(cluster_life, "run_server_life", life)
    monkeypatch.setattr(preflight_turn, "run_preflight", _preflight_writing(stop))
    pool, config, said = make_pool(tmp_path, fake_ray, "run", "run", due=True)
    a, b = pool.owner.slots
    pool.start(config, [Life(K0, 0)], a)
    pool.start(config, [Life(K4, 0)], b)
    with pytest.raises(cluster_pool.PreflightError):
        pool.wait_some()
    assert status(tmp_path, "k0/r0").state == "failed"
    ended = status(tmp_path, "k4/r0")
    assert ended.state == "done", ended
    assert (tmp_path / "run" / "k4" / "r0" / "requests.csv").read_text() == "t_done_s\n1.0\n"
    assert "k4/r0: done" in said and "credit k4/r0" in said and not pool.busy


def test_a_life_planned_as_a_capacity_probe_is_one_on_its_worker_too(tmp_path, fake_ray, monkeypatch, ray_installed):
    """The worker's run folder is a scratch one with no plan.json: the driver sends each life's purpose with it, so
    the adaptive sweep's capacity probe may end early on a cluster as it does here (life/probe_watch.py)."""
    from lookahead_runner.runfolder.plan import CAPACITY_PURPOSE, Plan, PlannedLife, write_plan

    sent = []

    def server_life(config, caps, setting, repeats, run_dir, say, server, purposes=None, **kwargs):
        sent.append(dict(purposes or {}))
        done_at_once(config, caps, setting, repeats, run_dir, say, server)

    monkeypatch.setattr(cluster_life, "run_server_life", server_life)
    pool, config, _ = make_pool(tmp_path, fake_ray, "run")
    lives = [PlannedLife(setting="k4", k=4, repeat=r, argv=["vllm"], dir=f"k4/r{r}", purpose=purpose)
             for r, purpose in ((0, ""), (1, CAPACITY_PURPOSE))]
    write_plan(tmp_path / "run", Plan(run_id="r", probe={"version": "0.32.0"}, config={}, target_users=8, lives=lives))
    for repeat in (1, 0):
        pool.submit(config, Life(K4, repeat))
        pool.wait()
    assert sent == [{"k4/r1": CAPACITY_PURPOSE}, {"k4/r0": ""}]
