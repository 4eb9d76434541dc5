"""What was not measured never passes, and the last soft spots of the decision (issue 21), on synthetic windows.

Each story is one of the issue's cases: a gate with no data, a waiver, a leader under an SLO, per-K noise,
one failure in 200 requests, the share near its threshold, repeats renamed, the cumulative stop rule.
"""
import dataclasses
import math

import numpy as np
import pytest
from unit.synthetic import table, window

from lookahead_runner.config import DecisionConfig
from lookahead_runner.decision import decide, evidence
from lookahead_runner.decision.engine import evaluate_stages

P = DecisionConfig(resamples=400)
NO_KV = dict(kv_usage_mean=math.nan, kv_usage_peak=math.nan)


def candidate(decision, k):
    return next(c for c in decision.candidates if c.k == k)


def gate(checks, name):
    return next(c for c in checks if c.name == name)


def clear_gain(**server):
    """K=4 doubles req/s over K=0, two repeats each: decided K=4 when every gate has its data."""
    return [window(k, 64, req * (1 + 0.01 * r), r, **server) for k, req in ((0, 25), (4, 50)) for r in range(2)]


def test_the_clear_gain_is_decided_when_every_reading_is_there():
    decision = decide(evidence(clear_gain(), 64), P, {})
    assert decision.status == "decided" and decision.recommended.k == 4
    assert decision.resamples == 400 and decision.confidence_range.low >= 0.9  # far from the threshold: no more


def test_kv_usage_absent_with_device_memory_present_is_not_measured_and_not_decided():
    decision = decide(evidence(clear_gain(**NO_KV), 64), P, {})
    memory = gate(decision.checklist, "memory headroom")
    assert memory.status == "unknown" and memory.unknown_because == "not measured"
    assert "vllm:kv_cache_usage_perc" in memory.evidence and "device memory alone is not KV headroom" in memory.evidence
    assert 'decision.waive = ["memory"]' in memory.evidence
    assert decision.status == "not_decided" and decision.recommended is None and decision.leading_k == 4
    assert "memory headroom is unknown (not measured)" in decision.verdict


def test_no_memory_reading_at_all_is_not_decided():
    blank = dict(NO_KV, preemptions=math.nan, gpu_mem_peak_mib=math.nan, gpu_mem_total_mib=math.nan)
    decision = decide(evidence(clear_gain(**blank, running_mean=math.nan), 64), P, {})
    assert decision.status == "not_decided"
    assert any(r.startswith("Stop rule not evaluated between K=0 and K=4") for r in decision.reasons)
    said = [decision.verdict, *decision.reasons, *decision.diagnoses, *decision.next_runs,
            *(c.evidence for c in decision.checklist), *(g.evidence for c in decision.candidates for g in c.gates)]
    assert not [text for text in said if "nan" in text.lower().replace("nanosec", "")]
    assert "vllm:num_requests_running" in gate(candidate(decision, 0).gates, "real batch").evidence


def test_preemptions_fail_the_memory_gate_without_kv_usage():
    ws = [window(0, 64, 25, r, **NO_KV) for r in range(2)] + [window(4, 64, 50, r, preemptions=12.0, **NO_KV)
                                                              for r in range(2)]
    decision = decide(evidence(ws, 64), P, {})
    assert gate(candidate(decision, 4).gates, "memory headroom").status == "fail"


def test_a_waived_memory_gate_decides_and_is_shown_waived_never_passed():
    p = DecisionConfig(resamples=400, waive=["memory"])
    decision = decide(evidence(clear_gain(**NO_KV), 64), p, {})
    assert decision.status == "decided" and decision.recommended.k == 4
    memory = gate(decision.checklist, "memory headroom")
    assert memory.status == "waived" and "waived by decision.waive" in memory.evidence
    assert "Decided without memory headroom (waived by decision.waive; vllm:kv_cache_usage_perc" in decision.verdict
    assert gate(candidate(decision, 4).gates, "memory headroom").status == "waived"


def test_a_waiver_does_not_hide_a_measured_failure():
    p = DecisionConfig(resamples=400, waive=["memory"])
    ws = [window(0, 64, 25, r) for r in range(2)] + [window(4, 64, 50, r, kv_usage_peak=0.99) for r in range(2)]
    decision = decide(evidence(ws, 64), p, {})
    assert gate(candidate(decision, 4).gates, "memory headroom").status == "fail"
    assert decision.recommended.k == 0


def test_the_baselines_real_batch_is_not_passed_before_its_data_is_looked_at():
    ws = [window(0, 64, 25, r, running_mean=math.nan) for r in range(2)] + [window(4, 64, 50, r) for r in range(2)]
    decision = decide(evidence(ws, 64), P, {})
    base = gate(candidate(decision, 0).gates, "real batch")
    assert base.status == "unknown" and "vllm:num_requests_running" in base.evidence
    assert gate(candidate(decision, 4).gates, "real batch").status == "unknown"
    assert decision.status == "not_decided"


