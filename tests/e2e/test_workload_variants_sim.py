"""Workload variants end to end on the simulator (issue 22): lists of prompt length or temperature run as blocks
in each server life, each variant decided alone, the verdicts differing where the simulator's own engine model
says they must, and the report, tables and token accounting keyed by variant.

The truth is the simulator's pure engine model (lookahead_runner/sim/model.py, built from the same argv the
sweep passes) in a closed loop of the stage's users: the K with the most requests per second.
"""
import json
import subprocess
import sys

import pandas as pd
import pytest
from fault_kit import processes_of

from lookahead_runner.sim.cli import parse_serve
from lookahead_runner.sim.model import EngineModel
from lookahead_runner.sim.profiles import get_profile
from lookahead_runner.sim.scenarios import SCENARIOS

pytestmark = pytest.mark.e2e

# roomy-kv with a costly verify: at 12 users K=4 gains ~65 % at temperature 0 (acceptance 0.8) and loses
# ~14 % at temperature 1 (acceptance 0.4), in the engine model; the real-batch gate is relaxed as in
# test_confirm_sim (at 12 users K=4 answers so fast that the client's turnaround lowers its running count)
TEMPERATURE_ARGS = ["--max-num-seqs", "64", "--sim-scenario", "roomy-kv", "--sim-set", "compute_ms_per_token=1.0",
                    "--sim-set", "startup_s=0.3"]
TEMPERATURE_SWEEP = f"""
name = "temperature"
[server]
model = "sim/e2e-model"
extra_args = {json.dumps(TEMPERATURE_ARGS)}
ready_timeout_s = 60
memory_stable_window_s = 0.5
[speculation]
k = [0, 4]
[load]
stages = [{{ users = 12, duration_s = 14 }}]
prompt_tokens = 64
output_tokens = 24
temperature = [0.0, 1.0]
warmup_s = 2.0
preflight_s = 0
[decision]
target_users = 12
batch_drop_frac = 0.3
confirm = "off"
"""


def run_cli(*args, timeout=400):
    return subprocess.run([sys.executable, "-m", "lookahead_runner", *args], capture_output=True, text=True,
                          timeout=timeout)


def steady_req_per_s(server_args, k, prompt, output, temperature, users, engine_s=40.0):
    """The engine model's requests per second at K in a closed loop of `users` (each sends its next request
    when one finishes), over the engine time after the first fifth."""
    spec = json.dumps({"method": "draft_model", "model": "sim/llama-68m", "num_speculative_tokens": k})
    args = parse_serve(["sim/e2e-model", *server_args, *(["--speculative-config", spec] if k else [])], get_profile())
    model = EngineModel(args.scenario, args.engine)
    sent = 0

    def send():
        nonlocal sent
        model.add_request(f"r{sent}", prompt, output, min_tokens=output, ignore_eos=True, temperature=temperature)
        sent += 1

    for _ in range(users):
        send()
    t, warm, done = 0.0, engine_s / 5, 0
    while t < engine_s:
        result = model.step()
        assert result.duration_s > 0
        t += result.duration_s
        for out in result.outputs:
            if out.finished:
                done += t > warm
                send()
    return done / (engine_s - warm)


def truth(server_args, ks, prompt, output, temperature, users):
    rates = {k: steady_req_per_s(server_args, k, prompt, output, temperature, users) for k in ks}
    return max(rates, key=rates.get), rates


def sweep(tmp_path, toml):
    (tmp_path / "sweep.toml").write_text(toml)
    done = run_cli("sweep", "--config", str(tmp_path / "sweep.toml"), "--out", str(tmp_path / "runs"))
    (run_dir,) = list((tmp_path / "runs").iterdir())
    return done, run_dir


def check_keyed_by_variant(run_dir, labels, lives=("k0/r0", "k4/r0")):
    """summary.csv, lives.csv, decision.json and the report name every variant; each block's tokens add up."""
    summary = pd.read_csv(run_dir / "summary.csv")
    assert list(summary.columns[:5]) == ["setting", "k", "repeat", "variant", "stage"]
    assert sorted(summary["variant"].unique()) == sorted(labels) and summary["valid"].all()
    table = pd.read_csv(run_dir / "lives.csv")
    assert len(table) == len(lives) * len(labels) and set(table["variant"]) == set(labels)
    assert (table["difference"] == 0).all() and (table["client_output_tokens"] > 0).all(), table.to_string()
    decision = json.loads((run_dir / "decision.json").read_text())
    assert decision["schema_version"] == 3
    assert {c["variant"] for c in decision["cells"]} == set(labels)
    assert [d["variant"] for d in decision["by_variant"]] == labels
    html = (run_dir / "report.html").read_text()
    for label in labels:
        assert f"Workload variant: {label}" in html and f"Decision per concurrency stage · {label}" in html
    for life in lives:
        blocks = json.loads((run_dir / life / "variants.json").read_text())["variants"]
        assert [b["label"] for b in blocks] == labels and all(b["t_end_s"] > b["t_start_s"] for b in blocks)
    assert not processes_of(str(run_dir)), "a server or Locust process of the sweep survived"
    return decision, html


