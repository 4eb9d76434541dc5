import json
import pytest

from lookahead_runner.config import ConfigError, config_from_dict, load_config


def write(tmp_path, text):
    path = tmp_path / "sweep.toml"
    path.write_text(text)
    return path


def test_defaults_are_valid_and_sorted(tmp_path):
    config = load_config(write(tmp_path, "[speculation]\nk = [8, 0, 4]\n"))
    assert config.speculation.k == [0, 4, 8]
    assert config.target_users == config.load.stages[-1].users


@pytest.mark.parametrize(
    "text, field",
    [
        ("[speculation]\nkk = [1]\n", "speculation.kk: unknown key"),
        ("[speculation]\nk = [0, -2]\n", "speculation.k: values must be >= 0"),
        ("[load]\nstages = []\n", "load.stages: list at least one stage"),
        ("[server]\ncommand = []\n", "server.command: set the vLLM command"),
        ("[load]\nrepeats = 0\n", "load.repeats"),
        ("[decision]\ntarget_users = 7\n", "decision.target_users = 7 is not a stage"),
        ("[load\n", "not valid TOML"),
        ("[sweep]\nstrategy = \"smart\"\n", "sweep.strategy"),
        ("[sweep]\nstrategy = \"adaptive\"\n[load]\nrepeat_mode = \"same-server\"\n",
         "set load.repeat_mode = \"restart\""),
        ("[sweep]\nstrategy = \"adaptive\"\n[speculation]\nk = [4]\n", "list at least two in speculation.k"),
        ("[sweep]\nmax_lives = 1\n", "sweep.max_lives"),
    ],
)
def test_bad_config_is_one_line_naming_the_field(tmp_path, text, field):
    with pytest.raises(ConfigError) as err:
        load_config(write(tmp_path, text))
    message = str(err.value)
    assert field in message
    assert "\n" not in message


def test_missing_file_says_so(tmp_path):
    with pytest.raises(ConfigError, match="file not found"):
        load_config(tmp_path / "nope.toml")


def test_cli_overrides_win(tmp_path):
    config = load_config(write(tmp_path, "[load]\nrepeats = 1\n"), {"load.repeats": 3, "name": "x"})
    assert (config.load.repeats, config.name) == (3, "x")


@pytest.mark.parametrize("value, mode", [('"schedule"', "schedule"), ("true", "always"), ("false", "off"),
                                         ('"off"', "off")])
def test_confirm_takes_a_mode_or_a_bool(tmp_path, value, mode):
    assert load_config(write(tmp_path, f"[decision]\nconfirm = {value}\n")).decision.confirm == mode


def test_confirm_flags_set_decision_confirm(tmp_path):
    from lookahead_runner.cli import _config, build_parser

    path = write(tmp_path, "")
    for flags, mode in (([], "schedule"), (["--confirm"], "always"), (["--no-confirm"], "off")):
        args = build_parser().parse_args(["sweep", "--config", str(path), *flags])
        assert _config(path, args).decision.confirm == mode
    with pytest.raises(SystemExit):
        build_parser().parse_args(["sweep", "--confirm", "--no-confirm"])


def test_auto_repeats_and_a_grid_are_refused_in_one_line():
    with pytest.raises(ConfigError, match="load.repeats = \"auto\" adds repeats for one decision"):
        config_from_dict({"load": {"repeats": "auto"}, "grid": {"flag": "--max-num-seqs", "values": ["64"]}})


REAL_VLLM = {"server": {"command": ["vllm"], "model": "my/target"},
             "speculation": {"k": [0, 4], "draft_model": "my/draft"}}


@pytest.mark.parametrize("changes, strategy", [
    ({}, "adaptive"),                                                            # the default
    ({"load": {"repeats": 2}}, "grid"),                                          # repeats given: the grid asked for
    ({"sweep": {"strategy": "grid"}}, "grid"),
    ({"load": {"repeat_mode": "same-server"}}, "grid"),                          # no server start per life
    ({"grid": {"flag": "--max-num-seqs", "values": ["64", "128"]}}, "grid"),      # one decision per value
    ({"speculation": {"k": [4]}}, "grid"),
    ({"decision": {"restart_spread": 0.04}}, "grid"),                            # the spread is known
    ({"server": {"command": None}}, "grid"),                                     # the simulator's own (the demo)
    ({"server": {"command": None, "extra_args": ["--sim-restart-spread", "0.05"]}}, "adaptive"),
])
def test_no_strategy_on_a_server_of_unknown_restart_spread_is_the_adaptive_sweep(changes, strategy):
    """Issue 38: on real vLLM with no strategy and no repeats given, the sweep measures until decided."""
    data = json.loads(json.dumps(REAL_VLLM))
    for section, values in changes.items():
        data.setdefault(section, {}).update(values)
        if data[section].get("command", "") is None:  # the simulator: its own models
            del data[section]["command"], data[section]["model"], data["speculation"]["draft_model"]
    config = config_from_dict(data)
    assert config.sweep.strategy == strategy and config.adaptive_by_default == (strategy == "adaptive")
    again = config_from_dict(config.model_dump(mode="json"))                    # plan.json's copy: as resolved
    assert again.sweep.strategy == strategy


RATES = [{"rate": 4.0, "duration_s": 60}, {"rate": 16.0, "duration_s": 60}]


@pytest.mark.parametrize("load, decision, strategy, at_rate", [
    ({"stages": RATES}, {}, "adaptive", 16.0),                                   # the last rate stage's rate
    ({"stages": RATES}, {"target_rate": 4.0}, "adaptive", 4.0),                  # the user's rate
    ({"stages": RATES, "repeats": 2}, {}, "grid", None),                         # repeats given: the grid
    ({"stages": RATES, "repeat_mode": "same-server"}, {}, "grid", None),
    ({"stages": RATES}, {"restart_spread": 0.04}, "grid", None),                 # the spread is known
    ({"stages": [{"users": 4, "duration_s": 60}, *RATES]}, {"target_rate": 16.0}, "adaptive", None),  # on users
])
def test_rate_stages_only_on_a_server_of_unknown_spread_measure_until_decided_at_the_target_rate(
        load, decision, strategy, at_rate):
    """Issues 48/49: a sweep of rate stages only gets the measure-until-decided default too, at its target rate
    (decision.target_rate, else the last rate stage, as the verdict at a rate takes it); with users stages beside
    them the adaptive sweep still decides at the users target."""
    config = config_from_dict(REAL_VLLM | {"load": load, "decision": decision})
    assert config.sweep.strategy == strategy and config.adaptive_by_default == (strategy == "adaptive")
    assert config.adaptive_rate == at_rate
