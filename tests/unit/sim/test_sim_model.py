"""The simulator's pure engine model: pool sizing, batching, preemption, acceptance, counts."""
from __future__ import annotations

import math
from dataclasses import replace

import pytest

from lookahead_runner.sim.kv_pool import EngineConfig, size_kv_pool
from lookahead_runner.sim.model import EngineModel
from lookahead_runner.sim.scenarios import SCENARIOS, get_scenario

TIGHT = get_scenario("tight-kv")


def spec_cfg(k: int, **kw) -> EngineConfig:
    return EngineConfig(num_speculative_tokens=k, method="draft_model" if k else "", lookahead_tokens=k, **kw)


def drain(model: EngineModel, max_steps: int = 100_000) -> dict[str, int]:
    """Step until idle; tokens emitted per request."""
    emitted: dict[str, int] = {}
    for _ in range(max_steps):
        if not model.has_work():
            return emitted
        for out in model.step().outputs:
            emitted[out.request_id] = emitted.get(out.request_id, 0) + out.n_tokens
    raise AssertionError("engine did not drain")


def test_pool_is_budget_minus_weights_minus_activation_in_blocks():
    sizing = size_kv_pool(TIGHT, spec_cfg(4))
    budget = TIGHT.gpu_total_mib * 0.92
    weights = TIGHT.target_weights_mib + TIGHT.draft_weights_mib
    activation = TIGHT.activation_base_mib + TIGHT.activation_mib_per_token * 128 * 5
    block_mib = 16 * (TIGHT.kv_kib_per_token + TIGHT.draft_kv_kib_per_token) / 1024
    assert sizing.num_blocks == int((budget - weights - activation) // block_mib)
    assert sizing.used_mib <= budget


def test_larger_k_leaves_fewer_blocks_and_so_does_a_larger_max_num_seqs():
    blocks = [size_kv_pool(TIGHT, spec_cfg(k)).num_blocks for k in (0, 2, 4, 8)]
    assert blocks == sorted(blocks, reverse=True) and len(set(blocks)) == 4
    assert size_kv_pool(TIGHT, spec_cfg(4, max_num_seqs=256)).num_blocks < blocks[2]


def test_empty_pool_fails_like_vllm():
    with pytest.raises(ValueError, match="No available memory for the cache blocks"):
        size_kv_pool(TIGHT, spec_cfg(8, gpu_memory_utilization=0.7))


def test_pool_smaller_than_one_max_len_sequence_fails_like_vllm():
    with pytest.raises(ValueError, match=r"max seq len \(40000\)"):
        size_kv_pool(TIGHT, spec_cfg(2, max_model_len=40000))


def test_admission_respects_max_num_seqs_and_free_blocks():
    model = EngineModel(TIGHT, spec_cfg(0, max_num_seqs=3))
    for i in range(5):
        model.add_request(f"r{i}", 32, 8, ignore_eos=True)
    model.step()
    assert (model.num_running, model.num_waiting) == (3, 2)

    # 10 blocks of 16 tokens; each prompt of 40 tokens + K=8 lookahead needs 3 blocks -> 3 fit
    model = EngineModel(TIGHT, spec_cfg(8, num_gpu_blocks_override=10, max_model_len=128))
    for i in range(5):
        model.add_request(f"r{i}", 40, 4, ignore_eos=True)
    model.step()
    assert (model.num_running, model.num_waiting) == (3, 2)
    assert model.kv_usage == pytest.approx(9 / 10)


def test_every_request_gets_exactly_max_tokens_with_ignore_eos():
    model = EngineModel(TIGHT, spec_cfg(4, seed=3))
    for i in range(20):
        model.add_request(f"r{i}", 50 + i, 30 + i, ignore_eos=True, temperature=0.3 * (i % 3))
    emitted = drain(model)
    assert emitted == {f"r{i}": 30 + i for i in range(20)}
    c = model.counters
    assert c.generation_tokens == sum(emitted.values())
    assert c.prompt_tokens == sum(50 + i for i in range(20))
    assert c.finished["length"] == 20
    assert model.kv_usage == 0.0 and model.free_blocks == model.num_blocks


def test_natural_stop_without_ignore_eos_respects_min_tokens():
    model = EngineModel(replace(TIGHT, natural_stop_prob_per_token=0.2), spec_cfg(0, seed=1))
    for i in range(30):
        model.add_request(f"r{i}", 10, 50, min_tokens=5)
    emitted = drain(model)
    assert all(5 <= n <= 50 for n in emitted.values())
    assert model.counters.finished["stop"] > 0


def test_preemption_when_blocks_run_out_is_counted_and_requests_still_complete():
    # 12 blocks; 4 requests of prompt 16 grow to 16 + 60 tokens (+ lookahead): they cannot all stay
    model = EngineModel(TIGHT, spec_cfg(4, num_gpu_blocks_override=12, max_model_len=128, seed=5))
    for i in range(4):
        model.add_request(f"r{i}", 16, 60, ignore_eos=True)
    peak_running, seen_preempted_first = 0, False
    emitted: dict[str, int] = {}
    for _ in range(10_000):
        if not model.has_work():
            break
        before = model.counters.preemptions
        for out in model.step().outputs:
            emitted[out.request_id] = emitted.get(out.request_id, 0) + out.n_tokens
        peak_running = max(peak_running, model.num_running)
        if model.counters.preemptions > before:
            # the newest running request is the victim and goes back to the head of the queue
            seen_preempted_first = seen_preempted_first or model.waiting[0].preemptions > 0
        assert model.free_blocks >= 0
    assert model.counters.preemptions > 0 and seen_preempted_first
    assert emitted == {f"r{i}": 60 for i in range(4)}
    assert model.free_blocks == model.num_blocks


def test_acceptance_follows_alpha_per_position_and_temperature_lowers_it():
    k, alpha = 4, TIGHT.alpha
    model = EngineModel(TIGHT, spec_cfg(k, seed=11))
    for i in range(200):
        model.add_request(f"r{i}", 8, 100, ignore_eos=True)
    drain(model)
    c = model.counters
    assert c.spec_draft_tokens == k * c.spec_drafts
    rates = [n / c.spec_drafts for n in c.accepted_per_pos()]
    for i, rate in enumerate(rates):
        assert rate == pytest.approx(alpha ** (i + 1), abs=0.02)
    assert sum(c.accepted_per_pos()) == c.spec_accepted_tokens
    expected_accepted = sum(alpha ** i for i in range(1, k + 1))
    assert c.spec_accepted_tokens / c.spec_drafts == pytest.approx(expected_accepted, rel=0.03)

    hot = EngineModel(TIGHT, spec_cfg(k, seed=11))
    for i in range(200):
        hot.add_request(f"r{i}", 8, 100, ignore_eos=True, temperature=1.0)
    drain(hot)
    assert hot.counters.accepted_per_pos()[0] / hot.counters.spec_drafts == pytest.approx(alpha / 2, abs=0.02)


def test_no_spec_counters_move_without_speculation():
    model = EngineModel(TIGHT, spec_cfg(0))
    model.add_request("r", 8, 20, ignore_eos=True)
    drain(model)
    c = model.counters
    assert (c.spec_drafts, c.spec_draft_tokens, c.spec_accepted_tokens) == (0, 0, 0)
    assert c.steps == 20  # one token per step, the first from the prefill step


def test_step_time_is_roofline_like():
    sc = TIGHT
    small = EngineModel(sc, spec_cfg(8))
    small.add_request("r", 8, 50, ignore_eos=True)
    prefill = small.step()
    assert prefill.duration_s == pytest.approx((sc.fixed_ms + sc.weight_read_ms + 8 * sc.prefill_ms_per_token) / 1e3)
    decode = small.step()  # one sequence: memory bound (weights + its 8 tokens of KV), plus K draft steps
    kv_ms, draft_kv_ms = sc.kv_read_ms(8 * sc.kv_kib_per_token), sc.kv_read_ms(8 * sc.draft_kv_kib_per_token)
    assert decode.duration_s == pytest.approx(
        (sc.fixed_ms + sc.weight_read_ms + kv_ms + 8 * (sc.draft_step_ms + draft_kv_ms)) / 1e3)

    big = EngineModel(sc, spec_cfg(8))
    for i in range(100):
        big.add_request(f"r{i}", 8, 50, ignore_eos=True)
    big.step()
    decode = big.step()  # 100 x 9 verified tokens: compute bound
    compute_ms = sc.compute_ms_per_token * 100 * 9
    assert compute_ms > sc.weight_read_ms
    draft_kv_ms = sc.kv_read_ms(100 * 8 * sc.draft_kv_kib_per_token)
    assert decode.duration_s == pytest.approx((sc.fixed_ms + compute_ms + 8 * (sc.draft_step_ms + draft_kv_ms)) / 1e3)


def test_kv_read_grows_with_context_and_is_read_once_per_step():
    """A decode step reads the KV each decoding sequence holds at the weights' bandwidth; verifying K + 1
    positions reads that context once, so the memory term does not grow with K; each draft step reads the
    draft's own KV."""
    sc = get_scenario("long-context")
    assert sc.kv_read_ms(sc.target_weights_mib * 1024) == pytest.approx(sc.weight_read_ms)

    def decode_ms(k: int, prompt: int) -> float:
        model = EngineModel(sc, spec_cfg(k, max_model_len=8192, max_num_batched_tokens=8192))
        model.add_request("r", prompt, 50, ignore_eos=True)
        model.step()  # prefill
        return model.step().duration_s * 1e3

    for prompt in (400, 4000):
        context_kv = sc.kv_read_ms(prompt * sc.kv_kib_per_token)
        assert decode_ms(0, prompt) == pytest.approx(sc.fixed_ms + sc.weight_read_ms + context_kv)
        draft_ms = 3 * (sc.draft_step_ms + sc.kv_read_ms(prompt * sc.draft_kv_kib_per_token))
        assert decode_ms(3, prompt) == pytest.approx(sc.fixed_ms + sc.weight_read_ms + context_kv + draft_ms)
    assert decode_ms(0, 4000) - decode_ms(0, 400) == pytest.approx(sc.kv_read_ms(3600 * sc.kv_kib_per_token))
    assert get_scenario("bench-10ms").kv_read_ms(1e9) == 0.0  # no bandwidth term: every step stays 10 ms


def test_abort_frees_blocks_and_counts():
    model = EngineModel(TIGHT, spec_cfg(2))
    model.add_request("a", 100, 50, ignore_eos=True)
    model.add_request("b", 100, 50, ignore_eos=True)
    model.step()
    assert model.abort("a") and not model.abort("a")
    assert model.num_running == 1 and model.counters.finished["abort"] == 1
    assert model.abort("b") and model.free_blocks == model.num_blocks


def test_same_seed_same_run():
    def run(seed: int) -> list:
        model = EngineModel(TIGHT, spec_cfg(4, seed=seed))
        for i in range(10):
            model.add_request(f"r{i}", 20, 40, ignore_eos=True)
        trace = []
        while model.has_work():
            result = model.step()
            trace.append((round(result.duration_s, 9), tuple(result.outputs)))
        return trace

    assert run(1) == run(1)
    assert run(1) != run(2)


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_every_scenario_starts_with_k_up_to_8(name):
    for k in (0, 2, 4, 8):
        sizing = size_kv_pool(SCENARIOS[name], spec_cfg(k))
        assert sizing.num_blocks * 16 >= 4096
        assert not math.isnan(sizing.used_mib)


def _one_request_trace(scenario, seed: int = 3) -> tuple[list[float], list[tuple]]:
    model = EngineModel(scenario, spec_cfg(4, seed=seed))
    model.add_request("r", 8, 400, ignore_eos=True)
    durations, outputs = [], []
    while model.has_work():
        result = model.step()
        durations.append(result.duration_s)
        outputs.append(tuple(result.outputs))
    return durations, outputs


def test_step_noise_keeps_the_physics_as_its_mean_and_leaves_acceptance_alone():
    quiet_s, quiet_out = _one_request_trace(TIGHT)
    jittery = replace(TIGHT, step_jitter_frac=0.3)
    noisy_s, noisy_out = _one_request_trace(jittery)
    assert noisy_out == quiet_out                       # the same tokens in the same steps
    ratios = [n / q for n, q in zip(noisy_s, quiet_s)]
    assert 0.9 < sum(ratios) / len(ratios) < 1.1        # mean 1 over ~120 steps (sd of the mean ~0.03)
    assert max(ratios) > 1.2 and min(ratios) < 0.8
    assert _one_request_trace(jittery)[0] == noisy_s     # seeded: the same run again
    assert _one_request_trace(jittery, seed=4)[0] != noisy_s


def test_speed_drift_holds_one_factor_for_its_period():
    drifting = replace(TIGHT, speed_drift_frac=0.2, speed_drift_s=1.0)
    quiet_s, _ = _one_request_trace(TIGHT)
    noisy_s, _ = _one_request_trace(drifting)
    ratios = [round(n / q, 9) for n, q in zip(noisy_s, quiet_s)]
    # ~120 steps of ~40 ms = ~5 s of engine time: about 5 factors, each held for ~25 steps in a row
    changes = sum(a != b for a, b in zip(ratios, ratios[1:]))
    assert 2 <= changes <= 8
    assert len(set(ratios)) == changes + 1
