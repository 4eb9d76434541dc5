"""benchmarks/model_prior.py: the synthetic model it hands the chooser (errors as wide as it states, its view formed
as the product forms it) and one small study through the product's chooser (the benchmark itself is run by hand)."""
from __future__ import annotations

import argparse
import sys

import numpy as np
import pytest

from .scripts import load

bench = load("model_prior")

from lookahead_runner.decision.perfmodel import prior  # noqa: E402


def test_the_synthetic_model_errs_with_the_median_it_states_and_shows_two_held_out_errors_per_measured_k():
    levels = {0: 20.0, 2: 40.0, 4: 50.0, 8: 30.0}
    sd = 0.078 / bench.MEDIAN_OF_HALF_NORMAL
    rng = np.random.default_rng(3)
    errors = []
    for _ in range(4000):
        drawn = ({k: rng.normal(0, sd) for k in levels}, rng.normal(0, sd, 16), {k: 0.0 for k in levels})
        view = bench.model_view(levels, drawn, [0, 4], 0.078, 0.01)
        errors.append(view.predictions[2].objective / levels[2] - 1)
        assert len(view.heldout_errors) == 4 and view.skip_level == 0.01
        assert view.predictions[4].objective == levels[4]      # a measured K at its fitted figure
    assert abs(np.median(np.abs(errors)) - 0.078) < 0.006


def test_the_rule_before_is_restored_after_its_comparison():
    kept = prior.skip_bound
    with bench.largest_as_bound():
        assert prior.skip_bound is not kept
    assert prior.skip_bound is kept


def test_a_small_study_scores_every_trial_once_per_strategy():
    profile = next(p for p in bench.sc.PROFILES if p.name == "tight-kv")
    out = bench.study(profile, 0.03, argparse.Namespace(trials=1, seed=0, error=0.078))
    for name in bench.STRATEGIES:
        row = out[name]
        assert row["right"] + row["not_decided"] + row["wrong"] == 1 and row["lives"] >= 4   # 2 lives of 2 K


def test_a_negative_seed_is_refused_in_one_line_with_exit_2_before_any_trial(capsys, monkeypatch):
    monkeypatch.setattr(bench, "study", lambda *args: pytest.fail("a trial ran on a negative seed"))
    monkeypatch.setattr(sys, "argv", ["model_prior.py", "--seed", "-1", "--trials", "1"])
    with pytest.raises(SystemExit) as exit_info:
        bench.main()
    assert exit_info.value.code == 2 and "--seed" in capsys.readouterr().err
