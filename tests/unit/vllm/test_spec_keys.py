"""The speculative config facts (lookahead_runner/vllm/spec_keys.py) against vLLM's own source lines, the
probe's refusal of a spec_key axis this vLLM cannot run, its rendering, and the simulator's SpeculativeConfig."""
from __future__ import annotations

import json
import re

import pytest

from lookahead_runner.config import ConfigError, config_from_dict
from lookahead_runner.run.runner import check_capabilities, plan_lives
from lookahead_runner.sim.cli import ConfigError as SimConfigError
from lookahead_runner.sim.cli import parse_serve
from lookahead_runner.sim.profiles import get_profile
from lookahead_runner.vllm.knob import KnobError, Setting, server_argv, speculation_args
from lookahead_runner.vllm.probe import Capabilities
from lookahead_runner.vllm.spec_keys import FACTS, SpecAxis, SpecKeyError, check_spec_axis, facts_for

SHORTHAND = frozenset({"--spec-method", "--spec-model", "--spec-tokens", "--speculative-config", "--enforce-eager"})
V032, V033 = Capabilities("0.32.0", SHORTHAND), Capabilities("0.33.0", SHORTHAND)


def source(fixtures_dir, version: str) -> str:
    return (fixtures_dir.parent / "speculative-config" / f"vllm-{version}.txt").read_text(encoding="utf-8")


@pytest.mark.parametrize("version", ["0.32.0", "0.33.0"])
def test_facts_are_the_released_source(fixtures_dir, version):
    text = source(fixtures_dir, version)
    facts = facts_for(tuple(int(part) for part in version.split(".")))
    assert facts is not None and facts.version == version
    assert facts.fields == set(re.findall(r"^    ([a-z_]+): ", text, re.M))   # every field, nothing more
    for alias, key in (("RejectionSampleMethod", "rejection_sample_method"), ("DraftSampleMethod", "draft_sample_method")):
        literal = re.search(rf"^{alias} = Literal\[(.*)\]$", text, re.M)[1]
        assert facts.keys[key].choices == tuple(json.loads(f"[{literal}]"))
    # each key's JSON kind follows its annotation
    for name, annotation in re.findall(r"^    ([a-z_]+): ([^=]+?)(?: = .*)?$", text, re.M):
        if name in facts.keys:
            kind = facts.keys[name].kind
            first = annotation.split("|")[0].strip()
            assert kind == {"bool": "bool", "int": "int", "float": "float"}.get(first, kind), (name, annotation)
    assert 'Currently only supported for method="dspark"' in text
    assert "Adaptive verification requires full CUDA graphs" in text and "cudagraph_mode = CUDAGraphMode.NONE" in text


def test_0_33_adds_fly_and_lm_head_quantization():
    added = set(FACTS[(0, 33)].keys) - set(FACTS[(0, 32)].keys)
    assert added == {"disable_lookahead_block_hashes", "draft_lm_head_quantization", "xpress_topc",
                     "fly_window_size", "fly_entropy_threshold", "fly_entropy_top_k"}
    assert "fly" in FACTS[(0, 33)].keys["rejection_sample_method"].choices
    assert "fly" not in FACTS[(0, 32)].keys["rejection_sample_method"].choices


AXIS = SpecAxis("draft_model", (0, 2, 4), ())


def refusal(caps: Capabilities, key: str, values: list[str], axis: SpecAxis = AXIS) -> str:
    with pytest.raises(SpecKeyError) as err:
        check_spec_axis(caps.version, caps.version_tuple, key, values, axis)
    assert "\n" not in str(err.value)
    return str(err.value)


def test_a_key_or_value_this_version_lacks_is_refused_naming_the_version():
    assert refusal(V032, "fly_window_size", ["2"]) == (
        "grid.spec_key = 'fly_window_size': vLLM 0.32.0's speculative config has no such key (vLLM 0.33.0 has it); "
        "pick one of its keys, e.g. draft_sample_method or rejection_sample_method")
    assert check_spec_axis("0.33.0", (0, 33, 0), "fly_window_size", ["2", "3"], AXIS) == [2, 3]
    assert "vLLM 0.32.0's rejection_sample_method takes standard, synthetic, block" in \
        refusal(V032, "rejection_sample_method", ["standard", "fly"])
    assert check_spec_axis("0.33.0", (0, 33, 0), "rejection_sample_method", ["standard", "fly"], AXIS) == \
        ["standard", "fly"]
    assert "no facts about the speculative config keys of vLLM 0.10.2" in \
        refusal(Capabilities("0.10.2"), "draft_sample_method", ["greedy"])
    assert "written by the runner" in refusal(V032, "num_speculative_tokens", ["2"])
    assert "is filled by vLLM itself" in refusal(V032, "draft_model_config", ["x"])
    assert "takes true or false" in refusal(V032, "enable_adaptive_verification", ["yes"])
    assert "takes a number >= 1" in refusal(V032, "prompt_lookup_max", ["0"])


