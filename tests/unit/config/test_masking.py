"""Secrets in argv, config and log text (lookahead_runner/config/masking.py): recognised the way vLLM and its
launchers take them, recorded as ${NAME}, filled in for the process only, read back by a pasted command."""
import json
import shlex
import subprocess

import pytest

from lookahead_runner.config import ConfigError, config_from_dict
from lookahead_runner.config.masking import (MissingSecret, Secrets, StreamMasker, api_key_to_env, encodings,
                                             mask_server, shell_join)
from lookahead_runner.report.cells import shell_text
from lookahead_runner.runfolder.results import redact

K1, K2 = "sk-first-0a1b2c", "sk-second-3d4e5f"


def test_vllm_api_key_forms_are_masked_and_named():
    secrets = Secrets.for_rules()
    argv = ["vllm", "serve", "m", "--api-key", K1, K2, "--max-num-seqs", "8", "--api_key=sk-third-77"]
    masked = secrets.mask_argv(argv)
    assert masked == ["vllm", "serve", "m", "--api-key", "${VLLM_API_KEY}", "${VLLM_API_KEY_2}",
                      "--max-num-seqs", "8", "--api_key=${VLLM_API_KEY_3}"]
    assert secrets.values == {"VLLM_API_KEY": K1, "VLLM_API_KEY_2": K2, "VLLM_API_KEY_3": "sk-third-77"}
    assert secrets.server_key == K1
    assert secrets.resolve_argv(masked) == argv


def test_the_same_value_keeps_its_name():
    secrets = Secrets.for_rules()
    assert secrets.mask_argv(["--api-key", K1]) == ["--api-key", "${VLLM_API_KEY}"]
    assert secrets.mask_argv(["--api-key=" + K1]) == ["--api-key=${VLLM_API_KEY}"]
    assert secrets.values == {"VLLM_API_KEY": K1}


def test_hf_token_value_is_optional():
    secrets = Secrets.for_rules()
    assert secrets.mask_argv(["--hf-token", "--max-num-seqs", "8"]) == ["--hf-token", "--max-num-seqs", "8"]
    assert secrets.mask_argv(["--hf-token", "hf_abcdefgh"]) == ["--hf-token", "${HF_TOKEN}"]
    assert secrets.mask_argv(["--hf-token"]) == ["--hf-token"]


def test_user_listed_flags_and_launcher_assignments():
    secrets = Secrets.for_rules(["--my-token"], ["HF_TOKEN", "WANDB_KEY"])
    argv = ["docker", "run", "-e", "HF_TOKEN=hf_x'y\"z", "--env=WANDB_KEY=w-123456", "-e", "OTHER=plain", "img",
            "--my-token", "t-secret-1", "--my-token=t-secret-2", "--max-num-seqs", "8",
            "bash -lc 'HF_TOKEN=hf_inner99 exec vllm'"]
    assert secrets.mask_argv(argv) == [
        "docker", "run", "-e", "HF_TOKEN=${HF_TOKEN}", "--env=WANDB_KEY=${WANDB_KEY}", "-e", "OTHER=plain", "img",
        "--my-token", "${MY_TOKEN}", "--my-token=${MY_TOKEN_2}", "--max-num-seqs", "8",
        "bash -lc 'HF_TOKEN=${HF_TOKEN_2} exec vllm'"]
    assert secrets.values["HF_TOKEN"] == "hf_x'y\"z" and secrets.values["HF_TOKEN_2"] == "hf_inner99"


def test_server_env_values_that_look_secret():
    secrets = Secrets.for_rules(secret_env=["MY_CRED"])
    env = {"HF_TOKEN": "hf_abcdefgh", "OPENAI_API_KEY": "sk-zz", "MY_CRED": "c", "HF_HUB_DISABLE_TOKEN": "1",
           "TOKENIZERS_PARALLELISM": "false", "CUDA_VISIBLE_DEVICES": "0"}
    assert secrets.mask_env(env) == {"HF_TOKEN": "${HF_TOKEN}", "OPENAI_API_KEY": "${OPENAI_API_KEY}",
                                     "MY_CRED": "${MY_CRED}", "HF_HUB_DISABLE_TOKEN": "1",
                                     "TOKENIZERS_PARALLELISM": "false", "CUDA_VISIBLE_DEVICES": "0"}


