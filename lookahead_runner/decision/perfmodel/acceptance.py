"""Acceptance per draft position -> tokens per verification step for any K (pure).

P(position i accepted) comes from the per-position counters (vllm:spec_decode_num_accepted_tokens_per_pos,
their growth over each K's lives / its drafts), pooled over every K that drafted that far; without them,
from a geometric fit to each K's mean acceptance length. Beyond the deepest position observed the last
ratio continues geometrically, and the model says so where it uses it.
"""
from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from scipy.optimize import minimize_scalar


@dataclass(frozen=True)
class PositionCounts:
    """One K's lives: drafts made and drafts whose position i (0-based) was accepted."""

    drafts: float
    accepted: tuple[float, ...]


@dataclass(frozen=True)
class Acceptance:
    """P(position i accepted), i = 0.. the largest observed position; geometric beyond it."""

    by_position: tuple[float, ...]
    source: str                  # "per-position counters", "geometric fit to mean acceptance length", "none"

    @property
    def positions_observed(self) -> int:
        return len(self.by_position)

    def position(self, i: int) -> float:
        p = self.by_position
        if i < len(p):
            return p[i]
        if not p:
            return 0.0
        ratio = min(1.0, p[-1] / p[-2]) if len(p) >= 2 and p[-2] > 0 else min(1.0, p[0])
        return p[-1] * ratio ** (i - len(p) + 1)

    def tokens_per_step(self, k: int) -> float:
        """Expected tokens a sequence gains per verification step at K: 1 + sum of P(position i accepted)."""
        return 1.0 + sum(self.position(i) for i in range(k))

    def extrapolates(self, k: int) -> bool:
        return k > self.positions_observed

    def tokens_per_decode_step(self, k: int, decode_tokens: float) -> float:
        """Tokens per step over a request's decode of `decode_tokens`: below tokens_per_step, since its last
        step emits only what is left (a short output wastes a larger share of the drafts)."""
        n = max(1, int(round(decode_tokens)))
        return n / _decode_steps(tuple(self.position(i) for i in range(k)), n)


@functools.lru_cache(maxsize=4096)
def _decode_steps(accepted_at: tuple[float, ...], tokens: int) -> float:
    """Expected verification steps to emit `tokens`: a step emits 1 + the accepted prefix, P(prefix >= i) =
    accepted_at[i - 1] (each position's acceptance, as the per-position counters count it)."""
    reach = (1.0, *accepted_at, 0.0)
    emit = [(a + 1, reach[a] - reach[a + 1]) for a in range(len(accepted_at) + 1)]
    steps = [0.0] * (tokens + 1)
    for left in range(1, tokens + 1):
        steps[left] = 1.0 + sum(p * steps[max(0, left - n)] for n, p in emit)
    return steps[tokens]


def _geometric_alpha(pairs: list[tuple[int, float]]) -> float:
    def loss(alpha: float) -> float:
        return sum((mal - (1 - alpha ** (k + 1)) / (1 - alpha)) ** 2 for k, mal in pairs)

    return float(minimize_scalar(loss, bounds=(1e-4, 0.9999), method="bounded").x)


def fit_acceptance(obs: Sequence, positions: Mapping[int, PositionCounts] | None) -> Acceptance:
    """From the counters when there are any; else from the windows' (k, tokens_per_step) (perfmodel_fit.Obs)."""
    counts = {k: c for k, c in (positions or {}).items() if k > 0 and c.drafts > 0 and c.accepted}
    if counts:
        depth = max(len(c.accepted) for c in counts.values())
        probs = []
        for i in range(depth):
            drafts = sum(c.drafts for c in counts.values() if len(c.accepted) > i)
            accepted = sum(c.accepted[i] for c in counts.values() if len(c.accepted) > i)
            probs.append(min(1.0, accepted / drafts) if drafts else 0.0)
        return Acceptance(tuple(probs), "per-position counters")
    pairs = [(o.k, o.tokens_per_step) for o in obs if o.k > 0 and math.isfinite(o.tokens_per_step)]
    if not pairs:
        return Acceptance((), "none")
    alpha = _geometric_alpha(pairs)
    depth = max(k for k, _ in pairs)
    return Acceptance(tuple(alpha ** (i + 1) for i in range(depth)), "geometric fit to mean acceptance length")
