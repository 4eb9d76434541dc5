"""A speculative config key as the grid's axis, end to end on the simulated vLLM 0.32: the CLI sweeps
K x draft_sample_method through real server lives and Locust, each server is started with the key in its
speculative config, and the decision is made per value; a key this vLLM lacks is refused before any server."""
import json
import subprocess
import sys

import pandas as pd
import pytest
from fault_kit import processes_of

pytestmark = pytest.mark.e2e

SWEEP = """
name = "spec-key"
[server]
model = "sim/e2e-model"
extra_args = ["--max-num-seqs", "32", "--sim-scenario", "roomy-kv"]
ready_timeout_s = 60
memory_stable_window_s = 0.5
[speculation]
k = [0, 2]
[grid]
spec_key = "{key}"
values = {values}
[load]
stages = [{{ users = 2, duration_s = 3 }}]
prompt_tokens = 32
output_tokens = 16
warmup_s = 1.0
preflight_s = 0
[decision]
min_requests = 3
"""


def run_cli(*args, timeout=240):
    return subprocess.run([sys.executable, "-m", "lookahead_runner", *args], capture_output=True, text=True,
                          timeout=timeout)


def test_sweep_of_a_speculative_config_key(tmp_path):
    config = tmp_path / "sweep.toml"
    config.write_text(SWEEP.format(key="draft_sample_method", values='["greedy", "probabilistic"]'))
    done = run_cli("sweep", "--config", str(config), "--out", str(tmp_path / "runs"))
    assert done.returncode in (0, 3), done.stdout[-2000:] + done.stderr[-2000:]   # decided, or not yet (short)
    assert "Traceback" not in done.stderr
    (run_dir,) = list((tmp_path / "runs").iterdir())

    plan = json.loads((run_dir / "plan.json").read_text())
    lives = {life["setting"]: life for life in plan["lives"]}
    assert list(lives) == ["k0-draft_sample_method-greedy", "k0-draft_sample_method-probabilistic",
                           "k2-draft_sample_method-greedy", "k2-draft_sample_method-probabilistic"]
    for value in ("greedy", "probabilistic"):
        argv = lives[f"k2-draft_sample_method-{value}"]["argv"]
        assert argv[argv.index("--speculative-config.draft_sample_method") + 1] == value
        assert not any("draft_sample_method" in part for part in lives[f"k0-draft_sample_method-{value}"]["argv"])
        # the server itself took the key into its speculative config (its startup log line of non-default args)
        log = (run_dir / lives[f"k2-draft_sample_method-{value}"]["dir"] / "server.log").read_text()
        assert f"'draft_sample_method': '{value}'" in log
        assert json.loads((run_dir / lives[f"k2-draft_sample_method-{value}"]["dir"] / "status.json").read_text())[
            "state"] == "done"

    summary = pd.read_csv(run_dir / "summary.csv")
    assert sorted(summary["axis_value"].unique()) == ["greedy", "probabilistic"]
    assert (summary["requests"] > 0).all()
    spec = summary[summary["k"] == 2]
    assert spec["acceptance_rate"].between(0, 1, inclusive="right").all()

    decision = json.loads((run_dir / "decision.json").read_text())
    assert [(a["flag"], a["value"]) for a in decision["by_axis"]] == [
        ("speculative_config.draft_sample_method", "greedy"), ("speculative_config.draft_sample_method", "probabilistic")]
    assert decision["verdict"].startswith("With speculative_config.draft_sample_method ")
    assert "speculative_config.draft_sample_method" in (run_dir / "report.html").read_text()
    assert not processes_of(str(run_dir)), "a server or Locust process of the sweep survived"


@pytest.mark.parametrize("key, values, says", [
    ("fly_window_size", '["2", "4"]', "vLLM 0.32.0's speculative config has no such key (vLLM 0.33.0 has it)"),
    ("rejection_sample_method", '["standard", "fly"]', "vLLM 0.32.0's rejection_sample_method takes standard, "
                                                         "synthetic, block"),
])
def test_a_key_this_vllm_lacks_is_refused_before_any_server(tmp_path, key, values, says):
    config = tmp_path / "sweep.toml"
    config.write_text(SWEEP.format(key=key, values=values))
    done = run_cli("sweep", "--config", str(config), "--out", str(tmp_path / "runs"), timeout=60)
    assert done.returncode == 2, done.stderr
    assert says in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "runs").exists()   # the probe refused it: no run folder, no server life