def test_latency_readings_missing_for_a_k_is_not_decided():
    ws = clear_gain()
    ws = [dataclasses.replace(w, latency_ms=np.column_stack([w.latency_ms[:, :3], np.full(w.completed, np.nan)]))
          if w.k == 4 else w for w in ws]
    decision = decide(evidence(ws, 64), P, {})
    latency = gate(candidate(decision, 4).gates, "e2e latency")
    assert latency.status == "unknown" and latency.unknown_because == "not measured"
    assert decision.status == "not_decided"


def _slo_windows(breaking: int, n: int, k: int, req: float, repeat: int):
    """A window of n requests whose TTFT is 100 ms except `breaking` of them at 600 ms."""
    w = window(k, 32, req, repeat, duration_s=n / req)
    ttft = np.full(w.completed, 100.0)
    ttft[:breaking] = 600.0
    return dataclasses.replace(w, latency_ms=np.column_stack([ttft, w.latency_ms[:, 1:]]))


def test_a_k_whose_measured_percentile_breaks_the_slo_does_not_lead():
    """323 requests, 6 beyond a p99 SLO (98.1 % within): unknown by its interval, but failed as measured."""
    p = DecisionConfig(resamples=400, slo={"ttft_p99_ms": 500})
    ws = [_slo_windows(0, 160, 0, 10.0, r) for r in range(2)] + [_slo_windows(3, 162, 4, 11.0, r) for r in range(2)]
    decision = decide(evidence(ws, 32), p, {})
    slo = gate(candidate(decision, 4).gates, "SLO ttft_p99_ms")
    assert slo.status == "unknown" and "no window here can prove it; stages of about" in slo.evidence
    assert decision.leading_k == 0 and decision.status == "not_decided"


def test_each_k_keeps_its_own_throughput_noise_when_it_differs_from_the_rest():
    """K=2's repeats 25 and 29 must not widen the interval of a stable +12 % at K=4."""
    spec = {0: (20.0, 20.1), 2: (25.0, 29.0), 4: (22.4, 22.5)}
    ws = [window(k, 32, v, r, duration_s=60) for k, values in spec.items() for r, v in enumerate(values)]
    ws += [window(k, 32, v, r + 2, duration_s=60) for k, values in spec.items() for r, v in enumerate(values)]
    stage = evaluate_stages(evidence(ws, 32), P)[32]
    assert stage.noise_by_k[2].scope.startswith("K=2's own") and stage.noise_by_k[4].scope == "pooled over K=0, 4"
    assert stage.noise_by_k[2].rel_sd > 5 * stage.noise_by_k[4].rel_sd
    gain = candidate(decide(evidence(ws, 32), P, {}), 4).gain_range
    assert gain.low > 0.06 and gain.high < 0.18, gain


def test_one_failure_in_200_requests_is_judged_by_the_same_rule_in_every_resample():
    ws = [window(0, 32, 10, r) for r in range(2)]
    ws += [window(4, 32, 15, r, duration_s=200 / 15, failures=1) for r in range(2)]
    decision = decide(evidence(ws, 32), P, {})
    assert gate(candidate(decision, 4).gates, "failures and timeouts").status == "pass"
    assert decision.status == "decided" and decision.recommended.k == 4 and decision.confidence >= 0.9


def test_a_share_near_the_threshold_draws_more_resamples_until_its_error_clears_it():
    ws = [window(0, 32, 10.0, r, duration_s=6, jitter=0.45) for r in range(2)]
    ws += [window(2, 32, v, r, duration_s=6, jitter=0.45) for r, v in enumerate((10.6, 11.3))]
    first = decide(evidence(ws, 32), P, {})
    threshold = round(first.confidence, 2)
    p = DecisionConfig(resamples=400, confidence=max(threshold, 0.5))
    near = decide(evidence(ws, 32), p, {})
    assert near.resamples > 400
    bounds = near.confidence_range
    if near.status == "decided":
        assert bounds.low >= p.confidence
    else:
        assert bounds.high < p.confidence or "Monte Carlo error" in near.verdict


@pytest.mark.parametrize("relabel", [{0: 2, 1: 0, 2: 1}, {0: 7, 1: 3, 2: 5}])
def test_renamed_or_reordered_repeats_give_the_same_verdict_and_confidence(relabel):
    ws = [window(k, 32, req * (1 + 0.03 * r * (-1) ** k), r, duration_s=8, jitter=0.45)
          for k, req in ((0, 10.0), (2, 10.7), (4, 10.9)) for r in range(3)]
    renamed = [dataclasses.replace(w, repeat=relabel[w.repeat]) for w in ws]
    one, two = decide(evidence(ws, 32), P, {}), decide(evidence(renamed, 32), P, {})
    assert (one.verdict, one.confidence, one.status) == (two.verdict, two.confidence, two.status)


