"""`sweep --serve-cmd ... --bench-cmd ...` and `init` with the same flags, then `sweep --config` of what init wrote:
the same lives' argv (the dry run's lines) and the same load and decision, through the CLI on the simulator (its
probe is a subprocess of a few seconds). init's file keeps no secret and comments every key."""
from __future__ import annotations

import re
import sys

import pytest

from lookahead_runner.cli import _config, build_parser, main
from lookahead_runner.config import ResolvedServer, load_config
from lookahead_runner.config.loading import tomllib

SERVE = (f"VLLM_LOGGING_LEVEL=INFO {sys.executable} -m lookahead_runner.sim serve sim/llama-3-8b --max-num-seqs 64 "
         "--api-key sk-not-in-the-file --speculative-config "
         "'{\"method\": \"draft_model\", \"model\": \"sim/llama-68m\", \"num_speculative_tokens\": 4, "
         "\"draft_tensor_parallel_size\": 1}'")
BENCH = ("vllm bench serve --dataset-name random --random-input-len 64 --random-output-len 32 --request-rate 2,4 "
         "--num-prompts 40 --burstiness 0.5 --max-concurrency 8 --goodput ttft:2000 tpot:80 --temperature 0.7")
FLAGS = ["--serve-cmd", SERVE, "--bench-cmd", BENCH, "--k", "0,2,4"]


def lives(capsys) -> list[str]:
    return [line for line in capsys.readouterr().out.splitlines() if re.match(r"^k\d+/r\d+: ", line)]


