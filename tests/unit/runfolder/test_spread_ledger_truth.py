"""Issue 46: what the restart spread ledger claims, checked (runfolder/spread_ledger.py, run/verdict/finalize.py
remember_spread): the fingerprint tells servers apart whatever flag comes before a flag; a spread is pooled only
from runs of the same workload, never from an outlier run; a run keeps its own date when its report is made again;
a ledger of the previous version is read."""
import json
from types import SimpleNamespace

import pytest

from lookahead_runner.config import DecisionConfig, config_from_dict
from lookahead_runner.decision import decide, evidence
from lookahead_runner.decision.schema import RestartSpread
from lookahead_runner.run.verdict.finalize import remember_spread
from lookahead_runner.runfolder import spread_ledger as ledger
from lookahead_runner.runfolder.plan import Plan

GPU = "1 x NVIDIA H100 80GB HBM3"
REAL = {"server": {"command": ["vllm"], "model": "org/target-8b", "extra_args": ["--max-num-seqs", "64"]},
        "speculation": {"k": [0, 4], "draft_model": "org/draft-1b"},
        "load": {"stages": [{"users": 4, "duration_s": 10}]}}


def config(extra_args=None, **load):
    data = json.loads(json.dumps(REAL))
    if extra_args is not None:
        data["server"]["extra_args"] = extra_args
    data["load"].update(load)
    return config_from_dict(data)


def key(cfg) -> str:
    return ledger.key_of(ledger.fingerprint(cfg, "0.32.0", GPU))


@pytest.mark.parametrize("one, other", [
    (["--disable-log-stats", "-O3"], ["--disable-log-stats", "-O0"]),
    (["--disable-log-stats", "-tp", "2"], ["--disable-log-stats", "-pp", "2"]),
    (["--enable-log-requests", "-O3"], ["--enable-log-requests", "-O0"]),
    (["--no-enable-log-requests", "-tp", "2"], ["--no-enable-log-requests", "-pp", "2"]),
    (["--api-key", "k-1", "-O3"], ["--api-key", "k-1", "-O0"]),
    (["--hf-token", "-tp", "2"], ["--hf-token", "-pp", "2"]),
])
def test_a_flag_after_a_neutral_switch_is_part_of_the_fingerprint(one, other):
    """(4) A switch that takes no value (--disable-log-stats) was taken to take one: the flag after it was dropped,
    so -O3 and -O0, -tp 2 and -pp 2 were one server."""
    assert key(config(one)) != key(config(other))
    assert ledger.speed_flags(one)[-1] in ("-O3", "2") and "k-1" not in ledger.speed_flags(one)


def test_neutral_flags_and_their_values_stay_out():
    assert ledger.speed_flags(["--seed", "-1", "--port", "8000", "--served-model-name", "a", "b", "-tp", "2",
                               "--disable-log-stats", "--host=0.0.0.0"]) == ["-tp", "2"]


def _remembered(cache_dir, runs):
    """A ledger holding `runs` (LedgerRun fields) for REAL's server; what the next run takes from it."""
    cfg = config()
    use, _ = ledger.use_for_run(cfg, "0.32.0", True, gear=GPU)
    for n, run in enumerate(runs):
        ledger.remember(use, f"run-{n}", 4, run["squares"], run["df"], 2 * run["df"], today=f"2026-11-{n + 1:02d}",
                        workload=run.get("workload", ledger.workload_key(cfg)))
    return ledger.use_for_run(cfg, "0.32.0", True, gear=GPU)[0].earlier_spread()


def test_the_spread_is_pooled_only_from_runs_of_the_same_workload(cache_dir):
    """(3) Another workload's lives (here 256 output tokens, not 32) spread differently: it was pooled in."""
    other = ledger.workload_key(config(output_tokens=256))
    earlier = _remembered(cache_dir, [{"squares": 0.03 ** 2, "df": 1},
                                      {"squares": 0.2 ** 2, "df": 1, "workload": other}])
    assert earlier.runs == 1 and earlier.squares == pytest.approx(0.03 ** 2)


