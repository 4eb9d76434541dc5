import math

import pandas as pd

from lookahead_runner.runfolder.analysis import WindowRules, counter_delta, stage_rows


def life(k_spec=True):
    stages = pd.DataFrame({"stage": [0, 1], "users": [2, 4], "t_start_s": [100.0, 110.0], "t_end_s": [110.0, 120.0]})
    reqs = []
    for i in range(40):
        t_done = 100.5 + i * 0.5
        stage = 0 if t_done < 110 else 1
        reqs.append(dict(stage=stage, users=[2, 4][stage], t_send_s=t_done - 1, t_first_token_s=t_done - 0.9,
                         t_done_s=t_done, ttft_ms=100.0 + i, e2e_ms=1000.0, itl_p50_ms=10.0, itl_p99_ms=12.0,
                         tpot_ms=14.0, prompt_tokens=128, output_tokens=64, chunks=20, ok=1, error="", lag_p99_ms=1.0))
    reqs[-1].update(ok=0, error="cut")
    reqs[5].update(ok=0, error="HTTP 500")
    server = pd.DataFrame({
        "t_s": [99.0, 102.5, 105.0, 110.0, 115.0, 120.5],
        "running": [0, 2, 2, 2, 4, 4], "waiting": [0] * 6, "kv_usage": [0, .2, .2, .3, .5, .6],
        "preemptions_total": [0, 0, 0, 1, 1, 3],
        "spec_accepted_total": [0, 10, 30, 50, 80, 120] if k_spec else [math.nan] * 6,
        "spec_draft_tokens_total": [0, 20, 60, 100, 160, 240] if k_spec else [math.nan] * 6,
        "spec_drafts_total": [0, 5, 15, 25, 40, 60] if k_spec else [math.nan] * 6,
    })
    gpu = pd.DataFrame({"t_s": [101.0, 105.0, 115.0], "used_mib": [900.0, 950.0, 990.0], "total_mib": [1000.0] * 3})
    return reqs, stages, server, gpu


def test_stage_windows_count_completed_requests_after_warmup():
    reqs, stages, server, gpu = life()
    rules = WindowRules(warmup_s=2.5, min_requests=5, expected_output_tokens=64)
    rows = stage_rows(pd.DataFrame(reqs), stages, server, gpu, "k4", 4, 0, rules)
    first, second = rows
    # stage 0 window [102.5, 110]: completions at 102.5 ... 110.0 = 16, one failed (index 5 at 103.0)
    assert first["requests"] == 15 and first["duration_s"] == 7.5
    assert math.isclose(first["failure_rate"], 1 / 16)
    # throughput by the share of each request inside the window: requests live 1 s (decode 0.9 s), so those
    # done at 103.5 ... 110.0 are wholly inside (14), the one done at 110.5 half (its decode 0.4 / 0.9)
    assert math.isclose(first["req_per_s"], 14.5 / 7.5)
    assert math.isclose(first["output_tok_per_s"], 64 * (14 + 0.4 / 0.9) / 7.5)
    # acceptance from counter deltas over the window: (50 - 10) / (100 - 20)
    assert math.isclose(first["acceptance_rate"], 0.5)
    assert math.isclose(first["mean_acceptance_length"], 1 + 40 / 20)
    assert first["preemptions"] == 1 and first["gpu_mem_peak_mib"] == 950.0
    # the cut request is neither a completion nor a failure
    assert second["failure_rate"] == 0.0 and second["valid"]


def test_no_speculation_leaves_acceptance_empty():
    reqs, stages, server, gpu = life(k_spec=False)
    rows = stage_rows(pd.DataFrame(reqs), stages, server, gpu, "k0", 0, 0, WindowRules(min_requests=1))
    assert all(math.isnan(r["acceptance_rate"]) for r in rows)


def test_validity_gates():
    reqs, stages, server, gpu = life()
    for r in reqs[:20]:
        r["output_tokens"] = 60
    reqs[30]["lag_p99_ms"] = 500.0
    rows = stage_rows(pd.DataFrame(reqs), stages, server, gpu, "k4", 4, 0,
                      WindowRules(min_requests=50, expected_output_tokens=64))
    assert not rows[0]["valid"]
    assert "wrong token count" in rows[0]["invalid_reason"] and "only" in rows[0]["invalid_reason"]
    assert "client lag: Locust's loop lag p99" in rows[1]["invalid_reason"]  # no CPU column: cause unknown


def test_lagging_client_is_named_saturated_or_starved_with_this_runs_fix():
    """High lag + a busy Locust process = saturated (more processes); high lag + an idle one = starved by
    other processes (placement): each reason carries the run's own fix."""
    from lookahead_runner.run.life.placement import Placement
    from lookahead_runner.runfolder.lag_advice import advice_for

    reqs, stages, server, gpu = life()
    for r in reqs:
        r.update(lag_p99_ms=400.0, client="h:1", client_cpu_pct=3.0 if r["stage"] == 0 else 97.0)
    off = advice_for(Placement("off", processes=1, host_cpus=(0, 1)).to_record())
    rules = WindowRules(min_requests=1, lag_advice=off)
    starved, saturated = (row["invalid_reason"] for row in
                          stage_rows(pd.DataFrame(reqs), stages, server, gpu, "k4", 4, 0, rules))
    assert starved.startswith("client starved: Locust's loop lag p99 400 ms > 50 ms while it used only 3% of a core")
    assert 'load.placement = "auto" (here: server.cpus = "0", load.cpus = "1")' in starved
    assert saturated.startswith("client saturated: Locust's loop lag p99 400 ms > 50 ms with its busiest process at 97%")
    pinned = advice_for(Placement("auto", (0, 1, 2), (3,), processes=1, host_cpus=(0, 1, 2, 3)).to_record())
    (_, saturated), = [(r["valid"], r["invalid_reason"]) for r in stage_rows(
        pd.DataFrame(reqs), stages.iloc[1:], server, gpu, "k4", 4, 0, WindowRules(min_requests=1, lag_advice=pinned))]
    assert 'load.cpus = "3" holds 1 process' in saturated


