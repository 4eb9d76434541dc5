"""decision.json's request_set from request rows (decision/traffic/request_set.py) and its report section: acceptance per
category three ways with intervals, the best K per category beside the mix's, natural outputs' agreement across K."""
import json

import numpy as np
import pandas as pd
import pytest

from lookahead_runner.decision.traffic.request_set import LifeRequests, best_line, summarise
from lookahead_runner.decision.traffic.schema import MIX, BestByCategory, RequestSetSummary
from lookahead_runner.decision.schema import Decision
from lookahead_runner.report.request_set import request_set_view


def rows(k, n, category, steps, accepted, tokens, start=0, hash_of=None, rounds=0):
    """n successful requests of one category; spec columns only where K > 0."""
    frame = pd.DataFrame({
        "ok": 1, "request_index": np.arange(start, start + n), "category": category, "set_round": rounds,
        "output_tokens": tokens, "prompt_tokens": np.arange(n) + 10,
        "output_hash": [hash_of(i) if hash_of else f"h{i}" for i in range(start, start + n)],
    })
    if k > 0:
        frame["spec_steps"], frame["spec_accepted_tokens"] = steps, accepted
        frame["spec_acceptance_length"] = 1 + np.asarray(accepted, dtype=float) / np.asarray(steps, dtype=float)
    return frame


def life(k, frames, windows=()):
    return LifeRequests(k, 0, pd.concat(frames, ignore_index=True), list(windows))


def test_acceptance_pooled_request_and_token_weighted_per_category_and_the_mix():
    # code: long outputs, 3 accepted per step; chat: short outputs, 0.5 accepted per step
    code = rows(4, 40, "code", steps=50, accepted=150, tokens=200)
    chat = rows(4, 40, "chat", steps=10, accepted=5, tokens=15, start=40)
    summary = summarise([life(0, [rows(0, 80, "code", 0, 0, 10)]), life(4, [code, chat])], source="s.jsonl", size=80)
    table = {a.category: a for a in summary.acceptance}
    assert summary.acceptance_source == "per-request"
    assert table["code"].acceptance_length == pytest.approx(4.0) and table["chat"].acceptance_length == pytest.approx(1.5)
    mix = table[MIX]
    assert mix.acceptance_length == pytest.approx(1 + (40 * 150 + 40 * 5) / (40 * 50 + 40 * 10))
    assert mix.request_weighted == pytest.approx(2.75)                       # every request once
    assert mix.token_weighted == pytest.approx((200 * 4.0 + 15 * 1.5) / 215)  # the long, well-accepted ones weigh more
    assert mix.token_weighted > mix.request_weighted
    assert mix.acceptance_length_range.low <= mix.acceptance_length <= mix.acceptance_length_range.high
    assert table["code"].acceptance_length_range.low == pytest.approx(4.0)   # no spread: a degenerate interval


def test_without_per_request_metrics_the_source_is_the_counters():
    summary = summarise([life(0, [rows(0, 30, "", 0, 0, 10)]), life(2, [rows(0, 30, "", 0, 0, 10)])],
                        source="s.jsonl", size=30)
    assert summary.acceptance_source == "counters" and summary.acceptance == []
    assert "server's counters" in summary.acceptance_source_text


def window(frame, users=16, seconds=10.0):
    return (users, seconds, frame)


def test_the_best_k_per_category_beside_the_mix_and_only_with_enough_requests():
    def at(k, code_n, chat_n, rare_n=0):
        frames = [rows(k, code_n, "code", 10, 10, 20), rows(k, chat_n, "chat", 10, 10, 20, start=1000)]
        if rare_n:
            frames.append(rows(k, rare_n, "rare", 10, 10, 20, start=2000))
        frame = pd.concat(frames, ignore_index=True)
        return life(k, [frame], [window(frame), window(frame.iloc[0:0], users=4)])

    lives = [at(0, 40, 40, 5), at(2, 50, 44, 5), at(4, 56, 42, 5)]
    summary = summarise(lives, source="s", size=100, users=16, mix_k=4)
    best = {b.category: b for b in summary.best_by_category}
    assert best["code"].k == 4 and best["code"].gain_pct == pytest.approx(40.0)
    assert best["chat"].k == 2 and best["chat"].gain_pct == pytest.approx(10.0)
    assert "rare" not in best                                              # 5 requests a K: too few for its own K
    assert summary.best_line == "code: K=4 +40 %; chat: K=2 +10 %; the mix: K=4"
    assert {(g.category, g.k): g.requests for g in summary.gains}[("rare", 4)] == 5
    assert summarise(lives, source="s", size=100, users=8).best_by_category == []   # no window at 8 users
    assert best_line([BestByCategory(category="code", k=0)], None) == "code: K=0; the mix: not decided"


def test_natural_outputs_agree_across_k_by_request_index_and_differences_are_counted():
    same = lambda i: f"h{i}"
    k0 = rows(0, 30, "", 0, 0, 12, hash_of=same)
    k4 = rows(4, 30, "", 5, 5, 12, hash_of=same)
    k4.loc[k4["request_index"] == 3, "output_tokens"] = 13                 # batch numerics changed one length
    k4.loc[k4["request_index"] == 4, "output_hash"] = "other"              # and another's text
    extra = rows(4, 5, "", 5, 5, 12, start=100)                            # answered under one K only
    summary = summarise([life(0, [k0]), life(4, [k4, extra])], source="s", size=200, natural_output=True)
    agreement = summary.agreement
    assert (agreement.matched, agreement.same_length, agreement.same_text) == (30, 29, 29)
    assert agreement.same_length_share == pytest.approx(29 / 30)
    dumped = json.loads(summary.model_dump_json())
    assert dumped["agreement"]["same_text_share"] == pytest.approx(29 / 30)
    assert summarise([life(0, [k0])], source="s", size=30).agreement is None   # exact lengths: not asked


def test_lengths_and_restarts():
    a = rows(0, 21, "code", 0, 0, np.arange(21) * 10, rounds=0)
    b = rows(0, 21, "code", 0, 0, 5, rounds=2)
    summary = summarise([life(0, [a, b])], source="s", size=21)
    code = summary.lengths[0]
    assert (code.category, code.requests, code.output_max, code.prompt_p50) == ("code", 42, 200.0, 20.0)
    assert summary.lengths[-1].category == MIX and summary.restarts == 2 and summary.sent == 42


def test_decision_json_reads_back_and_the_report_section_says_it():
    code = rows(4, 40, "code", steps=50, accepted=150, tokens=200)
    summary = summarise([life(0, [rows(0, 40, "code", 0, 0, 200)]), life(4, [code])], source="set.jsonl", size=40,
                        categories={"code": 40}, natural_output=True, flag_added=True)
    decision = Decision(status="decided", verdict="Set K=4", request_set=summary)
    again = Decision.model_validate_json(decision.model_dump_json())
    assert isinstance(again.request_set, RequestSetSummary) and again.request_set.acceptance[0].k == 4
    assert Decision.model_validate_json('{"status": "decided", "verdict": "x"}').request_set is None
    view = request_set_view(again.request_set)
    assert view["size"] == "40" and view["categories"] == "code 40" and view["outputs"].startswith("natural")
    assert view["flag"].startswith("the runner added --per-request-spec-decode-metrics summary")
    assert view["acceptance"][0]["pooled"] == "4.00 [4.00, 4.00]"
    assert view["agreement"].startswith("100.0 % of 40 requests answered under two K or more")
    assert request_set_view(None) is None
