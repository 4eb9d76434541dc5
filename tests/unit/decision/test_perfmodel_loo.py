"""decision/perfmodel/loo.py: every row's leave-one-out NNLS error at once, as one nnls fit per row gives it."""
import numpy as np
import pytest
from scipy.optimize import nnls

from lookahead_runner.decision.perfmodel.loo import loo_errors


def one_by_one(design, target):
    errors = []
    for i in range(len(design)):
        keep = np.arange(len(design)) != i
        coef, _ = nnls(design[keep], target[keep])
        errors.append(design[i] @ coef - target[i])
    return np.array(errors)


@pytest.mark.parametrize("seed", range(12))
def test_the_leave_one_out_errors_are_those_of_one_fit_per_row(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(8, 60))
    truth = np.where(rng.random(6) < 0.4, 0.0, rng.uniform(0.1, 2, 6))    # some coefficients at zero
    design = np.column_stack([np.ones(n), rng.integers(0, 9, n), rng.uniform(1, 60, n), rng.uniform(1, 500, n),
                              np.maximum(0, rng.uniform(1, 500, n) - 250), rng.uniform(0, 50, n)])
    step = design @ truth + rng.normal(0, 0.5, n) + 5
    scaled = design / step[:, None]                      # as choose_knee fits it: relative error
    np.testing.assert_allclose(loo_errors(scaled, np.ones(n)), one_by_one(scaled, np.ones(n)), atol=1e-9)


def test_a_row_that_changes_the_zero_coefficients_is_refitted():
    """One row alone makes a coefficient positive: without it the fit is another: nnls decides it."""
    design = np.array([[1.0, 0.0], [1.0, 0.0], [1.0, 0.0], [1.0, 5.0]])
    target = np.array([1.0, 1.1, 0.9, 6.0])
    np.testing.assert_allclose(loo_errors(design, target), one_by_one(design, target), atol=1e-12)



def test_a_zero_coefficient_of_a_tiny_column_is_judged_on_that_columns_scale():
    """A column a million times smaller than the other (tokens beside a constant, both over the step) has a
    gradient as small in absolute terms: left without the last row, its coefficient rises from zero, which a
    bound on the whole design's scale missed (the fourth error was half the one nnls gives)."""
    design = np.array([[762.76, 3.9e-4], [930.36, 8.0e-5], [924.04, 3.2e-5], [905.93, 6.5e-4]])
    target = np.array([455.515, 555.628, 551.793, 540.995])
    np.testing.assert_allclose(loo_errors(design, target), one_by_one(design, target), rtol=1e-9)
