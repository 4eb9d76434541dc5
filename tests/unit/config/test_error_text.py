"""A config error a person reads once (issue 48): the nearest key for an unknown one, an example value for a wrong
type, and the blame on `--set` where `--set` gave the value, not on the TOML file."""
import pytest

from lookahead_runner.config import ConfigError, load_config


def error(tmp_path, text: str, overrides: dict | None = None) -> str:
    path = tmp_path / "sweep.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_config(path, overrides)
    return str(err.value).replace(f"{tmp_path}/", "")  # the file as the user named it, here from its folder


@pytest.mark.parametrize("text, expected", [
    ("[speculation]\ndraft_modle = \"x\"\n",
     "sweep.toml: speculation.draft_modle: unknown key; did you mean draft_model?"),
    ("[lod]\nrepeats = 3\n", "sweep.toml: lod: unknown key; did you mean load?"),
    ("[load]\nstages = [{ usrs = 2, duration_s = 5 }]\n",
     "sweep.toml: load.stages.0.usrs: unknown key; did you mean users?"),
])
def test_an_unknown_key_names_the_nearest(tmp_path, text, expected):
    assert error(tmp_path, text) == expected


def test_an_unknown_key_far_from_every_key_lists_the_sections_keys(tmp_path):
    assert error(tmp_path, "[speculation]\nzzz = 1\n") == (
        "sweep.toml: speculation.zzz: unknown key; remove it or check its spelling ([speculation] takes k, method, "
        "draft_model, raw_lookahead_slots, flag_style, config)")


@pytest.mark.parametrize("text, expected", [
    ("[speculation]\nk = 4\n", "sweep.toml: speculation.k: Input should be a valid list; e.g. k = [0, 2, 4, 8]"),
    ("[speculation]\nk = [0, \"two\"]\n",
     "sweep.toml: speculation.k.1: Input should be a valid integer, unable to parse string as an integer; "
     "e.g. k = [0, 2, 4, 8]"),
    ("[server]\nready_timeout_s = \"long\"\n",
     "sweep.toml: server.ready_timeout_s: Input should be a valid number, unable to parse string as a number; "
     "e.g. ready_timeout_s = 600.0"),
])
def test_a_type_error_gives_an_example_value(tmp_path, text, expected):
    assert error(tmp_path, text) == expected


def test_a_set_error_is_blamed_on_set_with_an_example_in_its_form(tmp_path):
    assert error(tmp_path, "", {"speculation.k": "abc"}) == (
        "--set speculation.k: Input should be a valid list; e.g. --set 'speculation.k=[0,2,4,8]'")
    assert error(tmp_path, "", {"speculation.draft_modle": "x"}) == (
        "--set speculation.draft_modle: unknown key; did you mean speculation.draft_model?")
    assert error(tmp_path, "", {"load.prompt_file": "/nonexistent/p.jsonl"}).startswith(
        "--set load.prompt_file: '/nonexistent/p.jsonl' does not exist")
    # the file's own mistake stays the file's
    assert error(tmp_path, "[speculation]\nk = 4\n", {"load.repeats": 2}).startswith("sweep.toml: speculation.k: ")


def test_a_rule_over_several_sections_names_no_field_of_its_own(tmp_path):
    assert error(tmp_path, "[decision]\ntarget_rate = 20\n").startswith(
        "sweep.toml: decision.target_rate = 20 needs a rate stage at that rate")
    assert error(tmp_path, "", {"decision.target_rate": 20}).startswith(
        "--set decision.target_rate: decision.target_rate = 20 needs a rate stage at that rate")
