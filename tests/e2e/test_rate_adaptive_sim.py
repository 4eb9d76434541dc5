"""Issues 48/49 through real processes: rate stages only, no sweep.strategy and no load.repeats, on a simulator that
draws a restart spread per life (--sim-restart-spread 0.08, judged as real vLLM is: its spread unknown). The sweep
measures until decided at its target rate (the adaptive sweep: each K's first life over every rate stage, a repeat
at the target rate alone) and decides there in fewer lives than the grid of 2 repeats, on the same K; the grid runs
too, on the same server lives (their speeds drawn from server.env's LOOKAHEAD_SIM_LIFE and the life's name, so its
lives are the adaptive sweep's and one more).

The setting (roomy-kv, 16 sequences, 32 / 16 tokens) at 16 req/s, about 60 % of K=0's capacity within the SLO (27
req/s): the simulator's own engine model puts K=4's e2e p90 at 351 ms, K=24's at 563 and K=0's at 653 (sim/
open_loop.py, checked below), so K=4 is the truth there; K=24 is past the top, as a large K in a grid is. The life
name is the first of rate-adaptive-0, -1, ... whose six lives' speeds all lie within 1.5 SD of the spread (1.007 to
1.113: no outlier life, which is what a sweep's error rate, not this test, is about)."""
import json

import numpy as np
import pytest
from fault_kit import cli, write_config

pytestmark = [pytest.mark.e2e, pytest.mark.slow]  # sweeps of 5, 6 and 7-8 short lives: about 6 min on a busy host

SERVER_ARGS = ["--max-num-seqs", "16", "--sim-scenario", "roomy-kv"]
TARGET_RATE = 16.0
GRID_OF_TWO_REPEATS = 6   # 3 K x 2
CONFIG = f"""
name = "rate-adaptive"
[server]
model = "sim/rate-adaptive-e2e"
extra_args = {json.dumps(SERVER_ARGS + ["--sim-restart-spread", "0.08", "--sim-set", "startup_s=0.3"])}
env = {{ LOOKAHEAD_SIM_LIFE = "rate-adaptive-0" }}
ready_timeout_s = 60
memory_stable_window_s = 0.5
[speculation]
k = [0, 4, 24]
[load]
stages = [{{ rate = 8.0, duration_s = 4 }}, {{ rate = {TARGET_RATE}, duration_s = 10 }}]
prompt_tokens = 32
output_tokens = 16
warmup_s = 1.5
preflight_s = 0
arrival_seed = 3
[decision]
max_client_lag_p99_ms = 250  # a busy host: the parallel test run (tests/conftest.py); not under test here
slo = {{ ttft_p90_ms = 500 }}
target_rate = {TARGET_RATE}
confirm = "off"
"""


def sweep(tmp_path, name: str, *flags: str):
    done = cli("sweep", "--config", str(write_config(tmp_path, CONFIG)), "--out", str(tmp_path / name),
               "--no-ledger", *flags, timeout=400)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    (run_dir,) = list((tmp_path / name).iterdir())
    plan = json.loads((run_dir / "plan.json").read_text())
    return done, json.loads((run_dir / "decision.json").read_text()), plan["lives"]


def test_rate_stages_only_measure_until_decided_in_fewer_lives_than_the_grid_on_the_same_k(tmp_path):
    done, decision, lives = sweep(tmp_path, "default")
    assert "adaptive sweep (no sweep.strategy given, rate stages on a server whose restart spread is unknown" in \
        done.stdout
    assert decision["cost"]["strategy"] == "adaptive" and decision["status"] == "decided"
    assert decision["target_rate"] == TARGET_RATE and decision["recommended"]["k"] == 4, decision["verdict"]
    assert decision["verdict"].startswith(f"At {TARGET_RATE:g} req/s: set K=4")
    # judged at the bar of the look it stopped at, as the sweep's stop says
    looks = decision["looks"]
    assert looks["look"] == len(lives) and looks["at_most"] == GRID_OF_TWO_REPEATS
    assert decision["cost"]["stopped_because"].startswith(f"decided at look {len(lives)} of at most 6: boundary")
    # the spread bought with one repeated life; each K's first life over every rate stage, a repeat at 16 req/s alone
    assert any(life["purpose"] == "spread" for life in lives)
    assert all(life.get("rates") is None for life in lives if life["repeat"] == 0)
    assert all(life["rates"] == [TARGET_RATE] for life in lives if life["repeat"] > 0)
    assert len(lives) < GRID_OF_TWO_REPEATS, [life["dir"] for life in lives]

    _, grid, grid_lives = sweep(tmp_path, "grid", "--set", "sweep.strategy=grid", "--set", "load.repeats=2")
    assert len(grid_lives) == GRID_OF_TWO_REPEATS and grid["cost"]["strategy"] == "grid"
    assert grid["status"] == "decided" and grid["recommended"]["k"] == decision["recommended"]["k"], grid["verdict"]
    assert {life["dir"] for life in lives} < {life["dir"] for life in grid_lives}   # the same server lives, and more


