"""Lives handed to Ray slots so that K and GPU are not confounded (run/cluster_queue.py), and a life's files
packed on the worker and written into the run folder (run/cluster_life.py)."""
import io
import tarfile
from types import SimpleNamespace

import pytest

from lookahead_runner.run.cluster import slots_wanted
from lookahead_runner.run.cluster_life import gpus_here, pack, unpack
from lookahead_runner.run.cluster_queue import handout_order, next_for

# server lives as (K, repeat), in the plan's order: K ascending, repeats innermost
PLAN = [(k, r) for k in (0, 2, 4) for r in range(3)]


def k_of(life):
    return life[0]


def test_handout_goes_in_rounds_each_shuffled_and_reproducible():
    order = handout_order(PLAN, k_of, seed=7)
    assert sorted(order) == sorted(PLAN)
    rounds = [order[0:3], order[3:6], order[6:9]]
    assert [sorted(r[1] for r in each) for each in rounds] == [[0, 0, 0], [1, 1, 1], [2, 2, 2]]
    assert handout_order(PLAN, k_of, seed=7) == order  # the seed recorded in plan.json gives it again
    shuffles = {tuple(k_of(life) for life in handout_order(PLAN, k_of, seed)[:3]) for seed in range(20)}
    assert len(shuffles) > 1  # the order of K within a round is not fixed


def simulate(slots: int, seed: int) -> dict:
    """Slots freeing in turn (round robin) take lives by next_for; which slots ran each K."""
    queue = handout_order(PLAN, k_of, seed)
    ran = [set() for _ in range(slots)]
    where: dict[int, list[int]] = {}
    turn = 0
    while queue:
        slot = turn % slots
        life = queue.pop(next_for(queue, k_of, ran[slot]))
        ran[slot].add(k_of(life))
        where.setdefault(k_of(life), []).append(slot)
        turn += 1
    return where


@pytest.mark.parametrize("seed", range(5))
def test_repeats_of_a_k_land_on_different_slots_where_there_are_enough(seed):
    for k, slots in simulate(3, seed).items():
        assert sorted(slots) == [0, 1, 2], (k, slots)  # three repeats, three slots: one each
    for k, slots in simulate(2, seed).items():
        assert set(slots) == {0, 1}, (k, slots)        # three repeats, two slots: both used


def test_next_for_takes_the_first_setting_the_slot_has_not_run():
    queue = [(0, 1), (2, 1), (4, 1)]
    assert next_for(queue, k_of, {0}) == 1
    assert next_for(queue, k_of, {0, 2, 4}) == 0  # ran them all: the first


@pytest.mark.parametrize("resources, gpus, cpus, slots", [
    ({"CPU": 16, "GPU": 8}, 1, 1, 8), ({"CPU": 16, "GPU": 8}, 4, 1, 2), ({"CPU": 4, "GPU": 8}, 1, 2, 2),
    ({"CPU": 2}, 1, 1, 0), ({"CPU": 2}, 0, 1, 2), ({"CPU": 2, "GPU": 2}, 3, 1, 0)])
def test_slots_by_gpus_and_cpus(resources, gpus, cpus, slots):
    assert slots_wanted(resources, gpus, cpus) == slots


def test_gpus_here_are_uuids_by_cuda_visible_devices_or_rays_ids_without_nvml():
    uuids = ["GPU-aaaa-0", "GPU-bbbb-1", "GPU-cccc-2"]
    nvml = SimpleNamespace(NVMLError=RuntimeError, nvmlInit=lambda: None, nvmlDeviceGetCount=lambda: 3,
                           nvmlDeviceGetHandleByIndex=lambda i: i, nvmlDeviceGetUUID=lambda h: uuids[h])
    assert gpus_here("2,0", nvml) == ("GPU-cccc-2", "GPU-aaaa-0")

    def no_driver():
        raise OSError("libnvidia-ml.so.1: cannot open shared object file")
    assert gpus_here("1", SimpleNamespace(nvmlInit=no_driver)) == ("ray-gpu:1",)
    assert gpus_here(None, SimpleNamespace(nvmlInit=no_driver)) == ()


def test_a_life_comes_back_into_the_run_folder_replacing_what_was_there(tmp_path):
    worker, run_dir = tmp_path / "worker", tmp_path / "run"
    (worker / "k2" / "r1").mkdir(parents=True)
    (worker / "k2" / "r1" / "status.json").write_text('{"state": "done"}')
    (worker / "preflight.json").write_text("{}")
    (run_dir / "k2" / "r1").mkdir(parents=True)
    (run_dir / "k2" / "r1" / "stale.csv").write_text("cut run")
    (run_dir / "k2" / "r0").mkdir()
    (run_dir / "k2" / "r0" / "status.json").write_text('{"state": "done"}')
    unpack(pack(worker), run_dir, ["k2/r1"])
    assert (run_dir / "k2" / "r1" / "status.json").read_text() == '{"state": "done"}'
    assert not (run_dir / "k2" / "r1" / "stale.csv").exists()
    assert (run_dir / "k2" / "r0" / "status.json").exists() and (run_dir / "preflight.json").exists()


def test_files_that_would_land_outside_the_run_folder_are_refused(tmp_path):
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        data = b"x"
        info = tarfile.TarInfo("../escaped.txt")
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))
    (tmp_path / "run").mkdir()
    with pytest.raises(tarfile.TarError):
        unpack(buffer.getvalue(), tmp_path / "run", [])
    assert not (tmp_path / "escaped.txt").exists()


def test_a_submitted_life_takes_a_free_slot_that_has_not_run_its_setting(tmp_path):
    pytest.importorskip("ray", reason="SlotPool waits on Ray: pip install 'lookahead-runner[ray]'")
    from lookahead_runner.run.cluster import ClusterError, RaySlots, Slot, SlotPool
    from lookahead_runner.run.launch import Life
    from lookahead_runner.vllm.knob import Setting

    started = []

    class Owner(RaySlots):
        def _start(self, slot, group, config, run_dir, run_life, tag, say, progress):
            slot.ran.add(group[0].setting)
            started.append((slot.where, [life.key for life in group]))
            return object()  # stands in for the Ray reference

    owner = Owner([Slot(None, "a"), Slot(None, "b")], seed=0)
    run_life = SimpleNamespace(preflight_due=True)
    pool = SlotPool(owner, tmp_path, run_life, str, print, None, list(owner.slots))
    k0, k4 = Setting(0, False), Setting(4, False)
    owner.slots[0].ran.add(k4)
    assert pool.free() == 1                          # the first life runs the pre-flight alone
    pool.submit(None, Life(k4, 1))
    assert started == [("b", ["k4/r1"])] and pool.free() == 0 and [l.key for l in pool.in_flight()] == ["k4/r1"]
    run_life.preflight_due = False
    pool.submit(None, Life(k0, 0))                   # "a" has run K=4, not K=0: it takes it
    assert started[-1] == ("a", ["k0/r0"]) and pool.free() == 0
    owner.slots.clear()
    with pytest.raises(ClusterError, match="every Ray slot was lost"):
        pool.free()
