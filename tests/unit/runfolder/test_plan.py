"""plan.json and status.json (plan.py): typed, versioned, and a folder written before issue 23 still reads."""
import json
import shutil

import pandas as pd
import pytest

from lookahead_runner.run.verdict.finalize import finalize
from lookahead_runner.runfolder.plan import (CONFIRM_ROLE, PLAN_VERSION, LifeStatus, Plan, PlannedLife, RunDirError, append_lives,
                                   life_state, add_confirmation, read_plan, read_plan_and_config, read_status,
                                   retire_confirmation, write_plan, write_status)


@pytest.fixture
def old_run(tmp_path, fixtures_dir):
    folder = tmp_path / "run"
    shutil.copytree(fixtures_dir.parent / "run-plan-v1", folder)
    return folder


def test_a_schema_1_folder_reads_as_it_was_written(old_run):
    plan, config = read_plan_and_config(old_run)
    raw = json.loads((old_run / "plan.json").read_text())
    assert raw["version"] == 1 and "role" not in raw["lives"][0]
    assert [(l.dir, l.setting, l.k, l.role, l.argv) for l in plan.lives] == [
        (l["dir"], l["setting"], l["k"], "", l["argv"]) for l in raw["lives"]]
    assert plan.mode == "sweep" and plan.probe["version"] == "0.32.0" and config.speculation.k == [0, 2]
    # typed (runfolder/preflight.py PlacementRecord); a field added since (a Ray slot's CPUs) reads as its default
    assert plan.placement.model_dump() == raw["placement"] | {"slot_cpus": 0.0}
    assert (plan.placement.mode, plan.placement.load_cpus, plan.placement.processes) == ("auto", "1", 1)
    status = read_status(old_run / "k0/r0")
    assert status.version == 1 and status.state == "done" and status.memory_source == "sim" and status.locust_exit == 0


def test_a_schema_1_folder_re_renders_to_the_same_lives_and_verdict(old_run):
    before_lives = pd.read_csv(old_run / "lives.csv")
    before = json.loads((old_run / "decision.json").read_text())
    finalize(old_run, render=False)
    after_lives = pd.read_csv(old_run / "lives.csv")
    assert after_lives[list(before_lives.columns)].equals(before_lives)
    # what each life cost (issue 20b) came later: its columns are there, empty for a folder written before
    assert list(after_lives.columns) == list(before_lives.columns) + ["start_s", "measure_s"]
    assert after_lives[["start_s", "measure_s"]].isna().all().all()
    after = json.loads((old_run / "decision.json").read_text())
    assert (after["status"], after["verdict"], after["leading_k"]) == (before["status"], before["verdict"],
                                                                       before["leading_k"])



def test_a_folder_saved_with_decision_slo_attainment_still_re_analyses(old_run):
    """Runs made before issue 46 saved decision.slo_attainment, a key a config may no longer set: `report` on
    such a folder reads it as each SLO's own percentile says, and does not refuse the folder."""
    raw = json.loads((old_run / "plan.json").read_text())
    raw["config"]["decision"] |= {"slo_attainment": 0.99, "slo": {"ttft_p90_ms": 500.0}}
    (old_run / "plan.json").write_text(json.dumps(raw))
    plan, config = read_plan_and_config(old_run)
    assert config.decision.slo == {"ttft_p90_ms": 500.0}
    assert "slo_attainment" not in config.decision.model_dump()
    finalize(old_run, render=False)
    assert json.loads((old_run / "decision.json").read_text())["status"]


def test_the_run_reads_its_preflight_typed_beside_the_placement_it_planned(old_run):
    from lookahead_runner.runfolder.read import read_run
    from lookahead_runner.runfolder.preflight import PreflightRecord, write_preflight

    assert read_run(old_run).record().preflight is None  # written before the pre-flight existed
    settled = read_plan(old_run).placement.model_copy(update={"processes": 2, "description": "placement settled"})
    write_preflight(old_run, PreflightRecord(gate_ms=50.0, verdict="ok", placement=settled))
    data = read_run(old_run)
    assert isinstance(data.preflight, PreflightRecord) and data.record().preflight.placement.processes == 2
    assert data.record().plan.placement.processes == 1  # plan.json keeps the placement it planned