def test_the_truth_at_the_target_rate_is_k4():
    """The simulator's engine model alone (no clock, no server): K=4 the fastest at 16 req/s, every K keeping up."""
    from lookahead_runner.sim.open_loop import run_open_loop

    e2e = {}
    for k in (0, 4, 24):
        run = run_open_loop(SERVER_ARGS, k, TARGET_RATE, 20.0, 32, 16)
        assert run.keeps_up()
        e2e[k] = float(np.nanpercentile(run.latency_ms[run.window(), 3], 90))
    assert min(e2e, key=e2e.get) == 4 and e2e[4] * 1.3 < min(e2e[0], e2e[24]), e2e


# The verdict hanging on a capacity: K 0/4 at 8, 16 and 60 req/s, target 16. Both K keep up at 16 and K=0 falls
# behind at 60 (its capacity within the SLO about 29 req/s on the simulator, K=4's about 63): the rates configured
# leave K=0's capacity anywhere in (16, 60), so in the verdict's resamples it could pass K=4's, and lives at these
# rates cannot settle that. The sweep probes rates between, on lives of its own (one rate stage each).
PROBED_CONFIG = CONFIG.replace('name = "rate-adaptive"', 'name = "rate-probes"').replace(
    "k = [0, 4, 24]", "k = [0, 4]").replace(
    f"stages = [{{ rate = 8.0, duration_s = 4 }}, {{ rate = {TARGET_RATE}, duration_s = 10 }}]",
    f"stages = [{{ rate = 8.0, duration_s = 4 }}, {{ rate = {TARGET_RATE}, duration_s = 10 }}, "
    "{ rate = 60.0, duration_s = 10 }]").replace("max_client_lag_p99_ms = 250", "max_client_lag_p99_ms = 400")


def test_a_verdict_that_hangs_on_a_capacity_is_settled_by_probes_between_the_rates(tmp_path):
    assert "rate = 60.0" in PROBED_CONFIG and "k = [0, 4]" in PROBED_CONFIG
    config = write_config(tmp_path, PROBED_CONFIG)
    done = cli("sweep", "--config", str(config), "--out", str(tmp_path / "probed"), "--no-ledger", timeout=500)
    assert done.returncode in (0, 3), done.stdout[-3000:] + done.stderr[-3000:]   # decided, or not decided
    assert "Traceback" not in done.stderr
    (run_dir,) = list((tmp_path / "probed").iterdir())
    decision = json.loads((run_dir / "decision.json").read_text())
    lives = json.loads((run_dir / "plan.json").read_text())["lives"]
    probes = [life for life in lives if life["purpose"] == "capacity"]
    assert probes, [(life["dir"], life["chosen"]) for life in lives]
    assert "a capacity probe (K=0's capacity within the SLO could set it over K=4)" in probes[0]["chosen"]
    assert all(len(life["rates"]) == 1 and 16.0 < life["rates"][0] < 60.0 for life in probes)
    assert len(probes) <= 4 and len(lives) - len(probes) <= 4            # 2 per K beside the verdict's 2 per K
    # decided on K=4 by its capacity in 3 of 5 runs here with these probe rates (5 of 11 over the change's
    # versions), after 3 probes (K=0's capacity, between them, about half K=4's); in the others a probe of K=4 at
    # 44-48 req/s offered, on a server life of its own (the restart spread 8 %), read "behind" and left it not
    # decided, as a bracket from lives of different speeds can: never K=0, the K with half the capacity
    assert decision["recommended"] is None or decision["recommended"]["k"] == 4, decision["verdict"]
    assert decision["status"] == "not_decided" or decision["decided_by"] == "capacity", decision["verdict"]
    assert any(f"{len(probes)} of them capacity probe" in reason for reason in decision["reasons"])
    probed = {k: sum(1 for life in probes if life["k"] == k) for k in (0, 4)}
    assert all(f"({n} probed)" in row["rate_from"] for row in decision["capacity"]
               if row["rate"] is not None and (n := probed.get(row["k"])))    # (a capacity "> x" says no count)
    # a probe clearly over capacity ends early (K=0's capacity about 29 req/s: a probe of it past 38 offers a third
    # more than it serves); a repeat at the target rate, one rate stage too, runs whole
    ended = {life["dir"]: json.loads((run_dir / life["dir"] / "status.json").read_text()).get("ended_early", "")
             for life in lives}
    assert all(ended[life["dir"]] for life in probes if life["k"] == 0 and life["rates"][0] > 38), ended
    assert not any(ended[life["dir"]] for life in lives if life["purpose"] != "capacity"), ended
    early = sum(1 for life in probes if ended[life["dir"]])   # and the reasons count them
    said = [reason for reason in decision["reasons"] if "capacity probe" in reason and "ended early" in reason]
    assert (said and f", {early} ended early, clearly over capacity" in said[0]) if early else not said, said
    dry = cli("sweep", "--config", str(config), "--dry-run", timeout=60)
    assert "and up to 4 capacity probes beside them" in dry.stdout, dry.stdout
