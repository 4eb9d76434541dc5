"""Defaults that cannot mislead a real server: a key whose default is one of the simulator's models must be given
when the server is real vLLM; the request's model follows a --served-model-name of server.extra_args."""
from __future__ import annotations

import pytest

from lookahead_runner.config import ConfigError, config_from_dict

REAL = {"command": ["vllm"]}
TEMPLATE = {"argv_template": ["docker", "run", "-p", "{port}:8000", "vllm/vllm-openai", "--model", "{model}", "{args}"]}


def refused(data: dict) -> str:
    with pytest.raises(ConfigError) as err:
        config_from_dict(data, "sweep.toml")
    assert "\n" not in str(err.value)
    return str(err.value)


def test_a_real_server_without_its_draft_model_is_refused_naming_the_key():
    message = refused({"server": REAL | {"model": "meta-llama/Llama-3.1-8B-Instruct"}})
    assert message.startswith("sweep.toml: ") and "speculation.draft_model: server.command starts a real vLLM" in message
    assert '"sim/llama-68m" is the simulator\'s' in message and "server.model" not in message


def test_a_real_server_without_either_model_names_both():
    message = refused({"server": REAL})
    assert "server.model and speculation.draft_model: server.command starts a real vLLM" in message
    assert '"sim/llama-3-8b", "sim/llama-68m" are the simulator\'s models' in message


def test_a_launcher_template_is_a_real_server_too():
    assert "server.argv_template starts a real vLLM" in refused({"server": TEMPLATE | {"model": "org/target"}})
    config = config_from_dict({"server": TEMPLATE | {"model": "org/target"}, "speculation": {"draft_model": "org/d"}})
    assert not config.server.is_simulator
    assert config.decision.restart_prior()[1] == "unknown"  # real vLLM's restart spread, not the simulator's


@pytest.mark.parametrize("speculation", [{"method": "ngram"}, {"k": [0]}, {"k": [0, 2], "draft_model": "org/draft"},
                                         {"draft_model": "sim/llama-68m"}])  # given, even as the simulator's name
def test_the_draft_model_is_needed_only_where_it_is_sent_and_not_given(speculation):
    config = config_from_dict({"server": REAL | {"model": "org/target"}, "speculation": speculation})
    assert config.server.model == "org/target"


@pytest.mark.parametrize("server", [{}, {"url": "http://127.0.0.1:8000"}, {"command": ["python", "-m",
                                                                                       "lookahead_runner.sim"]}])
def test_the_simulator_and_a_running_server_are_not_refused(server):
    config = config_from_dict({"server": server, "speculation": {"k": [4]} if server else {}})
    # the simulator keeps its default; a running server without a model is asked for it (GET /v1/models)
    assert config.server.model == ("" if "url" in server else "sim/llama-3-8b")


def test_the_requests_carry_the_served_model_name():
    plain = config_from_dict({})
    assert plain.server.served_model == "sim/llama-3-8b"
    for extra_args in (["--served-model-name", "prod", "alias"], ["--max-num-seqs", "8", "--served-model-name=prod"],
                       ["--served_model_name", "prod"], ["--served_model_name=prod"]):  # vLLM reads _ as -
        assert config_from_dict({"server": {"extra_args": extra_args}}).server.served_model == "prod"


@pytest.mark.parametrize("extra_args", [["--served-model-name"], ["--served-model-name", "--max-num-seqs", "8"],
                                        ["--served_model_name"]])
def test_a_served_model_name_without_its_name_is_refused_with_the_fix(extra_args):
    message = refused({"server": {"extra_args": extra_args}})
    assert message == ('sweep.toml: server.extra_args: --served-model-name needs the name after it (the requests '
                       'carry it), e.g. "--served-model-name", "my-model"')
