"""The decision at an arrival rate (decision/rate_decision.py): SLO attainment decides among the K that keep up, a K
that falls behind or misses the SLO loses, the smallest K that holds is kept, too few arrivals is not decided (with
what to run), a K not in effect cannot be recommended."""
from __future__ import annotations

import pytest

from lookahead_runner.config import DecisionConfig
from lookahead_runner.decision.rate_decision import decide_at_rate

from .rate_windows_factory import rate_window

P = DecisionConfig(slo={"ttft_p99_ms": 500.0}, resamples=300)
ARGV = {0: ["vllm", "serve", "m"], 4: ["vllm", "serve", "m", "--speculative-config", "{...}"]}


def _gate(decision, k, name):
    candidate = next(c for c in decision.candidates if c.k == k)
    return next(g for g in candidate.gates if g.name == name)


def test_k_that_keeps_the_slo_where_the_baseline_falls_behind_is_set_in_rate_terms():
    windows = [rate_window(0, 20.0, 600, 420, behind=True), rate_window(4, 20.0, 600, 600)]
    decision = decide_at_rate(windows, 20.0, P, ARGV)
    assert decision.status == "decided" and decision.recommended.k == 4 and decision.target_rate == 20.0
    assert decision.recommended.argv == ARGV[4] and decision.target_users is None
    assert decision.verdict.startswith("At 20 req/s: set K=4: p99 TTFT ")
    assert "SLO met by 100.0% [99.4%, 100.0%] vs 70.0% " in decision.verdict
    assert "K=0 falls behind at 20 req/s" in decision.verdict
    assert _gate(decision, 0, "keeps up").status == "fail" and _gate(decision, 4, "keeps up").status == "pass"
    assert _gate(decision, 0, "SLO attainment").status == "fail"
    assert decision.confidence >= 0.9 and decision.candidates[1].gain > 0.3


def test_the_smallest_k_that_holds_the_slo_is_kept_and_the_faster_one_named_as_a_tradeoff():
    windows = [rate_window(0, 8.0, 600, 600, fast_ms=200.0), rate_window(4, 8.0, 600, 600, fast_ms=80.0)]
    decision = decide_at_rate(windows, 8.0, P, ARGV)
    assert decision.status == "decided" and decision.recommended.k == 0
    assert decision.verdict.startswith("At 8 req/s: keep K=0: SLO met by 100.0%")
    assert "K=4 keeps it too" in decision.verdict and "p99 TTFT" in decision.verdict
    tradeoff = next(t for t in decision.candidates[1].tradeoffs if t.metric == "TTFT p99")
    assert tradeoff.difference < -100 and tradeoff.range.high < 0


def test_too_few_arrivals_to_tell_the_attainment_from_its_target_is_not_decided_with_what_to_run():
    windows = [rate_window(0, 8.0, 120, 120), rate_window(4, 8.0, 120, 120)]
    decision = decide_at_rate(windows, 8.0, P, ARGV)
    assert decision.status == "not_decided" and decision.recommended is None and decision.leading_k == 0
    assert "SLO attainment is unknown (too little data)" in decision.verdict
    assert _gate(decision, 0, "SLO attainment").status == "unknown"
    assert any(run.startswith("Lengthen the rate stage at 8 req/s to about ") for run in decision.next_runs)


def test_no_k_that_holds_the_slo_says_so_with_each_ks_figures():
    windows = [rate_window(0, 30.0, 600, 100, behind=True), rate_window(4, 30.0, 600, 450)]
    decision = decide_at_rate(windows, 30.0, P, ARGV)
    assert decision.status == "no_eligible" and decision.recommended is None
    assert decision.verdict.startswith("No K keeps the SLO at 30 req/s: K=0 falls behind at 30 req/s")
    assert "K=4 misses the SLO: met by 75.0%" in decision.verdict


def test_a_k_whose_windows_at_the_rate_were_not_in_effect_cannot_be_recommended():
    off = "not in effect: K=4 drafted 0.0 tokens per step (expected 4)"
    windows = [rate_window(0, 20.0, 600, 600), rate_window(4, 20.0, 600, 600, valid=False, invalid_reason=off)]
    decision = decide_at_rate(windows, 20.0, P, ARGV)
    assert decision.verdict.startswith("K=4 cannot be recommended: none of its 1 window at 20 req/s had it in effect")
    assert [c.k for c in decision.candidates] == [0]


