import json

import pytest

from lookahead_runner.vllm.knob import (SPEC_FLAG_CARRIES, KnobError, Setting, check_flags, check_raw_mode, flag_value,
                                        runner_flag, server_argv)
from lookahead_runner.vllm.probe import SPEC_STYLE_FLAGS, Capabilities, capabilities_from, parse_help_flags


def caps_032(fixtures_dir):
    return capabilities_from(
        "Triton is installed, but doesn't include CPU backend.\n0.32.0\n",
        (fixtures_dir / "serve-help-all.txt").read_text(),
        (fixtures_dir / "serve-help.txt").read_text(),
    )


def test_help_all_of_032_gives_flags_without_lookahead(fixtures_dir):
    caps = caps_032(fixtures_dir)
    assert caps.version == "0.32.0"
    assert caps.help_source == "--help=all"
    assert {"--max-num-seqs", "--speculative-config", "--port", "--no-enable-log-requests"} <= caps.flags
    assert "--num-lookahead-slots" not in caps.flags
    assert (caps.generation, caps.spec_style, caps.lookahead_flag) == ("v1-no-slots", "shorthand", "absent")
    assert caps.spec_styles == ("shorthand", "config-json")


def test_group_summary_help_has_no_flags(fixtures_dir):
    assert len(parse_help_flags((fixtures_dir / "serve-help.txt").read_text())) < 10


def test_flat_help_of_old_versions_is_used():
    help_text = "usage: vllm serve\n\noptions:\n" + "".join(
        f"  --flag-{i} X        help\n" for i in range(12)) + "  --num-lookahead-slots NUM_LOOKAHEAD_SLOTS\n"
    caps = capabilities_from("0.6.6\n", None, help_text)
    assert caps.help_source == "--help"
    assert caps.lookahead_flag == "effective"
    assert caps.spec_style == "legacy-flags"


def test_raw_mode_refused_on_032_with_the_fix(fixtures_dir):
    with pytest.raises(KnobError) as err:
        check_raw_mode(caps_032(fixtures_dir))
    assert "removed in 0.12" in str(err.value) and "raw_lookahead_slots = false" in str(err.value)


def test_raw_mode_refused_where_v1_ignores_it():
    caps = Capabilities("0.10.1", frozenset({"--num-lookahead-slots", "--speculative-config"} | {f"--f{i}" for i in range(10)}))
    with pytest.raises(KnobError, match="never reads it"):
        check_raw_mode(caps)


def test_k_rendering_per_generation(fixtures_dir):
    caps = caps_032(fixtures_dir)
    argv = server_argv(caps, ["vllm"], "m", "127.0.0.1", 9000, ["--max-num-seqs", "64"], Setting(4), "draft_model", "d")
    assert argv[:8] == ["vllm", "serve", "m", "--host", "127.0.0.1", "--port", "9000", "--max-num-seqs"]
    # 0.32 lists --per-request-spec-decode-metrics: a life that speculates gets summary (the baseline, below, not)
    assert argv[9:] == ["--per-request-spec-decode-metrics", "summary",
                        "--spec-method", "draft_model", "--spec-tokens", "4", "--spec-model", "d"]
    ngram = server_argv(caps, ["vllm"], "m", "h", 1, [], Setting(3), "ngram", "d")
    assert ngram[-6:] == ["--spec-method", "ngram", "--spec-tokens", "3", "--speculative-config.prompt_lookup_max", "4"]
    as_json = server_argv(caps, ["vllm"], "m", "h", 1, [], Setting(4), "draft_model", "d", style="config-json")
    spec = json.loads(as_json[as_json.index("--speculative-config") + 1])
    assert spec == {"method": "draft_model", "num_speculative_tokens": 4, "model": "d"}
    assert server_argv(caps, ["vllm"], "m", "h", 1, [], Setting(0), "draft_model", "d")[-1] == "1"
    assert "--per-request-spec-decode-metrics" not in server_argv(caps, ["vllm"], "m", "h", 1, [], Setting(0),
                                                                  "draft_model", "d")
    v10 = Capabilities("0.10.2", frozenset({"--speculative-config", "--port"}))
    assert server_argv(v10, ["vllm"], "m", "h", 1, [], Setting(2), "eagle", "d")[-2] == "--speculative-config"
    old = Capabilities("0.8.1", frozenset())
    legacy = server_argv(old, ["vllm"], "m", "h", 1, [], Setting(3), "draft_model", "d")
    assert legacy[-4:] == ["--speculative-model", "d", "--num-speculative-tokens", "3"]


def test_shell_metacharacters_stay_one_argument(fixtures_dir):
    caps = caps_032(fixtures_dir)
    model = "m; rm -rf / $(whoami)"
    argv = server_argv(caps, ["vllm"], model, "h", 1, [], Setting(2), "draft_model", "d`x`")
    assert model in argv and argv[-1] == "d`x`"
    argv = server_argv(caps, ["vllm"], model, "h", 1, [], Setting(2), "draft_model", "d`x`", style="config-json")
    assert json.loads(argv[-1])["model"] == "d`x`"