def test_placeholders_are_filled_from_the_environment_or_listed_missing():
    secrets = Secrets.for_rules()
    masked = secrets.mask_argv(["--api-key", "${VLLM_API_KEY}", "--hf-token", "${HF_TOKEN}"])
    secrets.fill({"server.extra_args": masked}, {"VLLM_API_KEY": K1, "HF_TOKEN": ""})
    assert secrets.server_key == K1
    assert secrets.missing == [("server.extra_args", "HF_TOKEN")]
    with pytest.raises(MissingSecret, match="HF_TOKEN is not set"):
        secrets.resolve_argv(masked)


@pytest.mark.parametrize("key", [K1, "sk-<&>\"'\\/+= ü%x"])
def test_text_masking_covers_every_encoding(key):
    secrets = Secrets.for_rules()
    secrets.mask_argv(["--api-key", key])
    non_default = f"non-default args: {{'model': 'm', 'api_key': [{key!r}]}}"
    for text in (key, json.dumps({"k": key}), non_default, shlex.quote(key), *encodings(key)):
        masked = secrets.mask_text(text)
        assert all(form not in masked for form in encodings(key)), (text, masked)
        assert "${VLLM_API_KEY}" in masked


def test_short_values_are_masked_in_argv_but_not_in_free_text():
    secrets = Secrets.for_rules()
    assert secrets.mask_argv(["--api-key", "abc"]) == ["--api-key", "${VLLM_API_KEY}"]
    assert secrets.mask_text("abc def") == "abc def"


def test_stream_masking_finds_values_split_between_reads():
    secrets = Secrets.for_rules()
    secrets.mask_argv(["--api-key", K1])
    masker = StreamMasker(secrets, max_pending=16)
    data = f"start {K1}\nno newline for a long while {K1} and {K1}{K1} then the end {K1[:5]}".encode()
    out = b"".join(masker.feed(data[i:i + 3]) for i in range(0, len(data), 3)) + masker.flush()
    assert out == data.replace(K1.encode(), b"${VLLM_API_KEY}")


def test_stream_without_secrets_passes_through_at_line_ends():
    masker = StreamMasker(Secrets.for_rules())
    assert masker.feed(b"abc") == b""
    assert masker.feed(b"\rdef\n") == b"abc\rdef\n"
    assert masker.feed(b"tail") == b"" and masker.flush() == b"tail"


def test_shell_text_reads_secrets_from_the_environment():
    argv = ["vllm", "serve", "m x", "--api-key", "${VLLM_API_KEY}", "${VLLM_API_KEY_2}", "--api-key=${A}",
            "-e", "HF_TOKEN=${HF_TOKEN}", "$(rm -rf ~)", "${not a name}"]
    text = shell_text(argv)
    assert text == ("vllm serve 'm x' --api-key \"$VLLM_API_KEY\" \"$VLLM_API_KEY_2\" --api-key=\"$A\" "
                    "-e HF_TOKEN=\"$HF_TOKEN\" '$(rm -rf ~)' '${not a name}'")
    env = {"VLLM_API_KEY": K1, "VLLM_API_KEY_2": K2, "A": "a'b", "HF_TOKEN": "h t", "PATH": "/usr/bin:/bin"}
    echoed = subprocess.run(["sh", "-c", f"printf '%s\\n' {text[len('vllm '):]}"], env=env, capture_output=True,
                            text=True, check=True).stdout.splitlines()
    assert echoed == ["serve", "m x", "--api-key", K1, K2, "--api-key=a'b", "-e", "HF_TOKEN=h t", "$(rm -rf ~)",
                      "${not a name}"]
    assert shell_join(["a b"]) == shlex.join(["a b"])