def _plan(**update) -> Plan:
    life = PlannedLife(setting="k0", k=0, repeat=0, argv=["vllm", "serve", "m"], dir="k0/r0")
    return Plan(**({"run_id": "r", "probe": {"version": "0.32.0"}, "config": {}, "target_users": 8, "lives": [life]}
                   | update))


def test_lives_are_appended_and_a_confirmation_planned_and_retired(tmp_path):
    write_plan(tmp_path, _plan())
    append_lives(tmp_path, [PlannedLife(setting="k4", k=4, repeat=1, argv=["vllm"], dir="k4/r1")])
    from lookahead_runner.decision.schema import ConfirmPlan

    confirm = ConfirmPlan(kind="k", k=4, stages=[{"users": 8, "duration_s": 5.0}])
    add_confirmation(tmp_path, confirm, [PlannedLife(setting="confirm", k=4, repeat=0, argv=["vllm"], dir="confirm/r0")])
    plan = read_plan(tmp_path)
    assert plan.version == PLAN_VERSION and [l.dir for l in plan.sweep_lives()] == ["k0/r0", "k4/r1"]
    assert [(l.dir, l.role) for l in plan.confirm_lives()] == [("confirm/r0", CONFIRM_ROLE)] and plan.confirm.k == 4
    retire_confirmation(tmp_path)
    plan = read_plan(tmp_path)
    assert plan.confirm is None and [l.dir for l in plan.lives] == ["k0/r0", "k4/r1"]


def test_a_field_a_newer_writer_adds_is_kept_and_a_newer_schema_is_refused(tmp_path):
    plan = _plan()
    plan.lives[0].cost_s = 12.5  # e.g. a field another branch adds before it is declared here
    write_plan(tmp_path, plan)
    assert read_plan(tmp_path).lives[0].model_dump()["cost_s"] == 12.5
    write_plan(tmp_path, _plan(version=PLAN_VERSION + 1))
    with pytest.raises(RunDirError, match="newer than this lookahead-runner reads"):
        read_plan(tmp_path)
    (tmp_path / "plan.json").write_text('{"lives": []}')
    with pytest.raises(RunDirError, match="not a plan this version can read"):
        read_plan(tmp_path)


def test_a_secret_looking_value_is_redacted_and_a_placeholder_kept(tmp_path):
    write_plan(tmp_path, _plan(config={"server": {"env": {"HF_TOKEN": "hf_abcdefghijklmnop", "KEY": "${KEY}"}}}))
    env = json.loads((tmp_path / "plan.json").read_text())["config"]["server"]["env"]
    assert env == {"HF_TOKEN": "<redacted>", "KEY": "${KEY}"}


def test_a_life_state_is_missing_until_its_status_is_written(tmp_path):
    assert life_state(tmp_path) == "missing" and read_status(tmp_path) is None
    write_status(tmp_path, "running", server_life="k0/r0")
    assert life_state(tmp_path) == "running" and read_status(tmp_path).server_life == "k0/r0"
    write_status(tmp_path, "failed", "the server died", metrics_errors=2)
    status = read_status(tmp_path)
    assert (status.state, status.reason, status.metrics_errors) == ("failed", "the server died", 2)
    with pytest.raises(ValueError):
        LifeStatus(state="exploded")
    (tmp_path / "status.json").write_text("{")  # cut half-way: rerun on resume
    assert life_state(tmp_path) == "missing"