def test_temperature_variants_end_in_different_verdicts_matching_the_simulator(tmp_path):
    expected = {}
    for temperature, label in ((0.0, "temperature 0"), (1.0, "temperature 1")):
        expected[label], rates = truth(TEMPERATURE_ARGS, (0, 4), 64, 24, temperature, 12)
        assert abs(rates[4] / rates[0] - 1) > 0.1, rates  # a clear answer either way
    assert expected == {"temperature 0": 4, "temperature 1": 0}

    done, run_dir = sweep(tmp_path, TEMPERATURE_SWEEP)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    assert "each server life runs 2 workload variants, one block after another" in done.stdout
    assert "The answer differs by workload: K=4 at temperature 0; K=0 at temperature 1." in done.stdout
    assert "A single schedule cannot serve them all: vLLM 0.32/0.33 choose K by batch size only" in done.stdout

    decision, html = check_keyed_by_variant(run_dir, ["temperature 0", "temperature 1"])
    got = {d["variant"]: (d["status"], d["recommended"]["k"] if d["recommended"] else None)
           for d in decision["by_variant"]}
    assert got == {label: ("decided", k) for label, k in expected.items()}
    assert decision["status"] == "decided" and decision["recommended"] is None
    assert "The answers differ by workload" in html
    for life in ("k0/r0", "k4/r0"):  # each block calibrated and sampled with its own temperature
        for key, temperature in (("t0", 0.0), ("t1", 1.0)):
            workload = json.loads((run_dir / life / key / "workload.json").read_text())
            assert workload["temperature"] == temperature and workload["prompt_method"] == "tokenize"


# 128 output tokens and a 65,536-token prefill budget (this simulator has no prefix cache: every prompt is
# prefilled, where the published figure had a cached shared prefix): K=3 / K=0 req/s in the engine model
# 0.68 at 400 tokens and 1.24 at 4,000 (published: 0.79 and ~1.1)
LONG_CONTEXT_ARGS = ["--max-num-seqs", "256", "--max-num-batched-tokens", "65536", "--max-model-len", "8192",
                     "--sim-scenario", "long-context", "--sim-set", "startup_s=0.3"]


@pytest.mark.skipif("long-context" not in SCENARIOS,
                    reason="the simulator's long-context physics (issue 22, item 3) is not in this tree yet")
def test_prompt_length_variants_at_256_users_end_in_different_verdicts_matching_the_simulator(tmp_path):
    """The published shape (vLLM PR #48944): at 256 users K=3 loses at a 400-token context and gains at 4,000."""
    expected = {}
    for prompt, label in ((400, "400-token prompts"), (4000, "4,000-token prompts")):
        expected[label], rates = truth(LONG_CONTEXT_ARGS, (0, 3), prompt, 128, 0.0, 256)
        assert abs(rates[3] / rates[0] - 1) > 0.15, rates  # a clear answer either way
    assert expected == {"400-token prompts": 0, "4,000-token prompts": 3}
    toml = f"""
name = "context"
[server]
model = "sim/e2e-model"
extra_args = {json.dumps(LONG_CONTEXT_ARGS)}
ready_timeout_s = 60
memory_stable_window_s = 0.5
[speculation]
k = [0, 3]
[load]
stages = [{{ users = 256, duration_s = 40 }}]
prompt_tokens = [400, 4000]
output_tokens = 128
warmup_s = 6.0
preflight_s = 0
[decision]
confirm = "off"
"""
    done, run_dir = sweep(tmp_path, toml)
    assert done.returncode in (0, 3), done.stdout[-3000:] + done.stderr[-2000:]
    decision, html = check_keyed_by_variant(run_dir, ["400-token prompts", "4,000-token prompts"], ("k0/r0", "k3/r0"))
    check_context_answers(decision, pd.read_csv(run_dir / "summary.csv"), expected, done.stdout)
    assert "The answers differ by workload" in html