def test_no_valid_window_at_the_rate_is_no_measurement_naming_why():
    windows = [rate_window(0, 20.0, 600, 0, ok=0, valid=False, invalid_reason="no arrival succeeded, most often "
                                                                              "HTTP 404 (600 of 600)")]
    decision = decide_at_rate(windows, 20.0, P, ARGV)
    assert decision.status == "no_measurement"
    assert decision.verdict == ("No valid window at 20 req/s: nothing can be recommended at that rate. At K=0: no "
                                "arrival succeeded, most often HTTP 404 (600 of 600).")


def test_without_an_slo_the_lower_latency_decides_beyond_the_tie_band():
    p = DecisionConfig(resamples=300)
    windows = [rate_window(0, 8.0, 600, 600, fast_ms=400.0, p=p), rate_window(4, 8.0, 600, 600, fast_ms=100.0, p=p)]
    decision = decide_at_rate(windows, 8.0, p, ARGV)
    assert decision.objective.startswith("1000 / e2e p90") and decision.recommended.k == 4
    assert decision.verdict.startswith("At 8 req/s: set K=4: p90 e2e 1406 -> 1106 ms [-300, -300]")


@pytest.mark.parametrize("rate", [8.0, 20.0])
def test_the_same_windows_give_the_same_verdict(rate):
    windows = [rate_window(0, rate, 600, 420, behind=True), rate_window(4, rate, 600, 600)]
    first, second = (decide_at_rate(windows, rate, P, ARGV) for _ in range(2))
    assert first.model_dump() == second.model_dump()


# ---------------------------------------------------------- arrivals of one window are not independent


def test_misses_in_one_burst_widen_the_attainment_interval_the_arrivals_of_a_queue_being_correlated():
    # 30 of 2000 arrivals miss the SLO, all in one burst (a queue that built up and drained): Wilson on 2000
    # independent arrivals would prove 98.5 % >= 97 %; the burst is one event, not 30
    p = DecisionConfig(slo={"ttft_p99_ms": 500.0}, slo_attainment=0.97, resamples=300)
    spread = rate_window(0, 20.0, 2000, 1970, p=p)
    burst = rate_window(0, 20.0, 2000, 1970, p=p, burst=True)
    assert spread.attainment == burst.attainment
    wide, narrow = burst.attainment_bounds(0.95), spread.attainment_bounds(0.95)
    assert wide.high - wide.low > 3 * (narrow.high - narrow.low)
    assert _gate(decide_at_rate([spread, rate_window(4, 20.0, 2000, 2000, p=p)], 20.0, p, ARGV), 0,
                 "SLO attainment").status == "pass"
    gate = _gate(decide_at_rate([burst, rate_window(4, 20.0, 2000, 2000, p=p)], 20.0, p, ARGV), 0, "SLO attainment")
    assert gate.status == "unknown" and "correlated" in gate.evidence


def test_the_goodput_resamples_draw_runs_of_arrivals_so_a_burst_of_misses_widens_the_objectives_interval():
    p = DecisionConfig(slo={"ttft_p99_ms": 500.0}, slo_attainment=0.9, resamples=400)

    def width(burst):
        decision = decide_at_rate([rate_window(0, 20.0, 2000, 1900, p=p, burst=burst),
                                   rate_window(4, 20.0, 2000, 2000, p=p)], 20.0, p, ARGV)
        r = decision.candidates[0].objective_range
        return r.high - r.low

    assert width(True) > 3 * width(False)


def test_without_an_slo_a_k_that_keeps_up_where_the_baseline_served_nothing_is_not_held_by_an_unknown_latency():
    # load.max_in_flight full: none of K=0's arrivals was sent (it fell behind); K=4 served them all
    p = DecisionConfig(resamples=200)
    windows = [rate_window(0, 20.0, 200, 0, ok=0, p=p, behind=True), rate_window(4, 20.0, 200, 200, p=p)]
    decision = decide_at_rate(windows, 20.0, p, ARGV)
    latency = _gate(decision, 4, "e2e latency")
    assert latency.status == "pass" and "K=0 falls behind" in latency.evidence
    assert decision.status == "decided" and decision.recommended.k == 4


def test_failures_in_one_burst_are_not_proof_of_a_higher_failure_rate_than_the_baselines():
    # K=4: 60 of 2000 arrivals failed, all in one burst (a queue timing out together); K=0 none
    p = DecisionConfig(slo={"ttft_p99_ms": 500.0}, slo_attainment=0.9, failure_rate_slack=0.01, resamples=200)

    def failures(burst):
        windows = [rate_window(0, 20.0, 2000, 2000, p=p), rate_window(4, 20.0, 2000, 1940, ok=1940, p=p, burst=burst)]
        return _gate(decide_at_rate(windows, 20.0, p, ARGV), 4, "failures and timeouts")

    assert failures(False).status == "fail"
    assert failures(True).status == "unknown" and "not proven" in failures(True).evidence
