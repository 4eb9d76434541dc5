"""Acceptance per category and for the mix (decision.json `request_set.acceptance`), held against a known truth.

Claims checked: every acceptance interval the report's "Your requests" section prints, per category and for the
mix at one K, each stated at decision.interval_level (95 % by default): the acceptance length pooled over draft
steps, request-weighted and token-weighted (decision/traffic/request_set.acceptance_table, requests resampled with
every answer they got, within their category). The truth is the population's: the intervals resample the set's
requests as draws of the category's requests ("a stage twice as long over the same requests gives the same
interval"), so what they cover is the figure over every request the category could hold, the mix's at the file's
shares of its categories. The set's own requests' figure (what answering them forever would give) lies nearer the
estimate and is not the claim.

A trial's world (`draw`): 1-4 categories of 20-200 requests each (20: the fewest a category may hold), each
request with its own per-position acceptance alpha ~ Beta of the category's mean 0.3-0.9 and concentration 2-50
(requests alike or widely varied), an output of L tokens (lognormal, median 16-256) served in
S = round(L / (1 + mu(alpha))) draft steps at K (2, 4 or 8), each step accepting a prefix P(>= i) = alpha^i capped
at K (the simulator's draw, sim/model.py); every request answered 1-4 times, the answers independent or identical
(temperature 0). The truths come from the same law in closed form per (alpha, L) and quadrature over both
(`truths`): pooled 1 + E[S mu] / E[S], request-weighted 1 + E[mu], token-weighted E[v + S (1 + mu)^2] /
E[S (1 + mu)] (v: one step's variance of the accepted prefix), the mix's at the categories' shares.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from . import adapters
from .intervals import holds
from .regimes import Named, log_uniform
from .tally import COVERAGE, Tallies

FAMILY = "interval"
KS = (2, 4, 8)
FIGURES = ("pooled", "request-weighted", "token-weighted")
GRID = 600          # quadrature nodes per axis (alpha, L): the truths' error ~1e-4 of a length, far inside the
#                     intervals' half-widths (>= 1e-2 at 200 requests of a category)
LENGTH_SIGMA = 0.7


@dataclass(frozen=True)
class Category:
    name: str
    requests: int
    alpha_mean: float
    concentration: float
    length_median: float

    @property
    def beta(self) -> tuple[float, float]:
        return self.alpha_mean * self.concentration, (1 - self.alpha_mean) * self.concentration


@dataclass(frozen=True)
class AcceptanceRegime:
    k: int
    categories: tuple[Category, ...]
    answers_max: int            # each request answered 1..answers_max times
    identical: bool             # temperature 0: a request's answers all the same
    named: Named = Named()


def draw(rng: np.random.Generator) -> AcceptanceRegime:
    count = int(rng.integers(1, 5))
    categories = tuple(Category(f"c{i}", int(round(log_uniform(rng, 20, 200))), rng.uniform(0.3, 0.9),
                                log_uniform(rng, 2, 50), log_uniform(rng, 16, 256)) for i in range(count))
    k = int(rng.choice(KS))
    identical = bool(rng.uniform() < 0.5)
    answers = int(rng.integers(1, 5))
    smallest = min(c.requests for c in categories)
    varied = min(c.concentration for c in categories)
    named = Named({"K": str(k), "categories": "1" if count == 1 else "2-4",
                   "fewest requests": "20-50" if smallest < 50 else "50-200",
                   "requests": "varied (kappa<8)" if varied < 8 else "alike",
                   "answers": "identical" if identical else "independent", "rounds": str(answers)})
    return AcceptanceRegime(k, categories, answers, identical, named)


def prefix_moments(alpha: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Mean and variance of one step's accepted prefix, P(>= i) = alpha^i for i <= K."""
    powers = alpha[..., None] ** np.arange(1, k + 1)
    mean = powers.sum(axis=-1)
    second = (powers * (2 * np.arange(1, k + 1) - 1)).sum(axis=-1)
    return mean, second - mean ** 2


