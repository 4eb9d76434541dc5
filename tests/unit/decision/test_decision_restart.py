"""Issue 32: with one server life per K the confidence carries the spread from one life to the next (a prior
per server kind, the user's, or the repeats'); the stop rule's memory rise names a reading that rose."""
import math

import numpy as np
import pytest
from unit.synthetic import window

from lookahead_runner.cli import EXIT_NOT_DECIDED, exit_code
from lookahead_runner.config import ConfigError, DecisionConfig
from lookahead_runner.config import config_from_dict
from lookahead_runner.decision import decide, evidence
from lookahead_runner.decision.gates import rules
from lookahead_runner.decision.engine import evaluate_stages

USERS = 4


def vllm(**fields) -> DecisionConfig:
    """The decision section of a sweep restarting real vLLM (no documented restart spread)."""
    return DecisionConfig(resamples=400, **fields).for_server("vllm")


def one_life_each(rates: dict[int, float], duration_s: float = 30.0, **server):
    return evidence([window(k, USERS, rate, 0, duration_s=duration_s, **server) for k, rate in rates.items()], USERS)


def test_one_life_per_k_with_a_large_gain_is_decided_and_says_the_restart_spread_was_assumed():
    decision = decide(one_life_each({0: 10.0, 4: 16.0}), vllm(), {})
    assert decision.status == "decided" and decision.recommended.k == 4 and exit_code(decision) == 0
    assert "One life per K: restart spread unknown, taken as 15% per server life" in decision.verdict
    noise = [r for r in decision.reasons if "restart spread of 15% per server life (one life per K: restart " \
             "spread unknown" in r]
    assert len(noise) == 1 and "wider than the others'" not in noise[0]  # one pooled noise, said once


def test_one_life_per_k_with_a_small_gain_is_not_decided_and_says_what_to_run():
    """+9 % from one life each (the issue's first run): within what a restart moves on an unknown server."""
    decision = decide(one_life_each({0: 10.0, 4: 10.9}), vllm(), {})
    assert decision.status == "not_decided" and decision.leading_k == 4 and exit_code(decision) == EXIT_NOT_DECIDED
    assert "one life per K: restart spread unknown (taken as 15% per server life: at 90% a single-life gain " \
           "over K=0 must be about +35% to set a K, or about -22% to keep K=0)" in decision.verdict
    # the cheapest fact first: one life measures the spread; no count of repeats from the assumed 15 % (issue 38)
    assert decision.next_runs[0].startswith("The cheapest next fact is the restart spread (how far one server life "
                                            "lands from the next; 15% assumed here): one more life of K=4 measures it")
    assert not any("repeats of both" in step for step in decision.next_runs)


def test_a_loss_from_one_life_each_keeps_the_baseline_only_beyond_the_stated_threshold():
    """The issue's second run: K=4 -14 % from one life each was "Keep K=0, 99 %"; the threshold says -22 %."""
    assert decide(one_life_each({0: 10.0, 4: 8.6}), vllm(), {}).status == "not_decided"
    kept = decide(one_life_each({0: 10.0, 4: 6.5}), vllm(), {})
    assert kept.status == "decided" and kept.recommended.k == 0


def test_the_windows_alone_would_be_sure_of_the_same_small_gain():
    """What the restart term changes: the same windows with no restart spread decide +9 % at once."""
    decision = decide(one_life_each({0: 10.0, 4: 10.9}), vllm(restart_spread=0.0), {})
    assert decision.status == "decided" and decision.recommended.k == 4


def test_a_prior_spread_from_the_user_decides_a_gain_beyond_it_and_is_not_called_unknown():
    small = decide(one_life_each({0: 10.0, 4: 10.9}), vllm(restart_spread=0.02), {})
    assert small.status == "decided" and small.recommended.k == 4
    assert "unknown" not in small.verdict
    assert any("restart spread of 2.0% per server life (decision.restart_spread)" in r for r in small.reasons)
    wide = decide(one_life_each({0: 10.0, 4: 10.9}), vllm(restart_spread=0.08), {})
    assert wide.status == "not_decided" and "restart spread unknown" not in wide.verdict


REAL_VLLM = {"server": {"command": ["vllm"], "model": "org/target"}, "speculation": {"draft_model": "org/draft"}}


def test_the_simulator_has_a_documented_default_and_real_vllm_none():
    sim = config_from_dict({"decision": {}}).decision
    real = config_from_dict(REAL_VLLM).decision
    assert sim.restart_prior() == (0.01, "the simulator's default")
    assert real.restart_prior() == (0.15, "unknown")
    assert config_from_dict(REAL_VLLM | {"decision": {"restart_spread": 0.04}}) \
        .decision.restart_prior() == (0.04, "decision.restart_spread")


