"""decision.target_rate and the capacity search in the config: a target rate must be a rate stage's rate (one line
naming the field and the fix otherwise), the run's rate verdict is made where one is given or where the run has
rate stages only, and sweep.strategy = "capacity" needs rate stages and an SLO."""
import pytest

from lookahead_runner.config import ConfigError, load_config

RATES = "[load]\nstages = [{ users = 4, duration_s = 10 }, { rate = 4.0, duration_s = 10 }, { rate = 8.0, duration_s = 10 }]\n"


def _load(tmp_path, text):
    path = tmp_path / "sweep.toml"
    path.write_text(text)
    return load_config(path)


@pytest.mark.parametrize("text, line", [
    ("[decision]\ntarget_rate = 20\n",
     "decision.target_rate = 20 needs a rate stage at that rate: add { rate = 20, duration_s = 60 } to load.stages, "
     "or remove decision.target_rate"),
    (RATES + "[decision]\ntarget_rate = 6\n", "decision.target_rate = 6 is not a rate stage's rate [4, 8]"),
    (RATES + "[decision]\ntarget_rate = -1\n", "decision.target_rate"),
    ("[decision]\nslo_attainment = 1.5\n", "decision: slo_attainment = 1.5 is gone"),
    ("[sweep]\nstrategy = \"capacity\"\n[decision]\nslo = { ttft_p99_ms = 500 }\n",
     "sweep.strategy = \"capacity\" probes rate stages"),
    (RATES + "[sweep]\nstrategy = \"capacity\"\n", "sweep.strategy = \"capacity\" finds the highest rate within the "
                                                  "SLO: set at least one in decision.slo"),
    (RATES + "[sweep]\ncapacity_precision = 0\n", "sweep.capacity_precision"),
])
def test_bad_targets_and_capacity_settings_are_one_line_naming_the_field(tmp_path, text, line):
    with pytest.raises(ConfigError) as err:
        _load(tmp_path, text)
    assert line in str(err.value) and "\n" not in str(err.value)


def test_the_target_rate_is_the_given_one_or_the_last_rate_stage_of_a_run_of_rate_stages_only(tmp_path):
    assert _load(tmp_path, RATES + "[decision]\ntarget_rate = 4\n").target_rate == 4.0
    assert _load(tmp_path, RATES).target_rate is None   # user stages beside: no verdict at a rate unless asked
    only = "[load]\nstages = [{ rate = 4.0, duration_s = 10 }, { rate = 8.0, duration_s = 10 }]\n"
    assert _load(tmp_path, only).target_rate == 8.0
    assert _load(tmp_path, "[speculation]\nk = [0, 4]\n").target_rate is None


def test_a_capacity_search_takes_one_k_and_rate_stages_with_an_slo(tmp_path):
    config = _load(tmp_path, RATES + "[sweep]\nstrategy = \"capacity\"\n[speculation]\nk = [4]\n"
                              "[decision]\nslo = { ttft_p99_ms = 500 }\n")
    assert config.sweep.strategy == "capacity" and config.sweep.capacity_precision == 0.10
