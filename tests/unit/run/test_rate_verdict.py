"""Both targets given (decision.target_users and decision.target_rate): both verdicts in the headline, the status
and the exit code the least settled of the two, the users K recommended where it also passes every gate at the
rate, else the rate's K with what the users K misses there (run/verdict/rate_verdict.py)."""
from __future__ import annotations

import pytest

from lookahead_runner.cli import EXIT_NOT_DECIDED, exit_code
from lookahead_runner.decision.schema import Candidate, Check, Decision, Recommended
from lookahead_runner.run.verdict.rate_verdict import combined

USERS = Decision(status="decided", verdict="Set K=8 at 64 users: +40% req/s.", target_users=64,
                 recommended=Recommended(k=8, setting="k8", argv=["serve", "8"]), leading_k=8)


def _gate(name, status, evidence="..."):
    return Check(name=name, kind="gate", status=status, evidence=evidence)


def _at_rate(status="decided", k8_keeps_up="pass"):
    candidates = [Candidate(k=0, objective=20.0, gates=[_gate("keeps up", "pass"), _gate("SLO attainment", "pass")]),
                  Candidate(k=8, objective=20.0, gates=[_gate("keeps up", k8_keeps_up, "falls behind at 20 req/s: 9.8 "
                                                                                       "served, waiting 3 -> 41"),
                                                         _gate("SLO attainment", "pass")])]
    return Decision(status=status, verdict="At 20 req/s: keep K=0: SLO met by 99.6%.", target_rate=20.0,
                    recommended=Recommended(k=0, setting="k0", argv=["serve", "0"]) if status == "decided" else None,
                    leading_k=0, candidates=candidates)


def test_the_users_k_stands_where_it_also_keeps_the_slo_at_the_rate():
    out = combined(USERS, _at_rate())
    assert out.status == "decided" and out.recommended.k == 8 and out.at_rate.recommended.k == 0
    assert out.verdict.startswith("Set K=8 at 64 users: +40% req/s. At 20 req/s K=8 keeps the SLO too")
    assert out.target_rate == 20.0 and exit_code(out) == 0


def test_the_rates_k_is_recommended_where_the_users_k_falls_behind_at_the_rate():
    out = combined(USERS, _at_rate(k8_keeps_up="fail"))
    assert out.status == "decided" and out.recommended.k == 0 and out.recommended.argv == ["serve", "0"]
    assert out.verdict.startswith("Set K=0 for your 20 req/s: At 20 req/s: keep K=0")
    assert "At 64 users K=8 serves the most, but at 20 req/s it keeps up fail: falls behind at 20 req/s" in out.verdict


@pytest.mark.parametrize("rate_status, status, code", [("not_decided", "not_decided", EXIT_NOT_DECIDED),
                                                        ("no_eligible", "no_eligible", 1),
                                                        ("no_measurement", "no_measurement", 1)])
def test_the_least_settled_verdict_sets_the_status_and_the_exit_code(rate_status, status, code):
    out = combined(USERS, _at_rate(status=rate_status))
    assert out.status == status and out.recommended is None and exit_code(out) == code
    assert out.verdict == f"{USERS.verdict} {_at_rate(status=rate_status).verdict}"
    users_undecided = USERS.model_copy(update={"status": "not_decided", "recommended": None})
    assert combined(users_undecided, _at_rate()).status == "not_decided"


def test_a_one_rate_stage_life_of_the_capacity_search_or_planned_as_a_probe_may_end_early():
    from lookahead_runner.config import config_from_dict
    from lookahead_runner.run.life.probe_watch import is_probe, probe_watch

    def config(strategy, stages):
        return config_from_dict({"sweep": {"strategy": strategy}, "decision": {"slo": {"ttft_p99_ms": 500}},
                                 "load": {"stages": stages}})

    one = [{"rate": 8.0, "duration_s": 10}]
    assert is_probe(config("capacity", one))
    assert not is_probe(config("capacity", one + [{"rate": 16.0, "duration_s": 10}]))
    assert not is_probe(config("grid", one)) and probe_watch(config("grid", one), None) is None
    # the adaptive sweep at a rate: a life planned as a capacity probe is one; its repeats at the target rate, one
    # rate stage each too, run whole (the verdict reads their windows)
    assert is_probe(config("adaptive", one), "capacity") and probe_watch(config("adaptive", one), None, "capacity")
    assert not is_probe(config("adaptive", one), "spread") and not is_probe(config("adaptive", one))


def test_a_lifes_purpose_is_read_from_the_plan_and_is_empty_where_there_is_none(tmp_path):
    from lookahead_runner.run.life.probe_watch import planned_purpose
    from lookahead_runner.runfolder.plan import CAPACITY_PURPOSE, Plan, PlannedLife, write_plan

    assert planned_purpose(tmp_path, "k4/r1") == ""                                   # no plan.json
    (tmp_path / "plan.json").write_text("{not json")
    assert planned_purpose(tmp_path, "k4/r1") == ""                                   # none readable
    lives = [PlannedLife(setting="k4", k=4, repeat=r, argv=["vllm"], dir=f"k4/r{r}", purpose=purpose)
             for r, purpose in ((0, ""), (1, CAPACITY_PURPOSE))]
    write_plan(tmp_path, Plan(run_id="r", probe={"version": "0.32.0"}, config={}, target_users=8, lives=lives))
    assert [planned_purpose(tmp_path, f"k4/r{r}") for r in (0, 1, 2)] == ["", CAPACITY_PURPOSE, ""]


def test_the_capacity_table_and_the_gates_at_the_rate_are_held_together_at_the_rate_its_windows_were_offered():
    # issue 46: a capacity bracket is of offered rates; configured at 20 req/s the windows offered 18.2, which K=0's
    # capacity holds, as its gates there say: no disagreement to report
    from lookahead_runner.decision.schema import Capacity, Range
    from lookahead_runner.run.verdict.rate_verdict import _with_capacity

    row = Capacity(k=0, rate=18.8, rate_range=Range(low=18.2, high=19.5), rate_bracket=[18.2, 19.5],
                   rate_text="18.8 req/s [18.2, 19.5]")
    out = _with_capacity(_at_rate(), [row], {0: 18.2, 8: 18.2})
    assert out.diagnoses == [] and "Capacity within the SLO: K=0 18.8 req/s [18.2, 19.5]." in out.verdict
    # offered where the capacity fails it, the gates passing: that disagreement is told
    told = _with_capacity(_at_rate(), [row], {0: 19.5, 8: 19.5})
    assert told.diagnoses and told.diagnoses[0].startswith("K=0: its capacity within the SLO (18.8 req/s")
