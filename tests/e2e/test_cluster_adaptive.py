"""sweep.strategy = "adaptive" on a local Ray of two GPU slots (run/cluster/pool.py's SlotPool), through the real CLI:
the chooser proposes two lives at once, they overlap in time, each plan.json entry says why it was chosen, the
verdict is the serial adaptive sweep's on the same config, and the cost has GPU-minutes and wall minutes.
Skipped where Ray is not installed (pip install '.[test,ray]')."""
import json
import subprocess

import pandas as pd
import pytest
from fault_kit import (FINISHED, cli, in_session, kill_all, kill_group, no_traceback, only_run_dir, processes_of, start,
                       survivors, unique_model, wait_for, write_config)

ray = pytest.importorskip("ray", reason="needs Ray: pip install 'lookahead-runner[ray]'")
pytestmark = [pytest.mark.e2e, pytest.mark.ray, pytest.mark.slow]  # a local Ray a test: minutes a file; CI runs it

ADAPTIVE = """
name = "cluster-adaptive"
[server]
model = "{model}"
extra_args = ["--max-num-seqs", "64", "--sim-set", "startup_s=0.3", "--sim-scenario", "tight-kv"]
ready_timeout_s = 60
memory_stable_window_s = 0.5
[speculation]
k = [0, 1, 4]  # K=4 leads K=1 by 44 % on the simulator: a margin a busy CI host keeps (K=2 was 17 % behind)
[load]
stages = [{{ users = 4, duration_s = 8 }}]
prompt_tokens = 32
output_tokens = 16
warmup_s = 1.0
preflight_s = 0
repeats = 2
[sweep]
strategy = "adaptive"
[decision]
target_users = 4
max_client_lag_p99_ms = 250  # a busy shared host; not under test here
min_requests = 3
confirm = "off"
{cluster}
"""
TWO_SLOTS = "[cluster]\nengine = \"ray\"\ngpus = 2\n"


def decision_of(run_dir) -> dict:
    return json.loads((run_dir / "decision.json").read_text())


def test_adaptive_on_two_slots_runs_lives_at_once_and_ends_in_the_serial_verdict(tmp_path):
    model, runner = unique_model("ray-adaptive"), None
    try:
        serial = cli("sweep", "--config", str(write_config(tmp_path, ADAPTIVE.format(model=model, cluster=""),
                                                           "serial.toml")), "--out", str(tmp_path / "serial"),
                     timeout=300)
        assert serial.returncode in FINISHED, serial.stdout[-3000:] + serial.stderr[-3000:]
        # in a session of its own: the Ray processes it starts are told apart from those of another test's Ray
        runner = start("sweep", "--config", str(write_config(tmp_path, ADAPTIVE.format(model=model, cluster=TWO_SLOTS),
                                                             "ray.toml")), "--out", str(tmp_path / "ray"))
        stdout, stderr = runner.communicate(timeout=300)
        parallel = subprocess.CompletedProcess(runner.args, runner.returncode, stdout, stderr)
        assert parallel.returncode == serial.returncode, parallel.stdout[-3000:] + parallel.stderr[-3000:]
        no_traceback(parallel.stderr)
        assert "then up to 2 lives at once (one per Ray slot)" in parallel.stdout
        assert "adaptive: 2 lives at once on 2 slots" in parallel.stdout
        run_dir, serial_dir = only_run_dir(tmp_path / "ray"), only_run_dir(tmp_path / "serial")
        decision, alone = decision_of(run_dir), decision_of(serial_dir)
        assert (decision["status"], decision["recommended"], decision["leading_k"]) == (
            alone["status"], alone["recommended"], alone["leading_k"])
        assert decision["leading_k"] == 4  # K=4 leads on the simulator here

        lives = pd.read_csv(run_dir / "lives.csv")
        assert (lives["status"] == "done").all() and lives["gpus"].str.startswith("ray-gpu:").all(), lives
        rows = list(lives.itertuples())
        assert any(a.t_start_s < b.t_end_s and b.t_start_s < a.t_end_s for i, a in enumerate(rows)
                   for b in rows[i + 1:]), lives[["life", "t_start_s", "t_end_s"]]
        plan = json.loads((run_dir / "plan.json").read_text())
        assert [l["dir"] for l in plan["lives"]] == list(lives["life"]) and all(l["chosen"] for l in plan["lives"])
        assert plan["lives"][0]["chosen"] == "K=0: the baseline" and plan["adaptive"]["stop"] == "decided"
        assert sorted(plan["cluster"]["order"]) == sorted(lives["life"])
        assert any("chosen up to 2 at a time (one per slot)" in r for r in decision["reasons"]), decision["reasons"]

        cost, serial_cost = decision["cost"], alone["cost"]
        server_s = cost["start_s"] + cost["measure_s"]
        assert cost["gpu_s"] == pytest.approx(server_s, abs=0.2)  # one ray-gpu slot per life
        first, last = lives["t_start_s"].min(), lives["t_end_s"].max()
        assert cost["wall_s"] == pytest.approx(last - first, abs=0.2) and cost["wall_s"] < server_s
        assert "GPU-minutes" in cost["text"] and "wall minutes" in cost["text"]
        assert serial_cost["wall_s"] >= serial_cost["start_s"] + serial_cost["measure_s"]  # one life at a time
        assert survivors(model, settle_s=10) == [], "a server or Locust process of the sweep survived"
        wait_for(lambda: not in_session(runner.pid), 10, "the sweep's Ray processes to end")
        assert not processes_of(model)
    finally:
        if runner is not None:
            kill_group(runner)
        kill_all(model)