@pytest.mark.parametrize("value", [-0.1, 1.5, "wide", True])
def test_a_restart_spread_out_of_range_is_one_line_naming_the_field(value):
    with pytest.raises(ConfigError, match=r"decision\.restart_spread"):
        config_from_dict({"decision": {"restart_spread": value}})


def test_repeats_measure_the_restart_spread_themselves():
    """Two lives per K: the spread comes from the repeats (restart to restart), no prior is added or named."""
    ws = [window(k, USERS, rate * f, r, duration_s=30.0) for k, rate in ((0, 10.0), (4, 12.0))
          for r, f in enumerate((0.99, 1.01))]
    stage = evaluate_stages(evidence(ws, USERS), vllm())[USERS]
    assert stage.noise.source == "repeats" and stage.noise.restart_sd == 0.0 and not stage.noise.restart_unknown
    decision = decide(evidence(ws, USERS), vllm(), {})
    assert decision.status == "decided" and decision.recommended.k == 4 and "restart spread" not in decision.verdict


def test_same_server_repeats_are_one_life_per_k_too():
    """Repeats on one server life show the noise inside it: the restart term is added to theirs."""
    ws = [window(k, USERS, rate * f, r, duration_s=30.0) for k, rate in ((0, 10.0), (4, 10.9))
          for r, f in enumerate((0.995, 1.005))]
    restarted = decide(evidence(ws, USERS), vllm(), {})
    assert restarted.status == "decided" and restarted.recommended.k == 4
    one_life = DecisionConfig(resamples=400).for_server("vllm", one_life_per_k=True)
    stage = evaluate_stages(evidence(ws, USERS), one_life)[USERS]
    assert stage.noise.source == "repeats" and stage.noise.restart_unknown
    same = decide(evidence(ws, USERS), one_life, {})
    assert same.status == "not_decided" and "one life per K: restart spread unknown" in same.verdict
    assert any("load.repeat_mode = \"restart\"" in step for step in same.next_runs)
    assert config_from_dict(REAL_VLLM | {"load": {"repeat_mode": "same-server"}}) \
        .decision.one_life_per_k


def test_no_confident_wrong_answer_when_restarts_move_each_life():
    """Equal true rates (the truth: keep K=0), each life off by a restart spread of 8 % (under the 15 % taken
    when unknown): no seeded draw sets K=4 with confidence; without the restart term some would."""
    rng = np.random.default_rng(32)
    with_term, without = [], []
    for draw in range(16):
        rates = {k: 10.0 * (1 + 0.08 * rng.standard_normal()) for k in (0, 4)}
        ev = one_life_each(rates, duration_s=20.0)
        with_term.append(decide(ev, vllm(), {}))
        without.append(decide(ev, vllm(restart_spread=0.0), {}))
    wrong = [d for d in with_term if d.status == "decided" and d.recommended.k == 4]
    assert not wrong, [d.verdict for d in wrong]
    assert any(d.status == "decided" and d.recommended.k == 4 for d in without)


# ----------------------------------------------------------------------------------------- stop rule

ISSUE_STOP = {"kv_usage_mean": 0.0, "kv_usage_peak": 0.0, "preemptions": 0.0,
              "gpu_mem_peak_mib": math.nan, "gpu_mem_total_mib": math.nan}


def test_a_kv_pool_halving_at_constant_kv_use_is_no_memory_rise():
    """The issue's case: KV usage 0 % -> 0 %, preemptions 0 -> 0, the KV pool halving (the draft's weights)."""
    ws = [window(0, USERS, 10.0, r, duration_s=30.0, kv_pool_tokens=524288.0, **ISSUE_STOP) for r in range(2)]
    ws += [window(4, USERS, 9.0, r, duration_s=30.0, kv_pool_tokens=262144.0, **ISSUE_STOP) for r in range(2)]
    stage = evaluate_stages(evidence(ws, USERS), DecisionConfig(resamples=400))[USERS]
    assert rules.memory_rises(stage.stats[4], stage.stats[0]) == {"KV usage mean": 0.0, "KV usage peak": 0.0,
                                                                  "preemptions": 0.0}
    assert stage.stopped_at is None and stage.stop_share == pytest.approx(1.0)  # no resample stops either
    decision = decide(evidence(ws, USERS), DecisionConfig(resamples=400), {})
    assert decision.stopped_at_k is None and not any(r.startswith("Stop rule") for r in decision.reasons)


