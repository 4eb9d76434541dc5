"""The calibration suite's users group (benchmarks/calibration/users_capacity.py): its closed-loop truth is exact,
and the points the product prints with no interval are shown, never scored."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from benchmarks.calibration import users_capacity as uc  # noqa: E402
from benchmarks.calibration.tally import SHOWN, UNCLAIMED, Tallies  # noqa: E402


@pytest.mark.parametrize("users, servers, metric", [(3, 4, "e2e"), (10, 4, "e2e"), (7, 1, "e2e"), (20, 8, "ttft")])
def test_the_closed_loop_truth_matches_a_long_simulation_of_the_same_loop(users, servers, metric):
    rng = np.random.default_rng(5)
    limit_s = uc.closed_limit(users, servers, 1.0, 0.8, metric)
    shares = []
    for _ in range(10):
        w = uc.closed_window(0, 0, users, servers, 1.0, 3000.0, rng)
        values = w.latency_ms[:, 3] if metric == "e2e" else w.latency_ms[:, 0] - uc.TTFT_PREFILL_MS
        shares.append(float((values <= limit_s * 1000.0).mean()))
    # ten stages of ~2,000-9,000 requests: their mean's standard error is under 0.01
    assert np.mean(shares) == pytest.approx(uc.closed_attainment(users, servers, 1.0, limit_s, metric), abs=0.02)


def test_the_true_users_capacity_is_where_the_attainment_falls_to_its_target_never_below_the_slots():
    capacity = uc.closed_capacity(8, 2.0, 9.0, "e2e", 0.9)
    assert capacity > 8
    assert uc.closed_attainment(capacity, 8, 2.0, 9.0, "e2e") == pytest.approx(0.9, abs=1e-6)
    assert uc.closed_attainment(capacity * 1.1, 8, 2.0, 9.0, "e2e") < 0.9
    # a TTFT SLO: U <= slots never waits, so every such U meets it
    assert uc.closed_capacity(8, 2.0, 0.0, "ttft", 0.99) == pytest.approx(8)


def test_a_point_printed_with_no_interval_is_shown_beside_the_claims_never_scored():
    tallies = Tallies()
    rng = np.random.default_rng(1)
    for _ in range(3):
        uc.run_trial(rng, tallies)
    shown = {c.name for c in tallies if "Little's law" in c.name or "point estimate" in c.name
             or "goodput (rate)" in c.name}
    assert shown and all(tallies.claims[name].kind == SHOWN for name in shown)
    scored = {c.name for c in tallies if c.kind not in UNCLAIMED}
    assert scored <= {"capacity (users): user stages", "goodput (users): a cell's interval",
                      "SLO attainment (users): a cell's interval"}