def test_the_runner_owns_the_per_request_metrics_flag():
    from lookahead_runner.config import ConfigError, config_from_dict

    with pytest.raises(ConfigError) as err:
        config_from_dict({"server": {"extra_args": ["--per-request-spec-decode-metrics=detailed"]}}, "t.toml")
    assert str(err.value) == ("t.toml: server.extra_args: --per-request-spec-decode-metrics is written by the runner: "
                              "every life with K > 0 gets summary where this vLLM has the flag (each response's own "
                              "acceptance); remove it")
    v10 = Capabilities("0.10.2", frozenset({"--speculative-config", "--port"}))
    assert "--per-request-spec-decode-metrics" not in server_argv(v10, ["vllm"], "m", "h", 1, [], Setting(2), "eagle", "d")


def test_unknown_extra_flag_is_refused(fixtures_dir):
    with pytest.raises(KnobError, match="server.extra_args: .* --num-lookahead-slots"):
        check_flags(caps_032(fixtures_dir), ["--max-num-seqs", "8", "--num-lookahead-slots", "4"])


def test_argv_template_wraps_the_server_in_a_launcher(fixtures_dir):
    caps = caps_032(fixtures_dir)
    template = ["docker", "run", "--rm", "-p", "{port}:8000", "vllm/vllm-openai", "--model", "{model}", "{args}"]
    argv = server_argv(caps, ["vllm"], "m x", "h", 9001, ["--max-num-seqs", "8"], Setting(2), "draft_model", "d",
                       template)
    assert argv[:8] == ["docker", "run", "--rm", "-p", "9001:8000", "vllm/vllm-openai", "--model", "m x"]
    assert argv[8:] == ["--max-num-seqs", "8", "--per-request-spec-decode-metrics", "summary",
                        "--spec-method", "draft_model", "--spec-tokens", "2", "--spec-model", "d"]


def test_argv_template_must_place_args_and_port():
    from lookahead_runner.config import ConfigError, config_from_dict

    with pytest.raises(ConfigError, match=r"server.argv_template: .*\{args\}"):
        config_from_dict({"server": {"argv_template": ["ssh", "gpu1", "vllm", "serve", "--port", "{port}"]}})
    with pytest.raises(ConfigError, match=r"server.argv_template: .*\{port\}"):
        config_from_dict({"server": {"argv_template": ["ssh", "gpu1", "vllm", "serve", "{args}"]}})


def test_a_flag_style_this_vllm_lacks_is_refused_with_the_fix(fixtures_dir):
    from lookahead_runner.vllm.knob import resolve_style

    v10 = Capabilities("0.10.2", frozenset({"--speculative-config", "--port"}))
    with pytest.raises(KnobError) as err:
        resolve_style(v10, "shorthand")
    assert str(err.value).startswith("speculation.flag_style = 'shorthand': vLLM 0.10.2 does not accept --spec-method")
    assert 'flag_style = "auto" (here: config-json)' in str(err.value)
    assert resolve_style(caps_032(fixtures_dir), "config-json") == "config-json"
    assert resolve_style(Capabilities("0.8.2", frozenset({"--speculative-config", "--speculative-model",
                                                            "--num-speculative-tokens"})), "legacy-flags") == "legacy-flags"


def test_a_schedule_setting_renders_what_the_report_prints(fixtures_dir):
    """The confirmation life starts the schedule with the argv the decision prints (vllm/schedule.py), on its own
    port; a schedule without a speculating range cannot be written and is refused."""
    from lookahead_runner.vllm.schedule import Schedule, render_argv

    caps = caps_032(fixtures_dir)
    ranges = ((1, 18, 4), (19, 1_000_000, 0))
    printed = render_argv(Schedule.from_ranges(ranges), {4: server_argv(caps, ["vllm"], "m", "h", 8000, [], Setting(4),
                                                                        "draft_model", "d")})
    confirm = Setting(4, schedule=ranges, label="confirm")
    assert confirm.name == "confirm"
    assert server_argv(caps, ["vllm"], "m", "h", 8000, [], confirm, "draft_model", "d") == printed
    as_json = server_argv(caps, ["vllm"], "m", "h", 1, [], confirm, "draft_model", "d", style="config-json")
    spec = json.loads(as_json[-1])
    assert spec["num_speculative_tokens"] == 4 and spec["num_speculative_tokens_per_batch_size"] == [list(r) for r in ranges]
    with pytest.raises(KnobError, match="cannot be written"):
        server_argv(caps, ["vllm"], "m", "h", 1, [], Setting(0, schedule=((1, 8, 0),), label="confirm"), "draft_model", "d")


def test_every_way_of_writing_k_is_a_flag_the_runner_owns():
    written = {flag for flags in SPEC_STYLE_FLAGS.values() for flag in flags}
    assert written <= set(SPEC_FLAG_CARRIES) and all(runner_flag(flag) == flag for flag in written)
    assert runner_flag("--speculative_config={}") == "--speculative-config"
    assert runner_flag("--speculative-config.method") == "--speculative-config"
    assert runner_flag("--port=8000") == "--port" and runner_flag("--max-num-seqs") == "" and runner_flag("8000") == ""


def test_a_flags_value_is_read_from_either_form_and_the_last_wins():
    assert flag_value(["serve", "m", "--max-num-seqs", "64"], "--max-num-seqs") == "64"
    assert flag_value(["--max-num-seqs=32", "--max-num-seqs", "48"], "--max-num-seqs") == "48"
    assert flag_value(["--max-num-seqs-x=1", "--max-num-seqs"], "--max-num-seqs") is None
