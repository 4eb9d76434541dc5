"""`--serve-cmd`: a `vllm serve` line read as vLLM 0.32 reads it (the issue's line, vLLM's own examples), mapped to
[server] and [speculation]; what the runner cannot honour is one line naming it."""
from __future__ import annotations

import pytest

from lookahead_runner.config import load_config
from lookahead_runner.config.vllm_commands import CommandError, command_entries, overrides, parse_serve_cmd

EAGLE3 = "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"
LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
ISSUE = (f"CUDA_VISIBLE_DEVICES=0 vllm serve {LLAMA} --max-num-seqs 256 --gpu-memory-utilization 0.9 "
         f"--speculative-config '{{\"method\": \"eagle3\", \"model\": \"{EAGLE3}\", \"num_speculative_tokens\": 3, "
         "\"draft_tensor_parallel_size\": 1}'")


def test_the_issues_line_maps_model_method_draft_and_fixed_keys_and_keeps_the_rest():
    serve = parse_serve_cmd(ISSUE)
    assert (serve.model, serve.method, serve.draft_model, serve.k) == (LLAMA, "eagle3", EAGLE3, 3)
    assert serve.spec_config == {"draft_tensor_parallel_size": 1}
    assert serve.extra_args == ["--max-num-seqs", "256", "--gpu-memory-utilization", "0.9"]
    assert (serve.command, serve.env, serve.argv_template) == (["vllm"], {"CUDA_VISIBLE_DEVICES": "0"}, [])
    config = load_config(None, overrides(command_entries(serve, None, [0, 2, 4])))
    assert config.speculation.k == [0, 2, 4] and config.speculation.config == {"draft_tensor_parallel_size": 1}
    assert (config.server.model, config.server.env) == (LLAMA, {"CUDA_VISIBLE_DEVICES": "0"})


def test_without_k_the_default_list_and_the_commands_own_k():
    config = load_config(None, overrides(command_entries(parse_serve_cmd(ISSUE), None)))
    assert config.speculation.k == [0, 2, 3, 4, 8]


def test_vllms_own_example_without_a_method_gets_the_one_vllm_infers_from_the_name():
    # vllm/utils/argparse_utils.py's nested-config example: {"model": "nvidia/gpt-oss-120b-Eagle3-v2", ...}
    serve = parse_serve_cmd("vllm serve openai/gpt-oss-120b --speculative-config "
                            "'{\"model\": \"nvidia/gpt-oss-120b-Eagle3-v2\", \"num_speculative_tokens\": 3}' "
                            "--compilation-config '{\"pass_config\": {\"fuse_allreduce_rms\": true}}'")
    assert (serve.method, serve.draft_model, serve.k) == ("eagle3", "nvidia/gpt-oss-120b-Eagle3-v2", 3)
    assert "infers" in serve.method_origin
    assert serve.extra_args == ["--compilation-config", '{"pass_config": {"fuse_allreduce_rms": true}}']


def test_shorthands_dotted_keys_underscores_and_the_model_flag_read_as_vllm_reads_them():
    serve = parse_serve_cmd(f"/opt/venv/bin/vllm serve --model {LLAMA} --spec_method eagle3 --spec-model={EAGLE3} "
                            "--spec-tokens 4 --speculative-config.draft_tensor_parallel_size 1 "
                            "--speculative_config.draft_sample_method=greedy -tp 2 --port 8001 --host 0.0.0.0")
    assert (serve.model, serve.method, serve.draft_model, serve.k) == (LLAMA, "eagle3", EAGLE3, 4)
    assert serve.spec_config == {"draft_tensor_parallel_size": 1, "draft_sample_method": "greedy"}
    assert (serve.command, serve.extra_args, serve.host, serve.port) == (["/opt/venv/bin/vllm"], ["-tp", "2"],
                                                                         "0.0.0.0", 8001)


def test_the_dotted_form_replaces_the_json_as_vllm_appends_it_last():
    serve = parse_serve_cmd(f"vllm serve {LLAMA} --speculative-config.method ngram --speculative-config "
                            "'{\"method\": \"eagle3\", \"prompt_lookup_min\": 9}' "
                            "--speculative-config.num_speculative_tokens 2")
    assert (serve.method, serve.k, serve.draft_model) == ("ngram", 2, None)
    # ngram with neither lookup key: vLLM 0.32's own 5 and 5, not the runner's prompt_lookup_max = 4
    assert serve.spec_config == {"prompt_lookup_min": 5, "prompt_lookup_max": 5}


def test_docker_run_becomes_a_template_with_the_port_the_model_and_the_flags():
    serve = parse_serve_cmd(f"docker run --rm --gpus all -e HF_TOKEN=hf_abc -p 8000:8000 --ipc=host "
                            f"vllm/vllm-openai:v0.32.0 {LLAMA} --max-num-seqs 64 --spec-method eagle3 "
                            f"--spec-model {EAGLE3} --spec-tokens 3")
    assert serve.argv_template == ["docker", "run", "--rm", "--gpus", "all", "-e", "HF_TOKEN=hf_abc", "-p",
                                   "{port}:8000", "--ipc=host", "vllm/vllm-openai:v0.32.0", "{model}", "{args}"]
    assert serve.command == ["docker", "run", "--rm", "--entrypoint", "vllm", "vllm/vllm-openai:v0.32.0"]
    assert (serve.model, serve.extra_args, serve.host, serve.port) == (LLAMA, ["--max-num-seqs", "64"], None, None)
    config = load_config(None, overrides(command_entries(serve, None, [0, 3])))
    assert config.server.argv_template == serve.argv_template and not config.server.is_simulator


