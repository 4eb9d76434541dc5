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
