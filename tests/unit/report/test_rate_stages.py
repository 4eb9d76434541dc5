"""The report's rate stages: their own table (offered and achieved rate, SLO attainment with its interval, the
queue, the finding of a K that falls behind) and none of their rows in the users charts."""
from __future__ import annotations

import math

import pandas as pd

from lookahead_runner.report.rate_stages import rate_stage_view, user_rows


def _summary() -> pd.DataFrame:
    base = {"setting": "k0", "repeat": 0, "duration_s": 8.0, "valid": True, "invalid_reason": ""}
    return pd.DataFrame([
        base | {"k": 0, "stage": 0, "users": 8, "rate": math.nan, "req_per_s": 5.0},
        base | {"k": 0, "stage": 1, "users": 0, "rate": 12.0, "offered_per_s": 12.25, "achieved_per_s": 9.81,
                "slo_attainment": 0.62, "slo_attainment_low": 0.58, "slo_attainment_high": 0.66,
                "goodput_per_s": 7.6, "late_p50_ms": 0.8, "late_p99_ms": 4.2, "held": 0, "not_sent": 0,
                "outstanding_start": 9, "outstanding_end": 52, "waiting_start": 3, "waiting_end": 41,
                "keeps_up": False, "behind": "falls behind at 12 req/s: 9.8 served, waiting 3 -> 41"},
        base | {"setting": "k4", "k": 4, "stage": 1, "users": 0, "rate": 12.0, "offered_per_s": 12.25,
                "achieved_per_s": 12.1, "slo_attainment": math.nan, "held": 7, "not_sent": 2, "keeps_up": True,
                "behind": "", "valid": False, "invalid_reason": "dispatcher late: ..."},
    ])


def test_each_rate_window_is_a_row_with_its_figures_and_its_finding():
    first, second = rate_stage_view(_summary())
    assert (first["k"], first["rate"], first["offered"], first["achieved"]) == ("0", "12.00", "12.25", "9.81")
    assert first["attainment"] == "62.0% [58.0%, 66.0%]" and first["goodput"] == "7.60"
    assert first["late"] == "0.8 / 4.2" and first["held"] == "none"
    assert (first["outstanding"], first["waiting"]) == ("9 → 52", "3 → 41")
    assert first["keeps_up"] == "no: K=0 falls behind at 12 req/s: 9.8 served, waiting 3 -> 41" and first["valid"]
    assert second["attainment"] == "no SLO set" and second["held"] == "7 held, 2 not sent"
    assert second["keeps_up"] == "yes" and not second["valid"] and second["waiting"] == "–"


def test_the_users_charts_read_user_stages_only():
    assert user_rows(_summary())["stage"].tolist() == [0]
    before_rate_stages = _summary().drop(columns="rate")
    assert len(user_rows(before_rate_stages)) == 3 and rate_stage_view(before_rate_stages) == []


def test_a_window_too_short_to_tell_says_so_instead_of_yes():
    summary = _summary()
    summary.loc[2, "too_short"] = "stage too short for answers of 25 s; lengthen to 50 s"
    _first, second = rate_stage_view(summary)
    assert second["keeps_up"] == "cannot tell: stage too short for answers of 25 s; lengthen to 50 s"
    assert rate_stage_view(_summary())[1]["keeps_up"] == "yes"          # a summary from before: no such column
