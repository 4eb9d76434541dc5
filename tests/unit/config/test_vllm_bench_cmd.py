"""`--bench-cmd`: a `vllm bench serve` line mapped to [load] and [decision] with vLLM 0.32's meaning (the issue's
line, vLLM's own example); a flag the runner cannot honour is one line naming it, never dropped."""
from __future__ import annotations

import json

import pytest

from lookahead_runner.config import load_config
from lookahead_runner.config.vllm_commands import (CommandError, command_entries, overrides, parse_bench_cmd,
                                                   parse_serve_cmd)

SERVE = ("vllm serve meta-llama/Llama-3.1-8B-Instruct --speculative-config '{\"method\": \"eagle3\", "
         "\"model\": \"yuhuili/EAGLE3-LLaMA3.1-Instruct-8B\", \"num_speculative_tokens\": 3}'")


def config_of(bench: str, serve: str = SERVE):
    return load_config(None, overrides(command_entries(parse_serve_cmd(serve), parse_bench_cmd(bench), [0, 2])))


def test_the_issues_line_rate_goodput_and_lengths():
    config = config_of("vllm bench serve --dataset-name random --random-input-len 64 --random-output-len 32 "
                       "--request-rate 8 --num-prompts 400 --goodput ttft:500 tpot:50 --temperature 0")
    (stage,) = config.load.stages
    assert (stage.rate, stage.duration_s) == (8.0, 50.0)   # 400 prompts at 8 req/s
    assert (config.load.prompt_tokens, config.load.output_tokens, config.load.temperature) == (64, 32, 0.0)
    assert config.decision.slo == {"ttft_p99_ms": 500.0, "tpot_p99_ms": 50.0}
    assert (config.decision.objective, config.target_rate, config.load.endpoint) == ("goodput", 8.0, "completions")


def test_vllm_defaults_where_the_line_says_nothing():
    config = config_of("vllm bench serve --request-rate 4")
    assert (config.load.prompt_tokens, config.load.output_tokens) == (1024, 128)  # --random-input/output-len
    assert config.load.stages[0].duration_s == 250.0                              # --num-prompts 1000 at 4 req/s


def test_several_rates_burstiness_cap_seed_and_the_percentile_reported():
    config = config_of("vllm bench serve --request-rate 2,4 8 --burstiness 0.5 --max-concurrency 32 --seed 7 "
                       "--num-prompts 80 --goodput e2el:9000 --metric-percentiles 50,90 --top-p 0.9 "
                       "--save-result --result-dir out")
    assert [(s.rate, s.duration_s) for s in config.load.stages] == [(2.0, 40.0), (4.0, 20.0), (8.0, 10.0)]
    assert (config.load.burstiness, config.load.max_in_flight, config.load.arrival_seed) == (0.5, 32, 7)
    assert config.decision.slo == {"e2e_p90_ms": 9000.0} and config.load.top_p == 0.9


def test_vllms_own_example_max_concurrency_without_a_rate_is_a_users_stage():
    # vllm/distributed/kv_transfer/kv_connector/v1/decode_bench_connector.py's example, with the served model
    bench = parse_bench_cmd("vllm bench serve --base-url http://127.0.0.1:8000 --model "
                            "meta-llama/Llama-3.1-8B-Instruct --dataset-name random --random-input-len 40000 "
                            "--random-output-len 100 --max-concurrency 10")
    stages = dict((e.key, e.value) for e in bench.entries)["load.stages"]
    assert stages == [{"users": 10, "duration_s": 20}]
    assert bench.not_used == ("--base-url",) and "--base-url" in bench.note_lines()[-1]


def test_request_sets_as_vllm_bench_sends_them(tmp_path):
    spec_bench = tmp_path / "question.jsonl"
    spec_bench.write_text("\n".join(json.dumps({"question_id": i, "category": "qa", "turns": [f"q{i}"]})
                                    for i in range(20)) + "\n")
    config = config_of(f"vllm bench serve --dataset-name spec_bench --dataset-path {spec_bench} --request-rate 2")
    assert (config.load.requests, config.load.output_tokens, config.load.endpoint) == (str(spec_bench), "natural",
                                                                                       "chat")
    custom = tmp_path / "custom.jsonl"
    custom.write_text("\n".join(json.dumps({"prompt": f"p{i}", "output_tokens": 9}) for i in range(20)) + "\n")
    own = config_of(f"vllm bench serve --dataset-name custom --dataset-path {custom} --custom-output-len -1 "
                    "--skip-chat-template --request-rate 2")
    assert (own.load.output_tokens, own.load.endpoint) == ("natural", "completions")
    exact = config_of(f"vllm bench serve --dataset-name custom --dataset-path {custom} --custom-output-len 40 "
                      "--ignore-eos --request-rate 2")
    assert (exact.load.output_tokens, exact.load.endpoint) == (40, "chat")


def test_speed_bench_reads_the_subset_file_of_the_folder():
    bench = parse_bench_cmd("vllm bench serve --dataset-name speed_bench --dataset-path /data/speed "
                            "--speed-bench-dataset-subset throughput_1k --ignore-eos --request-rate 2")
    keys = {e.key: e.value for e in bench.entries}
    assert (keys["load.requests"], keys["load.output_tokens"]) == ("/data/speed/throughput_1k.jsonl", 4096)


