"""The product end to end: the CLI sweeps the simulated vLLM through real processes
(one server life per setting, a headless Locust subprocess per life) and writes the report."""
import json
import subprocess
import sys

import pandas as pd
import pytest
from fault_kit import processes_of

pytestmark = pytest.mark.e2e

SWEEP = """
name = "e2e"
[server]
model = "sim/e2e-model"
extra_args = ["--max-num-seqs", "64", "--sim-set", "startup_s=0.3", "--sim-scenario", "tight-kv"]
ready_timeout_s = 60
memory_stable_window_s = 0.5
[speculation]
k = [0, 4]
[load]
stages = [{ users = 2, duration_s = 4 }, { users = 8, duration_s = 4 }]
prompt_tokens = 32
output_tokens = 16
warmup_s = 1.0
preflight_s = 0
[decision]
target_users = 2
max_client_lag_p99_ms = 250  # a busy host: the parallel test run (tests/conftest.py); not under test here
min_requests = 3
production_users = 12
"""


def run_cli(*args, timeout=240, cwd=None):
    return subprocess.run([sys.executable, "-m", "lookahead_runner", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd)


def test_sweep_on_the_simulator_writes_summary_decision_report(tmp_path):
    config = tmp_path / "sweep.toml"
    config.write_text(SWEEP)
    done = run_cli("sweep", "--config", str(config), "--out", str(tmp_path / "runs"), "--verbose")
    # ~9 requests per 3 s window cannot bound an e2e p90 (>= 36 needed): K=4 leads but is not decided (exit 3)
    assert done.returncode == 3, done.stdout[-2000:] + done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    (run_dir,) = list((tmp_path / "runs").iterdir())

    summary = pd.read_csv(run_dir / "summary.csv")
    assert sorted(summary["k"].unique()) == [0, 4]
    assert len(summary) == 4  # 2 settings x 1 repeat x 2 stages
    assert (summary["requests"] > 0).all() and (summary["output_tok_per_s"] > 0).all()
    assert summary.loc[summary["k"] == 0, "acceptance_rate"].isna().all()
    assert summary.loc[summary["k"] == 4, "acceptance_rate"].between(0, 1, inclusive="right").all()
    assert summary["running_mean"].notna().all() and summary["gpu_mem_peak_mib"].notna().all()

    decision = json.loads((run_dir / "decision.json").read_text())
    assert decision["status"] == "not_decided" and decision["recommended"] is None and decision["target_users"] == 2
    assert decision["leading_k"] == 4 and decision["verdict"].startswith("Not decided yet at 2 users")
    assert any("p90 needs >= 36 requests" in step for step in decision["next_runs"])
    assert "What to run next" in (run_dir / "report.html").read_text()
    assert {item["name"] for item in decision["checklist"]} == {
        "repeat stability", "failures and latency", "memory headroom", "concurrency scaling"}
    assert (run_dir / "report.html").stat().st_size > 100_000

    plan = json.loads((run_dir / "plan.json").read_text())
    assert plan["probe"]["version"] == "0.32.0" and plan["probe"]["lookahead_flag"] == "absent"
    for life in ("k0/r0", "k4/r0"):
        server = json.loads((run_dir / life / "server.json").read_text())
        assert server["exit_code"] is not None and server["ready_s"] > 0
        assert json.loads((run_dir / life / "status.json").read_text())["state"] == "done"
        assert (run_dir / life / "requests.csv").stat().st_size > 0
    assert plan["lives"][1]["argv"][-6:] == ["--spec-method", "draft_model", "--spec-tokens", "4",
                                             "--spec-model", "sim/llama-68m"]  # 0.32 lists the shorthands
    assert not processes_of(str(run_dir)), "a server or Locust process of the sweep survived"

    model = decision["performance_model"]  # fitted on the 4 windows: validated, and said whether it is trusted
    assert model["reason"].startswith("trusted: " if model["trusted"] else "not trusted: ")
    assert {h["scheme"] for h in model["held_out"]} == {"stage"} and len(model["held_out"]) == 4
    assert model["production"]["users"] == 12 and model["production"]["statement"].startswith(
        "Prediction, not a measurement: at 12 users" if model["trusted"] else "No prediction at 12 users")
    assert model["acceptance_source"] == "per-position counters"
    positions = pd.read_csv(run_dir / "k4" / "r0" / "spec_positions.csv")
    assert sorted(positions["position"].unique()) == [0, 1, 2, 3] and not (run_dir / "k0/r0/spec_positions.csv").exists()
    assert 'id="perf-model"' in (run_dir / "report.html").read_text()

    # issue 39: each life left typed copies of its CSVs, the finalize its model's fit and its steps' times
    assert (run_dir / "k4/r0/.cache/requests.feather").is_file() and (run_dir / ".cache/perfmodel.json").is_file()
    assert "finalize (last life to report): " in done.stdout and "decide (resampling every stage): " in done.stdout

    rerender = run_cli("report", str(run_dir), "--verbose")
    assert rerender.returncode == 0 and "report.html" in rerender.stdout
    steps = [line.split(":")[0] for line in rerender.stdout.splitlines() if line.endswith(" s")]
    assert steps == ["read the run folder", "decide (resampling every stage)", "performance model", "report page",
                     "total"], rerender.stdout
    assert json.loads((run_dir / "decision.json").read_text()) == decision  # the same folder, the same decision


@pytest.mark.parametrize("toml, field", [
    ("[speculation]\nk = [-1]\n", "speculation.k"),
    ("[load]\nstages = []\n", "load.stages"),
    ("[server]\ncommand = []\n", "server.command"),
    ("[server]\ncommnd = ['vllm']\n", "server.commnd: unknown key"),
    ("[server]\ncommand = ['/nonexistent/vllm']\nmodel = 'org/target'\n[speculation]\ndraft_model = 'org/draft'\n",
     "server.command: '/nonexistent/vllm' not found"),
])
def test_bad_config_is_one_line_exit_2(tmp_path, toml, field):
    config = tmp_path / "bad.toml"
    config.write_text(toml)
    done = run_cli("sweep", "--config", str(config), "--out", str(tmp_path / "runs"), timeout=60)
    assert done.returncode == 2
    assert field in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "runs").exists()


