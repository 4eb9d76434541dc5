"""The simulator's /metrics text carries the families of the emulated vLLM generation.

A wrong metric name never fails a run, it only empties a column; so the names the runner
reads are pinned against the recorded vLLM 0.32 output (fixtures metrics-specdecode.txt and
metrics-nospec.txt) and, for V0 and 0.10, against vllm-facts.md through the runner's parser.
"""
from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from lookahead_runner.telemetry.prometheus import parse

from lookahead_runner.sim.metrics import SimMetrics
from lookahead_runner.sim.kv_pool import EngineConfig
from lookahead_runner.sim.model import EngineModel
from lookahead_runner.sim.profiles import get_profile
from lookahead_runner.sim.scenarios import get_scenario

MODEL = "sim/llama-3-8b"
CONTRACT_FAMILIES = {  # names as the parser reports them (counters without _total)
    "vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
    "vllm:num_preemptions", "vllm:prompt_tokens", "vllm:generation_tokens", "vllm:request_success",
    "vllm:cache_config_info", "vllm:time_to_first_token_seconds", "vllm:inter_token_latency_seconds",
    "vllm:e2e_request_latency_seconds", "vllm:request_queue_time_seconds",
}
SPEC_FAMILIES = {
    "vllm:spec_decode_num_drafts", "vllm:spec_decode_num_draft_tokens", "vllm:spec_decode_num_accepted_tokens",
    "vllm:spec_decode_num_accepted_tokens_per_pos",
}


def families(text: str) -> dict:
    return {f.name: f for f in text_string_to_metric_families(text) if f.name.startswith("vllm:")}


def sim_metrics_text(k: int, version: str = "0.32.0", dropped: frozenset[str] = frozenset()) -> str:
    cfg = EngineConfig(num_speculative_tokens=k, method="draft_model" if k else "", lookahead_tokens=k)
    model = EngineModel(get_scenario("tight-kv"), cfg)
    for i in range(6):
        model.add_request(f"r{i}", 30, 20, ignore_eos=True)
    while model.has_work():
        model.step()
    metrics = SimMetrics(model, MODEL, get_profile(version), dropped)
    metrics.ttft_s.observe(0.05)
    metrics.itl_s.observe(0.03)
    return metrics.render().decode()


def test_spec_decode_families_match_the_recorded_server(fixtures_dir):
    real = families((fixtures_dir / "metrics-specdecode.txt").read_text())
    sim = families(sim_metrics_text(4))
    wanted = CONTRACT_FAMILIES | SPEC_FAMILIES
    assert wanted <= set(real), wanted - set(real)
    assert wanted <= set(sim), wanted - set(sim)
    for name in wanted:
        assert sim[name].type == real[name].type, name


def test_no_spec_families_without_speculation_like_the_recorded_server(fixtures_dir):
    real = families((fixtures_dir / "metrics-nospec.txt").read_text())
    sim = families(sim_metrics_text(0))
    assert not SPEC_FAMILIES & set(real)
    assert not SPEC_FAMILIES & set(sim)
    assert CONTRACT_FAMILIES <= set(sim)


def test_samples_carry_vllm_names_labels_and_the_engine_counts():
    sim = families(sim_metrics_text(4))
    samples = {s.name: s for f in sim.values() for s in f.samples}
    labels = {"engine": "0", "model_name": MODEL}
    assert samples["vllm:generation_tokens_total"].labels == labels
    assert samples["vllm:generation_tokens_total"].value == 6 * 20
    assert samples["vllm:prompt_tokens_total"].value == 6 * 30
    assert "vllm:num_preemptions_total" in samples and "vllm:num_preemptions_created" in samples
    per_pos = [s for s in sim["vllm:spec_decode_num_accepted_tokens_per_pos"].samples if s.name.endswith("_total")]
    assert [s.labels["position"] for s in per_pos] == ["0", "1", "2", "3"]
    drafts = samples["vllm:spec_decode_num_drafts_total"].value
    accepted = samples["vllm:spec_decode_num_accepted_tokens_total"].value
    assert samples["vllm:spec_decode_num_draft_tokens_total"].value == 4 * drafts
    assert sum(s.value for s in per_pos) == accepted
    info = sim["vllm:cache_config_info"].samples[0]
    assert info.labels["block_size"] == "16" and int(info.labels["num_gpu_blocks"]) > 0
    assert samples["vllm:time_to_first_token_seconds_count"].value == 1


