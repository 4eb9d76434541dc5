"""The method's rules, one test each, on small synthetic summary tables."""
import math

import pandas as pd

from lookahead_runner.decision import Thresholds, decide, per_batch_size_config

TH = Thresholds()


def row(k, users, req, repeat=0, **over):
    base = dict(setting=f"k{k}", k=k, repeat=repeat, stage=0, users=users, req_per_s=req, output_tok_per_s=req * 64,
                running_mean=min(users, 60.0), waiting_mean=0.0, kv_usage_mean=0.5, kv_usage_peak=0.6,
                gpu_mem_peak_mib=70000.0, gpu_mem_total_mib=81920.0, failure_rate=0.0, e2e_p99_ms=2000.0,
                ttft_p99_ms=200.0, acceptance_rate=math.nan if k == 0 else 0.8, preemptions=0.0, valid=True)
    return base | over


def table(spec):
    """spec: {k: {users: req}} -> rows for two repeats with a 1% spread."""
    rows = []
    for k, by_users in spec.items():
        for users, req in by_users.items():
            rows += [row(k, users, req, 0), row(k, users, req * 1.01, 1)]
    return pd.DataFrame(rows)


def test_best_throughput_wins_and_passes_checklist():
    summary = table({0: {32: 10, 64: 12}, 2: {32: 13, 64: 15}, 4: {32: 15, 64: 17}})
    decision = decide(summary, 32, TH, {4: ["vllm", "serve"]})
    assert decision["recommended"]["k"] == 4
    assert decision["recommended"]["argv"] == ["vllm", "serve"]
    assert all(item["passed"] for item in decision["checklist"])
    assert decision["verdict"].startswith("Set K=4")


def test_ties_go_to_the_smaller_k():
    summary = table({0: {32: 10, 64: 12}, 2: {32: 15, 64: 16}, 4: {32: 15.2, 64: 16}})
    assert decide(summary, 32, TH, {})["recommended"]["k"] == 2


def test_stop_rule_memory_up_throughput_flat_keeps_previous_k():
    summary = table({0: {32: 10, 64: 12}, 2: {32: 13, 64: 15}, 4: {32: 13.1, 64: 15}, 8: {32: 16, 64: 17}})
    summary.loc[summary["k"] == 4, "kv_usage_mean"] = 0.7  # +20 points of KV, req/s +0.8%
    decision = decide(summary, 32, TH, {})
    assert decision["stopped_at_k"] == 4
    assert decision["recommended"]["k"] == 2  # K=8 is never reached, even though it looks faster
    assert any("Stop rule at K=4" in r for r in decision["reasons"])


def test_real_batch_drop_says_lower_max_num_seqs():
    summary = table({0: {32: 10, 64: 12}, 4: {32: 11, 64: 12}})
    summary.loc[summary["k"] == 4, "running_mean"] = 20.0
    diagnoses = decide(summary, 32, TH, {})["diagnoses"]
    assert any("lower --max-num-seqs first" in d and "20.0 running vs 32.0" in d for d in diagnoses)


def test_flat_throughput_says_not_the_lever():
    summary = table({0: {32: 10, 64: 12}, 2: {32: 10.1, 64: 12}, 4: {32: 10.05, 64: 12}})
    assert any("not the lever" in d for d in decide(summary, 32, TH, {})["diagnoses"])
    spread = table({0: {32: 10, 64: 12}, 2: {32: 13, 64: 15}, 4: {32: 15, 64: 17}})
    assert not any("not the lever" in d for d in decide(spread, 32, TH, {})["diagnoses"])


def test_low_acceptance_is_acceptance_bound():
    summary = table({0: {32: 10, 64: 12}, 2: {32: 9, 64: 11}})
    summary.loc[summary["k"] == 2, "acceptance_rate"] = 0.1
    assert any("Acceptance-bound" in d for d in decide(summary, 32, TH, {})["diagnoses"])


def test_concurrency_bound_names_the_kv_cache():
    summary = table({0: {64: 10, 96: 10}, 2: {64: 11, 96: 11}})
    summary.loc[summary["users"] == 64, "running_mean"] = 30.0
    summary.loc[summary["k"] == 0, "preemptions"] = 5.0
    notes = decide(summary, 64, TH, {})["diagnoses"]
    assert any("Concurrency-bound" in d and "KV cache" in d for d in notes)


def test_one_repeat_fails_the_stability_check():
    summary = pd.DataFrame([row(0, 32, 10), row(2, 32, 12), row(0, 64, 11), row(2, 64, 13)])
    checklist = {item["name"]: item for item in decide(summary, 32, TH, {})["checklist"]}
    assert not checklist["repeat stability"]["passed"]
    assert "load.repeats >= 2" in checklist["repeat stability"]["evidence"]


def test_scaling_check_fails_when_throughput_falls_above_target():
    summary = table({0: {32: 10, 64: 12}, 2: {32: 14, 64: 9}})
    decision = decide(summary, 32, TH, {})
    assert decision["recommended"]["k"] == 0  # K=2 fails scaling, K=0 passes all four
    k2 = next(c for c in decision["candidates"] if c["k"] == 2)
    assert not next(i for i in k2["checklist"] if i["name"] == "concurrency scaling")["passed"]


def test_memory_check_fails_on_preemptions_or_full_kv():
    summary = table({0: {32: 10, 64: 12}, 2: {32: 14, 64: 16}})
    summary.loc[summary["k"] == 2, "kv_usage_peak"] = 0.99
    k2 = next(c for c in decide(summary, 32, TH, {})["candidates"] if c["k"] == 2)
    assert not next(i for i in k2["checklist"] if i["name"] == "memory headroom")["passed"]


def test_invalid_windows_are_ignored_and_no_data_is_said():
    summary = table({0: {32: 10}, 2: {32: 14}})
    summary["valid"] = False
    decision = decide(summary, 32, TH, {})
    assert decision["recommended"] is None and "No valid measurement" in decision["verdict"]


def test_per_batch_size_ranges_follow_the_measured_batch():
    ranges = per_batch_size_config([{"running_mean": 4, "best_k": 8}, {"running_mean": 60, "best_k": 2},
                                    {"running_mean": 30, "best_k": 4}])
    assert [r[2] for r in ranges] == [8, 4, 2]
    assert ranges[0][0] == 1 and ranges[0][1] == 17 and ranges[1][0] == 18 and ranges[-1][1] >= 1000