def test_a_pool_reading_alone_leaves_the_stop_rule_unevaluated():
    bare = {"kv_usage_mean": math.nan, "kv_usage_peak": math.nan, "preemptions": math.nan,
            "gpu_mem_peak_mib": math.nan, "gpu_mem_total_mib": math.nan}
    ws = [window(k, USERS, 10.0, r, duration_s=30.0, kv_pool_tokens=pool, **bare)
          for k, pool in ((0, 524288.0), (4, 262144.0)) for r in range(2)]
    stage = evaluate_stages(evidence(ws, USERS), DecisionConfig(resamples=400))[USERS]
    assert stage.stop_gaps == [(0, 4)]


def test_the_stop_rule_names_the_reading_that_rose():
    ws = [window(0, USERS, 10.0, r, duration_s=30.0, kv_pool_tokens=524288.0, **ISSUE_STOP) for r in range(2)]
    ws += [window(4, USERS, 10.05, r, duration_s=30.0, kv_pool_tokens=262144.0,
                  **(ISSUE_STOP | {"kv_usage_peak": 0.3})) for r in range(2)]
    decision = decide(evidence(ws, USERS), DecisionConfig(resamples=400), {})
    stop = next(r for r in decision.reasons if r.startswith("Stop rule"))
    assert decision.stopped_at_k == 4
    assert stop.startswith("Stop rule at K=4: memory rose clearly since K=0 (clear rises, 5 points or more: KV usage "
                           "peak 0% -> 30% (+30); besides: KV usage mean 0% -> 0%, preemptions 0 -> 0, KV pool 524,288 "
                           "-> 262,144 tokens) while req/s changed")


def test_the_stages_of_one_life_share_its_restart_draw():
    """A life runs every stage: its luck is in all of them, so the knee's stage-to-stage ratio does not carry it."""
    ws = [window(k, users, rate * users / 4, 0, duration_s=30.0) for k, rate in ((0, 10.0), (4, 15.0))
          for users in (2, 4)]

    def spreads(p):
        stages = evaluate_stages(evidence(ws, 4), p)
        own = np.std(stages[4].objective_draws(0, "req_per_s")) / stages[4].stats[0].req_per_s
        ratio = stages[4].objective_draws(0, "req_per_s") / stages[2].objective_draws(0, "req_per_s")
        return own, np.std(ratio) / np.mean(ratio)

    (own, across), (own_bare, across_bare) = spreads(vllm()), spreads(vllm(restart_spread=0.0))
    assert own > 0.13 > own_bare  # each stage alone carries the 15 % restart spread
    assert across == pytest.approx(across_bare, rel=0.25)  # the ratio between a life's stages does not


def _robust_sd(values) -> float:
    """The spread of draws whose Student's t may have 1 degree of freedom (no variance): the interquartile range
    over a normal's (1.349)."""
    q1, q3 = np.percentile(values, [25, 75])
    return float(q3 - q1) / 1.349


def test_a_borrowed_restart_spread_is_shared_by_the_stages_of_one_life():
    """A single-life K borrows the restart spread K=0's two lives measure at each stage, as a repeat's Student's t:
    drawn at each stage alone, the knee's stage-to-stage ratio of K=4's one life carried its luck twice (23 % wide
    where its windows' own noise makes 1 %). The life's draw is shared by its stages, as an assumed spread's is; its
    windows' own noise is not."""
    one_life = [window(k, users, rate * users / 4, 0, duration_s=30.0) for k, rate in ((0, 10.0), (4, 15.0))
                for users in (2, 4)]
    ws, p = one_life + [window(0, users, 10.0 * 1.12 * users / 4, 1, duration_s=30.0) for users in (2, 4)], vllm()
    stages = evaluate_stages(evidence(ws, 4), p)
    assert stages[4].noise_by_k[4].source == stages[2].noise_by_k[4].source == "repeats"
    target, below = (stages[u].objective_draws(4, "req_per_s") for u in (4, 2))
    own = _robust_sd(target) / stages[4].stats[4].req_per_s
    ratio = target / below
    bare = evaluate_stages(evidence(one_life, 4), vllm(restart_spread=0.0))   # the windows' own noise alone
    bare_ratio = bare[4].objective_draws(4, "req_per_s") / bare[2].objective_draws(4, "req_per_s")
    assert own > 0.05                                                   # each stage alone carries the spread
    assert _robust_sd(ratio) / np.median(ratio) < 2 * _robust_sd(bare_ratio) / np.median(bare_ratio) + 0.01