def test_counter_delta_uses_last_sample_before_each_edge():
    server = pd.DataFrame({"t_s": [0.0, 1.0, 2.0], "c": [0.0, 5.0, 9.0]})
    assert counter_delta(server, "c", 0.5, 2.5) == 9.0
    assert counter_delta(server, "c", 1.0, 1.9) == 0.0


def test_timeouts_and_length_failures_are_counted_from_the_error_text():
    reqs, stages, server, gpu = life()
    reqs[30].update(ok=0, error="timeout (over 120 s)")
    reqs[31].update(ok=0, error="timeout (TimeoutError)")
    reqs[32].update(ok=0, error="short output (completion_tokens != 64) (12 tokens, 4 chunks)", output_tokens=12)
    reqs[33].update(ok=0, error="HTTP 500: boom")
    rows = stage_rows(pd.DataFrame(reqs), stages, server, gpu, "k4", 4, 0,
                      WindowRules(warmup_s=2.5, min_requests=1, expected_output_tokens=64))
    second = rows[1]  # window [112.5, 120]: completions at 112.5 ... 119.5 (index 24 ... 38, 39 is cut)
    assert second["failures"] == 4 and second["timeouts"] == 2
    assert math.isclose(second["timeout_rate"], 2 / 15) and math.isclose(second["failure_rate"], 4 / 15)
    assert second["length_mismatches"] == 1 and "1 responses with the wrong token count" in second["invalid_reason"]
    assert rows[0]["timeouts"] == 0 and rows[0]["timeout_rate"] == 0.0


def test_latency_percentiles_and_peaks():
    reqs, stages, server, gpu = life()
    rows = stage_rows(pd.DataFrame(reqs), stages, server, gpu, "k4", 4, 0, WindowRules(warmup_s=2.5, min_requests=1))
    first = rows[0]
    assert first["ttft_p50_ms"] <= first["ttft_p90_ms"] <= first["ttft_p99_ms"]
    assert first["e2e_p90_ms"] == 1000.0 and first["itl_p99_ms"] == 12.0
    assert rows[1]["waiting_peak"] == 0 and rows[1]["running_peak"] == 4 and rows[1]["kv_usage_peak"] == 0.5


def test_error_prefixes_match_what_the_scenario_writes():
    """A failure reason written other than the schema names would silently zero the timeout and length columns."""
    from lookahead_runner.contracts.records import LENGTH_ERRORS as LENGTH_ERROR_PREFIXES
    from lookahead_runner.contracts.records import TIMEOUT_ERROR as TIMEOUT_ERROR_PREFIX
    from lookahead_runner.workload.request import transport_failure
    from lookahead_runner.workload.sse import Chunk, Usage
    from lookahead_runner.workload.timeline import TokenTimeline, judge

    assert str(transport_failure(TimeoutError("timed out"), mid_stream=True)).startswith(TIMEOUT_ERROR_PREFIX)
    timeline = TokenTimeline()
    timeline.add(Chunk(text="a", has_choices=True, usage=Usage(16, 1)), 0.01)
    timeline.add(Chunk(done=True), 0.02)
    result = timeline.result(0.02)
    assert judge(result, 2).startswith(LENGTH_ERROR_PREFIXES[0])
    assert judge(result, 1, expected_prompt_tokens=8).startswith(LENGTH_ERROR_PREFIXES[1])


def test_acceptance_survives_a_window_with_no_sample_inside():
    """A busy server answered /metrics late: no sample falls inside the window, the covering one counts."""
    from lookahead_runner.runfolder.analysis import covering_delta

    server = pd.DataFrame({"t_s": [0.0, 1.0, 6.0], "a": [0.0, 2.0, 42.0], "d": [0.0, 4.0, 84.0]})
    assert counter_delta(server, "a", 2.0, 5.0) == 0.0
    assert covering_delta(server, "a", 2.0, 5.0) / covering_delta(server, "d", 2.0, 5.0) == 0.5


def test_the_error_text_of_a_life_where_no_request_failed_is_empty_text_on_every_pandas_allowed():
    """A requests.csv where no request failed reads its error column back as all-NaN floats: "" for each, as
    text, on pandas 2.0 onwards (pyproject's floor; pandas 2.2 has no StringDtype(na_value=...))."""
    from lookahead_runner.runfolder.analysis import error_text

    requests = pd.DataFrame({"error": [float("nan")] * 3, "ok": [1, 1, 1]})
    text = error_text(requests)
    assert text.tolist() == ["", "", ""] and (text != "cut").all()
    assert error_text(pd.DataFrame({"error": [float("nan"), "cut"]})).tolist() == ["", "cut"]
