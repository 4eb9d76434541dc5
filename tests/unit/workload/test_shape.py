"""--stages parsing, the schedule lookup, and the scenario options (all without importing Locust)."""

from __future__ import annotations

import argparse

import pytest

from lookahead_runner.workload.options import ScenarioSettings, add_scenario_options
from lookahead_runner.workload.stages import Stage, parse_stages, stage_at


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("4:20,16:20,32:20", [Stage(4, 20.0), Stage(16, 20.0), Stage(32, 20.0)]),
        (" 2:3 , 4:3 ", [Stage(2, 3.0), Stage(4, 3.0)]),
        ("1:0.5", [Stage(1, 0.5)]),
        ("64:600", [Stage(64, 600.0)]),
    ],
)
def test_good_stages(text, expected):
    assert parse_stages(text) == expected


@pytest.mark.parametrize(
    "text",
    ["", " ", "4", "4:", ":20", "4:20,", "a:20", "4:b", "0:20", "-1:20", "4:0", "4:-5", "4:20:1", "4.5:20", "4:inf", "4:nan"],
)
def test_bad_stages_give_one_line_naming_the_option(text):
    with pytest.raises(ValueError) as info:
        parse_stages(text)
    message = str(info.value)
    assert message.startswith("--stages: ")
    assert "\n" not in message
    assert "USERS:SECONDS" in message


def test_stage_at_follows_the_schedule_and_ends():
    stages = parse_stages("2:3,4:3")
    assert stage_at(stages, 0.0) == 0
    assert stage_at(stages, 2.999) == 0
    assert stage_at(stages, 3.0) == 1
    assert stage_at(stages, 5.9) == 1
    assert stage_at(stages, 6.0) is None


def _parser():
    configargparse = pytest.importorskip("configargparse")  # Locust's parser base; importing it patches nothing
    parser = configargparse.ArgumentParser(prog="locust")
    add_scenario_options(parser)
    return parser


def test_options_have_the_contract_defaults():
    options = _parser().parse_args([])
    settings = ScenarioSettings.from_options(options)
    assert settings == ScenarioSettings(
        stages="4:20,16:20,32:20", prompt_tokens=128, output_tokens=64, model="", temperature=0.0,
        requests_csv="", stages_csv="", request_timeout_s=120.0,
    )


def test_options_parse_to_their_types():
    options = _parser().parse_args(
        ["--stages", "2:3,4:3", "--prompt-tokens", "512", "--output-tokens", "32", "--model", "m",
         "--temperature", "0.7", "--requests-csv", "r.csv", "--stages-csv", "s.csv", "--request-timeout-s", "30"]
    )
    settings = ScenarioSettings.from_options(options)
    assert settings.parsed_stages == [Stage(2, 3.0), Stage(4, 3.0)]
    assert (settings.prompt_tokens, settings.output_tokens, settings.temperature) == (512, 32, 0.7)
    assert (settings.model, settings.requests_csv, settings.stages_csv) == ("m", "r.csv", "s.csv")
    assert settings.request_timeout_s == 30.0


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["--stages", "4:20,16"], "argument --stages: bad stage '16'"),
        (["--output-tokens", "0"], "argument --output-tokens: must be > 0"),
        (["--prompt-tokens", "x"], "argument --prompt-tokens: not an integer"),
        (["--request-timeout-s", "-1"], "argument --request-timeout-s: must be > 0"),
        # numpy refuses a negative seed: every dispatcher would fail and the rate stages send nothing
        (["--arrival-seed", "-1"], "argument --arrival-seed: must be >= 0"),
        # a schedule drawn whole: 10^9 arrivals would be 8 GB in every Locust process
        (["--stages", "1e6/s:1000"], "argument --stages: bad stage '1e6/s:1000'"),
        # review (issue 46): an infinite shape drew NaN gaps, so every rate stage silently sent nothing
        (["--burstiness", "inf"], "argument --burstiness: give the gamma shape"),
        (["--burstiness", "nan"], "argument --burstiness: give the gamma shape"),
    ],
)
def test_bad_options_are_argparse_errors(argv, fragment, capsys):
    with pytest.raises(SystemExit) as info:
        _parser().parse_args(argv)
    assert info.value.code == 2
    assert fragment in capsys.readouterr().err


def test_settings_from_an_object_without_the_options_keep_defaults():
    assert ScenarioSettings.from_options(argparse.Namespace()) == ScenarioSettings()
    with pytest.raises(ValueError, match="--stages"):
        ScenarioSettings.from_options(argparse.Namespace(stages="nope"))
