"""decision.json's request_set from request rows (decision/traffic/request_set.py) and its report section: acceptance per
category three ways with intervals (requests resampled), each category's per-request speed and verdict beside the
mix's (issue 36), natural outputs' agreement across K."""
import json

import numpy as np
import pandas as pd
import pytest

from lookahead_runner.config import DecisionConfig
from lookahead_runner.decision.traffic.request_set import LifeRequests, acceptance_table, summarise
from lookahead_runner.decision.traffic.schema import MIX, RequestSetSummary
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


def test_acceptance_intervals_do_not_narrow_when_the_same_requests_are_answered_again():
    """Rows are answers; the same 30 requests answered four times over (a stage four times as long, rounds of the
    set, near-identical at temperature 0) are still 30 requests: the interval stays as wide."""
    rng = np.random.default_rng(4)
    steps = rng.integers(20, 60, 30)
    accepted = np.round(steps * rng.uniform(0.5, 3.0, 30))
    once = rows(4, 30, "code", steps, accepted, 100)
    again = pd.concat([once] * 4, ignore_index=True)
    nearly = again.assign(spec_accepted_tokens=again["spec_accepted_tokens"] + rng.integers(-1, 2, len(again)))
    nearly["spec_acceptance_length"] = 1 + nearly["spec_accepted_tokens"] / nearly["spec_steps"]
    width = {}
    for name, frame in (("once", once), ("again", again), ("nearly", nearly)):
        (code, _mix) = acceptance_table([life(4, [frame])])
        width[name] = [r.high - r.low for r in (code.acceptance_length_range, code.request_weighted_range,
                                                code.token_weighted_range)]
        assert code.distinct_requests == 30 and code.requests == len(frame)
    assert width["again"] == pytest.approx(width["once"])
    assert all(n >= 0.9 * o for n, o in zip(width["nearly"], width["once"]))


def test_without_per_request_metrics_the_source_is_the_counters():
    summary = summarise([life(0, [rows(0, 30, "", 0, 0, 10)]), life(2, [rows(0, 30, "", 0, 0, 10)])],
                        source="s.jsonl", size=30)
    assert summary.acceptance_source == "counters" and summary.acceptance == []
    assert "server's counters" in summary.acceptance_source_text


def window(frame, users=16, seconds=10.0):
    return (users, seconds, frame)