def _steps(length: np.ndarray, mu: np.ndarray) -> np.ndarray:
    return np.maximum(1.0, np.round(length / (1 + mu)))


def _lengths(median: float, values: np.ndarray) -> np.ndarray:
    return np.maximum(1.0, np.round(median * np.exp(LENGTH_SIGMA * values)))


def category_sums(c: Category, k: int) -> np.ndarray:
    """Per request of the category's population, in expectation: [S mu, S, 1 + mu, v + S (1 + mu)^2, S (1 + mu), 1]
    (midpoint quadrature in probability over alpha and L)."""
    u = (np.arange(GRID) + 0.5) / GRID
    alpha = stats.beta.ppf(u, *c.beta)
    mu, v = prefix_moments(alpha, k)
    length = _lengths(c.length_median, stats.norm.ppf(u))
    steps = _steps(length[None, :], mu[:, None])
    m = mu[:, None]
    return np.array([(steps * m).mean(), steps.mean(), (1 + mu).mean(), (v[:, None] + steps * (1 + m) ** 2).mean(),
                     (steps * (1 + m)).mean(), 1.0])


def truths(sums: np.ndarray) -> tuple[float, float, float]:
    """(pooled, request-weighted, token-weighted) from category_sums (summed at the categories' shares)."""
    return 1 + sums[0] / sums[1], sums[2] / sums[5], sums[3] / sums[4]


def requests_frame(r: AcceptanceRegime, rng: np.random.Generator) -> pd.DataFrame:
    """requests.csv's rows at K: every answer of every request, with its per-request spec metrics."""
    parts = []
    first = 0
    for c in r.categories:
        alpha = rng.beta(*c.beta, c.requests)
        mu, _ = prefix_moments(alpha, r.k)
        steps = _steps(_lengths(c.length_median, rng.standard_normal(c.requests)), mu).astype(int)
        answers = rng.integers(1, r.answers_max + 1, c.requests)
        index = np.repeat(np.arange(c.requests), answers)
        draws_of = index if not r.identical else np.arange(c.requests)   # identical: one draw per request
        per_step = np.repeat(alpha[draws_of], steps[draws_of])
        accepted_steps = np.minimum(rng.geometric(1 - np.minimum(per_step, 1 - 1e-12)) - 1, r.k)
        bounds = np.concatenate([[0], np.cumsum(steps[draws_of])[:-1]])
        accepted = np.add.reduceat(accepted_steps, bounds) if len(per_step) else np.zeros(0)
        if r.identical:
            accepted = accepted[index]
        s = steps[index]
        parts.append(pd.DataFrame({"request_index": first + index, "category": c.name, "ok": 1, "spec_steps": s,
                                   "spec_accepted_tokens": accepted, "spec_acceptance_length": 1 + accepted / s,
                                   "output_tokens": s + accepted}))
        first += c.requests
    return pd.concat(parts, ignore_index=True)


def trial(rng: np.random.Generator, tallies: Tallies) -> None:
    r = draw(rng)
    p = adapters.decision_config()
    rows = adapters.acceptance_rows(r.k, requests_frame(r, rng), p)
    sums = {c.name: category_sums(c, r.k) for c in r.categories}
    mix = sum(c.requests * sums[c.name] for c in r.categories)
    level = float(p.interval_level)
    counts = {c.name: c.requests for c in r.categories}
    for row in rows:
        truth = truths(mix if row.category == adapters.MIX else sums[row.category])
        who = "the mix" if row.category == adapters.MIX else "a category"
        own = sum(counts.values()) if row.category == adapters.MIX else counts[row.category]
        factors = r.named.factors | {"its requests": "20-50" if own < 50 else "50-200" if own < 200 else "200+"}
        for figure, value, (low, high) in zip(FIGURES, truth, row.ranges):
            tallies.add(f"acceptance length ({figure}): {who}", FAMILY, COVERAGE, level,
                        "the category's population of requests (the mix: at the file's shares)",
                        holds(low, high, value), factors)
