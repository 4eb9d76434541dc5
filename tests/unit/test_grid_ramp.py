import pandas as pd
import pytest

from lookahead_runner.config import ConfigError, config_from_dict
from lookahead_runner.ramp import find_knee, ramp_config
from lookahead_runner.runner import plan_lives
from lookahead_runner.vllm.knob import Setting, server_argv, with_axis
from lookahead_runner.vllm.probe import Capabilities

CAPS = Capabilities("0.32.0", frozenset())


def test_grid_crosses_k_with_flag_values_in_k_order():
    config = config_from_dict({"speculation": {"k": [4, 0]}, "load": {"repeats": 2},
                               "grid": {"flag": "--max-num-seqs", "values": ["64", "128"]}})
    lives = plan_lives(config)
    assert [life.key for life in lives[:4]] == ["k0-max-num-seqs64/r0", "k0-max-num-seqs64/r1",
                                                "k0-max-num-seqs128/r0", "k0-max-num-seqs128/r1"]
    assert len(lives) == 8 and [life.setting.k for life in lives] == [0] * 4 + [4] * 4


def test_grid_value_replaces_the_production_flag():
    setting = Setting(2, axis_flag="--max-num-seqs", axis_value="64")
    assert with_axis(["--max-num-seqs", "256", "--dtype", "half"], setting) == ["--dtype", "half", "--max-num-seqs", "64"]
    assert with_axis(["--max-num-seqs=256"], setting) == ["--max-num-seqs", "64"]
    argv = server_argv(CAPS, ["vllm"], "m", "h", 1, ["--max-num-seqs", "256"], setting, "draft_model", "d")
    assert argv.count("--max-num-seqs") == 1 and argv[argv.index("--max-num-seqs") + 1] == "64"


@pytest.mark.parametrize("grid, field", [
    ({"flag": "max-num-seqs", "values": ["1"]}, "write the flag with its dashes"),
    ({"flag": "--max-num-seqs"}, "grid.values"),
    ({"values": ["1"]}, "grid.flag"),
])
def test_bad_grid_names_the_field(grid, field):
    with pytest.raises(ConfigError, match=field):
        config_from_dict({"grid": grid})


def test_running_server_is_one_setting():
    with pytest.raises(ConfigError, match="server.url"):
        config_from_dict({"server": {"url": "http://127.0.0.1:8000"}, "speculation": {"k": [0, 4]}})


def test_ramp_config_doubles_stages_for_one_k():
    config = ramp_config(config_from_dict({}), 4, [1, 2, 4], 5.0)
    assert config.speculation.k == [4] and config.load.repeats == 1
    assert [(s.users, s.duration_s) for s in config.load.stages] == [(1, 5.0), (2, 5.0), (4, 5.0)]


def test_knee_is_the_last_stage_that_still_grew():
    summary = pd.DataFrame({"users": [1, 2, 4, 8], "req_per_s": [1.0, 1.9, 3.0, 3.02], "valid": [True] * 4})
    knee = find_knee(summary, 0.02)
    assert knee["knee_users"] == 4 and knee["next_users"] == 8
    rising = pd.DataFrame({"users": [1, 2], "req_per_s": [1.0, 2.0], "valid": [True, True]})
    assert find_knee(rising, 0.02)["next_users"] is None
