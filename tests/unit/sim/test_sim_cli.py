"""The simulator's vllm-like argv: flags, speculative config, help screens, errors."""
from __future__ import annotations

import re

import pytest

from lookahead_runner.sim.__main__ import main
from lookahead_runner.sim.cli import ConfigError, help_text, parse_serve
from lookahead_runner.sim.profiles import get_profile

PROFILE = get_profile("0.32.0")


def test_version(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == "0.32.0"


def test_python_subcommand_runs_code_against_the_emulated_vllm(capsys):
    code = ("import dataclasses, vllm; from vllm.config import SpeculativeConfig as c; "
            "print(vllm.__version__, [f.type for f in dataclasses.fields(c) if 'per_batch' in f.name])")
    assert main(["--sim-version", "0.32.0", "python", "-c", code]) == 0
    assert capsys.readouterr().out.strip() == "0.32.0 ['list[tuple[int, int, int]] | None']"
    assert main(["--sim-version", "0.10.2", "python", "-c", code]) == 0
    assert capsys.readouterr().out.strip() == "0.10.2 []"
    assert main(["python", "-c", "raise SystemExit(3)"]) == 3
    assert main(["python", "script.py"]) == 2 and "only `-c CODE`" in capsys.readouterr().err
    import sys
    assert "vllm" not in sys.modules or getattr(sys.modules["vllm"], "__version__", "") != "0.32.0"


def test_serve_args_become_an_engine_config():
    args = parse_serve(["sim/llama-3-8b", "--port", "8123", "--host", "127.0.0.1", "--max-num-seqs", "64",
                        "--speculative-config", '{"method":"draft_model","model":"d","num_speculative_tokens":4}',
                        "--gpu-memory-utilization", "0.9", "--max-model-len", "2k", "--seed", "7"], PROFILE)
    e = args.engine
    assert (args.model, args.served_model_name, args.host, args.port) == ("sim/llama-3-8b", "sim/llama-3-8b",
                                                                          "127.0.0.1", 8123)
    assert (e.max_num_seqs, e.num_speculative_tokens, e.method, e.lookahead_tokens) == (64, 4, "draft_model", 4)
    assert (e.gpu_memory_utilization, e.max_model_len, e.seed, e.block_size) == (0.9, 2000, 7, 16)
    assert args.non_default["max_num_seqs"] == 64 and "sim_scenario" not in args.non_default


def test_no_speculative_config_is_k0_and_ngram_reserves_no_lookahead():
    assert parse_serve(["m"], PROFILE).engine.num_speculative_tokens == 0
    ngram = parse_serve(["m", "-sc", '{"model":"[ngram]","num_speculative_tokens":3}'], PROFILE).engine
    assert (ngram.method, ngram.num_speculative_tokens, ngram.lookahead_tokens) == ("ngram", 3, 0)


def test_dotted_speculative_config_keys():
    e = parse_serve(["m", "--speculative-config.method", "eagle", "--speculative-config.num_speculative_tokens=5"],
                    PROFILE).engine
    assert (e.method, e.num_speculative_tokens, e.lookahead_tokens) == ("eagle", 5, 5)


def test_shorthand_flags_merge_like_vllm_032():
    from lookahead_runner.vllm.knob import speculation_args
    from lookahead_runner.vllm.probe import Capabilities

    caps = Capabilities("0.32.0", frozenset({"--spec-method", "--spec-model", "--spec-tokens", "--speculative-config"}))
    for method, lookahead in (("draft_model", 3), ("ngram", 0)):
        e = parse_serve(["m", *speculation_args(caps, 3, method, "d")], PROFILE).engine
        assert (e.method, e.num_speculative_tokens, e.lookahead_tokens) == (method, 3, lookahead)
    assert parse_serve(["m", "--spec-model", "d", "--spec-tokens", "2"], PROFILE).engine.method == "draft_model"
    # real 0.32: a key given both ways is refused; dotted keys replace a whole JSON argument
    with pytest.raises(ConfigError, match=r"--spec-tokens and --speculative-config\['num_speculative_tokens'\] are mutually"):
        parse_serve(["m", "-sc", '{"num_speculative_tokens":4}', "--spec-method", "ngram", "--spec-tokens", "2"], PROFILE)
    with pytest.raises(ConfigError, match="num_speculative_tokens"):
        parse_serve(["m", "-sc", '{"method":"ngram","num_speculative_tokens":2}',
                     "--speculative-config.prompt_lookup_max", "4"], PROFILE)


def test_bad_speculative_config_is_an_engine_config_error():
    with pytest.raises(ConfigError, match="num_speculative_tokens"):
        parse_serve(["m", "--speculative-config", '{"method":"draft_model"}'], PROFILE)
    with pytest.raises(ConfigError, match="method"):
        parse_serve(["m", "--speculative-config", '{"method":"magic","num_speculative_tokens":2}'], PROFILE)


def test_unknown_flag_and_removed_lookahead_flag_exit_2(capsys):
    for flag in ("--x", "--num-lookahead-slots"):
        with pytest.raises(SystemExit) as exc:
            main(["serve", "m", flag, "4"])
        assert exc.value.code == 2
        assert f"vllm serve: error: unrecognized arguments: {flag}" in capsys.readouterr().err


def test_sim_flags_are_accepted_and_listed_in_their_own_group():
    args = parse_serve(["m", "--sim-scenario", "roomy-kv", "--sim-fault", "http-500=0.5",
                        "--sim-set", "alpha=0.5"], PROFILE)
    assert args.scenario.name == "roomy-kv" and args.scenario.alpha == 0.5
    assert args.faults.get("http-500") == 0.5
    assert "--sim-scenario" in help_text(["--help=simulatorconfig"], PROFILE)
    assert "--sim-" not in help_text(["--help"], PROFILE)
    with pytest.raises(SystemExit):
        parse_serve(["m", "--sim-scenario", "nope"], PROFILE)


def test_help_summary_lists_groups_and_help_all_lists_flags(fixtures_dir):
    summary = help_text(["--help"], PROFILE)
    assert summary.startswith("usage: vllm serve [model_tag] [options]")
    assert "Config Groups:" in summary and "vllm serve --help=all" in summary
    full = help_text(["--help=all"], PROFILE)
    flags = set(re.findall(r"^ {2}(--[a-z0-9-]+)", full, flags=re.M))
    assert {"--max-num-seqs", "--speculative-config", "--gpu-memory-utilization", "--port"} <= flags
    assert "--num-lookahead-slots" not in full
    real = set(re.findall(r"^ {2}(--[a-z0-9-]+)", (fixtures_dir / "serve-help-all.txt").read_text(), flags=re.M))
    vllm_flags = {f for f in flags if not f.startswith("--sim-")}
    assert vllm_flags <= real, vllm_flags - real   # the simulator never invents a vLLM flag 0.32 lacks


def test_help_for_a_group_or_a_word():
    assert help_text(["--help=schedulerconfig"], PROFILE).startswith("SchedulerConfig:")
    assert "--max-num-seqs" in help_text(["--help=max_num_seqs"], PROFILE)
    assert help_text(["--help=lookahead"], PROFILE).startswith("No group or arguments matching")
    assert help_text(["m", "--port", "1"], PROFILE) is None
