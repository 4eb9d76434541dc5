"""The restart spread ledger (runfolder/spread_ledger.py): keyed by the server's fingerprint, in the user's XDG cache
folder, written after a run that measured a spread, read by the next sweep on the same fingerprint; plan.json
records what a run used; a corrupt file is one warning line."""
import json
from pathlib import Path

import pytest

from lookahead_runner.config import config_from_dict
from lookahead_runner.config.decision import EarlierSpread
from lookahead_runner.runfolder import spread_ledger as ledger
from lookahead_runner.runfolder.plan import Plan

REAL = {"server": {"command": ["vllm"], "model": "org/target-8b",
                   "extra_args": ["--max-num-seqs", "64", "--served-model-name", "prod", "--seed", "3"],
                   "env": {"VLLM_CPU_KVCACHE_SPACE": "4", "HF_TOKEN": "${HF_TOKEN}"}, "secret_env": ["HF_TOKEN"]},
        "speculation": {"k": [0, 4], "draft_model": "org/draft-1b"},
        "load": {"stages": [{"users": 4, "duration_s": 10}]}}
GPU = "1 x NVIDIA H100 80GB HBM3"


@pytest.fixture(autouse=True)
def _secrets(monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf-secret")
    monkeypatch.setenv("OTHER", "other-secret")


def config(**changes):
    data = json.loads(json.dumps(REAL))
    for section, values in changes.items():
        data[section].update(values)
    return config_from_dict(data)


def key(cfg, version="0.32.0", gear=GPU) -> str:
    return ledger.key_of(ledger.fingerprint(cfg, version, gear))


def test_the_fingerprint_is_what_changes_speed():
    base = key(config())
    assert key(config()) == base
    # its name, its seed, its logging and its secrets change no speed
    assert key(config(server={"extra_args": ["--max-num-seqs", "64", "--disable-log-stats"]})) == base
    assert key(config(server={"env": {"VLLM_CPU_KVCACHE_SPACE": "4", "HF_TOKEN": "${OTHER}"}})) == base
    # a flag, the version, the model, the draft, the GPUs do
    assert key(config(server={"extra_args": ["--max-num-seqs", "96"]})) != base
    assert key(config(), version="0.33.0") != base
    assert key(config(server={"model": "org/target-70b"})) != base
    assert key(config(speculation={"draft_model": "org/draft-3b"})) != base
    assert key(config(), gear="2 x NVIDIA H100 80GB HBM3") != base
    assert key(config(server={"env": {"VLLM_CPU_KVCACHE_SPACE": "8"}})) != base


def test_a_local_models_config_is_part_of_its_identity(tmp_path):
    (tmp_path / "config.json").write_text('{"layers": 2}')
    first = key(config(server={"model": str(tmp_path)}))
    (tmp_path / "config.json").write_text('{"layers": 4}')
    assert key(config(server={"model": str(tmp_path)})) != first


def test_the_ledger_lives_in_the_xdg_cache_folder():
    assert ledger.ledger_path({"XDG_CACHE_HOME": "/x/cache"}) == Path("/x/cache/lookahead-runner/restart-spread.json")
    assert ledger.ledger_path({}) == Path.home() / ".cache" / "lookahead-runner" / "restart-spread.json"


def test_a_run_remembers_its_spread_and_the_next_on_the_same_server_reads_it(cache_dir):
    cfg = config()
    first, said = ledger.use_for_run(cfg, "0.32.0", True, gear=GPU)
    assert first.earlier is None and "no earlier run on this server at 4 users" in said
    workload = ledger.workload_key(cfg)
    ledger.remember(first, "run-1", 4, squares=2 * 0.03 ** 2, df=2, lives=4, today="2026-12-01", workload=workload)
    ledger.remember(first, "run-2", 4, squares=0.04 ** 2, df=1, lives=2, today="2026-12-02", workload=workload)
    ledger.remember(first, "run-2", 4, squares=0.04 ** 2, df=1, lives=2, today="2026-12-02",  # once per run
                    workload=workload)
    second, said = ledger.use_for_run(cfg, "0.32.0", True, gear=GPU)
    earlier = second.earlier_spread()
    assert earlier == EarlierSpread(2 * 0.03 ** 2 + 0.04 ** 2, 3, 2, 6, "2026-12-02", users=4)
    assert said == ("restart spread ledger: restart spread 3.4% from 2 earlier runs on this server (last "
                    "2026-12-02, 3 degrees of freedom)")
    # another fingerprint, another concurrency, --no-ledger: not used
    other, _ = ledger.use_for_run(config(server={"extra_args": ["--max-num-seqs", "96"]}), "0.32.0", True, gear=GPU)
    assert other.earlier is None
    assert ledger.use_for_run(config(load={"stages": [{"users": 8, "duration_s": 10}]}), "0.32.0", True,
                              gear=GPU)[0].earlier is None
    off, said = ledger.use_for_run(cfg, "0.32.0", False, gear=GPU)
    assert not off.enabled and off.earlier_spread() is None and said == "restart spread ledger: not used (--no-ledger)"
    assert ledger.remember(off, "run-3", 4, 1.0, 1, 2) == "" and len(_runs(cache_dir)) == 2


def _runs(cache_dir: Path) -> list:
    data = json.loads((cache_dir / "lookahead-runner" / "restart-spread.json").read_text())
    return [run for server in data["servers"].values() for run in server["runs"]]


def test_only_the_newest_runs_count(cache_dir):
    use, _ = ledger.use_for_run(config(), "0.32.0", True, gear=GPU)
    for day in range(1, ledger.MAX_RUNS + 3):
        ledger.remember(use, f"run-{day}", 4, squares=float(day), df=1, lives=2, today=f"2026-11-{day:02d}",
                        workload=ledger.workload_key(config()))
    earlier = ledger.use_for_run(config(), "0.32.0", True, gear=GPU)[0].earlier_spread()
    assert earlier.runs == ledger.MAX_RUNS and earlier.squares == sum(range(3, ledger.MAX_RUNS + 3))


@pytest.mark.parametrize("text", ["{not json", '[1, 2]', '{"version": 1, "servers": [3]}', ""])  # a corrupt entry: _safety
def test_a_corrupt_ledger_is_one_warning_line_and_ignored(cache_dir, text):
    path = ledger.ledger_path()
    path.parent.mkdir(parents=True)
    path.write_text(text)
    use, said = ledger.use_for_run(config(), "0.32.0", True, gear=GPU)
    warning, note = said.split("\n")
    assert warning.startswith(f"warning: the restart spread ledger {path} is unreadable (") and \
        warning.endswith("): ignored; the next run that measures a spread writes a fresh one (the old kept as .bad)")
    assert use.earlier is None and note.startswith("restart spread ledger: no earlier run")
    assert ledger.remember(use, "run-1", 4, 0.002, 2, 4).startswith("warning:")   # rewritten fresh
    assert len(_runs(cache_dir)) == 1


def test_the_simulators_own_spread_is_documented_and_needs_no_ledger():
    sim = config_from_dict({"speculation": {"k": [0, 4]}})
    assert ledger.use_for_run(sim, "0.32.0", True) == (None, "")
    drawing = config_from_dict({"speculation": {"k": [0, 4]}, "server": {"extra_args": ["--sim-restart-spread", "0.03"]}})
    use, _ = ledger.use_for_run(drawing, "0.32.0", True)
    assert use.fingerprint["hardware"] == "simulated" and use.fingerprint["flags"] == ["--sim-restart-spread", "0.03"]


def test_plan_json_carries_what_was_used_and_the_decision_reads_it_from_there():
    cfg = config()
    use = ledger.LedgerUse(key="k", fingerprint={}, earlier=EarlierSpread(0.002, 2, 1, 4, "2026-12-02").__dict__)
    plan = Plan(run_id="r", probe={"version": "0.32.0"}, config=cfg.model_dump(mode="json"), target_users=4,
                restart_spread=use)
    again = Plan.model_validate(json.loads(plan.model_dump_json()))
    assert again.sweep_config().decision.earlier_spread == EarlierSpread(0.002, 2, 1, 4, "2026-12-02")
    older = Plan.model_validate(json.loads(plan.model_dump_json(exclude={"restart_spread"})))  # a folder before it
    assert older.restart_spread is None and older.sweep_config().decision.earlier_spread is None


def test_each_ks_level_and_the_spread_are_remembered_for_the_same_workload_only(cache_dir):
    cfg = config()
    use, _ = ledger.use_for_run(cfg, "0.32.0", True, gear=GPU)
    ledger.remember(use, "run-1", 4, 0.002, 2, 4, workload=ledger.workload_key(cfg), levels={"0": 12.0, "4": 13.0})
    ledger.remember(use, "run-2", 4, 0.002, 2, 4, workload=ledger.workload_key(cfg), levels={"0": 14.0})
    earlier = ledger.use_for_run(cfg, "0.32.0", True, gear=GPU)[0].earlier_spread()
    assert earlier.levels == {"0": 13.0, "4": 13.0} and earlier.runs == 2
    longer = config(load={"output_tokens": 256})      # another workload: neither the spread nor the levels (issue 46)
    assert ledger.use_for_run(longer, "0.32.0", True, gear=GPU)[0].earlier_spread() is None