def test_an_outlier_run_is_set_apart_from_the_earlier_runs_pool(cache_dir):
    """(5) One run whose pair landed 40 % apart inflated the spread every later run borrowed, for 10 runs: a run
    noisier than the others beyond the F test is now left out, as a K is at a stage."""
    usual = [{"squares": 2 * 0.02 ** 2, "df": 2}] * 3
    earlier = _remembered(cache_dir, [*usual, {"squares": 0.4 ** 2, "df": 1}])
    assert earlier.runs == 3 and earlier.rel_sd == pytest.approx(0.02)


def test_a_report_made_again_keeps_the_runs_own_date(cache_dir):
    """(5) `lookahead-runner report` on an old run wrote it into the ledger as today's: the newest runs, and the
    date every later verdict names, were the reports', not the runs'."""
    cfg = config()
    use, _ = ledger.use_for_run(cfg, "0.32.0", True, gear=GPU)
    plan = Plan(run_id="old-run", created="2026-10-03T09:15:00+0000", probe={"version": "0.32.0"},
                config=cfg.model_dump(mode="json"), target_users=4, restart_spread=use)
    data = SimpleNamespace(plan=plan, config=cfg)
    spread = RestartSpread(rel_sd=0.03, squares=0.002, this_df=2, lives=4, ledger_squares=0.002, ledger_df=2,
                           ledger_lives=4)
    assert remember_spread(data, SimpleNamespace(restart_spread=spread, candidates=[])) == ""
    runs = json.loads(ledger.ledger_path().read_text())["servers"][use.key]["runs"]
    assert [r["date"] for r in runs] == ["2026-10-03"]


def test_a_ledger_of_the_previous_version_is_read_and_kept(cache_dir):
    cfg = config()
    use, _ = ledger.use_for_run(cfg, "0.32.0", True, gear=GPU)
    old = {"version": 1, "servers": {use.key: {"fingerprint": use.fingerprint, "runs": [
        {"run_id": "v1-run", "date": "2026-11-01", "users": 4, "squares": 0.002, "df": 2, "lives": 4, "rel_sd": 0.0316,
         "workload": ledger.workload_key(cfg), "levels": {"0": 12.0}}]}}}
    path = ledger.ledger_path()
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(old))
    earlier = ledger.use_for_run(cfg, "0.32.0", True, gear=GPU)[0].earlier_spread()
    assert (earlier.squares, earlier.df, earlier.window_squares, earlier.levels) == (0.002, 2, 0.0, {"0": 12.0})
    assert ledger.remember(use, "v2-run", 4, 0.001, 1, 2, today="2026-12-01", workload=ledger.workload_key(cfg),
                           window_squares=0.0001) == ""
    data = json.loads(path.read_text())
    assert data["version"] == ledger.LEDGER_VERSION == 2
    assert [r["run_id"] for r in data["servers"][use.key]["runs"]] == ["v1-run", "v2-run"]


def test_what_a_run_measured_is_taken_by_the_next_only_at_the_users_it_was_measured_at():
    """The pure path finalize and the next sweep take (for calibration on synthetic lives, without the file)."""
    from unit.synthetic import window
    measuring = evidence([window(0, 64, 20.0, 0, duration_s=30.0), window(0, 64, 20.2, 1, duration_s=30.0),
                          window(4, 64, 21.0, 0, duration_s=30.0)], 64)
    measured = decide(measuring, DecisionConfig(resamples=200).for_server("vllm"), {})
    earlier = ledger.earlier_from(measured, measured_at=64, users=64)
    assert earlier.df == measured.restart_spread.ledger_df and earlier.users == 64
    assert earlier.squares == pytest.approx(measured.restart_spread.ledger_squares)
    assert ledger.earlier_from(measured, measured_at=64, users=1) is None
