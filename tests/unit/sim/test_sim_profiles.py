"""The simulator's vLLM generations, each as vllm-facts.md describes it, read by the runner's own probe."""
from __future__ import annotations

import re

import pytest

from lookahead_runner.sim import logs
from lookahead_runner.sim.__main__ import main
from lookahead_runner.sim.cli import ConfigError, help_text, parse_serve
from lookahead_runner.sim.model import EngineModel
from lookahead_runner.sim.profiles import PROFILES, get_profile
from lookahead_runner.sim.scenarios import get_scenario
from lookahead_runner.vllm.probe import capabilities_from, parse_help_flags

V0, V10, V32 = (get_profile(v) for v in ("0.6.6", "0.10.2", "0.32.0"))
EXPECTED = {  # version: (generation, spec_style, lookahead_flag, help_source), per vllm-facts.md
    "0.6.6": ("v0", "legacy-flags", "effective", "--help"),
    "0.10.2": ("v1", "config-json", "ignored", "--help=all"),
    "0.32.0": ("v1-no-slots", "shorthand", "absent", "--help=all"),
}


def probe_texts(version: str) -> tuple[str, str]:
    """What `serve --help=all` and `serve --help` print (an argparse error for V0's --help=all)."""
    profile = get_profile(version)
    try:
        help_all = help_text(["--help=all"], profile)
    except SystemExit as exc:
        assert exc.code == 2
        help_all = "vllm serve: error: argument -h/--help: ignored explicit argument 'all'"
    return help_all, help_text(["--help"], profile)


@pytest.mark.parametrize("version", sorted(EXPECTED))
def test_the_probe_reads_each_profile_as_the_facts_say(version):
    help_all, help_plain = probe_texts(version)
    caps = capabilities_from(version + "\n", help_all, help_plain)
    assert (caps.generation, caps.spec_style, caps.lookahead_flag, caps.help_source) == EXPECTED[version]
    assert get_profile(version).generation == caps.generation
    assert {"--max-num-seqs", "--gpu-memory-utilization", "--port", "--sim-scenario"} <= caps.flags


def test_0_32_lists_exactly_the_flags_and_summary_of_the_recorded_server(fixtures_dir):
    real_all = (fixtures_dir / "serve-help-all.txt").read_text()
    sim_flags = {f for f in parse_help_flags(help_text(["--help=all"], V32)) if not f.startswith("--sim-")}
    assert sim_flags == parse_help_flags(real_all)
    real_summary = (fixtures_dir / "serve-help.txt").read_text()
    assert help_text(["--help"], V32) == real_summary[real_summary.index("usage:"):]


def test_v0_prints_one_flat_help_and_knows_no_help_topics(capsys):
    text = help_text(["--help"], V0)
    assert text.startswith("usage: vllm serve <model_tag> [options]") and "Config Groups" not in text
    flags = parse_help_flags(text)
    assert {"--num-lookahead-slots", "--speculative-model", "--num-speculative-tokens",
            "--ngram-prompt-lookup-max", "--speculative-disable-by-batch-size"} <= flags
    assert "--speculative-config" not in flags and "(default:" not in text
    with pytest.raises(SystemExit) as exc:
        help_text(["--help=all"], V0)
    assert exc.value.code == 2
    assert "error: argument -h/--help: ignored explicit argument 'all'" in capsys.readouterr().err


def test_0_10_prints_every_flag_on_plain_help_and_filters_topics():
    text = help_text(["--help"], V10)
    assert "Config Groups" not in text and "--help=listgroup" in text
    flags = parse_help_flags(text)
    assert {"--num-lookahead-slots", "--speculative-config"} <= flags and "--speculative-model" not in flags
    assert help_text(["--help=all"], V10) == text
    assert help_text(["--help=schedulerconfig"], V10).startswith("SchedulerConfig:")
    assert "  - CacheConfig" in help_text(["--help=listgroup"], V10)