def test_raw_lookahead_sweep_refused_before_any_server(tmp_path):
    config = tmp_path / "raw.toml"
    config.write_text("[speculation]\nraw_lookahead_slots = true\n")
    done = run_cli("sweep", "--config", str(config), "--out", str(tmp_path / "runs"), timeout=60)
    assert done.returncode == 2 and "removed in 0.12" in done.stderr
    assert not (tmp_path / "runs").exists()


def test_a_real_server_without_a_draft_model_is_refused_before_anything_starts(tmp_path):
    """A real `vllm` (here a stand-in that leaves a mark when it runs) and no speculation.draft_model: the
    simulator's draft would reach vLLM, so the sweep stops on one line naming the key; not even the probe ran."""
    mark = tmp_path / "started"
    fake = tmp_path / "vllm"
    fake.write_text(f"import pathlib\npathlib.Path({str(mark)!r}).write_text('ran')\n")
    config = tmp_path / "real.toml"
    config.write_text(f"[server]\ncommand = {json.dumps([sys.executable, str(fake)])}\nmodel = \"org/target\"\n"
                      "[speculation]\nk = [0, 4]\n")
    done = run_cli("sweep", "--config", str(config), "--out", str(tmp_path / "runs"), timeout=60)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [done.stderr.strip()]
    assert "speculation.draft_model: server.command starts a real vLLM" in done.stderr, done.stderr
    assert not mark.exists() and not (tmp_path / "runs").exists()
    given = run_cli("sweep", "--config", str(config), "--set", "speculation.draft_model=org/draft", "--dry-run",
                    timeout=60)
    assert mark.exists(), given.stderr  # given, the same config reaches the probe: the stand-in ran


def test_a_served_model_name_in_extra_args_is_the_model_every_request_carries(tmp_path):
    """The simulator, as vLLM, answers 404 to a model it does not serve: with --served-model-name the requests
    (warm-up and load) must carry that name, not server.model."""
    config = tmp_path / "served.toml"
    config.write_text(SWEEP.replace('"--sim-scenario", "tight-kv"]', '"--served-model-name", "prod-name"]')
                      .replace("k = [0, 4]", "k = [0]").replace("production_users = 12", 'confirm = "off"')
                      .replace("stages = [{ users = 2, duration_s = 4 }, { users = 8, duration_s = 4 }]",
                               "stages = [{ users = 2, duration_s = 3 }]"))
    done = run_cli("sweep", "--config", str(config), "--out", str(tmp_path / "runs"), timeout=120)
    run_dir = next((tmp_path / "runs").iterdir())
    requests = pd.read_csv(run_dir / "k0" / "r0" / "requests.csv")
    assert len(requests) >= 3 and requests["ok"].all(), requests["error"].dropna().unique()[:3]
    assert "prod-name" in (run_dir / "k0" / "r0" / "server.log").read_text()
    assert json.loads((run_dir / "k0" / "r0" / "status.json").read_text())["state"] == "done", done.stderr
