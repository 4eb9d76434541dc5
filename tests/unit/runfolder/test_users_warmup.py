"""A users stage's window starts after every user's first request has ended (runfolder/users_warmup.py)."""
import math

import pandas as pd

from lookahead_runner.runfolder.analysis import WindowRules, stage_rows

START, USERS, ANSWER_S = 1000.0, 32, 20.0
FIRST_TTFT_MS, STEADY_TTFT_MS = 4000.0, 200.0


def closed_loop(stage_s: float, rate: float | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """32 users from an empty server, each sending its next request when the last one ends: the first ones
    (all prefilling at once) take 16-21 s and wait 4 s for their first token, every later one 20 s and 0.2 s."""
    rows = []
    for user in range(USERS):
        sent, first = START + 0.02 * user, True
        while sent < START + stage_s:
            took = 16.0 + 5.0 * user / (USERS - 1) if first else ANSWER_S
            done = sent + took
            cut = done > START + stage_s
            rows.append(dict(stage=0, users=0 if rate else USERS, t_send_s=sent,
                             t_first_token_s=sent + (FIRST_TTFT_MS if first else STEADY_TTFT_MS) / 1000,
                             t_done_s=min(done, START + stage_s), ttft_ms=FIRST_TTFT_MS if first else STEADY_TTFT_MS,
                             e2e_ms=took * 1000, itl_p50_ms=10.0, itl_p99_ms=12.0, tpot_ms=14.0, prompt_tokens=128,
                             output_tokens=64, chunks=64, ok=0 if cut else 1, error="cut" if cut else "",
                             lag_p99_ms=1.0, t_scheduled_s=sent if rate else math.nan))
            sent, first = done, False
    stages = pd.DataFrame({"stage": [0], "users": [0 if rate else USERS], "t_start_s": [START],
                           "t_end_s": [START + stage_s], "rate": [rate if rate else math.nan]})
    return pd.DataFrame(rows), stages


def row_of(stage_s: float, rules: WindowRules = WindowRules(), rate: float | None = None) -> dict:
    requests, stages = closed_loop(stage_s, rate)
    (row,) = stage_rows(requests, stages, pd.DataFrame(), pd.DataFrame(), "k0", 0, 0, rules)
    return row


def test_a_users_window_starts_after_every_users_first_request_has_ended():
    """Stage 60 s, answers 20 s: 25 % of the stage (15 s) ends before the first requests (16-21 s), which the
    window would read (their 4 s TTFT); it starts after the last of them instead."""
    row = row_of(60.0)
    assert row["valid"], row["invalid_reason"]
    assert row["ttft_p99_ms"] == STEADY_TTFT_MS
    last_first_end = 0.02 * (USERS - 1) + 21.0
    assert math.isclose(row["duration_s"], round(60.0 - last_first_end, 3), abs_tol=1e-3)


def test_a_users_stage_shorter_than_two_request_cycles_is_too_short_not_measured():
    row = row_of(30.0)
    assert not row["valid"]
    assert "stage too short for answers of 22 s; lengthen to 44 s" in row["invalid_reason"]


def test_a_stage_that_cut_a_first_request_is_too_short_by_at_least_its_length():
    row = row_of(15.0)
    assert not row["valid"]
    assert "stage too short for answers of over 15 s; lengthen to more than 30 s" in row["invalid_reason"]


def test_an_explicit_warmup_is_kept_as_the_user_set_it():
    row = row_of(60.0, WindowRules(warmup_s=5.0))
    assert row["duration_s"] == 55.0 and row["ttft_p99_ms"] == FIRST_TTFT_MS


def test_a_rate_stage_keeps_its_quarter_of_the_stage():
    row = row_of(60.0, rate=1.0)
    assert row["duration_s"] == 45.0


def two_stages(second_s: float) -> tuple[pd.DataFrame, pd.DataFrame]:
    """16 users for 60 s (spawned over 20 s), then 32 for `second_s`, every answer 20 s (the users of the first
    stage keep running into the second, each sending its next request when the last one ends; the 16 new ones spawn at its start)."""
    rows, first_end = [], START + 60.0
    for user in range(32):
        sent = START + 1.25 * user if user < 16 else first_end + 0.02 * (user - 16)   # the running ones staggered
        while sent < first_end + second_s:
            done = sent + ANSWER_S
            cut = done > first_end + second_s
            rows.append(dict(stage=0 if sent < first_end else 1, users=16 if sent < first_end else 32, t_send_s=sent,
                             t_first_token_s=sent + 0.2, t_done_s=min(done, first_end + second_s),
                             ttft_ms=STEADY_TTFT_MS, e2e_ms=ANSWER_S * 1000, itl_p50_ms=10.0, itl_p99_ms=12.0,
                             tpot_ms=14.0, prompt_tokens=128, output_tokens=64, chunks=64, ok=0 if cut else 1,
                             error="cut" if cut else "", lag_p99_ms=1.0, t_scheduled_s=math.nan))
            sent = done
    stages = pd.DataFrame({"stage": [0, 1], "users": [16, 32], "t_start_s": [START, first_end],
                           "t_end_s": [first_end, first_end + second_s], "rate": [math.nan, math.nan]})
    return pd.DataFrame(rows), stages


def test_a_later_stage_waits_for_its_new_users_first_requests_not_a_second_cycle_of_the_running_ones():
    """Going from 16 to 32 users with 20 s answers, the running users' first sends of the stage come as their
    requests in flight end (up to 20 s in): counting them as first requests made the cycle 40 s and a 50 s stage
    'too short for answers of 40 s'. The new users' first requests end at about 20 s."""
    requests, stages = two_stages(50.0)
    rows = stage_rows(requests, stages, pd.DataFrame(), pd.DataFrame(), "k0", 0, 0, WindowRules())
    assert rows[1]["valid"], rows[1]["invalid_reason"]
    assert 25.0 <= rows[1]["duration_s"] <= 30.0
