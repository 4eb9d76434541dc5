"""Pins the metric names read from a real vLLM 0.32 /metrics: a wrong name never fails a run,
it only empties a column, so the recorded text is the test."""
from lookahead_runner.telemetry.prometheus import parse


def test_spec_decode_counters_from_real_032_metrics(fixtures_dir):
    values = parse((fixtures_dir / "metrics-specdecode.txt").read_text())
    assert values["generation_tokens_total"] == 30848.0
    assert values["spec_drafts_total"] == 12921.0
    assert values["spec_draft_tokens_total"] == 51684.0
    assert values["spec_accepted_total"] == 17827.0  # per-position series are not added in
    assert values["running"] == 0.0 and values["kv_usage"] == 0.0


def test_kv_pool_size_from_the_cache_config_info_labels(fixtures_dir):
    assert parse((fixtures_dir / "metrics-specdecode.txt").read_text())["kv_pool_tokens"] == 262144.0
    blocks_only = 'vllm:cache_config_info{block_size="16",engine="0",num_gpu_blocks="100"} 1.0\n'
    assert parse(blocks_only)["kv_pool_tokens"] == 1600.0
    assert "kv_pool_tokens" not in parse("vllm:num_requests_running 3\n")


def test_no_spec_series_without_speculation(fixtures_dir):
    values = parse((fixtures_dir / "metrics-nospec.txt").read_text())
    assert values["generation_tokens_total"] == 67136.0
    assert not any(name.startswith("spec_") for name in values)


def test_old_kv_name_and_engines_are_averaged():
    text = "\n".join([
        "# TYPE vllm:gpu_cache_usage_perc gauge",
        'vllm:gpu_cache_usage_perc{engine="0",model_name="m"} 0.5',
        'vllm:gpu_cache_usage_perc{engine="1",model_name="m"} 0.25',
        "# TYPE vllm:num_requests_running gauge",
        'vllm:num_requests_running{engine="0",model_name="m"} 3',
        'vllm:num_requests_running{engine="1",model_name="m"} 4',
        "",
    ])
    values = parse(text)
    assert values["kv_usage"] == 0.375
    assert values["running"] == 7


def test_accepted_tokens_per_draft_position_from_real_032_metrics(fixtures_dir):
    """The per-position counters come back one signal per position (their _created series do not)."""
    values = parse((fixtures_dir / "metrics-specdecode.txt").read_text())
    positions = {name: value for name, value in values.items() if name.startswith("spec_accepted_pos_")}
    assert positions == {"spec_accepted_pos_0": 5503.0, "spec_accepted_pos_1": 4108.0,
                         "spec_accepted_pos_2": 4108.0, "spec_accepted_pos_3": 4108.0}
