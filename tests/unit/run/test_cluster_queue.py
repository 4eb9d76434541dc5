"""Lives handed to Ray slots so that K and GPU are not confounded (run/cluster/queue.py), and the GPUs a slot
names (run/cluster/worker_life.py)."""
from types import SimpleNamespace

import pytest

from lookahead_runner.config import config_from_dict
from lookahead_runner.run.cluster.slots import RaySlots
from lookahead_runner.run.cluster.worker_life import Where, gpus_here
from lookahead_runner.run.cluster.pool import Slot
from lookahead_runner.run.cluster.queue import handout_order, next_for

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


def test_each_round_hands_out_its_longest_groups_first():
    """Same-server lives of a resumed run: K=2 has all three repeats left, K=0 and K=4 one each. The longest starts
    first, so that the last to start are short (the last round full), whatever the seed's shuffle."""
    groups = [[(0, 2)], [(2, 0), (2, 1), (2, 2)], [(4, 1)]]
    for seed in range(10):
        order = handout_order(groups, lambda group: group[0][0], seed, len)
        assert order[0] == groups[1] and sorted(map(tuple, order[1:])) == [((0, 2),), ((4, 1),)], order
    assert handout_order(PLAN, k_of, seed=7) == handout_order(PLAN, k_of, 7, lambda life: 1)  # one size: the shuffle


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


def test_gpus_here_are_uuids_by_cuda_visible_devices_or_rays_ids_without_nvml():
    uuids = ["GPU-aaaa-0", "GPU-bbbb-1", "GPU-cccc-2"]
    nvml = SimpleNamespace(NVMLError=RuntimeError, nvmlInit=lambda: None, nvmlDeviceGetCount=lambda: 3,
                           nvmlDeviceGetHandleByIndex=lambda i: i, nvmlDeviceGetUUID=lambda h: uuids[h])
    assert gpus_here("2,0", nvml) == ("GPU-cccc-2", "GPU-aaaa-0")

    def no_driver():
        raise OSError("libnvidia-ml.so.1: cannot open shared object file")
    assert gpus_here("1", SimpleNamespace(nvmlInit=no_driver)) == ("ray-gpu:1",)
    assert gpus_here(None, SimpleNamespace(nvmlInit=no_driver)) == ()




def test_the_plan_warns_of_k_and_gpu_confounded_only_where_the_slots_differ_in_what_they_hold(ray_installed):
    """Slots of no GPU (gpus_per_life = 0, a CPU build) on one node hold the same thing: one repeat a K confounds
    nothing; slots of different GPUs, or on different nodes, do."""
    config = config_from_dict({"cluster": {"engine": "ray", "gpus_per_life": 0, "gpus": 0},
                               "speculation": {"k": [0, 4]}, "load": {"repeats": 1}})

    def slots(*wheres):
        return RaySlots([Slot(None, Where(*where)) for where in wheres], seed=0)

    assert slots(("10.0.0.1", "aaaaaaaa-node", ()), ("10.0.0.1", "aaaaaaaa-node", ())).confound_warning(config) == ""
    for apart in (slots(("10.0.0.1", "aaaaaaaa-node", ("ray-gpu:0",)), ("10.0.0.1", "aaaaaaaa-node", ("ray-gpu:1",))),
                  slots(("10.0.0.1", "aaaaaaaa-node", ()), ("10.0.0.2", "bbbbbbbb-node", ()))):
        assert apart.confound_warning(config).startswith("K and GPU confounded: 2 slots, but each K has 1 server life")
