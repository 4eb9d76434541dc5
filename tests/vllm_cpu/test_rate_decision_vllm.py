"""A rate sweep against a real vLLM 0.32 (issue 37, item 3): K 0 and 4 (perturbed draft, acceptance ~0.5), rate
stages only, open loop. Every K's rate windows are valid (the dispatcher keeps its schedule, the server answers),
and the run ends with a verdict at its target rate, or an honest "not decided" that says why and what to run;
never the "rate stages only" answer of before. Each K's capacity within the SLO is in decision.json.

Needs `bash tests/vllm_cpu/setup.sh`; run with `flock /work/.../heavy.lock python -m pytest -n 0 -m vllm_cpu
tests/vllm_cpu/test_rate_decision_vllm.py` (a few minutes: two server starts and 30 s of load each).
"""
from __future__ import annotations

import json
import subprocess

import pandas as pd
import pytest
from test_real_vllm import MISSING, ProcessWatch, kill_leftovers, run_cli, sweep_toml, vllm_processes

pytestmark = [
    pytest.mark.vllm_cpu,
    pytest.mark.skipif(bool(MISSING), reason=f"{MISSING}: run `bash tests/vllm_cpu/setup.sh` first"),
]

RATES = (1.0, 3.0)
TARGET = 3.0


@pytest.fixture(scope="module")
def rate_run(tmp_path_factory):
    baseline = {p.pid for p in vllm_processes()}
    root = tmp_path_factory.mktemp("rate-decision")
    toml = sweep_toml("e2e-rate-decision", "tiny-draft-perturbed", [0, 4], stage_s=15)
    stages = ", ".join(f"{{ rate = {rate}, duration_s = 15 }}" for rate in RATES)
    toml = toml.replace("stages = [{ users = 2, duration_s = 15 }, { users = 4, duration_s = 15 }]",
                        f"stages = [{stages}]")
    toml = toml.replace("[decision]\n", f"[decision]\ntarget_rate = {TARGET}\nslo = {{ e2e_p90_ms = 5000 }}\n")
    assert "rate = 3.0" in toml and "users =" not in toml
    (root / "sweep.toml").write_text(toml)
    with ProcessWatch():
        try:
            done = run_cli("sweep", "--config", str(root / "sweep.toml"), "--out", str(root / "runs"),
                           "--no-early-stop", timeout=600)
        except subprocess.TimeoutExpired as err:
            killed = kill_leftovers(baseline)
            pytest.fail(f"the rate sweep overran 600 s; killed {killed}\n{(err.stdout or b'')[-2000:]!r}")
    kill_leftovers(baseline)
    (run_dir,) = list((root / "runs").iterdir())
    return done, run_dir


def test_real_vllm_rate_windows_are_valid_and_the_run_ends_with_a_verdict_at_the_rate(rate_run):
    done, run_dir = rate_run
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    summary = pd.read_csv(run_dir / "summary.csv")
    windows = summary[summary["rate"].notna()]
    assert sorted(windows["k"].unique()) == [0, 4] and sorted(windows["rate"].unique()) == list(RATES)
    assert windows["valid"].all(), windows[["k", "rate", "invalid_reason"]].to_string()
    assert (windows["slo_attainment_low"] <= windows["slo_attainment"]).all()
    decision = json.loads((run_dir / "decision.json").read_text())
    assert decision["target_rate"] == TARGET and decision["target_users"] is None
    assert "rate stages only" not in decision["verdict"]
    names = {"decided": f"At {TARGET:g} req/s: ", "not_decided": f"Not decided yet at {TARGET:g} req/s: K=",
             "no_eligible": f"No K keeps the SLO at {TARGET:g} req/s: "}
    assert decision["status"] in names and decision["verdict"].startswith(names[decision["status"]])
    assert done.returncode == {"decided": 0, "not_decided": 3, "no_eligible": 1}[decision["status"]]
    if decision["status"] == "not_decided":
        assert decision["next_runs"], decision["verdict"]   # says what to run
    gates = {g["name"] for c in decision["candidates"] for g in c["gates"]}
    assert {"keeps up", "SLO attainment", "failures and timeouts", "memory headroom"} <= gates
    assert {row["k"] for row in decision["capacity"]} == {0, 4}
    print(f"real vLLM at {TARGET:g} req/s: {decision['verdict']}")
    for row in decision["capacity"]:
        print(f"  capacity {row['text']}")
