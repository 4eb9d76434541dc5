"""Leave-one-out errors of a non-negative least-squares fit, every row at once (the roofline knee's choice).

Leaving one row out of an NNLS fit seldom changes which coefficients are zero. On the full fit's positive
coefficients the fit without row i is then ordinary least squares, given in closed form for every i by the
leverage (Sherman-Morrison): beta_(i) = beta - G^-1 x_i r_i / (1 - h_ii). That solution is the NNLS one exactly
when it stays positive and no zero coefficient would lower the error (the Karush-Kuhn-Tucker conditions on the
other rows); each row where that does not hold is refitted by scipy's nnls, as before.
"""
from __future__ import annotations

import numpy as np
from scipy.optimize import nnls

TOLERANCE = 1e-9      # relative: a coefficient this close to 0, or a gradient this close to 0, is refitted exactly


def loo_errors(design: np.ndarray, target: np.ndarray) -> np.ndarray:
    """For every row i: design[i] @ coef_(i) - target[i], coef_(i) the NNLS fit on every other row."""
    n, p = design.shape
    full, _ = nnls(design, target)
    active = full > 0
    errors = np.full(n, np.nan)
    exact = np.zeros(n, dtype=bool)
    x = design[:, active]
    if active.any() and n > active.sum():
        gram = x.T @ x
        if np.linalg.cond(gram) < 1e10:
            inverse = np.linalg.inv(gram)
            beta = inverse @ (x.T @ target)
            residual = target - x @ beta
            leverage = np.einsum("ij,jk,ik->i", x, inverse, x)
            room = 1 - leverage
            ok = room > TOLERANCE
            step = (inverse @ x.T) * np.where(ok, residual / np.where(ok, room, 1), 0)   # p_active x n
            betas = beta[:, None] - step                                                 # coef without row i
            scale = np.abs(beta).max() or 1.0
            positive = (betas > TOLERANCE * scale).all(axis=0)
            # KKT on the rows kept: the gradient of a zero coefficient must not point into the positive side
            fitted = x @ betas                                                           # n x n: row j, fit i
            residuals = target[:, None] - fitted
            residuals[np.arange(n), np.arange(n)] = 0.0                                  # row i left out
            gradient = design[:, ~active].T @ residuals                                  # p_zero x n
            # on each column's own scale: a column far smaller than the others has as small a gradient
            bound = TOLERANCE * np.linalg.norm(design[:, ~active], axis=0)[:, None] * np.linalg.norm(target)
            feasible = (gradient <= bound).all(axis=0) if (~active).any() else np.ones(n, dtype=bool)
            exact = ok & positive & feasible
            errors[exact] = -residual[exact] / room[exact]                               # the left-out row's
    rows = np.arange(n)
    for i in np.nonzero(~exact)[0]:
        keep = rows != i
        coef, _ = nnls(design[keep], target[keep])
        errors[i] = design[i] @ coef - target[i]
    return errors