def check_context_answers(decision: dict, summary: pd.DataFrame, expected: dict, stdout: str) -> None:
    """Each variant's measured ranking is the truth's, and so is each verdict. One repeat of 40 s stages decides
    the 400-token variant (K=3 -21 % [-36 %, -2 %], K=0 in 98 % of resamples, 2026-12-02) but may leave the
    4,000-token one not decided yet with the truth leading (+11 % [-14 %, +46 %], 74 %: 256 requests that start
    together finish in waves, so a window holds few throughput bins): either way the verdicts differ."""
    for label, k in expected.items():
        rows = summary[summary["variant"] == label].set_index("k")["req_per_s"]
        assert rows.idxmax() == k, (label, rows.to_dict())
    short, long_ = decision["by_variant"]
    # one 40 s stage of one repeat: each variant decided, or not decided yet with the simulator's truth leading
    # (the final merge's run read 80 % for K=0 at 400 tokens, 82 % for K=3 at 4,000)
    assert short["leading_k"] == 0 and short["status"] in ("decided", "not_decided"), short["verdict"]
    assert long_["leading_k"] == 3 and long_["status"] in ("decided", "not_decided"), long_["verdict"]
    if long_["status"] == "decided":
        assert long_["recommended"]["k"] == 3 and decision["status"] == "decided"
        assert "The answer differs by workload: K=0 at 400-token prompts; K=3 at 4,000-token prompts." in stdout
    else:
        assert decision["status"] == "not_decided"
        short_text = ("K=0 at 400-token prompts" if short["status"] == "decided"
                      else "not decided yet (K=0 leads) at 400-token prompts")
        assert (f"Not decided for every workload variant: {short_text}; not decided yet (K=3 leads) at "
                "4,000-token prompts.") in stdout


def test_a_variant_longer_than_max_model_len_stops_before_any_server(tmp_path):
    (tmp_path / "sweep.toml").write_text('[server]\nextra_args = ["--max-model-len", "2048"]\n'
                                         '[load]\nprompt_tokens = [400, 4000]\n')
    done = run_cli("sweep", "--config", str(tmp_path / "sweep.toml"), "--out", str(tmp_path / "runs"), timeout=60)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.count("\n") == 1 and "the workload variant of 4,000-token prompts needs 4,064 tokens" \
        in done.stderr and "--max-model-len 2,048 in server.extra_args" in done.stderr
    assert not (tmp_path / "runs").exists()


# test_confirm_sim's scenario at two temperatures: at temperature 0 K=4 wins at 12 users and K=0 at 34 (a
# per-batch-size schedule); at temperature 1 K=0 wins at both (no schedule)
CONFIRM_SWEEP = f"""
name = "confirm-variants"
[server]
model = "sim/e2e-model"
extra_args = {json.dumps(TEMPERATURE_ARGS + ["--sim-set", "schedule_step_ms=0"])}
ready_timeout_s = 60
memory_stable_window_s = 0.5
[speculation]
k = [0, 4]
[load]
stages = [{{ users = 12, duration_s = 8 }}, {{ users = 34, duration_s = 8 }}]
prompt_tokens = 64
output_tokens = 24
temperature = [0.0, 1.0]
warmup_s = 2.0
preflight_s = 0
[decision]
target_users = 34
batch_drop_frac = 0.3
"""


def test_a_variants_schedule_is_confirmed_in_a_life_running_that_variant_alone(tmp_path):
    done, run_dir = sweep(tmp_path, CONFIRM_SWEEP)
    assert done.returncode in (0, 3), done.stdout[-3000:] + done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    assert "confirmation of temperature 0: the per-batch-size schedule (K=4 up to batch" in done.stdout
    assert "confirmation of temperature 1" not in done.stdout  # one K at every stage: nothing to confirm
    plan = json.loads((run_dir / "plan.json").read_text())
    (stored,) = plan["confirm_variants"]
    assert stored["variant"] == "temperature 0" and stored["kind"] == "schedule" and plan["confirm"] is None
    entries = [life for life in plan["lives"] if life.get("role") == "confirm"]
    assert [(e["dir"], e["variant"]) for e in entries] == [("confirm-t0/r0", "temperature 0")]
    assert "num_speculative_tokens_per_batch_size" in " ".join(entries[0]["argv"])
    life = run_dir / "confirm-t0" / "r0"
    assert json.loads((life / "status.json").read_text())["state"] == "done"
    assert json.loads((life / "workload.json").read_text())["temperature"] == 0.0  # that variant alone
    assert not (life / "t0").exists() and not (life / "t1").exists()
    decision = json.loads((run_dir / "decision.json").read_text())
    cold, hot = decision["by_variant"]
    assert cold["confirmation"] is not None and cold["confirmation"]["life"] == "confirm-t0/r0"
    assert cold["confirmation"]["status"] in ("confirmed", "confirmed with a cost", "not confirmed")
    assert hot["confirmation"] is None and hot["per_batch_size"] is None
    summary = pd.read_csv(run_dir / "summary.csv")
    assert set(summary.loc[summary["setting"] == "confirm-t0", "variant"]) == {"temperature 0"}
    html = (run_dir / "report.html").read_text()
    assert 'id="confirmation-v0"' in html and 'id="confirmation-v1"' not in html
    assert not processes_of(str(run_dir))
