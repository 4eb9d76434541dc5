import pytest
from unit.synthetic import window

from lookahead_runner.config import ConfigError, DecisionConfig, config_from_dict
from lookahead_runner.decision import evidence
from lookahead_runner.decision.ramp import ramp_decision
from lookahead_runner.run.strategies.ramp import ramp_config
from lookahead_runner.run.runner import plan_lives
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


def _ramp(points, k=4):
    """points: (users, req/s, TTFT p50 ms, KV peak, preemptions) -> the ramp's evidence, one repeat of 30 s."""
    return evidence([window(k, u, req, 0, duration_s=30, ttft_ms=ttft, e2e_ms=ttft + 1200 * (1 + u / 128),
                            kv_usage_peak=kv, preemptions=pre) for u, req, ttft, kv, pre in points], points[0][0])


def test_knee_is_where_more_users_buy_little_at_a_latency_and_kv_cost():
    """The issue's ramp at K=4: +2 % at 128 and +8 % at 256 users while KV sat at 99.8 % with preemptions and
    TTFT p50 went 119 -> 633 -> 2568 ms: the knee is 64 users, not "still growing"."""
    ev = _ramp([(4, 3.6, 90, 0.05, 0), (16, 14.1, 95, 0.2, 0), (64, 50.1, 119, 0.7, 0),
                (128, 51.2, 633, 0.998, 23), (256, 55.1, 2568, 0.998, 26)])
    decision = ramp_decision(ev, 4, "k4", ["vllm", "serve"], DecisionConfig(resamples=300))
    assert decision.knee.users == 64 and decision.knee.next_users == 128, decision.knee.reason
    assert decision.verdict.startswith("The knee at K=4 is 64 users") and "preemptions" in decision.verdict
    assert [s.costly for s in decision.knee.steps][2:] == [True, True]


def test_no_knee_while_every_doubling_still_pays():
    ev = _ramp([(4, 4.0, 90, 0.05, 0), (8, 7.9, 92, 0.1, 0), (16, 15.5, 95, 0.2, 0)])
    decision = ramp_decision(ev, 4, "k4", [], DecisionConfig(resamples=300))
    assert decision.knee.users is None and decision.verdict.startswith("No knee found at K=4")
    assert "add higher stages" in decision.knee.reason