@pytest.mark.parametrize("version, flag", [
    ("0.6.6", "--speculative-config"), ("0.10.2", "--speculative-model"), ("0.10.2", "--num-speculative-tokens"),
    ("0.32.0", "--num-lookahead-slots"), ("0.32.0", "--speculative-model"),
])
def test_flags_a_generation_lacks_are_argparse_errors(version, flag, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--sim-version", version, "serve", "m", flag, "4"])
    assert exc.value.code == 2
    assert f"vllm serve: error: unrecognized arguments: {flag}" in capsys.readouterr().err


SPEC_JSON = '{"method":"eagle","model":"e","num_speculative_tokens":3}'


@pytest.mark.parametrize("version, argv, k, lookahead", [
    # V0: the literal flag reserves KV without speculation and gives way to K with it
    ("0.6.6", ["--num-lookahead-slots", "8"], 0, 8),
    ("0.6.6", ["--num-lookahead-slots", "8", "--speculative-model", "d", "--num-speculative-tokens", "3"], 3, 3),
    ("0.6.6", ["--speculative-model", "[ngram]", "--num-speculative-tokens", "3", "--ngram-prompt-lookup-max", "4"],
     3, 3),
    # V1 (0.10): parsed, read nowhere; the scheduler's lookahead is K for model drafters, 0 for ngram
    ("0.10.2", ["--num-lookahead-slots", "8"], 0, 0),
    ("0.10.2", ["--num-lookahead-slots", "8", "--speculative-config", SPEC_JSON], 3, 3),
    ("0.10.2", ["--speculative-config.method", "ngram", "--speculative-config.num_speculative_tokens", "3"], 3, 0),
    # 0.12+: K, K+1 for dflash, 0 for lookups; --spec-* shorthands
    ("0.32.0", ["--spec-method", "eagle3", "--spec-model", "x", "--spec-tokens", "4"], 4, 4),
    ("0.32.0", ["--spec-method", "dflash", "--spec-tokens", "4"], 4, 5),
    ("0.32.0", ["-sc", '{"method":"suffix","num_speculative_tokens":4}'], 4, 0),
])
def test_the_lookahead_each_generation_really_reserves(version, argv, k, lookahead):
    engine = parse_serve(["m", *argv], get_profile(version)).engine
    assert (engine.num_speculative_tokens, engine.lookahead_tokens) == (k, lookahead)


def test_a_raw_slots_sweep_moves_kv_and_the_real_batch_on_v0_only():
    def closed_loop(version: str, slots: int, users: int = 96) -> tuple[float, float]:
        args = parse_serve(["m", "--num-lookahead-slots", str(slots), "--max-num-seqs", "128"], get_profile(version))
        model = EngineModel(get_scenario("tight-kv"), args.engine)
        sent = 0
        for sent in range(users):
            model.add_request(f"r{sent}", 128, 64, ignore_eos=True)
        t_s = kv_area = running_area = 0.0
        for _ in range(20_000):
            if t_s >= 20.0:
                break
            result = model.step()
            t_s += result.duration_s
            kv_area += model.kv_usage * result.duration_s
            running_area += model.num_running * result.duration_s
            for out in result.outputs:
                if out.finished:
                    sent += 1
                    model.add_request(f"r{sent}", 128, 64, ignore_eos=True)
        return kv_area / t_s, running_area / t_s

    v0 = [closed_loop("0.6.6", slots) for slots in (0, 64, 256)]
    assert v0[0][0] < v0[1][0] < v0[2][0]             # KV usage climbs with the literal flag
    assert v0[2][1] < v0[0][1] - 5                    # and at 256 slots the real batch drops
    assert closed_loop("0.10.2", 256) == closed_loop("0.10.2", 0)   # V1 ignores it


def test_speculation_errors_each_generation_raises():
    with pytest.raises(ConfigError, match="Expected both speculative_model and num_speculative_tokens"):
        parse_serve(["m", "--speculative-model", "d"], V0)
    with pytest.raises(ConfigError, match="num_speculative_tokens was provided without speculative_model"):
        parse_serve(["m", "--num-speculative-tokens", "3"], V0)
    with pytest.raises(ConfigError, match="ngram_prompt_lookup_max"):
        parse_serve(["m", "--speculative-model", "[ngram]", "--num-speculative-tokens", "3"], V0)
    with pytest.raises(ConfigError, match="NotImplementedError: Speculative decoding with draft model"):
        parse_serve(["m", "--speculative-config", '{"model":"d","num_speculative_tokens":3}'], V10)
    assert parse_serve(["m", "-sc", '{"model":"d","num_speculative_tokens":3}'], V32).engine.method == "draft_model"


def test_v0_can_stop_drafting_above_a_batch_size():
    args = parse_serve(["m", "--speculative-model", "d", "--num-speculative-tokens", "4",
                        "--speculative-disable-by-batch-size", "3"], V0)
    model = EngineModel(get_scenario("roomy-kv"), args.engine)
    for i in range(2):
        model.add_request(f"a{i}", 8, 40, ignore_eos=True)
    for _ in range(3):
        model.step()
    assert model.counters.spec_drafts > 0
    model.add_request("b", 8, 40, ignore_eos=True)
    model.step()                                       # two were running: they draft; the third is admitted
    drafts = model.counters.spec_drafts
    for _ in range(3):
        model.step()
    assert model.counters.spec_drafts == drafts        # three running: no drafts, lookahead still held
    assert all(s.blocks * 16 >= s.computed + 4 for s in model.running)


def test_profile_selection_by_flag_env_and_prefix(capsys, monkeypatch):
    assert main(["--sim-version", "0.6.6", "--version"]) == 0
    assert main(["--sim-version=0.10", "--version"]) == 0
    monkeypatch.setenv("LOOKAHEAD_SIM_VLLM_VERSION", "0.6.6")
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.split() == ["0.6.6", "0.10.2", "0.6.6"]
    assert main(["--sim-version", "0.9.9", "--version"]) == 2
    assert "known: " + ", ".join(PROFILES) in capsys.readouterr().err


def test_log_lines_follow_the_generation():
    lines: list[str] = []
    logs.Logger(V0, lines.append)("INFO", "metrics.py:467", "hello")
    logs.Logger(V32, lines.append)("INFO", "loggers.py:259", "hello", role="EngineCore")
    assert re.fullmatch(r"INFO \d\d-\d\d \d\d:\d\d:\d\d metrics\.py:467\] hello", lines[0])
    assert re.fullmatch(r"\(EngineCore pid=\d+\) INFO \d\d-\d\d \d\d:\d\d:\d\d \[loggers\.py:259\] hello", lines[1])
    window = logs.StatsWindow(5.0, 500, 1000, 100, 400, 300, [90, 80, 70, 60], 12, 3, 0.5, 4, 100, 400, 300)
    (_, v0_stats), (_, v0_spec) = logs.stats(V0, window)
    assert "Running: 12 reqs, Swapped: 0 reqs, Pending: 3 reqs, GPU KV cache usage: 50.0%" in v0_stats
    assert v0_spec.startswith("Speculative metrics: Draft acceptance rate: 0.750, System efficiency: 0.800")
    (_, v1_stats), (_, v1_spec) = logs.stats(V32, window)
    assert v1_stats.startswith("Engine 000: Avg prompt throughput: 100.0 tokens/s")
    assert "Mean acceptance length: 4.00" in v1_spec and "Avg Draft acceptance rate: 75.0%" in v1_spec
    assert logs.kv_cache(V0, 100, 16, 2.0, 1024)[0][1] == "# GPU blocks: 100, # CPU blocks: 2048"
    assert "GPU KV cache size: 1,600 tokens" in logs.kv_cache(V32, 100, 16, 2.0, 1024)[0][1]
