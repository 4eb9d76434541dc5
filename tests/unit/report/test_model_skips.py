"""The K the adaptive sweep left out on the performance model's word reach decision.json's reasons and the report
page from plan.json, each with its prediction against the leader's (run/verdict/finalize.py, the report's reasons)."""
import json
import shutil

from lookahead_runner.decision.adaptive import ModelSkip
from lookahead_runner.run.verdict.finalize import finalize
from lookahead_runner.runfolder.plan import read_plan, record_adaptive_stop, write_plan

SAID = ("K=1 not run: the model predicts 41.2 req/s [38.0, 44.1] against 52.3 for the leader K=2 (measured 50.0), "
        "21% behind, more than its largest held-out error, 7.8% at the target")


def test_each_k_left_out_on_the_models_word_is_named_in_decision_json_and_the_report(tmp_path, fixtures_dir):
    run = tmp_path / "run"
    shutil.copytree(fixtures_dir.parent / "run-plan-v1", run)   # K 0 and 2 ran; K=1 planned, left out
    plan = read_plan(run)
    plan.config["speculation"]["k"] = [0, 1, 2]
    write_plan(run, plan)
    record_adaptive_stop(run, "decided: K=2 wins", "decided",
                         [ModelSkip(1, 41.2, 38.0, 44.1, 2, 52.3, 50.0, 0.078, "", "req/s")])
    assert read_plan(run).adaptive.model_skipped[0].predicted == 41.2       # as saved
    finalize(run, ledger=False)
    reasons = json.loads((run / "decision.json").read_text())["reasons"]
    assert any(SAID in reason and "none could be the best" not in reason for reason in reasons), reasons
    assert SAID in (run / "report.html").read_text(encoding="utf-8")
