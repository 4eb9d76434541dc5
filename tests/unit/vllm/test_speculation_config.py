"""`[speculation] config = {...}`: speculative config keys held constant beside K. Merged into the speculative
config of every life with K > 0 (read back as vLLM 0.32 reads its argv: the simulator's parser), K, the method
and the draft model still the runner's; a key the runner writes is refused in one line, a key or value this vLLM
lacks before any server starts; MTP and the lookup methods get no draft model."""
from __future__ import annotations

import json

import pytest

from lookahead_runner.config import ConfigError, ResolvedServer, config_from_dict
from lookahead_runner.run.life.launch import render_argv
from lookahead_runner.run.runner import check_capabilities, plan_lives
from lookahead_runner.sim.cli import parse_serve
from lookahead_runner.sim.profiles import get_profile
from lookahead_runner.vllm.knob import KnobError, loads_draft_model
from lookahead_runner.vllm.probe import Capabilities
from lookahead_runner.vllm.spec_keys import SpecKeyError

SHORTHAND = frozenset({"--spec-method", "--spec-model", "--spec-tokens", "--speculative-config"})
V032 = Capabilities("0.32.0", SHORTHAND)
CONFIG_JSON = Capabilities("0.32.0", frozenset({"--speculative-config"}))
CONSTANTS = {"draft_tensor_parallel_size": 1, "draft_sample_method": "probabilistic", "revision": "1234"}


def sweep(**speculation) -> dict:
    return {"server": {"command": ["vllm"], "model": "m"},
            "speculation": {"k": [0, 2, 4], "draft_model": "d"} | speculation, "load": {"repeats": 2}}


def spec_of_every_life(config_dict: dict, caps: Capabilities = V032) -> dict[str, dict | None]:
    """Each planned life's speculative config, as the simulated vLLM 0.32 parses its argv (None: no speculation)."""
    config = config_from_dict(config_dict)
    check_capabilities(config, caps)
    server = ResolvedServer.resolve(config.server)
    out = {}
    for life in plan_lives(config):
        argv = render_argv(config, caps, life.setting, 8000, server)
        out[life.key] = parse_serve(argv[argv.index("serve") + 1:], get_profile("0.32")).speculative_config
    return out


@pytest.mark.parametrize("caps", [V032, CONFIG_JSON], ids=["shorthand", "config-json"])
def test_the_table_is_in_the_speculative_config_of_every_life_with_k(caps):
    specs = spec_of_every_life(sweep(config=CONSTANTS), caps)
    assert sorted(specs) == ["k0/r0", "k0/r1", "k2/r0", "k2/r1", "k4/r0", "k4/r1"]
    for key, spec in specs.items():
        if key.startswith("k0/"):
            assert spec is None  # the baseline runs without speculation
            continue
        k = int(key[1])
        assert spec == {"method": "draft_model", "model": "d", "num_speculative_tokens": k} | CONSTANTS, key


def test_ngram_lookup_lengths_replace_the_runners_and_a_min_above_its_max_is_refused():
    both = spec_of_every_life(sweep(method="ngram", config={"prompt_lookup_min": 2, "prompt_lookup_max": 5}))
    assert both["k4/r0"] == {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 2,
                             "prompt_lookup_max": 5}
    assert spec_of_every_life(sweep(method="ngram", config={"prompt_lookup_min": 3}))["k2/r1"] == {
        "method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_max": 4, "prompt_lookup_min": 3}
    with pytest.raises(ConfigError, match=r"prompt_lookup_min = 5 is above prompt_lookup_max = 4 \(the runner's "
                                          r"default\): vLLM refuses it; set prompt_lookup_max >= 5 too$"):
        config_from_dict(sweep(method="ngram", config={"prompt_lookup_min": 5}))


@pytest.mark.parametrize("method", ["mtp", "qwen3_next_mtp", "ngram", "suffix"])
def test_mtp_and_the_lookup_methods_name_no_draft_model(method):
    assert not loads_draft_model(method)
    for caps in (V032, CONFIG_JSON):
        spec = spec_of_every_life(sweep(method=method), caps)["k2/r0"]
        assert "model" not in spec and spec["method"] == method and spec["num_speculative_tokens"] == 2
    assert loads_draft_model("eagle3") and loads_draft_model("draft_model") and loads_draft_model("dspark")


@pytest.mark.parametrize("key, fix", [
    ("num_speculative_tokens", "remove it and set speculation.k (K, the swept value) instead"),
    ("method", "remove it and set speculation.method instead"),
    ("model", "remove it and set speculation.draft_model instead"),
    ("num_speculative_tokens_per_batch_size", "remove it: the confirmation life writes the per-batch-size schedule"),
])
def test_a_key_the_runner_writes_is_refused_in_one_line_naming_it(key, fix):
    with pytest.raises(ConfigError) as err:
        config_from_dict(sweep(config={"draft_tensor_parallel_size": 1, key: [[1, 2, 3]] if "batch" in key else 4}))
    line = str(err.value)
    assert "\n" not in line and line.startswith(f"config: speculation.config: {key} is written by the runner")
    assert fix in line


