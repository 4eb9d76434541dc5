"""Secrets recognised by their name wherever a name and a value stand together (config/masking.py): `NAME=VALUE`
in any argv (a launcher's `-e HF_TOKEN=...`, `env HF_TOKEN=... vllm`), an environment pair, and a key of a JSON flag
value (`--model-loader-extra-config '{"token": ...}'`), with no `server.secret_env` listing them; and vLLM's
`--hf-token` handed to the server in HF_TOKEN instead of its argv, as `--api-key` is in VLLM_API_KEY."""
import json

import pytest

from lookahead_runner.config import ConfigError, ResolvedServer, config_from_dict
from lookahead_runner.config.masking import Secrets, looks_secret
from lookahead_runner.run.life.launch import server_launch
from lookahead_runner.runfolder.results import redact
from lookahead_runner.vllm.knob import Setting
from lookahead_runner.vllm.probe import Capabilities

HF = "hf_Secret0123456789"
SK = "sk-Secret-abcdef"
CAPS = Capabilities("0.32.0", frozenset({"--speculative-config", "--hf-token", "--model-loader-extra-config"}))


@pytest.mark.parametrize("name", ["HF_TOKEN", "OPENAI_API_KEY", "OPENAI_KEY", "AZURE_OPENAI_KEY", "S3_CREDENTIALS",
                                  "AWS_SECRET_ACCESS_KEY", "DB_PASSWORD", "GPG_PASSPHRASE", "PROXY_AUTH", "apiKey",
                                  "hfToken", "token", "hf_token", "credentials"])
def test_names_that_hold_a_secret(name):
    assert looks_secret(name, "v-123456")


@pytest.mark.parametrize("name", ["TOKENIZERS_PARALLELISM", "spec_key", "key", "KEYBOARD", "MONKEY", "max_tokens",
                                  "maxTokens", "AUTHOR", "CUDA_VISIBLE_DEVICES", "tokens"])
def test_names_that_do_not(name):
    assert not looks_secret(name, "v-123456")


def test_a_name_value_pair_in_any_argv_is_masked_by_its_name_alone():
    secrets = Secrets.for_rules()  # no server.secret_env
    argv = ["docker", "run", "-e", f"HF_TOKEN={HF}", f"--env=OPENAI_KEY={SK}", "-e", "OTHER=plain",
            "-e", "HF_HUB_DISABLE_TOKEN=1", "img", f"bash -lc 'AZURE_OPENAI_KEY={SK}x exec vllm'",
            f'S3_CREDENTIALS="{HF} two" vllm', f"MY_PASSWORD='{HF} 3' vllm"]
    masked = secrets.mask_argv(argv)
    assert masked == ["docker", "run", "-e", "HF_TOKEN=${HF_TOKEN}", "--env=OPENAI_KEY=${OPENAI_KEY}", "-e",
                      "OTHER=plain", "-e", "HF_HUB_DISABLE_TOKEN=1", "img",
                      "bash -lc 'AZURE_OPENAI_KEY=${AZURE_OPENAI_KEY} exec vllm'",
                      'S3_CREDENTIALS="${S3_CREDENTIALS}" vllm', "MY_PASSWORD='${MY_PASSWORD}' vllm"]
    assert secrets.resolve_argv(masked) == argv
    assert secrets.mask_argv(["env", f"HF_TOKEN={HF}", "vllm", "serve"]) == ["env", "HF_TOKEN=${HF_TOKEN}", "vllm",
                                                                              "serve"]


def test_a_secret_in_a_json_flag_value_is_masked_and_filled_back():
    secrets = Secrets.for_rules()
    loader = json.dumps({"token": HF, "n": 1, "nested": {"api_key": SK, "plain": "x"}, "tag": "tokenless"})
    argv = ["vllm", "--model-loader-extra-config", loader, f'--hf-overrides={{"hfToken": "{SK}2"}}']
    masked = secrets.mask_argv(argv)
    assert HF not in json.dumps(masked) and SK not in json.dumps(masked)
    assert json.loads(masked[2]) == {"token": "${TOKEN}", "n": 1, "nested": {"api_key": "${API_KEY}", "plain": "x"},
                                     "tag": "tokenless"}
    assert masked[3] == '--hf-overrides={"hfToken": "${HFTOKEN}"}'
    assert secrets.resolve_argv(masked) == argv


def test_a_json_value_with_escapes_is_masked_as_the_server_prints_it_too():
    """The placeholder stands for the value as JSON escapes it (so the filled-in text is the same JSON); the server
    prints the value it parsed (vLLM's "non-default args" line): that one is masked in its log too."""
    value = "hf-<&>\"\\'/+=x"
    secrets = Secrets.for_rules()
    masked = secrets.mask_argv(["--model-loader-extra-config", json.dumps({"token": value})])
    assert json.loads(masked[1]) == {"token": "${TOKEN}"}
    assert json.loads(secrets.resolve_argv(masked)[1]) == {"token": value}
    printed = f"non-default args: {{'model_loader_extra_config': {{'token': {value!r}}}}}"
    assert value not in secrets.mask_text(printed) and repr(value)[1:-1] not in secrets.mask_text(printed)