def test_docker_on_the_hosts_network_gets_the_lifes_port_inside():
    serve = parse_serve_cmd(f"docker run --network host vllm/vllm-openai {LLAMA} --port 8000 --spec-method ngram "
                            "--spec-tokens 4")
    assert serve.argv_template[-4:] == ["{model}", "--port", "{port}", "{args}"]


@pytest.mark.parametrize("line, named", [
    (f"vllm serve {LLAMA} --max-num-seqs 64", "no speculative config"),
    (f"vllm serve {LLAMA} --spec-method eagle3 --speculative-config '{{\"method\": \"eagle\"}}'", "--spec-method"),
    (f"vllm serve {LLAMA} --speculative-config '{{\"model\": \"org/small-llama\", \"num_speculative_tokens\": 2}}'",
     "no method"),
    (f"vllm serve {LLAMA} --speculative-config '{{\"method\": \"eagle3\"}}'", "has no model"),
    (f"vllm serve {LLAMA} --speculative-config '{{\"method\": \"eagle3\", \"model\": \"m\", "
     "\"num_speculative_tokens_per_batch_size\": [[1, 8, 4]]}'", "num_speculative_tokens_per_batch_size"),
    (f"vllm serve {LLAMA} --speculative-config '{{method: eagle3}}'", "not JSON"),
    (f"vllm serve --enforce-eager {LLAMA}", "no model"),
    (f"vllm serve {LLAMA} --config prod.yaml", "--config"),
    (f"vllm serve {LLAMA} --speculative-model x --num-speculative-tokens 2", "--speculative-model"),
    (f"docker run -d -p 8000:8000 vllm/vllm-openai {LLAMA}", "-d"),
    (f"docker run --gpus all vllm/vllm-openai {LLAMA} --spec-method ngram --spec-tokens 2", "publishes no port"),
    (f"docker run -p 8000:8000 my/image {LLAMA}", "vllm/vllm-openai"),
    ("vllm serve 'unclosed", "quotation"),
    ("vllm --version", "no `serve`"),
])
def test_what_it_cannot_honour_is_one_line_naming_it(line, named):
    with pytest.raises(CommandError) as err:
        parse_serve_cmd(line)
    assert named in str(err.value) and "\n" not in str(err.value) and str(err.value).startswith("--serve-cmd: ")


def test_the_simulator_needs_no_speculative_config():
    serve = parse_serve_cmd("python -m lookahead_runner.sim serve sim/llama-3-8b --max-num-seqs 64")
    assert serve.method is None and serve.command == ["python", "-m", "lookahead_runner.sim"]


@pytest.mark.parametrize("flag, whole", [("--api-k sk-in-clear", "--api-key"), ("--spec-tok 5", "--spec-tokens"),
                                         ("--hos=0.0.0.0", "--host"), ("--served-model my-name", "--served-model-name"),
                                         ("--hf-tok hf_in_clear", "--hf-token")])
def test_a_flag_the_runner_reads_given_abbreviated_is_refused_not_passed_on(flag, whole):
    # vLLM's parser takes an unambiguous prefix (allow_abbrev): passed on unread, --api-k's key would be written in
    # clear and --spec-tok would set K behind the runner's back
    with pytest.raises(CommandError) as err:
        parse_serve_cmd(f"vllm serve {LLAMA} --spec-method ngram {flag}")
    said = str(err.value)
    assert said.startswith("--serve-cmd: ") and whole in said and "\n" not in said and "in_clear" not in said \
        and "in-clear" not in said


def test_a_longer_flag_and_the_end_of_options_are_not_taken_for_abbreviations():
    serve = parse_serve_cmd(f"vllm serve {LLAMA} --spec-method ngram --model-impl vllm --config-format hf")
    assert serve.extra_args == ["--model-impl", "vllm", "--config-format", "hf"]


def test_a_line_continued_with_a_backslash_reads_as_the_shell_reads_it():
    # vLLM's docs write `vllm serve` over several lines; pasted in single quotes, the backslash-newline reaches the
    # runner, where shlex.split alone would make a "\n" argument of it
    serve = parse_serve_cmd(f"vllm serve {LLAMA} \\\n  --spec-method ngram \\\r\n  --spec-tokens 3 \\\n"
                            "--max-model-len 4096")
    assert (serve.method, serve.k, serve.extra_args) == ("ngram", 3, ["--max-model-len", "4096"])


def test_a_dotted_speculative_key_takes_vllms_human_readable_numbers():
    # FlexibleArgumentParser: a dotted value that is no JSON is read by human_readable_int ("4k" = 4000) first
    serve = parse_serve_cmd(f"vllm serve {LLAMA} --speculative-config.method ngram "
                            "--speculative-config.max_model_len 4k --speculative-config.prompt_lookup_max 1_0")
    assert serve.spec_config["max_model_len"] == 4000 and serve.spec_config["prompt_lookup_max"] == 10


def test_a_docker_option_value_ending_in_the_images_name_is_not_taken_for_the_image():
    serve = parse_serve_cmd(f"docker run -p 8000:8000 -v /data/vllm-openai:/vllm-openai --workdir /vllm-openai "
                            f"vllm/vllm-openai:v0.32.0 {LLAMA} --spec-method ngram")
    assert serve.model == LLAMA and serve.command[-1] == "vllm/vllm-openai:v0.32.0"
