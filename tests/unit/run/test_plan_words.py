"""What the dry run says it will do, in words true of the config (issue 48): Locust's processes planned for the
requests in flight where the config has rate stages only (it has no users), the adaptive sweep's bound on lives
with where it comes from; and the warnings of run/before_lives.py."""
import pytest

from lookahead_runner.config import ConfigError, config_from_dict
from lookahead_runner.run.strategies.adaptive_sweep import ModelView, describe
from lookahead_runner.run.before_lives import cache_entry, check_models, hub_cache, is_hub_name, slo_warning
from lookahead_runner.run.life.placement import plan_placement


def test_processes_for_rate_stages_are_planned_for_requests_in_flight():
    rates = config_from_dict({"load": {"stages": [{"rate": 3.0, "duration_s": 5}]}})
    why = plan_placement(rates, (0, 1)).processes_why
    assert why.startswith("processes auto: 1 planned for 3 requests in flight (3 requests per second for a second)")
    capped = config_from_dict({"load": {"stages": [{"rate": 3.0, "duration_s": 5}], "max_in_flight": 12}})
    assert "planned for 12 requests in flight (load.max_in_flight)" in plan_placement(capped, (0, 1)).processes_why
    users = config_from_dict({"load": {"stages": [{"users": 4, "duration_s": 5}]}})
    assert "planned for 4 users " in plan_placement(users, (0, 1)).processes_why


def test_the_adaptive_bound_says_where_it_comes_from():
    config = config_from_dict({"sweep": {"strategy": "adaptive"}, "speculation": {"k": [0, 4]},
                               "load": {"stages": [{"users": 4, "duration_s": 5}]}})
    text = describe(config, ModelView(why_not="fewer than two K measured"))
    assert text.endswith("(at most 4 server lives: 2 K x 2, sweep.max_lives to change it; sweep.strategy = \"grid\" "
                         "would run 2: each K x load.repeats)")
    bounded = config.model_copy(update={"sweep": config.sweep.model_copy(update={"max_lives": 3})})
    assert describe(bounded, ModelView(why_not="-")).endswith("(at most 3 server lives: sweep.max_lives; "
                                                              "sweep.strategy = \"grid\" would run 2: each K x "
                                                              "load.repeats)")


@pytest.mark.parametrize("name, hub", [("Qwen/Qwen3-8B", True), ("gpt2", True), ("/models/x", False),
                                       ("./x", False), ("a/b/c", False), ("org--x/y", False), ("org/x.git", False),
                                       ("-org/x", False), ("models/tiny", True)])
def test_hub_names_follow_huggingface_hubs_rules(name, hub):
    assert is_hub_name(name) is hub


def test_the_cache_folder_follows_the_environment(tmp_path):
    assert hub_cache({"HF_HUB_CACHE": str(tmp_path)}) == tmp_path
    assert hub_cache({"HF_HOME": str(tmp_path)}) == tmp_path / "hub"
    assert hub_cache({"XDG_CACHE_HOME": str(tmp_path)}) == tmp_path / "huggingface" / "hub"


def test_a_snapshot_without_weights_is_not_in_the_cache(tmp_path):
    repo = tmp_path / "models--org--m"
    (repo / "snapshots" / "abc").mkdir(parents=True)
    (repo / "snapshots" / "abc" / "config.json").write_text("{}")
    assert not cache_entry(tmp_path, "org/m").complete
    (repo / "snapshots" / "abc" / "model.safetensors").write_bytes(b"0")
    assert cache_entry(tmp_path, "org/m").complete


def real(model: str, draft: str, **more) -> object:
    return config_from_dict({"server": {"command": ["vllm"], "model": model, **more},
                             "speculation": {"k": [0, 2], "draft_model": draft}})


def test_only_what_a_life_here_loads_is_checked(tmp_path):
    env = {"HF_HUB_CACHE": str(tmp_path)}
    with pytest.raises(ConfigError, match="^server.model: '/no/such/model' does not exist on this host"):
        check_models(real("/no/such/model", "org/d"), env)
    # a launcher's path is the container's: not this host's to check
    assert check_models(real("/no/such/model", "/no/draft", command=["docker", "run", "img"]), env) == []
    # K = 0 alone loads no draft
    only_base = real("org/m", "/no/draft").model_copy(update={"speculation": real("org/m", "/no/draft").speculation
                                                              .model_copy(update={"k": [0]})})
    assert [w.split(":")[0] for w in check_models(only_base, env)] == ["server.model"]


def test_rate_stages_without_an_slo_say_what_the_verdict_reads():
    rates = config_from_dict({"load": {"stages": [{"rate": 3.0, "duration_s": 5}]},
                              "decision": {"latency_percentile": 95}})
    assert "the e2e latency at p95 (decision.latency_percentile) alone" in slo_warning(rates)
    assert slo_warning(rates, "ramp").startswith("decision.slo is empty: the knee in rate terms is where the K stops")
    assert slo_warning(config_from_dict({})) == ""


def test_weights_in_the_download_dir_vllm_is_given_are_in_the_cache(tmp_path):
    # vLLM hands --download-dir to huggingface_hub as its cache_dir: the weights are looked for there
    download = tmp_path / "weights"
    snapshot = download / "models--org--m" / "snapshots" / "abc"
    snapshot.mkdir(parents=True)
    (snapshot / "model.safetensors").write_bytes(b"0")
    env = {"HF_HUB_CACHE": str(tmp_path / "hub"), "HF_HUB_OFFLINE": "1"}
    for extra in (["--download-dir", str(download)], [f"--download_dir={download}"]):
        config = real("org/m", "org/d", extra_args=extra).model_copy()
        only_base = config.model_copy(update={"speculation": config.speculation.model_copy(update={"k": [0]})})
        assert check_models(only_base, env) == []
