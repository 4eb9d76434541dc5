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


def test_more_timeouts_than_baseline_fail_the_failures_check():
    summary = table({0: {32: 10, 64: 12}, 2: {32: 14, 64: 16}}).assign(timeout_rate=0.0)
    summary.loc[summary["k"] == 2, "timeout_rate"] = 0.05
    k2 = next(c for c in decide(summary, 32, TH, {})["candidates"] if c["k"] == 2)
    item = next(i for i in k2["checklist"] if i["name"] == "failures and latency")
    assert not item["passed"] and "timeouts 5.00% vs 0.00%" in item["evidence"]


def test_longer_ttft_tail_fails_the_failures_check():
    summary = table({0: {32: 10, 64: 12}, 2: {32: 14, 64: 16}})
    summary.loc[summary["k"] == 2, "ttft_p99_ms"] = 400.0  # baseline 200 ms
    k2 = next(c for c in decide(summary, 32, TH, {})["candidates"] if c["k"] == 2)
    assert not next(i for i in k2["checklist"] if i["name"] == "failures and latency")["passed"]


def test_scaling_check_looks_at_every_stage_above_the_target():
    summary = table({0: {32: 10, 64: 12, 96: 13}, 2: {32: 14, 64: 16, 96: 11}})
    k2 = next(c for c in decide(summary, 32, TH, {})["candidates"] if c["k"] == 2)
    item = next(i for i in k2["checklist"] if i["name"] == "concurrency scaling")
    assert not item["passed"] and "falls from" in item["evidence"] and "at 96" in item["evidence"]


def test_concurrency_bound_names_the_scheduler_with_its_numbers():
    summary = table({0: {64: 10, 96: 11}, 2: {64: 11, 96: 12}})
    summary.loc[summary["users"] == 64, "running_mean"] = 30.0
    summary.loc[summary["users"] == 64, "waiting_mean"] = 20.0
    notes = decide(summary, 64, TH, {})["diagnoses"]
    bound = [d for d in notes if d.startswith("Concurrency-bound")]
    assert bound and "scheduler" in bound[0] and "30.0 running" in bound[0] and "20.0 waiting" in bound[0]


def test_missing_k0_says_which_k_is_the_baseline():
    summary = table({2: {32: 10, 64: 12}, 4: {32: 12, 64: 14}})
    reasons = decide(summary, 32, TH, {})["reasons"]
    assert any("No valid K=0 window" in r and "K=2 stands in" in r for r in reasons)


def test_per_stage_best_carries_a_command_and_older_vllm_gets_no_batch_size_form():
    summary = table({0: {4: 2, 32: 10, 64: 12}, 4: {4: 4, 32: 13, 64: 11}})
    argv = {0: ["vllm", "serve", "m"], 4: ["vllm", "serve", "m", "--speculative-config", '{"num_speculative_tokens":4}']}
    decision = decide(summary, 32, TH, argv, version=(0, 32, 0))
    assert [(p["users"], p["best_k"]) for p in decision["per_stage"]] == [(4, 4), (32, 4), (64, 0)]
    assert decision["per_stage"][2]["argv"] == argv[0] and decision["per_stage"][0]["argv"] == argv[4]
    assert "per_batch_size" not in decision
    assert decision["recommended"]["k"] == 0  # K=4 falls above the target
    assert any("4 users -> K=4" in r for r in decision["reasons"])


def test_per_batch_size_form_on_033_extends_the_speculative_config():
    summary = table({0: {4: 2, 32: 10, 64: 12}, 2: {4: 3, 32: 13, 64: 12.2}, 4: {4: 4, 32: 12, 64: 11}})
    summary.loc[summary["users"] == 4, "running_mean"] = 4.0
    summary.loc[summary["users"] == 32, "running_mean"] = 30.0
    spec = '{"method":"ngram","num_speculative_tokens":%d,"prompt_lookup_max":4}'
    argv = {0: ["vllm", "serve", "m"], 2: ["vllm", "serve", "m", "--speculative-config", spec % 2],
            4: ["vllm", "serve", "m", "--speculative-config", spec % 4]}
    form = decide(summary, 32, TH, argv, version=(0, 33, 0))["per_batch_size"]
    assert form["num_speculative_tokens_per_batch_size"] == [[1, 17, 4], [18, 45, 2], [46, 1_000_000, 0]]
    config = __import__("json").loads(form["argv"][-1])
    assert config["num_speculative_tokens"] == 4 and config["prompt_lookup_max"] == 4
    assert config["num_speculative_tokens_per_batch_size"] == form["num_speculative_tokens_per_batch_size"]


def test_per_batch_size_ranges_merge_neighbours_with_the_same_k():
    ranges = per_batch_size_config([{"running_mean": 4, "best_k": 4}, {"running_mean": 30, "best_k": 4},
                                    {"running_mean": 60, "best_k": 0}])
    assert ranges == [[1, 45, 4], [46, 1_000_000, 0]]


def test_same_server_repeats_say_so_in_their_stability_evidence():
    from lookahead_runner.finalize import SAME_SERVER_NOTE, note_repeat_mode

    def decision():
        shared = {"name": "repeat stability", "passed": True, "evidence": "req/s over 3 repeats 9.8-10.1"}
        single = {"name": "repeat stability", "passed": False, "evidence": "only one repeat: set load.repeats >= 2"}
        return {"checklist": [shared], "candidates": [{"checklist": [shared]}, {"checklist": [single]}]}

    noted = note_repeat_mode(decision(), "same-server")
    assert noted["checklist"][0]["evidence"] == "req/s over 3 repeats 9.8-10.1" + SAME_SERVER_NOTE  # once, though shared
    assert noted["candidates"][1]["checklist"][0]["evidence"].startswith("only one repeat") and \
        SAME_SERVER_NOTE not in noted["candidates"][1]["checklist"][0]["evidence"]
    assert note_repeat_mode(decision(), "restart") == decision()