def test_environment_pairs_and_json_values_in_the_environment():
    secrets = Secrets.for_rules()
    env = {"OPENAI_KEY": SK, "AZURE_OPENAI_KEY": SK + "a", "S3_CREDENTIALS": HF, "VLLM_X": json.dumps({"token": HF + "b"}),
           "TOKENIZERS_PARALLELISM": "false", "HF_HUB_DISABLE_TOKEN": "1"}
    masked = secrets.mask_env(env)
    assert masked["OPENAI_KEY"] == "${OPENAI_KEY}" and masked["AZURE_OPENAI_KEY"] == "${AZURE_OPENAI_KEY}"
    assert masked["S3_CREDENTIALS"] == "${S3_CREDENTIALS}" and json.loads(masked["VLLM_X"]) == {"token": "${TOKEN}"}
    assert masked["TOKENIZERS_PARALLELISM"] == "false" and masked["HF_HUB_DISABLE_TOKEN"] == "1"
    assert secrets.resolve_env(masked) == env


def test_a_secret_flag_in_a_command_string_a_url_password_and_an_authorization_header_are_masked():
    """Where no name stands before the value: vLLM's flags inside a launcher's command string, a URL's user:password
    (a proxy), an Authorization header; each masked, filled back as it was, and --api-key's the key the load sends."""
    secrets = Secrets.for_rules()
    argv = ["bash", "-lc", f"exec vllm serve m --api-key {SK} --hf-token '{HF}' --port 8000",
            "--header", f"Authorization: Bearer {SK}-2", "--model", f"https://me:{HF}-3@models.example/m"]
    env = {"HTTPS_PROXY": f"http://me:{HF}-4@proxy:3128", "PLAIN": "http://proxy:3128", "URLS": "a@b c:d"}
    masked, masked_env = secrets.mask_argv(argv), secrets.mask_env(env)
    assert not any(secret in json.dumps([masked, masked_env]) for secret in (SK, HF))
    assert masked[2] == "exec vllm serve m --api-key ${VLLM_API_KEY} --hf-token '${HF_TOKEN}' --port 8000"
    assert masked_env["PLAIN"] == env["PLAIN"] and masked_env["URLS"] == env["URLS"]
    assert secrets.resolve_argv(masked) == argv and secrets.resolve_env(masked_env) == env
    assert secrets.server_key == SK


@pytest.mark.parametrize("field", ["url", "dcgm_url"])
def test_a_server_address_with_a_password_is_refused_in_one_line(field):
    """No client of the runner sends a URL's user:password (urllib takes "me:pw@host" for the host name), and the
    address is written into plan.json as given: refused where it is read, naming the field."""
    with pytest.raises(ConfigError) as err:
        config_from_dict({"server": {field: f"http://me:{HF}@127.0.0.1:8000"}, "speculation": {"k": [4]}}, "c")
    assert str(err.value).startswith(f"c: server.{field}: ") and HF not in str(err.value) and "\n" not in str(err.value)
    assert config_from_dict({"server": {field: "http://127.0.0.1:8000"}, "speculation": {"k": [4]}}, "c")


def test_the_plan_keeps_its_own_fields_named_like_keys():
    """A field of plan.json named spec_key or key (a variant's, the ledger's) is no secret."""
    plan = {"spec_key": "draft_sample_method", "restart_spread": {"key": "0a1b2c3d"}, "variants": [{"key": "p400"}]}
    assert redact(plan) == plan


def _launch(server: dict, environ: dict | None = None):
    config = config_from_dict({"server": {"model": "org/target", **server}, "speculation": {"k": [0]}})
    return server_launch(config, CAPS, Setting(0), 8000, ResolvedServer.resolve(config.server, environ or {}))


def test_hf_token_travels_in_the_environment_where_it_reaches_the_server(monkeypatch):
    """vLLM 0.32 reads no variable of its own for the token: without --hf-token, huggingface_hub's get_token()
    reads HF_TOKEN (vllm/config/model.py hf_token = None -> huggingface_hub/utils/_headers.py get_token_to_send)."""
    monkeypatch.delenv("HF_HUB_DISABLE_IMPLICIT_TOKEN", raising=False)
    argv, env, secrets = _launch({"extra_args": ["--hf-token", HF, "--max-num-seqs", "8"]})
    assert "--hf-token" not in argv and HF not in argv and env["HF_TOKEN"] == "${HF_TOKEN}"
    assert secrets.resolve_env(env)["HF_TOKEN"] == HF
    argv, env, _ = _launch({"extra_args": [f"--hf_token={HF}"]})
    assert not any(a.startswith("--hf") for a in argv) and env["HF_TOKEN"] == "${HF_TOKEN}"


@pytest.mark.parametrize("server,environ", [
    ({"command": ["docker", "run", "--rm", "img"], "extra_args": ["--hf-token", HF]}, {}),  # the env stays here
    ({"extra_args": ["--hf-token", HF], "env": {"HF_TOKEN": "hf_other_value_1"}}, {}),     # another token there
    ({"extra_args": ["--hf-token", HF], "env": {"HF_HUB_DISABLE_IMPLICIT_TOKEN": "1"}}, {}),  # would not be read
    ({"extra_args": ["--hf-token", "--max-num-seqs", "8"]}, {}),                          # bare: the cached login
])
def test_hf_token_stays_on_the_argv_where_the_environment_would_not_carry_it(server, environ):
    argv, env, _ = _launch(server, environ)
    assert "--hf-token" in argv and env.get("HF_TOKEN", "") != "${HF_TOKEN}"
