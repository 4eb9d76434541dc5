"""The tuning method's phenomena emerge from the simulator's physics (virtual time, no clock).

A closed-loop client of N users (each sends the next request the moment one finishes,
prompt 128, output 64, ignore_eos, temperature 0) drives `EngineModel.step()`; we measure
output tokens/s and the time-weighted mean of running requests after a warm-up.
Run with `pytest -s` to see the table.
"""
from __future__ import annotations

from typing import NamedTuple

import pytest

from lookahead_runner.sim.kv_pool import EngineConfig
from lookahead_runner.sim.model import EngineModel
from lookahead_runner.sim.scenarios import get_scenario

PROMPT_TOKENS, OUTPUT_TOKENS = 128, 64
WARMUP_S, MEASURE_S = 10.0, 30.0


class Run(NamedTuple):
    k: int
    users: int
    tok_per_s: float
    running_mean: float
    preemptions: int
    kv_usage_mean: float


def closed_loop(scenario_name: str, k: int, users: int, prompt_tokens: int = PROMPT_TOKENS,
                output_tokens: int = OUTPUT_TOKENS, warmup_s: float = WARMUP_S, measure_s: float = MEASURE_S,
                **engine) -> Run:
    cfg = EngineConfig(**{"max_num_seqs": 128, "num_speculative_tokens": k, "method": "draft_model" if k else "",
                          "lookahead_tokens": k, **engine})
    model = EngineModel(get_scenario(scenario_name), cfg)
    sent = 0

    def send() -> None:
        nonlocal sent
        model.add_request(f"r{sent}", prompt_tokens, output_tokens, ignore_eos=True, temperature=0.0)
        sent += 1

    for _ in range(users):
        send()
    t_s = measured_s = running_area = kv_area = 0.0
    tokens = 0
    preempt_at_start = None
    while t_s < warmup_s + measure_s:
        result = model.step()
        assert result.duration_s > 0
        t_s += result.duration_s
        measuring = t_s > warmup_s
        if measuring:
            preempt_at_start = model.counters.preemptions if preempt_at_start is None else preempt_at_start
            measured_s += result.duration_s
            running_area += model.num_running * result.duration_s
            kv_area += model.kv_usage * result.duration_s
        for out in result.outputs:
            tokens += out.n_tokens if measuring else 0
            if out.finished:
                send()
    return Run(k, users, tokens / measured_s, running_area / measured_s,
               model.counters.preemptions - (preempt_at_start or 0), kv_area / measured_s)


def table(scenario_name: str, users: int) -> dict[int, Run]:
    runs = {k: closed_loop(scenario_name, k, users) for k in (0, 2, 4, 8)}
    for r in runs.values():
        print(f"{scenario_name:15s} users={r.users:3d} K={r.k}: {r.tok_per_s:7.0f} tok/s, running mean "
              f"{r.running_mean:5.1f}, kv mean {r.kv_usage_mean:.2f}, preemptions {r.preemptions}")
    return runs


@pytest.mark.parametrize("users", [4, 8])
def test_low_concurrency_larger_k_raises_throughput(users):
    runs = table("tight-kv", users)
    tok = [runs[k].tok_per_s for k in (0, 2, 4, 8)]
    assert tok == sorted(tok), tok
    assert runs[8].tok_per_s > 2.5 * runs[0].tok_per_s
    assert all(r.preemptions == 0 for r in runs.values())


@pytest.mark.parametrize("users", [64, 96])
def test_high_concurrency_k8_cuts_real_batch_and_throughput(users):
    runs = table("tight-kv", users)
    for k in (2, 4):
        assert runs[8].running_mean < runs[k].running_mean - 5
        assert runs[8].tok_per_s < 0.85 * runs[k].tok_per_s
    assert runs[8].preemptions > 0
    assert runs[8].kv_usage_mean > 0.85
    assert runs[2].running_mean > 0.9 * users  # small K: the batch is (almost) every user


def test_roomy_kv_keeps_the_batch_but_compute_still_limits_large_k():
    runs = table("roomy-kv", 96)
    assert all(r.running_mean > 0.9 * 96 and r.preemptions == 0 for r in runs.values())
    assert runs[8].tok_per_s < runs[2].tok_per_s


def test_low_acceptance_larger_k_only_wastes():
    runs = table("low-acceptance", 8)
    assert runs[8].tok_per_s < runs[4].tok_per_s < runs[2].tok_per_s
    assert runs[8].tok_per_s < runs[0].tok_per_s


@pytest.mark.parametrize("users, context, k3_wins", [(256, 400, False), (256, 4000, True), (64, 400, True)])
def test_long_context_keeps_speculation_paying_at_high_batch(users, context, k3_wins):
    """vLLM PR #48944's shape: at 256 users K=3 loses at a 400-token context and gains at 4,000 (each step
    reads far more KV, so it stays memory-bound); at 64 users it gains at 400 too."""
    engine = {"max_num_seqs": 256, "max_num_batched_tokens": 16384, "max_model_len": 8192}
    base, spec = (closed_loop("long-context", k, users, context, 256, 30.0, 60.0, **engine) for k in (0, 3))
    ratio = spec.tok_per_s / base.tok_per_s
    print(f"long-context users={users} context={context}: K=3 / K=0 = {ratio:.2f}")
    assert (ratio > 1.03) if k3_wins else (ratio < 0.9), ratio
    assert base.preemptions == spec.preemptions == 0


def test_the_context_pair_of_the_decision_benchmark_has_the_truths_it_states():
    """benchmarks/decision_scenarios.py's context-400 / context-4000: one server, two prompt lengths, two best K
    (the engine model of the very argv the benchmark passes, by the product's rule at wide margins)."""
    import importlib.util
    import sys
    from pathlib import Path

    path = Path(__file__).resolve().parents[3] / "benchmarks" / "decision_scenarios.py"
    spec = importlib.util.spec_from_file_location("decision_scenarios", path)
    bench = importlib.util.module_from_spec(spec)
    sys.modules["decision_scenarios"] = bench
    spec.loader.exec_module(bench)
    pair = {s.name: s for s in bench.SCENARIOS if s.name.startswith("context-")}
    assert pair["context-400"].server_args == pair["context-4000"].server_args
    short, long = ({row["k"]: row for row in (bench.model_steady_state(s, k, 100.0, 1) for k in s.ks)}
                   for s in (pair["context-400"], pair["context-4000"]))
    assert pair["context-400"].truth == 0 and all(short[k]["req_per_s"] < 0.95 * short[0]["req_per_s"] for k in (2, 4))
    assert pair["context-4000"].truth == 2
    assert long[2]["req_per_s"] > 1.2 * max(long[0]["req_per_s"], long[4]["req_per_s"])
    assert long[2]["e2e_p90_ms"] < long[0]["e2e_p90_ms"] and long[2]["preemptions"] == 0
