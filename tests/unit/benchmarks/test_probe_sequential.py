"""benchmarks/probe_sequential.py: each edge trial judged two ways on the same probes' draws; judging after each probe
stops the search no later than judging once after it, and a verdict named by either is scored against the edge."""
import numpy as np

from .scripts import load

bench = load("probe_sequential")


def test_judging_after_each_probe_runs_no_more_probes_and_scores_both_ways():
    row = bench.one_trial(np.random.default_rng(3))
    once, each = row["once after the search"], row["after each probe"]
    assert each["probes"] <= once["probes"]
    for way in (once, each):
        assert not way["wrong"] or way["decided"]          # only a decided verdict is scored wrong
        assert not way["decided"] or way["k"] in (0, 4)


def test_bad_trials_is_one_line_and_exit_2(capsys):
    assert bench.main(["--trials", "0"]) == 2
    assert "--trials must be at least 1" in capsys.readouterr().err


def test_a_judge_that_decides_stops_the_search_before_its_first_probe_and_one_that_never_does_changes_nothing():
    from calibration.capacity_verdicts import at_the_edge, capacity_search, draw, ramp_windows
    rng = np.random.default_rng(5)
    regime = draw(rng)
    edge_rng = rng.spawn(1)[0]
    r = at_the_edge(regime, edge_rng)
    _, slo, windows, seeds = ramp_windows(r, edge_rng)
    assert capacity_search(r, windows, slo, np.random.default_rng(seeds), lambda ws: True) == windows
    alone = capacity_search(r, windows, slo, np.random.default_rng(seeds))
    never = capacity_search(r, windows, slo, np.random.default_rng(seeds), lambda ws: False)
    assert len(alone) > len(windows) and [w.rate for w in never] == [w.rate for w in alone]