def test_a_field_this_version_does_not_name_is_refused_when_written_and_kept_when_read(tmp_path):
    with pytest.raises(TypeError, match="LifeStatus has no field ready_ss"):
        write_status(tmp_path, "done", ready_ss=1.0)  # misspelt ready_s
    assert read_status(tmp_path) is None  # nothing was written
    with pytest.raises(TypeError, match="PlannedLife has no field repeats"):
        PlannedLife.written({"setting": "k0", "k": 0, "repeats": 0, "dir": "k0/r0"})
    (tmp_path / "status.json").write_text(json.dumps({"state": "done", "gpu_watts": 300}))  # a newer writer's field
    assert read_status(tmp_path).model_extra == {"gpu_watts": 300}


def test_each_variants_confirmation_is_planned_and_retired_alone_and_the_adaptive_state_kept(tmp_path):
    from lookahead_runner.decision.schema import ConfirmPlan
    from lookahead_runner.runfolder.plan import record_adaptive_stop

    write_plan(tmp_path, _plan())
    append_lives(tmp_path, [PlannedLife(setting="k4", k=4, repeat=0, argv=["vllm"], dir="k4/r0", stages=[8],
                                        chosen="K=4 once more", spec_key="num_speculative_tokens")])
    for variant, key in (("short", "v1"), ("long", "v2")):
        confirm = ConfirmPlan(kind="k", k=4, stages=[{"users": 8, "duration_s": 5.0}], variant=variant)
        add_confirmation(tmp_path, confirm, [PlannedLife(setting=f"confirm-{key}", k=4, repeat=0, argv=["vllm"],
                                                         dir=f"confirm-{key}/r0")])
    record_adaptive_stop(tmp_path, "decided: K=4 wins", "decided")
    (tmp_path / "k4/r0").mkdir(parents=True)
    write_status(tmp_path / "k4/r0", "done", start_s=12.5, measure_s=8.0)
    plan = read_plan(tmp_path)
    assert plan.confirm is None and [p.variant for p in plan.confirm_variants] == ["short", "long"]
    assert [l.dir for l in plan.confirm_lives("long")] == ["confirm-v2/r0"] and plan.confirmation("short").k == 4
    assert (plan.lives[1].stages, plan.lives[1].chosen, plan.lives[1].spec_key) == (
        [8], "K=4 once more", "num_speculative_tokens")
    assert (plan.adaptive.stopped, plan.adaptive.stop) == ("decided: K=4 wins", "decided")
    assert (read_status(tmp_path / "k4/r0").start_s, read_status(tmp_path / "k4/r0").measure_s) == (12.5, 8.0)
    retire_confirmation(tmp_path, "short")
    plan = read_plan(tmp_path)
    assert [p.variant for p in plan.confirm_variants] == ["long"] and plan.confirmation("short") is None
    assert [l.dir for l in plan.confirm_lives()] == ["confirm-v2/r0"]
    for field in ("stages", "chosen", "spec_key", "variant"):  # declared, not kept by extra="allow"
        assert field in PlannedLife.model_fields
    assert {"confirm_variants", "adaptive"} <= set(Plan.model_fields)
    assert {"start_s", "measure_s"} <= set(LifeStatus.model_fields)


def test_requests_are_kept_in_memory_only_for_a_request_set(old_run, monkeypatch):
    """RunData.requests holds every life's requests for the request set's figures (run/verdict/request_set_run.py), its
    only reader: without load.requests nothing is kept (the peak memory of a 3M-request report)."""
    from lookahead_runner.runfolder import read as read_module

    data = read_module.read_run(old_run)
    assert not data.config.load.requests and len(data.windows) and data.requests == {}
    real = read_module.read_plan_and_config

    def with_request_set(run_dir):
        plan, config = real(run_dir)
        return plan, config.model_copy(update={"load": config.load.model_copy(update={"requests": "set.jsonl"})})

    monkeypatch.setattr(read_module, "read_plan_and_config", with_request_set)
    data = read_module.read_run(old_run)
    assert sorted(data.requests) == [("k0/r0", ""), ("k2/r0", "")]
    assert all(len(block.requests) for block in data.requests.values())
    assert sum(len(block.windows) for block in data.requests.values()) == len(data.windows) == 1