def test_the_commands_and_inits_toml_give_the_same_argv_and_load(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("VLLM_API_KEY", "sk-not-in-the-file")   # what `sweep --config` reads for ${VLLM_API_KEY}
    out = ["--out", str(tmp_path / "reports")]
    assert main(["sweep", *FLAGS, "--dry-run", *out]) == 0
    from_flags = lives(capsys)
    toml = tmp_path / "my-sweep.toml"
    assert main(["init", *FLAGS, "--out", str(toml)]) == 0
    capsys.readouterr()
    assert main(["sweep", "--config", str(toml), "--dry-run", *out]) == 0
    from_file = lives(capsys)
    assert len(from_flags) == 3 and from_flags == from_file
    assert all('--api-key "$VLLM_API_KEY"' in line for line in from_file)

    flags_config = _config(None, build_parser().parse_args(["sweep", *FLAGS]))
    file_config = load_config(toml)
    for section in ("speculation", "load", "decision", "grid", "sweep"):
        assert getattr(flags_config, section).model_dump() == getattr(file_config, section).model_dump(), section
    assert ResolvedServer.resolve(flags_config.server).masked == ResolvedServer.resolve(file_config.server).masked
    assert [(s.rate, s.duration_s) for s in file_config.load.stages] == [(2.0, 20.0), (4.0, 10.0)]
    assert file_config.decision.slo == {"ttft_p99_ms": 2000.0, "tpot_p99_ms": 80.0}
    assert (file_config.load.max_in_flight, file_config.load.burstiness, file_config.load.temperature) == (8, 0.5, 0.7)


def test_inits_file_keeps_no_secret_and_comments_every_key(tmp_path, capsys):
    assert main(["init", *FLAGS]) == 0
    text = capsys.readouterr().out
    assert "sk-not-in-the-file" not in text and "${VLLM_API_KEY}" in text
    assert tomllib.loads(text)["server"]["env"] == {"VLLM_LOGGING_LEVEL": "INFO"}
    lines = text.splitlines()
    keys = [i for i, line in enumerate(lines) if re.match(r"^[\w\"-]+ = ", line)]
    assert len(keys) >= 15 and all(lines[i - 1].startswith("# ") for i in keys)


def test_init_keeps_a_file_that_is_there_and_refuses_what_cannot_run(tmp_path, capsys):
    toml = tmp_path / "kept.toml"
    toml.write_text("# mine\n")
    assert main(["init", *FLAGS, "--out", str(toml)]) == 2
    assert toml.read_text() == "# mine\n" and "--force" in capsys.readouterr().err
    assert main(["init", "--serve-cmd", SERVE, "--bench-cmd", "vllm bench serve --request-rate 4 --top-k 5"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("lookahead-runner: --bench-cmd: --top-k:") and "\n" not in err


@pytest.mark.parametrize("argv", [["sweep", "--serve-cmd", SERVE, "--bench-cmd", "vllm bench serve --top-k 5",
                                   "--dry-run"],
                                  ["ramp", "--serve-cmd", SERVE, "--bench-cmd", "vllm bench serve --top-k 5",
                                   "--dry-run"]])
def test_sweep_and_ramp_refuse_a_bench_flag_they_cannot_honour_before_anything_starts(argv, capsys):
    assert main(argv) == 2
    assert "--top-k" in capsys.readouterr().err


def test_resume_runs_its_plans_config_not_the_commands(tmp_path, capsys):
    assert main(["sweep", "--resume", str(tmp_path), "--serve-cmd", SERVE]) == 2
    assert "remove --serve-cmd" in capsys.readouterr().err


def test_a_newline_or_control_character_in_the_commands_keeps_inits_file_toml(capsys):
    serve = f"{SERVE} --chat-template 'line one\nbias = 1' --served-model-name 'a\x01b'"
    assert main(["init", "--serve-cmd", serve]) == 0
    data = tomllib.loads(capsys.readouterr().out)   # the header's comment holds the command as it was given
    assert data["server"]["extra_args"][-4:] == ["--chat-template", "line one\nbias = 1", "--served-model-name",
                                                 "a\x01b"]


def test_the_header_names_each_secret_as_the_file_does(capsys):
    # two values that both want HF_TOKEN: the header's "$NAME" and the file's ${NAME} must name the same one
    serve = "HF_TOKEN=hf_from_env " + SERVE.replace("VLLM_LOGGING_LEVEL=INFO ", "") + " --hf-token hf_from_flag"
    assert main(["init", "--serve-cmd", serve]) == 0
    text = capsys.readouterr().out
    header = text.split("\n\n", 1)[0]
    env_name = re.search(r'HF_TOKEN="\$(\w+)"', header)[1]
    flag_name = re.search(r'--hf-token "\$(\w+)"', header)[1]
    data = tomllib.loads(text)
    assert data["server"]["env"]["HF_TOKEN"] == f"${{{env_name}}}" and env_name != flag_name
    assert data["server"]["extra_args"][-1] == f"${{{flag_name}}}" and "hf_from" not in text


def test_inits_config_errors_are_blamed_on_the_commands_not_on_set(capsys):
    assert main(["init", "--serve-cmd", SERVE, "--bench-cmd", "vllm bench serve --request-rate 4 --burstiness 0"]) == 2
    err = capsys.readouterr().err.splitlines()[-1]
    assert err.startswith("lookahead-runner: --serve-cmd/--bench-cmd: load.burstiness: ") and "--set" not in err


def test_a_command_a_toml_file_cannot_hold_is_one_line_and_no_file(tmp_path, capsys):
    toml = tmp_path / "sweep.toml"
    assert main(["init", "--serve-cmd", SERVE + " --served-model-name x\udcff", "--out", str(toml)]) == 2
    assert "UTF-8" in capsys.readouterr().err and list(tmp_path.iterdir()) == []
    toml.write_text("# mine\n")
    assert main(["init", "--serve-cmd", SERVE + " --served-model-name x\udcff", "--out", str(toml), "--force"]) == 2
    assert toml.read_text() == "# mine\n" and list(tmp_path.iterdir()) == [toml]


def test_init_force_replaces_the_file_whole(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("VLLM_API_KEY", "sk-not-in-the-file")
    toml = tmp_path / "sweep.toml"
    toml.write_text("# mine\n")
    assert main(["init", *FLAGS, "--out", str(toml), "--force"]) == 0
    assert load_config(toml).speculation.k == [0, 2, 4] and list(tmp_path.iterdir()) == [toml]


def test_resume_refuses_a_k_list_it_would_not_use(tmp_path, capsys):
    assert main(["sweep", "--resume", str(tmp_path), "--k", "0,2"]) == 2
    assert "--k" in capsys.readouterr().err


def test_with_a_config_file_an_error_of_the_commands_is_blamed_on_them_not_on_the_file(tmp_path, capsys):
    toml = tmp_path / "base.toml"
    toml.write_text("[load]\nrepeats = 1\n")
    bench = "vllm bench serve --request-rate 4 --burstiness 0"
    assert main(["sweep", "--config", str(toml), "--bench-cmd", bench, "--dry-run"]) == 2
    err = capsys.readouterr().err.splitlines()[-1]
    assert err.startswith("lookahead-runner: --serve-cmd/--bench-cmd: load.burstiness: ") and str(toml) not in err


@pytest.mark.parametrize("argv", [["init", "--serve-cmd", SERVE, "--k", ""],
                                  ["init", "--serve-cmd", SERVE, "--bench-cmd", ""],
                                  ["sweep", "--config", "base.toml", "--serve-cmd", "", "--dry-run"]])
def test_an_empty_command_or_k_list_is_refused_not_skipped(argv, tmp_path, monkeypatch, capsys):
    # `--serve-cmd "$SERVE_CMD"` with the variable unset: the sweep would run something other than asked
    monkeypatch.chdir(tmp_path)
    (tmp_path / "base.toml").write_text("[load]\nrepeats = 1\n")
    assert main(argv) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_a_file_init_cannot_write_is_named_not_its_temporary(tmp_path, capsys):
    (tmp_path / "a-folder").mkdir()
    assert main(["init", "--serve-cmd", SERVE, "--out", str(tmp_path / "a-folder"), "--force"]) == 74
    assert capsys.readouterr().err == f"lookahead-runner: {tmp_path / 'a-folder'}: Is a directory\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-folder"]
