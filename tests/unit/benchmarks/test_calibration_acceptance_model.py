"""benchmarks/calibration/acceptance.py and model_claims.py: the truths their trials are scored against (the suite's
CI slice scores the claims themselves: test_calibration_slice.py)."""
from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from benchmarks.calibration import acceptance, adapters, model_claims  # noqa: E402


def _figures(frame) -> tuple[np.ndarray, np.ndarray]:
    """Pooled, request-weighted and token-weighted acceptance length of a set of single-answer requests, each a ratio
    of sums, and each one's standard error (the delta method over the requests)."""
    steps, accepted = frame["spec_steps"].to_numpy(float), frame["spec_accepted_tokens"].to_numpy(float)
    own, tokens = frame["spec_acceptance_length"].to_numpy(float), frame["output_tokens"].to_numpy(float)
    figures, errors = [], []
    for top, bottom, shift in ((accepted, steps, 1.0), (own, np.ones(len(own)), 0.0), (own * tokens, tokens, 0.0)):
        ratio = top.sum() / bottom.sum()
        figures.append(shift + ratio)
        errors.append(np.sqrt(np.square(top - ratio * bottom).sum()) / bottom.sum())
    return np.array(figures), np.array(errors)


def _within(frame, truth) -> bool:
    """Within 4 standard errors of the set's own figures, plus the quadrature's 1e-3."""
    figures, errors = _figures(frame)
    return bool(np.all(np.abs(figures - np.asarray(truth)) <= 4 * errors + 1e-3))


@pytest.mark.parametrize(("k", "alpha", "concentration"), [(2, 0.4, 40.0), (8, 0.8, 3.0)])
def test_the_acceptance_truths_are_what_a_large_set_drawn_from_the_same_law_measures(k, alpha, concentration):
    category = acceptance.Category("c0", 100_000, alpha, concentration, 48.0)
    regime = acceptance.AcceptanceRegime(k, (category,), 1, False)
    truth = acceptance.truths(acceptance.category_sums(category, k))
    assert _within(acceptance.requests_frame(regime, np.random.default_rng(5)), truth)
    # the truth told apart from a near one: K one less
    assert not _within(acceptance.requests_frame(regime, np.random.default_rng(5)),
                       acceptance.truths(acceptance.category_sums(category, k - 1)))


def test_the_mixs_truth_weighs_its_categories_by_their_shares_of_the_file():
    slow, fast = (acceptance.Category("slow", 60_000, 0.3, 20.0, 32.0),
                  acceptance.Category("fast", 20_000, 0.9, 20.0, 200.0))
    regime = acceptance.AcceptanceRegime(4, (slow, fast), 1, False)
    mix = sum(c.requests * acceptance.category_sums(c, 4) for c in (slow, fast))
    assert _within(acceptance.requests_frame(regime, np.random.default_rng(6)), acceptance.truths(mix))
    # the mix is neither category: the shares matter
    assert acceptance.truths(mix)[1] != pytest.approx(acceptance.truths(acceptance.category_sums(fast, 4))[1], abs=0.1)


def test_the_products_table_reads_the_frame_as_one_row_per_category_then_the_mix():
    regime = acceptance.draw(np.random.default_rng(1))
    rows = adapters.acceptance_rows(regime.k, acceptance.requests_frame(regime, np.random.default_rng(2)),
                                    adapters.decision_config())
    assert [r.category for r in rows] == [c.name for c in regime.categories] + [adapters.MIX]
    assert all(len(r.ranges) == 3 and all(low < high for low, high in r.ranges) for r in rows)


def test_a_model_world_without_restart_spread_is_predicted_at_a_measured_stage_as_its_true_curve():
    regime = dataclasses.replace(model_claims.draw(np.random.default_rng(4)), spread=1e-4, window_s=300.0, lives=2)
    rng = np.random.default_rng(7)
    model = adapters.fit_model(model_claims.windows(regime, rng), max(regime.stages),
                               model_claims.positions(regime, rng))
    k, users = regime.measured_ks[-1], max(regime.stages)
    point, low, high = adapters.model_prediction(model, k, users)
    truth = model_claims.true_rate(regime, k, users)
    assert point == pytest.approx(truth, rel=0.03) and low <= truth <= high


def test_the_true_curve_is_the_mean_over_lives_so_a_wider_spread_moves_it_only_slightly():
    regime = model_claims.draw(np.random.default_rng(8))
    narrow = model_claims.true_rate(dataclasses.replace(regime, spread=1e-4), 0, max(regime.stages))
    wide = model_claims.true_rate(dataclasses.replace(regime, spread=0.15), 0, max(regime.stages))
    assert wide == pytest.approx(narrow, rel=0.03) and wide != narrow