@pytest.mark.parametrize("line, named", [
    ("--top-k 20", "--top-k"),
    ("--random-range-ratio 0.5", "--random-range-ratio"),
    ("--random-prefix-len 64", "--random-prefix-len"),
    ("--ramp-up-strategy linear --ramp-up-start-rps 1 --ramp-up-end-rps 8", "--ramp-up"),
    ("--request-rate inf", "--request-rate inf"),
    ("--max-concurrency 8 --num-prompts 100", "--num-prompts"),
    ("--goodput itl:50", "--goodput itl:50"),
    ("--goodput ttft:0", "--goodput ttft:0"),
    ("--goodput ttft:500 --metric-percentiles 100", "--metric-percentiles"),
    ("--dataset-name sharegpt --dataset-path sg.json", "sharegpt"),
    ("--dataset-name burstgpt", "burstgpt"),
    ("--dataset-name hf --dataset-path philschmid/mt-bench", "downloads nothing"),
    ("--dataset-name custom --dataset-path c.jsonl", "--custom-output-len 256 (vllm bench's default)"),
    ("--dataset-name spec_bench --dataset-path q.jsonl --spec-bench-output-len 512", "--spec-bench-output-len 512"),
    ("--dataset-name spec_bench --dataset-path q.jsonl --spec-bench-category coding", "--spec-bench-category"),
    ("--backend openai-embeddings", "--backend"),
    ("--backend openai --endpoint /v1/chat/completions", "--endpoint"),
    ("--request-rate 4 --made-up-flag 3", "--made-up-flag"),
    ("--request-rat 4", "--request-rat"),
])
def test_a_flag_it_cannot_honour_is_one_line_naming_it(line, named):
    with pytest.raises(CommandError) as err:
        parse_bench_cmd(f"vllm bench serve --request-rate 4 {line}" if "--request-rate" not in line and
                        "--max-concurrency" not in line else f"vllm bench serve {line}")
    assert named in str(err.value) and "\n" not in str(err.value) and str(err.value).startswith("--bench-cmd: ")


def test_a_model_other_than_the_served_one_is_refused():
    with pytest.raises(CommandError, match="--model other/model"):
        command_entries(parse_serve_cmd(SERVE),
                        parse_bench_cmd("vllm bench serve --model other/model --request-rate 1"))


def test_no_temperature_is_said_not_assumed_in_silence():
    bench = parse_bench_cmd("vllm bench serve --request-rate 4")
    assert any("--temperature" in line for line in bench.note_lines())


def test_what_has_no_bearing_on_the_load_is_named_not_dropped():
    bench = parse_bench_cmd("HF_TOKEN=hf_x vllm bench serve --request-rate 2 --port 8001 --save-result --label a")
    assert bench.not_used == ("HF_TOKEN=...", "--port", "--save-result", "--label")
    assert "hf_x" not in " ".join(bench.note_lines())


def test_a_line_continued_with_a_backslash_reads_as_the_shell_reads_it():
    bench = parse_bench_cmd("vllm bench serve \\\n  --request-rate 4 \\\n  --num-prompts 40")
    assert {e.key: e.value for e in bench.entries}["load.stages"] == [{"rate": 4.0, "duration_s": 10.0}]


def test_speed_bench_keeps_its_own_length_where_output_len_is_given():
    # vllm bench maps --output-len to every set's length flag but SPEED-Bench's (serve.py): its 4096 stands
    bench = parse_bench_cmd("vllm bench serve --dataset-name speed_bench --dataset-path /data/speed --output-len 64 "
                            "--ignore-eos --request-rate 2")
    assert {e.key: e.value for e in bench.entries}["load.output_tokens"] == 4096
    assert any("--output-len" in line and "speed_bench" in line for line in bench.note_lines())


@pytest.mark.parametrize("line, unused", [
    ("--dataset-name random --custom-output-len 64 --hf-name philschmid/mt-bench", "--custom-output-len, --hf-name"),
    ("--dataset-name custom --dataset-path c.jsonl --custom-output-len -1 --random-input-len 64 --input-len 9",
     "--random-input-len, --input-len"),
    ("--metric-percentiles 90", "--metric-percentiles"),
])
def test_a_flag_that_does_nothing_with_this_dataset_is_named_not_dropped(line, unused):
    # vllm bench reads a dataset's own flags only with that dataset (and the percentiles only for its report)
    notes = " ".join(parse_bench_cmd(f"vllm bench serve --request-rate 4 {line}").note_lines())
    assert unused in notes


def test_a_percentile_that_is_no_number_is_refused_not_skipped():
    with pytest.raises(CommandError, match="--metric-percentiles 50,nan"):
        parse_bench_cmd("vllm bench serve --request-rate 4 --goodput ttft:500 --metric-percentiles 50,nan")


@pytest.mark.parametrize("line", ["--api-key sk-in-clear", "--api-key=sk-in-clear", "--hf-token hf_in_clear"])
def test_an_unknown_flag_is_named_without_the_value_after_it(line):
    # a serve flag carried over by mistake: its value may be a key, and the line goes to the terminal and CI logs
    with pytest.raises(CommandError) as err:
        parse_bench_cmd(f"vllm bench serve --request-rate 4 {line}")
    said = str(err.value)
    assert line.split()[0].split("=")[0] in said and "in_clear" not in said and "in-clear" not in said