@pytest.mark.parametrize("toml_value, kind", [("{ size = 1 }", "a table"), ("1979-05-27", "a date"),
                                              ("[{ a = 1 }]", "a list holding a table"),
                                              ("[[1, 2], [3]]", "a list holding a list")])
def test_a_value_of_a_toml_type_no_speculative_config_takes_is_refused_naming_the_key(tmp_path, toml_value, kind):
    """TOML has tables and dates; the speculative config's values are numbers, text, true/false or a flat list."""
    from lookahead_runner.config import load_config

    path = tmp_path / "sweep.toml"
    path.write_text("[speculation]\nk = [0, 2]\nconfig = { draft_tensor_parallel_size = " + toml_value + " }\n")
    with pytest.raises(ConfigError) as err:
        load_config(path)
    line = str(err.value)
    assert "\n" not in line and "valid boolean" not in line, line
    assert line == (f"{path}: speculation.config: draft_tensor_parallel_size: {kind} is no speculative "
                    "config value; give a number, a string, true or false, or a list of them, e.g. "
                    "draft_tensor_parallel_size = 1"), line

def test_the_table_beside_the_rest_of_the_config():
    with pytest.raises(ConfigError, match="grid.spec_key = 'draft_sample_method' is also in speculation.config"):
        config_from_dict(sweep(config={"draft_sample_method": "greedy"})
                         | {"grid": {"spec_key": "draft_sample_method", "values": ["probabilistic"]}})
    with pytest.raises(ConfigError, match="raw_lookahead_slots sweeps --num-lookahead-slots alone"):
        config_from_dict(sweep(raw_lookahead_slots=True, config={"draft_tensor_parallel_size": 1}))
    with pytest.raises(ConfigError, match=r"speculation\.config: 'a-b': write the key as vLLM"):
        config_from_dict(sweep(config={"a-b": 1}))
    with pytest.raises(ConfigError, match="its other keys go in speculation.config"):
        config_from_dict({"server": {"extra_args": ["--speculative-config", '{"prompt_lookup_max": 3}']}})


@pytest.mark.parametrize("constants, caps, refusal", [
    ({"xpress_topc": 2}, V032, r"speculation.config.xpress_topc: vLLM 0.32.0's speculative config has no such "
                               r"key \(vLLM 0.33.0 has it\); remove it"),
    ({"tensor_parallel_size": 2}, V032, "is filled by vLLM itself; the draft's is draft_tensor_parallel_size"),
    ({"draft_tensor_parallel_size": 0}, V032, r"draft_tensor_parallel_size = 0: vLLM 0.32.0's "
                                              r"draft_tensor_parallel_size takes a number >= 1"),
    ({"draft_tensor_parallel_size": 1.5}, V032, "takes a number \\(a whole number\\)"),
    ({"draft_sample_method": "best"}, V032, "draft_sample_method takes greedy, probabilistic"),
    ({"rejection_sample_method": "synthetic"}, V032, "requires exactly one of synthetic_acceptance_rates and "
                                                     "synthetic_acceptance_length"),
    ({"draft_tensor_parallel_size": 1}, Capabilities("0.6.6", frozenset({"--speculative-model",
                                                                          "--num-speculative-tokens"})),
     "speculation.config: vLLM 0.6.6 has no speculative config to carry draft_tensor_parallel_size"),
])
def test_what_this_vllm_lacks_is_refused_before_any_server(constants, caps, refusal):
    config = config_from_dict(sweep(config=constants))
    with pytest.raises((SpecKeyError, KnobError), match=refusal):
        check_capabilities(config, caps)


def test_typed_as_this_vllm_takes_them_and_passed_on_where_no_facts_are_kept():
    spec = spec_of_every_life(sweep(config={"draft_tensor_parallel_size": "2", "enforce_eager": "true",
                                            "rejection_sample_method": "synthetic",
                                            "synthetic_acceptance_rates": [0.9, 0.8]}), CONFIG_JSON)["k2/r0"]
    assert spec["draft_tensor_parallel_size"] == 2 and spec["enforce_eager"] is True
    assert spec["synthetic_acceptance_rates"] == [0.9, 0.8]
    # a version without facts here: the keys go to its own SpeculativeConfig as given
    newer = Capabilities("0.40.0", frozenset({"--speculative-config"}))
    config = config_from_dict(sweep(config={"some_new_key": 3}))
    check_capabilities(config, newer)
    argv = render_argv(config, newer, plan_lives(config)[-1].setting, 8000, ResolvedServer.resolve(config.server))
    assert json.loads(argv[-1])["some_new_key"] == 3
