"""The slots a Ray cluster holds, counted node by node (run/cluster_start.py): a life's GPUs and CPUs are all on
one node."""
import pytest

from lookahead_runner.run.cluster_start import lives_on, no_fit_line, slots_on


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
