"""The chat endpoint end to end on the simulator (issue 28): the same sweep with load.endpoint = "chat" and
"completions" on the chat-drafter scenario (a drafter trained on chat data: acceptance 0.85 on chat-formatted
requests, 0.3 on raw prompts) ends in the verdicts the simulator's closed-loop truth has (sim/closed_loop.py, the
pure engine model in a closed loop of the stage's users, built from the same argv), and they differ.

The chat sweep passes chat_template_kwargs {enable_thinking = false}, which the simulator's template answers with
two more prompt tokens: every window's prompt tokens equal load.prompt_tokens only if the kwargs reached both
/tokenize (the calibration) and every chat request.
"""
import json
import subprocess
import sys
import time

import pandas as pd
import pytest
from fault_kit import processes_of, unique_model

from lookahead_runner.sim.closed_loop import best_k

pytestmark = pytest.mark.e2e

ARGS = ["--max-num-seqs", "64", "--sim-scenario", "chat-drafter", "--sim-set", "startup_s=0.3"]
USERS, PROMPT, OUTPUT = 12, 64, 24
SWEEP = f"""
name = "chat"
[server]
model = "sim/e2e-model"
extra_args = {json.dumps(ARGS)}
ready_timeout_s = 60
memory_stable_window_s = 0.5
[speculation]
k = [0, 4]
[load]
stages = [{{ users = {USERS}, duration_s = 12 }}]
prompt_tokens = {PROMPT}
output_tokens = {OUTPUT}
warmup_s = 2.0
preflight_s = 0
[decision]
target_users = {USERS}
max_client_lag_p99_ms = 250  # a busy host: the parallel test run (tests/conftest.py); not under test here
# at 12 users K=4 answers so fast that the client's turnaround lowers its running count (test_confirm_sim)
batch_drop_frac = 0.3
confirm = "off"
"""
ENDPOINTS = {"chat": '\nendpoint = "chat"\nchat_template_kwargs = { enable_thinking = false }\n',
             "completions": '\nendpoint = "completions"\n'}


def sweep(tmp_path, endpoint: str):
    root = tmp_path / endpoint
    root.mkdir()
    toml = SWEEP.replace("[decision]", ENDPOINTS[endpoint].lstrip("\n") + "[decision]")
    (root / "sweep.toml").write_text(toml)
    done = subprocess.run([sys.executable, "-m", "lookahead_runner", "sweep", "--config", str(root / "sweep.toml"),
                           "--out", str(root / "runs")], capture_output=True, text=True, timeout=400)
    (run_dir,) = list((root / "runs").iterdir())
    return done, run_dir


@pytest.mark.slow  # two sweeps of 12-s stages for a verdict each: 75-83 s in CI (2026-12-06); CI runs it
def test_chat_and_completions_end_in_the_verdicts_of_the_simulators_truth_and_differ(tmp_path):
    truth = {}
    for endpoint in ENDPOINTS:
        truth[endpoint], rates = best_k(ARGS, (0, 4), PROMPT, OUTPUT, 0.0, USERS, chat=endpoint == "chat")
        assert abs(rates[4] / rates[0] - 1) > 0.15, rates  # a clear answer either way
    assert truth == {"chat": 4, "completions": 0}

    for endpoint in ENDPOINTS:
        done, run_dir = sweep(tmp_path, endpoint)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
        assert "Traceback" not in done.stderr
        decision = json.loads((run_dir / "decision.json").read_text())
        assert decision["status"] == "decided" and decision["recommended"]["k"] == truth[endpoint], \
            (endpoint, decision["verdict"])
        summary = pd.read_csv(run_dir / "summary.csv")
        assert summary["valid"].all() and (summary["requests"] > 0).all()
        for life in ("k0/r0", "k4/r0"):
            workload = json.loads((run_dir / life / "workload.json").read_text())
            assert workload["endpoint"] == endpoint and workload["prompt_method"] == "tokenize"
            assert workload["prompt_chat_template"] is (endpoint == "chat")
            requests = pd.read_csv(run_dir / life / "requests.csv")
            ok = requests[requests["ok"] == 1]
            assert len(ok) > 20 and (ok["prompt_tokens"] == PROMPT).all() and (ok["output_tokens"] == OUTPUT).all()
            assert (requests["error"].isna() | (requests["error"] == "cut")).all(), requests["error"].value_counts()
            if endpoint == "chat" and life == "k0/r0":
                # K = 0 streams one token a chunk: the role-only opening chunk is one chunk more, no token
                assert (ok["chunks"] == OUTPUT + 1).all()
        table = pd.read_csv(run_dir / "lives.csv")
        assert (table["difference"] == 0).all(), table.to_string()  # client tokens = the server's counters
        assert not processes_of(str(run_dir)), "a server or Locust process of the sweep survived"


def test_a_model_without_a_chat_template_stops_the_sweep_at_its_first_life_with_the_fix(tmp_path):
    """vLLM answers every chat request 400 when the model's tokenizer has no chat template (the simulator's
    no-chat-template fault answers as vLLM 0.32 does): the first life stops the sweep, nothing is measured."""
    root = tmp_path / "no-template"
    root.mkdir()
    model = unique_model("no-chat-template")
    toml = SWEEP.replace("[decision]", ENDPOINTS["chat"].lstrip("\n") + "[decision]").replace(
        '"startup_s=0.3"', '"startup_s=0.3", "--sim-fault", "no-chat-template"').replace("sim/e2e-model", model)
    assert "no-chat-template" in toml and model in toml
    (root / "sweep.toml").write_text(toml)
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "lookahead_runner", "sweep", "--config", str(root / "sweep.toml"),
                           "--out", str(root / "runs")], capture_output=True, text=True, timeout=200)
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    line = done.stderr.strip().splitlines()[-1]
    assert line == (f'lookahead-runner: load.endpoint = "chat": the server has no chat template for {model} (it '
                    "answered HTTP 400: As of transformers v4.44, default chat template is no longer allowed, so you "
                    "must provide a chat template if the tokenizer does not define one.); give vLLM one with "
                    '--chat-template FILE in server.extra_args, or set load.endpoint = "completions"'), line
    assert time.monotonic() - started < 60, "the sweep measured before it stopped"
    (run_dir,) = list((root / "runs").iterdir())
    assert not (run_dir / "k4").exists(), "a second life started after the first found no chat template"
    status = json.loads((run_dir / "k0" / "r0" / "status.json").read_text())
    assert status["state"] != "done" and "no chat template" in status["reason"], status
    assert not list(run_dir.glob("k0/r0/requests*.csv")), "load was sent"
    assert not processes_of(model), "a simulator of this test was left running"
