"""Threshold stages: a schedule's boundaries are real batch sizes, the load's stages are user counts.

For each boundary (batch b runs one K, b + 1 the next) this picks the user count whose real batch,
as the per-K lives measured it for the K that side runs, lands about 5 % below b, and the one landing
about 5 % above it: inside the ~10 % band on either side, so a collapse at the threshold (vLLM issue
#49548) shows up at a stage of its own instead of between two stages. Pure: evidence in, plans out.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

from ..cells.evidence import Evidence
from ..schema import Boundary

AIM_FRAC = 0.05        # aim at the middle of the ~10 % band on each side of a boundary
BAND_FRAC = 0.10       # a threshold stage whose real batch lands further away says so
MAX_EXTRAPOLATION = 1.5  # beyond the largest stage measured, at most this many times its users


def batch_curve(evidence: Evidence, k: int) -> list[tuple[float, float]]:
    """(users, mean real batch) of K's cells, rising in users, from (0, 0)."""
    points = [(0.0, 0.0)]
    for users in evidence.users:
        cell = evidence.cell(k, users)
        if cell is None:
            continue
        batches = [w.signal("running_mean") for w in cell.windows]
        batches = [b for b in batches if math.isfinite(b)]
        if batches:
            points.append((float(users), sum(batches) / len(batches)))
    return points


def users_for_batch(curve: Sequence[tuple[float, float]], batch: float) -> float | None:
    """The user count whose real batch is `batch` on this curve (linear between measured stages; past the
    last one along its last segment, up to MAX_EXTRAPOLATION x its users); None when it never gets there."""
    for (u0, b0), (u1, b1) in zip(curve, curve[1:]):
        if b1 > b0 and b0 <= batch <= b1:
            return u0 + (batch - b0) * (u1 - u0) / (b1 - b0)
    if len(curve) < 2:
        return None
    (u0, b0), (u1, b1) = curve[-2], curve[-1]
    if batch <= b1 or b1 - b0 <= 0.1 * (u1 - u0):  # below: a falling curve; flat: saturated, never gets there
        return None
    users = u1 + (batch - b1) * (u1 - u0) / (b1 - b0)
    return users if users <= MAX_EXTRAPOLATION * u1 else None


def batch_at(curve: Sequence[tuple[float, float]], users: float) -> float | None:
    """The real batch the curve expects at `users` (the inverse reading, for the record)."""
    for (u0, b0), (u1, b1) in zip(curve, curve[1:]):
        if u0 <= users <= u1 and u1 > u0:
            return b0 + (users - u0) * (b1 - b0) / (u1 - u0)
    if len(curve) >= 2 and users > curve[-1][0]:
        (u0, b0), (u1, b1) = curve[-2], curve[-1]
        return b1 + (users - u1) * (b1 - b0) / (u1 - u0)
    return None


def boundaries(ranges: Sequence[Sequence[int]], evidence: Evidence) -> list[Boundary]:
    """One `Boundary` per change of K between neighbouring ranges, with the user counts to run."""
    out = []
    for (_, b, k_below), (_, _, k_above) in zip(ranges, ranges[1:]):
        if k_below == k_above:
            continue
        curves = {k_below: batch_curve(evidence, k_below), k_above: batch_curve(evidence, k_above)}
        notes: list[str] = []
        below = _side(curves, k_below, k_above, max(1.0, b * (1 - AIM_FRAC)), b, notes)
        above = _side(curves, k_above, k_below, max(b + 1.0, b * (1 + AIM_FRAC)), b, notes)
        if below and above and above[0] <= below[0]:
            above = (below[0] + 1, above[1])
        out.append(Boundary(batch=int(b), k_below=int(k_below), k_above=int(k_above),
                            users_below=below[0] if below else None, users_above=above[0] if above else None,
                            expected_batch_below=below[1] if below else None,
                            expected_batch_above=above[1] if above else None, note="; ".join(notes)))
    return out


def _side(curves: dict[int, list[tuple[float, float]]], k: int, other: int, batch: float, boundary: int,
          notes: list[str]) -> tuple[int, float | None] | None:
    """(users, expected real batch) for one side of a boundary, from the curve of the K that side runs; where
    that K's stages never reach the batch (a window invalid, or too few stages), from the other K's (noted)."""
    for source in (k, other):
        users = users_for_batch(curves[source], batch)
        if users is not None:  # rounded away from the boundary, so the batch stays on its side
            users = max(1, math.ceil(users) if batch > boundary else math.floor(users))
            if source != k:
                notes.append(f"K={k}'s real batch never reaches {batch:.0f} in the stages measured: users picked "
                             f"from K={source}'s")
            return users, batch_at(curves[source], users)
    notes.append(f"no K's real batch reaches {batch:.0f} in the stages measured: that side is not run")
    return None


def confirmation_stages(stages: Sequence[tuple[int, float]], target_users: int, scope: str,
                        bounds: Sequence[Boundary]) -> list[dict]:
    """The confirmation life's stages, rising: the sweep's (all, or the target's only) plus each boundary's
    threshold stages, each as long as the sweep stage nearest in users."""
    chosen = {users: duration for users, duration in stages if scope == "all" or users == target_users}
    for bound in bounds:
        for users in (bound.users_below, bound.users_above):
            if users is not None and users not in chosen:
                nearest = min(stages, key=lambda stage: (abs(stage[0] - users), stage[0]))
                chosen[users] = nearest[1]
    return [{"users": users, "duration_s": duration} for users, duration in sorted(chosen.items())]


def lands_in_band(batch: float | None, boundary: int, side: str) -> bool:
    """Did a threshold stage's measured real batch land inside the ~10 % band on its side?"""
    if batch is None or not math.isfinite(batch):
        return False
    if side == "below":
        return boundary * (1 - BAND_FRAC) <= batch <= boundary + 0.5
    return boundary + 0.5 <= batch <= (boundary + 1) * (1 + BAND_FRAC)
