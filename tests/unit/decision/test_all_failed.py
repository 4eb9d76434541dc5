"""A stage where every request failed names the most common error (issue 37, item 9): `ramp --url` against a
running vLLM sent a model it does not serve, all 1,456 requests failed with HTTP 404, and the verdict said only "No
valid stage at K=0: no knee to find." From the requests to summary.csv's invalid reason, to the verdict: a verdict
without a measurement says why its stages are invalid; a measured one names a K at the target where every request
failed."""
import pandas as pd
from unit.synthetic import window

from lookahead_runner.config import DecisionConfig
from lookahead_runner.decision import decide, evidence
from lookahead_runner.decision.ramp import ramp_decision
from lookahead_runner.runfolder.analysis import WindowRules, stage_rows

NOT_SERVED = "HTTP 404: The model `sim/llama-3-8b` does not exist. Valid aliases: tiny-target."


def refused_stage(n=30, other=""):
    stages = pd.DataFrame({"stage": [0], "users": [4], "t_start_s": [100.0], "t_end_s": [110.0]})
    requests = pd.DataFrame([dict(stage=0, users=4, t_send_s=102.0 + i * 0.2, t_first_token_s=None,
                                  t_done_s=102.01 + i * 0.2, ttft_ms=None, e2e_ms=10.0, itl_p50_ms=None,
                                  itl_p99_ms=None, tpot_ms=None, prompt_tokens=0, output_tokens=0, chunks=0, ok=0,
                                  error=other if other and i % 10 == 0 else NOT_SERVED, lag_p99_ms=1.0)
                             for i in range(n)])
    return stage_rows(requests, stages, pd.DataFrame(), pd.DataFrame(), "k0", 0, 0, WindowRules(warmup_s=1.0))


def test_a_window_where_every_request_failed_is_invalid_with_its_most_common_error():
    (row,) = refused_stage(other="timeout (over 120 s)")
    assert row["requests"] == 0 and row["failures"] == 30 and not row["valid"]
    assert row["top_error"] == f"{NOT_SERVED} (27 of 30)"
    assert row["invalid_reason"] == f"every request failed, most often {NOT_SERVED} (27 of 30)"


def test_the_ramp_verdict_says_why_no_stage_is_valid():
    invalid = {(0, 4): f"every request failed, most often {NOT_SERVED} (1456 of 1456)",
               (0, 8): "client starved: Locust's loop lag p99 627 ms > 50 ms"}
    decision = ramp_decision(evidence([], 4, invalid), 0, "k0", [], DecisionConfig(resamples=50))
    assert decision.status == "no_measurement"
    assert decision.verdict == ("No valid stage at K=0: no knee to find. At K=0, 4 users (and 1 more stage): every "
                                f"request failed, most often {NOT_SERVED} (1456 of 1456).")
    lagging = ramp_decision(evidence([], 8, {(0, 8): invalid[(0, 8)]}), 0, "k0", [], DecisionConfig(resamples=50))
    assert lagging.verdict == ("No valid stage at K=0: no knee to find. At K=0, 8 users: client starved: Locust's "
                               "loop lag p99 627 ms > 50 ms.")


def test_the_sweep_verdict_names_it_at_the_target_stage_measured_or_not():
    p = DecisionConfig(resamples=50)
    invalid = {(0, 16): f"every request failed, most often {NOT_SERVED} (640 of 640)"}
    nothing = decide(evidence([], 16, invalid), p, {})
    assert nothing.verdict == ("No valid measurement at 16 users: nothing can be recommended. At K=0, 16 users: every "
                               f"request failed, most often {NOT_SERVED} (640 of 640).")
    invalid = {(4, 16): "every request failed, most often HTTP 500: simulated internal server error (--sim-fault "
                        "http-500) (77 of 77)", (8, 16): "only 3 requests completed (< 10)"}
    windows = [window(0, 16, 20.0, r) for r in range(2)]
    some = decide(evidence(windows, 16, invalid), p, {0: []})
    assert some.verdict.endswith(" At K=4, 16 users: every request failed, most often HTTP 500: simulated internal "
                                 "server error (--sim-fault http-500) (77 of 77).")   # a measured verdict: K=8 not
    assert evidence(windows, 16, {(0, 16): "x"}).invalid == {}  # a (K, users) with a valid window is measured


def stage_with_errors(errors):
    stages = pd.DataFrame({"stage": [0], "users": [4], "t_start_s": [100.0], "t_end_s": [110.0]})
    requests = pd.DataFrame([dict(stage=0, users=4, t_send_s=102.0 + i * 0.2, t_first_token_s=None,
                                  t_done_s=102.01 + i * 0.2, ttft_ms=None, e2e_ms=10.0, itl_p50_ms=None,
                                  itl_p99_ms=None, tpot_ms=None, prompt_tokens=5, output_tokens=0, chunks=0, ok=0,
                                  error=error, lag_p99_ms=1.0) for i, error in enumerate(errors)])
    (row,) = stage_rows(requests, stages, pd.DataFrame(), pd.DataFrame(), "k0", 0, 0, WindowRules(warmup_s=1.0))
    return row


def test_the_most_common_error_is_counted_by_its_kind_not_by_each_requests_own_detail():
    # requests.csv's error is "reason (detail)" (workload/request.StreamFailure): a short output carries its own
    # token counts, a timeout its clock, so 27 short outputs are 27 different texts; 3 identical HTTP 500s are not
    # the most common error
    short = [f"short output (completion_tokens != 64) (5 prompt, {n} output tokens, {n + 1} chunks)" for n in range(27)]
    row = stage_with_errors(short + ["HTTP 500: boom"] * 3)
    assert row["top_error"] == "short output (completion_tokens != 64) (27 of 30)"
    assert row["invalid_reason"].startswith("every request failed, most often short output (completion_tokens != 64) "
                                            "(27 of 30); ")
    timeouts = ["timeout (over 120 s)"] * 4 + ["timeout (TimeoutError)"] * 4 + ["disconnect mid-stream (X)"] * 5
    assert stage_with_errors(timeouts)["top_error"] == "timeout (8 of 13)"
    # an HTTP error is the server's own words: its status groups them, the most common message is shown
    context = [f"HTTP 400: This model's maximum context length is 2048 tokens; you asked {2049 + n}" for n in range(6)]
    row = stage_with_errors(context + ["HTTP 500: boom"] * 4)
    assert row["top_error"].startswith("HTTP 400: This model's maximum context length is 2048 tokens; you asked ")
    assert row["top_error"].endswith(" (6 of 10)")
