"""Every example config the README and the docs point to loads as it is (run from the checkout's root, as they say)."""
from pathlib import Path

import pytest

from lookahead_runner.config import load_config

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = sorted((ROOT / "examples").glob("*.toml"))


def test_the_examples_are_found():
    assert {path.name for path in EXAMPLES} >= {"sweep.toml", "chat.toml", "requests.toml", "cluster.toml"}


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda path: path.name)
def test_an_example_config_loads(path, monkeypatch, ray_installed):
    monkeypatch.chdir(ROOT)
    config = load_config(path)
    assert config.name and config.speculation.k


def test_the_cluster_example_runs_two_lives_at_once_on_a_ray_started_here(ray_installed):
    config = load_config(ROOT / "examples" / "cluster.toml")
    assert config.cluster.engine == "ray" and config.cluster.address == "" and config.cluster.gpus == 2
    assert config.cluster.life_gpus(config.server.extra_args) == 1 and config.load.planned_repeats == 2