def answers(k, category, speeds, start=0, tokens=100, times=1):
    """Successful answers of one category in a window: request start + i at speeds[i] output tokens/s (e2e =
    tokens / speed), each answered `times` times."""
    speeds = np.tile(np.asarray(speeds, dtype=float), times)
    index = np.tile(np.arange(start, start + len(speeds) // times), times)
    return pd.DataFrame({"ok": 1, "request_index": index, "category": category, "set_round": 0,
                         "output_tokens": tokens, "prompt_tokens": 10, "output_hash": [f"h{i}" for i in index],
                         "e2e_ms": 1000.0 * tokens / speeds, "tpot_ms": 900.0 / speeds})


def speeds(n, base, rng):
    return base * (1 + 0.1 * rng.standard_normal(n))   # each request its own speed, ~10 % apart


def sped_up(factors, n=40, ks=(0, 4), seed=1):
    """One life per K: every category's requests at that K `factors[category][K]` times as fast as at K=0."""
    rng = np.random.default_rng(seed)
    own = {c: speeds(n, 20.0, rng) for c in factors}
    lives = []
    for k in ks:
        frame = pd.concat([answers(k, c, own[c] * f.get(k, 1.0), start=1000 * i) for i, (c, f) in
                           enumerate(factors.items())], ignore_index=True)
        lives.append(life(k, [frame], [window(frame)]))
    return lives


def verdicts(summary):
    return {v.category: v for v in summary.verdicts}


def test_a_category_is_judged_by_its_own_speed_per_request_beside_the_mix_with_the_tie_band():
    lives = sped_up({"code": {4: 1.6}, "chat": {4: 1.0}, "mail": {4: 1.3}})
    summary = summarise(lives, source="s", size=120, users=16, mix_k=4, baseline_k=0)
    table = {(s.category, s.k): s for s in summary.speeds}
    assert table[("code", 4)].gain == pytest.approx(0.6, abs=0.01)
    assert table[(MIX, 4)].gain == pytest.approx(0.3, abs=0.02)
    assert table[("code", 4)].gain_range.low < 0.6 < table[("code", 4)].gain_range.high
    by = verdicts(summary)
    assert by["code"].relation == "more than the mix" and by["chat"].relation == "less than the mix"
    assert by["mail"].relation == "within the tie band"
    assert by["mail"].text.startswith("mail: +30% [")
    assert "within the tie band (±3%) of the mix's +30%" in by["mail"].text
    assert by["code"].text.startswith("code: +60% [") and "more than the mix's +30% by +23% [" in by["code"].text
    assert summary.mix_verdict.startswith("the mix: K=4, +30% [") and summary.best_line.endswith(summary.mix_verdict)
    assert summary.summary_version == 2 and summary.gains == [] and summary.best_by_category == []


def test_window_composition_is_no_gain_a_category_served_alike_is_within_the_tie_band():
    """Closed loop: the K=4 window happened to complete half again as many code requests (and as fast each): its
    throughput rose 50 %, its requests did not get faster. The category is within the tie band, not "K=4 +50 %",
    and the mix, whose code requests are five times as fast as its chat ones, is no faster either (its categories
    at the same shares under every K)."""
    rng = np.random.default_rng(2)
    code, chat = speeds(40, 100.0, rng), speeds(40, 20.0, rng)
    k0 = pd.concat([answers(0, "code", code), answers(0, "chat", chat, start=1000)], ignore_index=True)
    k4 = pd.concat([answers(4, "code", np.concatenate([code, code[:20]])).assign(
        request_index=np.concatenate([np.arange(40), np.arange(20)])), answers(4, "chat", chat, start=1000)],
        ignore_index=True)
    summary = summarise([life(0, [k0], [window(k0)]), life(4, [k4], [window(k4)])], source="s", size=80, users=16,
                        mix_k=0, baseline_k=0)
    by = verdicts(summary)
    assert by["code"].best_k is None and "within the tie band (±3%) of K=0 at every K" in by["code"].text
    assert "+50" not in summary.best_line
    mix = {s.k: s for s in summary.speeds if s.category == MIX}
    assert mix[4].gain == pytest.approx(0.0, abs=1e-9)
    assert mix[0].speed == pytest.approx((code.mean() + chat.mean()) / 2)   # at their shares of the requests, 40 : 40


def test_its_own_best_k_is_named_where_it_beats_the_verdicts_beyond_the_tie_band():
    lives = sped_up({"code": {2: 1.3, 4: 1.6}, "chat": {2: 1.0, 4: 0.8}}, ks=(0, 2, 4))
    by = verdicts(summarise(lives, source="s", size=80, users=16, mix_k=4, baseline_k=0))
    assert by["code"].best_k is None                                      # K=4 is its own best too
    assert by["chat"].best_k == 0 and "its own best K=0: +25% [" in by["chat"].text   # K=0 and 2 tie: the smaller
    assert by["chat"].best_gain == pytest.approx(0.25, abs=0.01) and "per request over K=4" in by["chat"].text
    alone = verdicts(summarise(lives, source="s", size=80, users=16, mix_k=0, baseline_k=0))   # the verdict: K=0
    assert alone["code"].best_k == 4 and alone["code"].text.startswith("code: its own best K=4: +60% [")
    assert alone["chat"].best_k is None and alone["chat"].text == (
        "chat: no K beats K=0 beyond the ±3% tie band and the noise (K=2: +0% [+0%, +0%], K=4: -20% [-20%, -20%])")
    blocked = verdicts(summarise(lives, source="s", size=80, users=16, mix_k=0, baseline_k=0, eligible={0, 2}))
    assert blocked["code"].best_k == 2                                    # among the K no gate blocks at the target


def test_the_servers_life_noise_widens_a_gain_not_the_difference_from_the_mix():
    from lookahead_runner.decision.traffic.category_speed import LifeNoise, judge_categories
    lives = sped_up({"code": {4: 1.6}, "chat": {4: 1.0}})
    p = DecisionConfig()
    quiet = judge_categories(lives, 16, p, [], baseline_k=0, verdict_k=4)
    noisy = judge_categories(lives, 16, p, [], baseline_k=0, verdict_k=4, noise={4: LifeNoise(0.2, 3, 0.05)})
    width = lambda r: r.high - r.low
    q, n = ({(s.category, s.k): s for s in f.speeds}[("code", 4)] for f in (quiet, noisy))
    assert width(n.gain_range) > 2 * width(q.gain_range)
    assert (n.vs_mix_range.low, n.vs_mix_range.high) == (q.vs_mix_range.low, q.vs_mix_range.high)


def test_the_objective_does_not_relabel_the_figures_of_a_category():
    lives = sped_up({"code": {4: 1.6}, "chat": {4: 1.0}})
    goodput = DecisionConfig(objective="goodput", slo={"ttft_p99_ms": 500})
    a, b = (summarise(lives, source="s", size=80, users=16, mix_k=4, baseline_k=0, decision=p)
            for p in (DecisionConfig(), goodput))
    assert a.speeds == b.speeds and a.best_line == b.best_line and "per request" in a.best_line


def test_a_category_without_its_baseline_says_no_baseline_and_one_with_too_few_requests_says_so():
    rng = np.random.default_rng(3)
    code, rare = speeds(40, 20.0, rng), speeds(12, 20.0, rng)
    k0 = answers(0, "code", code)
    k2 = pd.concat([answers(2, "code", code * 1.2), answers(2, "rare", rare, start=500)], ignore_index=True)
    k4 = pd.concat([answers(4, "code", code * 1.4), answers(4, "rare", rare[:4], start=500)], ignore_index=True)
    lives = [life(k, [f], [window(f)]) for k, f in ((0, k0), (2, k2), (4, k4))]
    summary = summarise(lives, source="s", size=60, users=16, mix_k=4, baseline_k=0)
    view = {(r["category"], r["k"]): r for r in request_set_view(summary)["speeds"]}
    assert view[("code", 0)]["gain"] == "baseline" and view[("code", 4)]["gain"].startswith("+40.0 % [")
    assert view[("rare", 2)]["gain"] == "no baseline" and view[("rare", 4)]["gain"] == "no baseline"
    assert view[("rare", 2)]["vs_mix"] == "no baseline" and view[("the mix", 4)]["vs_mix"] == ""
    assert verdicts(summary)["rare"].text == "rare: too few of its requests at K=0 (0, 10 needed)"
    assert summarise(lives, source="s", size=60, users=8).speeds == []   # no window at 8 users


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
    assert view["acceptance"][0]["pooled"] == "4.00 [4.00, 4.00]" and view["acceptance"][0]["requests"] == \
        "40 (40 answers)"
    old = json.loads(again.model_dump_json())["request_set"]
    old = {key: value for key, value in old.items() if key not in ("speeds", "verdicts", "summary_version")}
    old |= {"gains": [{"category": "code", "k": 4, "requests": 40, "objective": 2.0, "gain_pct": 5.0}],
            "best_by_category": [{"category": "code", "k": 4, "gain_pct": 5.0}]}
    assert RequestSetSummary.model_validate(old).summary_version == 1            # a version 1 summary still reads
    assert view["agreement"].startswith("100.0 % of 40 requests answered under two K or more")
    assert request_set_view(None) is None


def test_request_weighted_acceptance_counts_every_request_once_however_often_it_was_answered():
    """Request 0 (acceptance 4.0) answered three times, request 1 (1.5) once: request-weighted is the mean of the two
    requests, (4 + 1.5) / 2, not of the four answers; pooled and token-weighted count every answer (as the server)."""
    frame = rows(4, 2, "code", steps=[10, 10], accepted=[30, 5], tokens=100)
    (code, mix) = acceptance_table([life(4, [pd.concat([frame, frame.iloc[[0]], frame.iloc[[0]]])])])
    assert code.request_weighted == pytest.approx(2.75) and mix.request_weighted == pytest.approx(2.75)
    assert code.acceptance_length == pytest.approx(1 + 95 / 40)
    assert code.token_weighted == pytest.approx((3 * 4.0 + 1.5) / 4)
    assert code.requests == 4 and code.distinct_requests == 2


def test_a_category_one_k_did_not_answer_does_not_move_the_mixs_gain():
    """A short window at K=4 reached no code request (users walk the set in order; a faster K is elsewhere in it).
    Every request is as fast as under K=0: the mix's gain is 0, not the -50 % of a mix that lost its fast category,
    and chat is within the tie band of it (not "more than the mix")."""
    rng = np.random.default_rng(5)
    code, chat, mail = speeds(40, 100.0, rng), speeds(40, 20.0, rng), speeds(40, 20.0, rng)
    k0 = pd.concat([answers(0, "code", code), answers(0, "chat", chat, start=1000),
                    answers(0, "mail", mail, start=2000)], ignore_index=True)
    k4 = pd.concat([answers(4, "chat", chat, start=1000), answers(4, "mail", mail, start=2000)], ignore_index=True)
    summary = summarise([life(0, [k0], [window(k0)]), life(4, [k4], [window(k4)])], source="s", size=120, users=16,
                        mix_k=4, baseline_k=0)
    mix = {s.k: s for s in summary.speeds if s.category == MIX}
    assert mix[4].gain == pytest.approx(0.0, abs=1e-9) and mix[4].gain_range.high == pytest.approx(0.0, abs=1e-9)
    chat_row = {(s.category, s.k): s for s in summary.speeds}[("chat", 4)]
    assert chat_row.vs_mix == pytest.approx(0.0, abs=1e-9)
    assert verdicts(summary)["chat"].relation == "within the tie band"
    assert summary.mix_verdict.startswith("the mix: K=4, +0% [")