def test_a_lone_api_key_moves_to_the_environment_several_stay():
    assert api_key_to_env(["v", "--api-key", "${K}", "--x", "1"]) == (["v", "--x", "1"], {"VLLM_API_KEY": "${K}"})
    assert api_key_to_env(["v", "--api_key=${K}"]) == (["v"], {"VLLM_API_KEY": "${K}"})
    assert api_key_to_env(["v", "--api-key", "${K}", "${K_2}"]) == (["v", "--api-key", "${K}", "${K_2}"], {})
    assert api_key_to_env(["v", "--x"]) == (["v", "--x"], {})


def test_a_key_moves_to_the_environment_only_where_the_environment_reaches_the_server():
    from lookahead_runner.run.life.launch import server_launch
    from lookahead_runner.config import ResolvedServer
    from lookahead_runner.vllm.knob import Setting
    from lookahead_runner.vllm.probe import Capabilities

    caps = Capabilities("0.32.0", frozenset({"--speculative-config"}))
    for command, moved in ((["vllm"], True), (["taskset", "-c", "1", "vllm"], True),
                           (["docker", "run", "--rm", "vllm/vllm-openai"], False), (["ssh", "gpu1", "vllm"], False)):
        config = config_from_dict({"server": {"command": command, "model": "org/target", "extra_args": ["--api-key", K1]},
                                   "speculation": {"k": [0]}})
        argv, env, _ = server_launch(config, caps, Setting(0), 8000, ResolvedServer.resolve(config.server))
        assert ("--api-key" not in argv and env.get("VLLM_API_KEY") == "${VLLM_API_KEY}") == moved, command
        assert K1 not in argv and K1 not in env.values()


def test_mask_server_and_the_plan_config():
    config = config_from_dict({"server": {
        "command": ["docker", "run", "-e", "HF_TOKEN=hf_abcdefgh", "img"], "secret_env": ["HF_TOKEN"],
        "extra_args": ["--api-key", K1, "--max-num-seqs", "8"], "env": {"HUGGING_FACE_HUB_TOKEN": "hf_zyxwvuts"},
        "model": "org/target"}, "speculation": {"draft_model": "org/draft"}})
    masked, secrets = mask_server(config.server, {})
    dumped = json.dumps(redact(masked.model_dump(mode="json")))
    assert K1 not in dumped and "hf_abcdefgh" not in dumped and "hf_zyxwvuts" not in dumped
    assert masked.extra_args == ["--api-key", "${VLLM_API_KEY}", "--max-num-seqs", "8"]
    assert masked.env == {"HUGGING_FACE_HUB_TOKEN": "${HUGGING_FACE_HUB_TOKEN}"}
    assert secrets.missing == []


def test_a_config_that_reads_an_unset_variable_is_one_line(monkeypatch):
    monkeypatch.delenv("VLLM_API_KEY", raising=False)
    with pytest.raises(ConfigError) as err:
        config_from_dict({"server": {"extra_args": ["--api-key", "${VLLM_API_KEY}"]}}, "run/plan.json")
    assert str(err.value) == ("run/plan.json: server.extra_args: ${VLLM_API_KEY} is read from the environment, but "
                              "VLLM_API_KEY is not set (secrets are kept only by name); export VLLM_API_KEY=... "
                              "and run again")
    monkeypatch.setenv("VLLM_API_KEY", K1)
    config_from_dict({"server": {"extra_args": ["--api-key", "${VLLM_API_KEY}"]}}, "run/plan.json")
    monkeypatch.delenv("MY_KEY", raising=False)
    with pytest.raises(ConfigError, match=r"^c: server.api_key_env: the environment variable MY_KEY is not set"):
        config_from_dict({"server": {"api_key_env": "MY_KEY"}}, "c")


@pytest.mark.parametrize("field,value,why", [("secret_flags", ["hf-token"], "write the flag with its dashes"),
                                             ("secret_env", ["HF-TOKEN"], "is not a variable name")])
def test_bad_secret_rules_are_one_line(field, value, why):
    with pytest.raises(ConfigError, match=f"^c: server.{field}: .*{why}"):
        config_from_dict({"server": {field: value}}, "c")
