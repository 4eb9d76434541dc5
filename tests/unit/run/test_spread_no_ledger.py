"""--no-ledger on a resumed run, and plan.json's restart_spread read as one line when it is not what this version
writes (runfolder/spread_ledger.py LedgerUse, run/verdict/finalize.py remember_spread, cli.py)."""
import json
from types import SimpleNamespace

import pytest

from lookahead_runner import cli
from lookahead_runner.config import config_from_dict
from lookahead_runner.decision.schema import RestartSpread
from lookahead_runner.run.verdict.finalize import remember_spread
from lookahead_runner.runfolder import results, spread_ledger
from lookahead_runner.runfolder.plan import Plan, RunDirError, read_plan, write_plan

CONFIG = {"speculation": {"k": [0, 4]}, "load": {"stages": [{"users": 4, "duration_s": 10}]},
          "server": {"extra_args": ["--sim-restart-spread", "0.05"]}}
EARLIER = {"squares": 0.002, "df": 2, "runs": 1, "lives": 4, "last": "2026-12-02", "levels": {}}


def a_plan(tmp_path, earlier=None) -> Plan:
    config = config_from_dict(CONFIG)
    use, _ = spread_ledger.use_for_run(config, "0.32.0", True)
    plan = Plan(run_id="run-1", probe={"version": "0.32.0"}, config=config.model_dump(mode="json"), target_users=4,
                restart_spread=use)
    write_plan(tmp_path, plan)
    if earlier is not None:  # as a hand edit or another writer left it
        data = results.read_json(tmp_path / "plan.json")
        data["restart_spread"]["earlier"] = earlier
        results.write_json(tmp_path / "plan.json", data)
    return plan


def test_a_resumed_run_with_no_ledger_does_not_write_the_ledger(tmp_path, cache_dir, monkeypatch):
    a_plan(tmp_path)
    started = []
    monkeypatch.setattr(cli, "_start_run", lambda config, args, mode="sweep": started.append(config) or 0)
    assert cli.main(["sweep", "--resume", str(tmp_path), "--no-ledger"]) == 0
    assert started[0].decision.ledger is False
    # the decision made by that run (the plan.json of the run says the ledger was on when it started)
    plan = read_plan(tmp_path)
    data = SimpleNamespace(plan=plan, config=plan.sweep_config())
    decision = SimpleNamespace(restart_spread=RestartSpread(rel_sd=0.03, squares=0.002, this_df=2, lives=4, ledger_squares=0.002,
                                                                         ledger_df=2, ledger_lives=4),
                               candidates=[])
    assert remember_spread(data, decision, ledger=False) == ""
    assert not spread_ledger.ledger_path().exists()
    assert remember_spread(data, decision) == "" and spread_ledger.ledger_path().exists()


@pytest.mark.parametrize("earlier, named", [
    (EARLIER | {"pooled": True}, "unknown key 'pooled'"), ({"squares": 0.002}, "df"),
    (EARLIER | {"df": "2"}, "df"), (EARLIER | {"squares": -1.0}, "squares"), ([1, 2], "earlier")])
def test_a_restart_spread_this_version_does_not_write_is_one_line(tmp_path, earlier, named, capsys):
    a_plan(tmp_path, earlier)
    with pytest.raises(RunDirError) as err:
        read_plan(tmp_path)
    assert "restart_spread.earlier" in str(err.value) and named in str(err.value)
    assert cli.main(["report", str(tmp_path)]) == 2
    out = capsys.readouterr()
    assert len(out.err.strip().splitlines()) == 1 and "restart_spread.earlier" in out.err and "Traceback" not in out.err


def test_a_plan_with_the_earlier_spread_as_written_reads_back(tmp_path):
    a_plan(tmp_path, EARLIER)
    assert read_plan(tmp_path).sweep_config().decision.earlier_spread.df == 2
    assert json.loads((tmp_path / "plan.json").read_text())["restart_spread"]["earlier"] == EARLIER