@pytest.mark.parametrize("fixture, k", [("metrics-specdecode.txt", 4), ("metrics-nospec.txt", 0)])
def test_0_32_exposes_exactly_the_families_of_the_recorded_server(fixtures_dir, fixture, k):
    real = families((fixtures_dir / fixture).read_text())
    sim = families(sim_metrics_text(k))
    assert set(sim) == set(real), (set(sim) ^ set(real))
    assert {name: f.type for name, f in sim.items()} == {name: f.type for name, f in real.items()}
    assert set(parse(sim_metrics_text(k))) == set(parse((fixtures_dir / fixture).read_text()))


V1_SIGNALS = {"running", "waiting", "kv_usage", "preemptions_total", "prompt_tokens_total",
              "generation_tokens_total", "requests_success_total", "kv_pool_tokens"}


@pytest.mark.parametrize("version, k, signals", [
    ("0.6.6", 4, V1_SIGNALS | {"spec_draft_tokens_total", "spec_accepted_total", "spec_emitted_total"}),
    ("0.6.6", 0, V1_SIGNALS),
    ("0.10.2", 4, V1_SIGNALS | {"spec_drafts_total", "spec_draft_tokens_total", "spec_accepted_total"}
     | {f"spec_accepted_pos_{i}" for i in range(4)}),   # accepted tokens per draft position, one signal each
    ("0.10.2", 0, V1_SIGNALS),
])
def test_older_generations_parse_into_their_signals(version, k, signals):
    assert set(parse(sim_metrics_text(k, version))) == signals


def test_v0_names_gauges_and_labels():
    sim = families(sim_metrics_text(4, "0.6.6"))
    assert {"vllm:gpu_cache_usage_perc", "vllm:num_requests_swapped", "vllm:spec_decode_draft_acceptance_rate",
            "vllm:spec_decode_efficiency", "vllm:spec_decode_num_emitted_tokens",
            "vllm:time_per_output_token_seconds"} <= set(sim)
    absent = {"vllm:kv_cache_usage_perc", "vllm:spec_decode_num_drafts", "vllm:inter_token_latency_seconds"}
    assert not absent & set(sim)
    assert sim["vllm:spec_decode_efficiency"].type == "gauge"
    samples = {s.name: s for f in sim.values() for s in f.samples}
    assert samples["vllm:generation_tokens_total"].labels == {"model_name": MODEL}
    rate = samples["vllm:spec_decode_draft_acceptance_rate"].value
    assert rate == samples["vllm:spec_decode_num_accepted_tokens_total"].value / \
        samples["vllm:spec_decode_num_draft_tokens_total"].value


def test_0_10_names():
    sim = families(sim_metrics_text(4, "0.10.2"))
    assert {"vllm:kv_cache_usage_perc", "vllm:time_per_output_token_seconds", "vllm:spec_decode_num_drafts"} <= set(sim)
    assert not {"vllm:gpu_cache_usage_perc", "vllm:inter_token_latency_seconds", "vllm:engine_sleep_state"} & set(sim)


def test_a_dropped_metric_family_is_absent_and_the_parser_misses_only_it():
    """--sim-fault drop-metric=NAME: a gauge by its name, a counter with or without _total."""
    from lookahead_runner.sim.faults import parse_faults

    faults = parse_faults(["drop-metric=vllm:kv_cache_usage_perc", "drop-metric=vllm:spec_decode_num_drafts_total",
                           "drop-metric=vllm:spec_decode_num_accepted_tokens"])
    text = sim_metrics_text(4, dropped=faults.dropped_metrics)
    names = set(families(text))
    assert not names & {"vllm:kv_cache_usage_perc", "vllm:spec_decode_num_drafts",
                        "vllm:spec_decode_num_accepted_tokens"}
    assert {"vllm:num_requests_running", "vllm:spec_decode_num_draft_tokens", "vllm:num_preemptions"} <= names
    signals = parse(text)
    assert "kv_usage" not in signals and "spec_accepted_total" not in signals and "running" in signals
    assert "kv_usage" in parse(sim_metrics_text(4))


def test_drop_metric_needs_a_name():
    from lookahead_runner.sim.faults import parse_faults

    with pytest.raises(ValueError, match="drop-metric needs the metric's name"):
        parse_faults(["drop-metric"])
