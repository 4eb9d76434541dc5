"""A rate stage's window from a life's frames: its arrivals followed to their end, SLO attainment with its Wilson
interval, goodput, the queue and the finding of a K that falls behind, and the dispatcher's lateness gate."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from lookahead_runner.config.slo import parse_slos
from lookahead_runner.contracts.records import NOT_SENT_ERROR, REQUEST_COLUMNS
from lookahead_runner.decision.cells.rate_window import behind_findings
from lookahead_runner.decision.cells.stats import wilson
from lookahead_runner.runfolder.analysis import SUMMARY_COLUMNS, WindowRules, stage_windows, summary_frame
from lookahead_runner.runfolder.rate_windows import rate_stage_window

T0 = 1000.0
SLOS = parse_slos((("ttft_p99_ms", 500.0),))


def _requests(rate: float, seconds: float, service_s, ttft_ms, late_ms: float = 1.0, stage: int = 0,
              start: float = T0, **extra) -> pd.DataFrame:
    """Arrivals every 1/rate s; each served in `service_s(i)` seconds from its send, `late_ms` after its time."""
    rows = []
    for i in range(int(rate * seconds)):
        scheduled = start + (i + 0.5) / rate
        send = scheduled + late_ms / 1000.0
        done = send + service_s(i)
        rows.append({"stage": stage, "users": 0, "t_send_s": send, "t_first_token_s": send + ttft_ms(i) / 1000.0,
                     "t_done_s": done, "ttft_ms": ttft_ms(i), "e2e_ms": (done - send) * 1000.0, "tpot_ms": 20.0,
                     "itl_p50_ms": 20.0, "itl_p99_ms": 25.0, "prompt_tokens": 32, "output_tokens": 16,
                     "chunks": 16, "ok": 1, "error": "", "lag_p99_ms": 1.0, "client": "h:1", "client_cpu_pct": 20.0,
                     "t_scheduled_s": scheduled, "held_ms": 0.0, "arrival": i, **extra})
    return pd.DataFrame(rows, columns=[c for c in REQUEST_COLUMNS])


def _stages(rate: float, seconds: float, stage: int = 0) -> pd.DataFrame:
    return pd.DataFrame([{"stage": stage, "users": 0, "t_start_s": T0, "t_end_s": T0 + seconds, "rate": rate}])


def _server(times, waiting) -> pd.DataFrame:
    return pd.DataFrame({"t_s": times, "waiting": waiting, "running": [4.0] * len(times)})


def _window(requests, stages, server=None, rules=WindowRules(warmup_s=2.0, min_requests=5), slos=SLOS):
    server = server if server is not None else pd.DataFrame()
    ((row, _finished, _ok, t0),) = stage_windows(requests, stages, server, pd.DataFrame(), "k0", 0, 0, rules)
    return rate_stage_window(row, t0, stages, requests, server, slos, rules, 0.95)


def test_a_k_that_keeps_up_meets_its_slo_in_the_share_of_arrivals_with_a_wilson_interval():
    # 10 req/s for 10 s, every request 0.2 s; every 10th has a TTFT over the SLO
    requests = _requests(10, 10, lambda i: 0.2, lambda i: 900.0 if i % 10 == 0 else 100.0)
    row, window = _window(requests, _stages(10.0, 10))
    inside = requests[requests["t_scheduled_s"] >= T0 + 2.0]
    good = int((inside["ttft_ms"] <= 500).sum())
    assert window.arrivals == len(inside) == 80 and row["arrivals"] == 80
    assert row["offered_per_s"] == pytest.approx(10.0)
    assert row["slo_attainment"] == pytest.approx(good / 80) == pytest.approx(0.9)
    bounds = wilson(good, 80, 0.95)
    assert (row["slo_attainment_low"], row["slo_attainment_high"]) == (round(bounds.low, 6), round(bounds.high, 6))
    assert row["goodput_per_s"] == pytest.approx(good / 8.0)
    assert row["achieved_per_s"] == pytest.approx(10.0, rel=0.05) == pytest.approx(row["req_per_s"], rel=0.05)
    assert row["keeps_up"] and row["behind"] == "" and row["valid"], row["invalid_reason"]
    assert row["late_p50_ms"] == pytest.approx(1.0) and row["held"] == 0 and row["not_sent"] == 0
    assert set(row) >= set(SUMMARY_COLUMNS) - {"variant"}


def test_a_k_that_falls_behind_is_a_finding_with_its_figures_not_an_invalid_window():
    # 10 req/s offered, one served every 0.125 s (8 req/s): each waits longer than the one before
    requests = _requests(10, 10, lambda i: 0.2, lambda i: 100.0)
    served = T0 + 0.2 + np.arange(len(requests)) * 0.125
    requests["t_done_s"] = served
    requests["t_send_s"] = requests["t_scheduled_s"] + 0.001
    requests["t_first_token_s"] = served - 0.1
    requests["ttft_ms"] = (requests["t_first_token_s"] - requests["t_send_s"]) * 1000.0
    server = _server(np.arange(T0, T0 + 10.5, 0.5), np.linspace(0, 25, 21))
    row, window = _window(requests, _stages(10.0, 10), server)
    assert not window.keeps_up and row["valid"], row["invalid_reason"]
    assert row["waiting_start"] == 5.0 and row["waiting_end"] == 25.0   # the first and last samples inside it
    assert row["outstanding_end"] > row["outstanding_start"] + 8
    assert row["behind"] == f"falls behind at 10 req/s: {row['achieved_per_s']:.1f} served, waiting 5 -> 25"
    assert row["achieved_per_s"] == pytest.approx(8.0, rel=0.05)
    assert behind_findings([window]) == [f"K=0 {row['behind']}."]


def test_without_the_servers_queue_the_finding_names_the_outstanding_requests():
    requests = _requests(10, 10, lambda i: 0.2 + 0.05 * i, lambda i: 100.0)
    _row, window = _window(requests, _stages(10.0, 10))
    assert window.behind.startswith("falls behind at 10 req/s: ") and ", outstanding " in window.behind


def test_a_late_dispatcher_makes_the_window_invalid_as_a_lagging_client_does():
    requests = _requests(10, 10, lambda i: 0.2, lambda i: 100.0, late_ms=80.0)
    row, _window_ = _window(requests, _stages(10.0, 10))
    assert not row["valid"] and row["late_p99_ms"] == pytest.approx(80.0)
    assert row["invalid_reason"].startswith("dispatcher late: requests left p99 80 ms after their scheduled time")


def test_held_and_never_sent_arrivals_count_against_the_window():
    requests = _requests(10, 10, lambda i: 0.2, lambda i: 100.0)
    requests.loc[30:39, "held_ms"] = 300.0
    requests.loc[30:39, "t_send_s"] += 0.3
    # never sent: they waited for a slot until the stage ended (the dispatcher's row, as dispatcher._not_sent writes it)
    requests.loc[40:44, ["ok", "error", "t_send_s", "ttft_ms", "e2e_ms", "held_ms"]] = [
        0, NOT_SENT_ERROR, math.nan, math.nan, math.nan, 5000.0]
    row, window = _window(requests, _stages(10.0, 10))
    assert (row["held"], row["not_sent"]) == (15, 5)
    assert row["slo_attainment"] == pytest.approx(75 / 80) and window.arrivals == 80
    assert row["late_p99_ms"] == pytest.approx(1.0)        # a held request's wait is not the dispatcher's lateness


def test_without_slos_there_is_no_attainment_or_goodput():
    row, _window_ = _window(_requests(10, 10, lambda i: 0.2, lambda i: 100.0), _stages(10.0, 10), slos=())
    assert math.isnan(row["slo_attainment"]) and math.isnan(row["goodput_per_s"])


def test_a_user_stage_has_no_rate_window_and_its_rate_columns_stay_empty():
    requests = _requests(10, 10, lambda i: 0.2, lambda i: 100.0)
    stages = _stages(10.0, 10).assign(users=4, rate=math.nan)
    ((row, _f, _ok, t0),) = stage_windows(requests, stages, pd.DataFrame(), pd.DataFrame(), "k0", 0, 0,
                                          WindowRules(warmup_s=2.0))
    assert rate_stage_window(row, t0, stages, requests, pd.DataFrame(), SLOS, WindowRules(), 0.95) is None
    assert rate_stage_window(row, t0, stages.drop(columns="rate"), requests, pd.DataFrame(), SLOS, WindowRules(),
                             0.95) is None  # a folder from before rate stages
    assert summary_frame([row])["offered_per_s"].isna().all()


def test_a_server_refusing_every_arrival_makes_the_window_invalid_but_a_queue_of_timeouts_does_not():
    refused = _requests(10, 10, lambda i: 0.01, lambda i: math.nan)
    refused[["ok", "error", "ttft_ms"]] = [0, "HTTP 404: model not found", math.nan]
    row, _window_ = _window(refused, _stages(10.0, 10))
    assert not row["valid"] and row["invalid_reason"] == "no arrival succeeded, most often HTTP 404: model not " \
                                                           "found (80 of 80)"
    timed_out = _requests(10, 10, lambda i: 5.0, lambda i: math.nan)
    timed_out[["ok", "error", "ttft_ms"]] = [0, "timeout", math.nan]
    row, window = _window(timed_out, _stages(10.0, 10))
    assert row["valid"] and row["slo_attainment"] == 0.0 and window.arrivals == 80


def _closed_loop(users: int, start: float, seconds: float, ttft_ms: float, stage: int) -> pd.DataFrame:
    """`users` users each sending a 0.5 s request after the last, from `start` for `seconds`."""
    rows = []
    for user in range(users):
        for n in range(int(seconds / 0.5)):
            send = start + n * 0.5 + user * 0.01
            rows.append({"stage": stage, "users": users, "t_send_s": send, "t_first_token_s": send + ttft_ms / 1000,
                         "t_done_s": send + 0.5, "ttft_ms": ttft_ms, "e2e_ms": 500.0, "tpot_ms": 20.0,
                         "itl_p50_ms": 20.0, "itl_p99_ms": 25.0, "prompt_tokens": 32, "output_tokens": 16,
                         "chunks": 16, "ok": 1, "error": "", "lag_p99_ms": 1.0, "client": "h:1"})
    return pd.DataFrame(rows, columns=list(REQUEST_COLUMNS))


def test_a_user_stage_after_a_rate_stage_counts_its_users_requests_not_the_backlog_of_arrivals():
    # 10 req/s offered for 10 s, 4 s each: the arrivals of the rate stage finish well into the users stage
    arrivals = _requests(10, 10, lambda i: 4.0, lambda i: 3000.0)
    users = _closed_loop(2, T0 + 10.0, 10.0, 100.0, stage=1)
    requests = pd.concat([arrivals, users], ignore_index=True)
    stages = pd.DataFrame([{"stage": 0, "users": 0, "t_start_s": T0, "t_end_s": T0 + 10.0, "rate": 10.0},
                           {"stage": 1, "users": 2, "t_start_s": T0 + 10.0, "t_end_s": T0 + 20.0, "rate": math.nan}])
    rules = WindowRules(warmup_s=2.0, min_requests=5)
    rows = {row["stage"]: row for row, *_ in stage_windows(requests, stages, pd.DataFrame(), pd.DataFrame(), "k0",
                                                            0, 0, rules)}
    users_window = users[(users["t_done_s"] >= T0 + 12.0) & (users["t_done_s"] <= T0 + 20.0)]
    assert rows[1]["requests"] == len(users_window)          # the 2 users' requests, none of the arrivals'
    assert rows[1]["ttft_p99_ms"] == pytest.approx(100.0)     # not the arrivals' 3 s
    # and the rate stage's achieved rate is its arrivals' completions alone (none of the users' here)
    assert rows[0]["requests"] == int(((arrivals["t_done_s"] >= T0 + 2.0) & (arrivals["t_done_s"] <= T0 + 10.0)).sum())


def test_a_rate_windows_latency_columns_are_its_arrivals_followed_to_their_end():
    # falling behind: each arrival waits longer than the one before, most finish after the window
    requests = _requests(10, 10, lambda i: 0.2 + 0.1 * i, lambda i: 100.0 + 100.0 * i)
    row, _window_ = _window(requests, _stages(10.0, 10))
    inside = requests[requests["t_scheduled_s"] >= T0 + 2.0]
    assert (inside["t_done_s"] > T0 + 10.0).sum() > len(inside) / 2
    # the survivors that finished inside the window would read low: the arrivals' own percentiles
    assert row["ttft_p99_ms"] == pytest.approx(float(inside["ttft_ms"].quantile(0.99)))
    assert row["e2e_p50_ms"] == pytest.approx(float(inside["e2e_ms"].quantile(0.5)))


def test_a_windows_arrivals_are_in_the_order_they_were_scheduled_whatever_order_requests_csv_holds_them_in():
    # requests.csv is written as requests end: a burst of 10 slow arrivals (a queue) must stay one run
    requests = _requests(10, 10, lambda i: 0.2, lambda i: 900.0 if 40 <= i < 50 else 100.0)
    shuffled = requests.sample(frac=1.0, random_state=3)
    row, window = _window(shuffled, _stages(10.0, 10))
    ordered_row, _ = _window(requests, _stages(10.0, 10))
    missed = np.flatnonzero(~window.good)
    assert len(missed) == 10 and np.all(np.diff(missed) == 1)
    assert row["slo_attainment_low"] == ordered_row["slo_attainment_low"]
    assert row["ttft_p99_ms"] == ordered_row["ttft_p99_ms"]