def test_a_walk_whose_memory_doubles_for_a_few_per_cent_a_step_stops():
    """K=2 -> 4 -> 8: KV usage 30 -> 45 -> 60 % while req/s creeps up 4 % a step: each step clears the 2 % the
    step rule asks; weighed against the memory the walk took (30 points: 12 % needed), K=8 is left out."""
    ev = table({2: {32: 20.0}, 4: {32: 20.8}, 8: {32: 21.63}}, 32)
    for k, kv in ((2, 0.30), (4, 0.45), (8, 0.60)):
        for w in ev.cells[(k, 32)].windows:
            w.server.update(kv_usage_mean=kv, kv_usage_peak=kv + 0.05)
    decision = decide(ev, P, {})
    assert decision.stopped_at_k == 8 and decision.leading_k == 4
    assert candidate(decision, 8).beyond_stop and any(r.startswith("Stop rule at K=8") for r in decision.reasons)


def test_a_memory_rise_that_pays_for_itself_does_not_stop():
    ev = table({0: {32: 10.0}, 4: {32: 18.0}}, 32)
    for w in ev.cells[(4, 32)].windows:
        w.server.update(kv_usage_mean=0.7, kv_usage_peak=0.75)
    decision = decide(ev, P, {})
    assert decision.stopped_at_k is None and decision.recommended.k == 4


def test_waive_accepts_only_gate_names():
    with pytest.raises(ValueError, match="waive"):
        DecisionConfig(waive=["memroy"])


def test_auto_repeats_do_not_chase_a_metric_that_is_not_there():
    from lookahead_runner.decision.engine import repeats_wanted

    assert repeats_wanted(evidence(clear_gain(**NO_KV), 64), P) == []
    close = [window(0, 32, 10.0, r, duration_s=6, jitter=0.45, **NO_KV) for r in range(2)]
    close += [window(2, 32, v, r, duration_s=6, jitter=0.45, **NO_KV) for r, v in enumerate((10.2, 10.9))]
    assert repeats_wanted(evidence(close, 32), P) == [0, 2]  # not confident either: repeats help that


def test_extra_resamples_of_one_stage_leave_every_stage_index_aligned_for_the_knee():
    ws = [window(0, 32, 10.0, r, duration_s=6, jitter=0.45) for r in range(2)]
    ws += [window(2, 32, v, r, duration_s=6, jitter=0.45) for r, v in enumerate((10.6, 11.3))]
    ws += [window(k, 8, req, r) for k, req in ((0, 4.0), (2, 7.0)) for r in range(2)]
    first = evaluate_stages(evidence(ws, 32), P)[32]
    p = DecisionConfig(resamples=400, confidence=max(round(first.shares[first.pick], 2), 0.5))  # right at it
    stages = evaluate_stages(evidence(ws, 32), p)
    assert stages[32].resamples > 400 and stages[8].resamples == 400
    assert {len(d) for st in stages.values() for d in st.draws.values()} == {400}
    decision = decide(evidence(ws, 32), p, {})
    assert decision.knee is not None and decision.resamples == stages[32].resamples


def test_when_every_k_breaks_an_unproven_slo_as_measured_the_verdict_is_not_decided_not_no_k():
    p = DecisionConfig(resamples=400, slo={"ttft_p99_ms": 500})
    ws = [_slo_windows(2, 160, 0, 10.0, r) for r in range(2)] + [_slo_windows(3, 162, 4, 11.0, r) for r in range(2)]
    decision = decide(evidence(ws, 32), p, {})
    assert [gate(c.gates, "SLO ttft_p99_ms").status for c in decision.candidates] == ["unknown", "unknown"]
    assert decision.status == "not_decided" and decision.leading_k is not None
    assert all(g.status != "fail" for c in decision.candidates for g in c.gates)


def test_the_report_shows_waived_and_why_a_column_is_empty_never_a_pass():
    from lookahead_runner.report.verdict import check_rows, evidence_rows, verdict_tone

    p = DecisionConfig(resamples=400, waive=["memory"])
    ws = [dataclasses.replace(w, server={**w.server, "acceptance_rate": math.nan}) for w in clear_gain(**NO_KV)]
    decision = decide(evidence(ws, 64), p, {})
    memory = next(row for row in check_rows(decision.checklist) if row["name"] == "memory headroom")
    assert memory["status"] == "waived" and "waived" in memory["status_text"] and "pass" not in memory["status_text"]
    assert verdict_tone(decision) == "warn"  # decided, but not every check passed
    k4 = next(row for row in evidence_rows(decision) if row["k"] == "4")
    assert "vllm:spec_decode_num_accepted_tokens" in k4["acceptance"] and "vllm:kv_cache_usage_perc" in k4["kv_peak"]
