import json

import pytest

from lookahead_runner.vllm.knob import KnobError, Setting, check_flags, check_raw_mode, server_argv
from lookahead_runner.vllm.probe import Capabilities, capabilities_from, parse_help_flags


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
    assert (caps.generation, caps.spec_style, caps.lookahead_flag) == ("v1-no-slots", "config-json", "absent")


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
    spec = json.loads(argv[argv.index("--speculative-config") + 1])
    assert spec == {"method": "draft_model", "num_speculative_tokens": 4, "model": "d"}
    assert "--speculative-config" not in server_argv(caps, ["vllm"], "m", "h", 1, [], Setting(0), "draft_model", "d")
    old = Capabilities("0.8.1", frozenset())
    legacy = server_argv(old, ["vllm"], "m", "h", 1, [], Setting(3), "draft_model", "d")
    assert legacy[-4:] == ["--speculative-model", "d", "--num-speculative-tokens", "3"]


def test_shell_metacharacters_stay_one_argument(fixtures_dir):
    caps = caps_032(fixtures_dir)
    model = "m; rm -rf / $(whoami)"
    argv = server_argv(caps, ["vllm"], model, "h", 1, [], Setting(2), "draft_model", "d`x`")
    assert model in argv
    assert json.loads(argv[-1])["model"] == "d`x`"


def test_unknown_extra_flag_is_refused(fixtures_dir):
    with pytest.raises(KnobError, match="server.extra_args: .* --num-lookahead-slots"):
        check_flags(caps_032(fixtures_dir), ["--max-num-seqs", "8", "--num-lookahead-slots", "4"])


def test_argv_template_wraps_the_server_in_a_launcher(fixtures_dir):
    caps = caps_032(fixtures_dir)
    template = ["docker", "run", "--rm", "-p", "{port}:8000", "vllm/vllm-openai", "--model", "{model}", "{args}"]
    argv = server_argv(caps, ["vllm"], "m x", "h", 9001, ["--max-num-seqs", "8"], Setting(2), "draft_model", "d",
                       template)
    assert argv[:8] == ["docker", "run", "--rm", "-p", "9001:8000", "vllm/vllm-openai", "--model", "m x"]
    assert argv[8:10] == ["--max-num-seqs", "8"] and argv[10] == "--speculative-config"
    assert json.loads(argv[11])["num_speculative_tokens"] == 2


def test_argv_template_must_place_args_and_port():
    from lookahead_runner.config import ConfigError, config_from_dict

    with pytest.raises(ConfigError, match=r"server.argv_template: .*\{args\}"):
        config_from_dict({"server": {"argv_template": ["ssh", "gpu1", "vllm", "serve", "--port", "{port}"]}})
    with pytest.raises(ConfigError, match=r"server.argv_template: .*\{port\}"):
        config_from_dict({"server": {"argv_template": ["ssh", "gpu1", "vllm", "serve", "{args}"]}})