def test_what_a_value_needs_besides_the_key():
    dspark = SpecAxis("dspark", (0, 4), ())
    assert check_spec_axis("0.33.0", (0, 33, 0), "enable_adaptive_verification", ["false", "true"], dspark) == [False, True]
    assert 'for method = "dspark" only' in refusal(V033, "enable_adaptive_verification", ["true"])
    eager = SpecAxis("dspark", (0, 4), ("--enforce-eager",))
    assert "requires full CUDA graphs" in refusal(V033, "enable_adaptive_verification", ["true"], eager)
    check_spec_axis("0.33.0", (0, 33, 0), "enable_adaptive_verification", ["false"], eager)  # off: no graphs needed
    assert "synthetic_acceptance_rates" in refusal(V033, "rejection_sample_method", ["synthetic"])
    assert "needs num_speculative_tokens >= 2" in \
        refusal(V033, "rejection_sample_method", ["fly"], SpecAxis("draft_model", (0, 1, 2), ()))


def sweep_config(**grid) -> dict:
    return {"speculation": {"k": [0, 4]}, "grid": grid}


def test_config_takes_one_axis_and_the_runner_refuses_before_any_server():
    with pytest.raises(ConfigError, match="grid.spec_key: the grid has one axis"):
        config_from_dict(sweep_config(flag="--max-num-seqs", spec_key="draft_sample_method", values=["1"]))
    with pytest.raises(ConfigError, match="grid.values: list at least one value for grid.spec_key"):
        config_from_dict(sweep_config(spec_key="draft_sample_method"))
    with pytest.raises(ConfigError, match="write the key as vLLM's speculative config names it"):
        config_from_dict(sweep_config(spec_key="--draft-sample-method", values=["greedy"]))
    config = config_from_dict(sweep_config(spec_key="draft_sample_method", values=["greedy", "probabilistic"]))
    assert config.grid.axis == "speculative_config.draft_sample_method"
    check_capabilities(config, V032)
    with pytest.raises(SpecKeyError, match="vLLM 0.32.0"):
        check_capabilities(config_from_dict(sweep_config(spec_key="xpress_topc", values=["0"])), V032)
    names = [life.setting.name for life in plan_lives(config)]
    assert names == ["k0-draft_sample_method-greedy", "k0-draft_sample_method-probabilistic",
                     "k4-draft_sample_method-greedy", "k4-draft_sample_method-probabilistic"]


def argv(caps: Capabilities, setting: Setting, style: str = "auto", method: str = "draft_model") -> list[str]:
    return server_argv(caps, ["vllm"], "m", "127.0.0.1", 8000, ["--max-num-seqs", "64"], setting, method, "d",
                       style=style)


def test_the_key_reaches_the_speculative_config_typed_in_every_style():
    setting = Setting(4, spec_key="enable_adaptive_verification", axis_value="true")
    shorthand = argv(V032, setting)
    assert shorthand[-2:] == ["--speculative-config.enable_adaptive_verification", "true"]
    config_json = argv(V032, setting, "config-json")
    assert json.loads(config_json[-1]) == {"method": "draft_model", "num_speculative_tokens": 4, "model": "d",
                                           "enable_adaptive_verification": True}
    greedy = Setting(4, spec_key="draft_sample_method", axis_value="greedy")
    assert argv(V032, greedy)[-2:] == ["--speculative-config.draft_sample_method", "greedy"]
    numeric = argv(V032, Setting(4, spec_key="revision", axis_value="1234"))  # a str key: "1234" stays text
    assert numeric[-2:] == ["--speculative-config.revision", '"1234"']
    assert parse_serve(numeric[2:], get_profile("0.32")).speculative_config["revision"] == "1234"
    ngram = argv(V032, Setting(3, spec_key="prompt_lookup_max", axis_value="2"), method="ngram")
    assert ngram.count("--speculative-config.prompt_lookup_max") == 1 and ngram[-1] == "2"  # replaces the runner's 4
    assert "--speculative-config" not in " ".join(argv(V032, Setting(0, spec_key="draft_sample_method",
                                                                    axis_value="greedy")))  # K=0: no config
    with pytest.raises(KnobError, match="vLLM 0.6.6 has no speculative config to carry draft_sample_method"):
        speculation_args(Capabilities("0.6.6"), 2, "draft_model", "d", keys={"draft_sample_method": "greedy"})
    with pytest.raises(KnobError, match="vLLM 0.10.2 has no such speculative config key"):
        argv(Capabilities("0.10.2"), greedy)


def test_the_simulator_takes_the_keys_its_profile_version_has():
    profile = get_profile("0.32")
    for style in ("auto", "config-json"):
        args = parse_serve(argv(V032, Setting(4, spec_key="draft_sample_method", axis_value="probabilistic"),
                                style)[2:], profile)
        assert args.speculative_config["draft_sample_method"] == "probabilistic"
        assert args.engine.num_speculative_tokens == 4
    with pytest.raises(SimConfigError, match="fly_window_size\n  Unexpected keyword argument"):
        parse_serve(["m", "-sc", '{"method":"draft_model","model":"d","num_speculative_tokens":2,"fly_window_size":2}'],
                    profile)
    with pytest.raises(SimConfigError, match="rejection_sample_method\n  Input should be 'standard', 'synthetic' or 'block'"):
        parse_serve(["m", "-sc", '{"model":"d","num_speculative_tokens":2,"rejection_sample_method":"fly"}'], profile)
    # 0.10's pydantic config ignored unknown keys: the simulated 0.10.2 starts with one
    old = parse_serve(["m", "--speculative-config", '{"method":"eagle","model":"d","num_speculative_tokens":2,'
                                                    '"fly_window_size":2}'], get_profile("0.10"))
    assert old.engine.num_speculative_tokens == 2
