"""What was not measured never passes, through real processes: the simulator started by the runner with
`--sim-fault drop-metric=NAME` (that metric family absent from /metrics), Locust loading it, the decision
and the report made from the run folder.

Two short sweeps (K 0 and 4, one 7 s stage of 16 users, two same-server repeats, no pre-flight; requests
long enough that the server, not the client, sets the pace):
- KV usage dropped: not decided (exit 3), naming the metric, with the waiver as the way out;
- KV usage and the acceptance counters dropped, no device memory (`server.memory_source = "none"`), memory
  waived: decided, the waiver shown in the verdict, the
  checklist and the report; the acceptance column empty with its cause, the decision unaffected; and the
  same run folder decided again with its repeat folders swapped gives the same verdict and confidence.
"""
import json
import shutil

import pytest

from fault_kit import FAST, cli, kill_all, no_traceback, only_run_dir, survivors, sweep_toml, unique_model, write_config

from lookahead_runner.config import SIM_COMMAND
from lookahead_runner.decision import Decision

pytestmark = [pytest.mark.e2e, pytest.mark.slow]  # two sweeps of 2 repeats: 120 s; CI runs it

KV = "vllm:kv_cache_usage_perc"
ACCEPTANCE = ["vllm:spec_decode_num_drafts", "vllm:spec_decode_num_draft_tokens",
              "vllm:spec_decode_num_accepted_tokens", "vllm:spec_decode_num_accepted_tokens_per_pos"]
PLAIN_SIM = list(SIM_COMMAND)


def sweep(tmp_path, case: str, dropped: list[str], waive: list[str], memory_source: str = "sim"):
    model = unique_model(case)
    drops = [arg for name in dropped for arg in ("--sim-fault", f"drop-metric={name}")]
    toml = sweep_toml(model, [0, 4], stages=((16, 7),),
                      server={"command": PLAIN_SIM, "extra_args": FAST + drops, "memory_source": memory_source},
                      load={"preflight_s": 0, "repeats": 2, "repeat_mode": "same-server", "warmup_s": 1,
                            "output_tokens": 48, "request_timeout_s": 20})
    toml += f"confirm = \"off\"\nwaive = {json.dumps(waive)}\n"
    toml += "max_client_lag_p99_ms = 250\n"  # a busy host: the parallel test run (tests/conftest.py)
    config = write_config(tmp_path, toml)
    try:
        done = cli("sweep", "--config", str(config), "--out", str(tmp_path / "runs"), timeout=240)
        assert survivors(model) == []
    finally:
        kill_all(model)
    no_traceback(done.stdout, done.stderr)
    run_dir = only_run_dir(tmp_path / "runs")
    return done, run_dir, Decision.model_validate_json((run_dir / "decision.json").read_text())


def gate(checks, name):
    return next(c for c in checks if c.name == name)


def test_kv_usage_dropped_is_not_decided_and_names_the_metric(tmp_path):
    done, run_dir, decision = sweep(tmp_path, "nokv", [KV], [])
    assert done.returncode == 3, done.stdout[-3000:] + done.stderr[-2000:]
    assert decision.status == "not_decided" and decision.recommended is None
    memory = gate(decision.checklist, "memory headroom")
    assert memory.status == "unknown" and memory.unknown_because == "not measured"
    assert KV in memory.evidence and 'decision.waive = ["memory"]' in memory.evidence
    assert "device memory alone is not KV headroom" in memory.evidence  # the sim memory source still reads
    assert "memory headroom is unknown (not measured)" in decision.verdict and KV in done.stdout
    assert all(c.kv_usage_peak is None and KV in c.not_measured["kv_usage_peak"] for c in decision.cells)
    report = (run_dir / "report.html").read_text()
    assert "? unknown" in report and KV in report


def test_memory_waived_decides_shows_the_waiver_and_acceptance_dropped_changes_nothing(tmp_path):
    done, run_dir, decision = sweep(tmp_path, "waived", [KV, *ACCEPTANCE], ["memory"], memory_source="none")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert decision.status == "decided" and decision.recommended.k == 4, decision.verdict
    # the waiver: in the verdict, the checklist and the report, never as a pass
    assert "Decided without memory headroom (waived by decision.waive; vllm:kv_cache_usage_perc" in decision.verdict
    assert gate(decision.checklist, "memory headroom").status == "waived"
    report = (run_dir / "report.html").read_text()
    assert "waived (not judged)" in report and "unknown and waived are never a pass" in report
    # acceptance: the column is empty with its cause, and no gate waits for it
    k4 = next(c for c in decision.cells if c.k == 4)
    assert k4.acceptance_rate is None and "vllm:spec_decode_num_accepted_tokens" in k4.not_measured["acceptance_rate"]
    assert "vllm:spec_decode_num_accepted_tokens" in report
    assert not [g for c in decision.candidates for g in c.gates if g.status == "unknown"]
    assert k4.running_mean is not None and k4.preemptions is not None  # the rest of /metrics still read
    assert any(d.startswith("Device memory not measured") for d in decision.diagnoses), decision.diagnoses

    # the same folder decided again with its repeat folders swapped: the same verdict and confidence
    again = tmp_path / "renamed"
    shutil.copytree(run_dir, again)
    for setting in ("k0", "k4"):
        (again / setting / "r0").rename(again / setting / "swap")
        (again / setting / "r1").rename(again / setting / "r0")
        (again / setting / "swap").rename(again / setting / "r1")
    redone = cli("report", str(again), timeout=180)
    assert redone.returncode == 0, redone.stderr[-2000:]
    second = Decision.model_validate_json((again / "decision.json").read_text())
    assert (second.verdict, second.confidence, second.status) == (decision.verdict, decision.confidence,
                                                                  decision.status)
