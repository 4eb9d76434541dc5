"""Every example config the README and the docs point to loads as it is (run from the checkout's root, as they say)."""
from pathlib import Path

import pytest

from lookahead_runner.config import load_config

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = sorted((ROOT / "examples").glob("*.toml"))


def test_the_examples_are_found():
    assert {path.name for path in EXAMPLES} >= {"sweep.toml", "chat.toml", "requests.toml", "cluster.toml",
                                                 "eagle.toml", "mtp.toml", "ngram.toml", "draft-model.toml"}


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda path: path.name)
def test_an_example_config_loads(path, monkeypatch, ray_installed):
    monkeypatch.chdir(ROOT)
    config = load_config(path)
    assert config.name and config.speculation.k


def test_the_cluster_example_runs_two_lives_at_once_on_a_ray_started_here(ray_installed):
    config = load_config(ROOT / "examples" / "cluster.toml")
    assert config.cluster.engine == "ray" and config.cluster.address == "" and config.cluster.gpus == 2
    assert config.cluster.life_gpus(config.server.extra_args) == 1 and config.load.planned_repeats == 2


@pytest.mark.parametrize("name, method, draft, constants", [
    ("eagle.toml", "eagle3", "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", {}),
    ("mtp.toml", "mtp", None, {}),
    ("ngram.toml", "ngram", None, {"prompt_lookup_min": 2, "prompt_lookup_max": 5}),
    ("draft-model.toml", "draft_model", "meta-llama/Llama-3.2-1B-Instruct", {"draft_tensor_parallel_size": 2}),
])
def test_the_gpu_examples_start_a_real_vllm_with_their_method(name, method, draft, constants):
    """docs/on-your-gpu.md's examples: a real `vllm` (not the simulator), the method, a draft model only where the
    method loads one, and the constant speculative keys; the TP > 1 ones name as many GPUs as their TP."""
    from lookahead_runner.vllm.knob import flag_value, loads_draft_model

    config = load_config(ROOT / "examples" / name)
    assert config.server.command == ["vllm"] and not config.server.is_simulator
    assert config.speculation.method == method and config.speculation.config == constants
    assert loads_draft_model(method) == (draft is not None)
    if draft:
        assert config.speculation.draft_model == draft
    tp = int(flag_value(config.server.extra_args, "--tensor-parallel-size") or 1)
    gpus = config.server.env.get("CUDA_VISIBLE_DEVICES")
    assert gpus is None or len(gpus.split(",")) == tp
