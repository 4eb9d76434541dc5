"""preflight.json and the placement record (runfolder/preflight.py): typed, versioned, NaN kept, a file written
before the records were typed still reads, a partial one reads with defaults, an unreadable one as no pre-flight;
and what the report and the windows' advice read from them."""
import json
import math

from lookahead_runner.report.view import placement_rows
from lookahead_runner.run.life.placement import Placement
from lookahead_runner.run.life.preflight import LoadedFigures, idle_lag
from lookahead_runner.runfolder.lag_advice import lag_advice
from lookahead_runner.runfolder.lag_advice import LagAdvice
from lookahead_runner.runfolder.preflight import (PREFLIGHT_VERSION, IdleLag, PlacementRecord, PreflightRecord,
                                                  PreflightRun, read_preflight, write_preflight)

BEFORE = Placement("auto", (0, 1, 2), (3,), 1, True, {"VLLM_CPU_OMP_THREADS_BIND": "0-2"}, (0, 1, 2, 3))
AFTER = BEFORE.with_processes(2, "processes auto: 2 from the pre-flight")


def _record(**update) -> PreflightRecord:
    figures = LoadedFigures(8, 40, 12.345, 3.2, 55.5, 80.0, 1000.0, 1)
    unmeasured = LoadedFigures(8, 3, float("nan"), float("nan"), float("nan"), float("nan"), 0.0, 1)
    return PreflightRecord(placement_before=BEFORE.to_record(), gate_ms=50.0,
                           idle=IdleLag.model_validate({"samples": 95, "lag_p50_ms": 0.1, "lag_p99_ms": 1.25,
                                                        "lag_max_ms": 2.0, "cpu_pct": 0.5}),
                           runs=[figures.to_record(1), unmeasured.to_record(2)], verdict="ok",
                           placement=AFTER.to_record()).model_copy(update=update)


def test_a_record_round_trips_through_the_file_with_nan_kept(tmp_path):
    record = _record()
    write_preflight(tmp_path, record)
    raw = (tmp_path / "preflight.json").read_text()
    assert "NaN" in raw and json.loads(raw)["version"] == PREFLIGHT_VERSION  # as results.write_json writes NaN
    back = read_preflight(tmp_path)
    assert back.version == PREFLIGHT_VERSION and back.verdict == "ok" and back.gate_ms == 50.0
    assert back.placement_before == BEFORE.to_record() and Placement.from_record(back.placement) == AFTER
    assert back.idle.lag_p99_ms == 1.25 and back.idle.error == "" and back.idle.model_extra["samples"] == 95
    first, second = back.runs
    assert first == record.runs[0] and first.chunk_cpu_us == 800.0 and first.processes == 1
    assert second.processes == 2 and second.chunks_per_s == 0.0
    assert all(math.isnan(getattr(second, name)) for name in ("lag_p99_ms", "lag_p50_ms", "busiest_cpu_pct",
                                                              "total_cpu_pct", "chunk_cpu_us"))
    assert placement_rows(back, None) == placement_rows(record, None)


def test_a_file_written_before_the_records_were_typed_reads_as_version_1(tmp_path):
    # run_preflight's dict as results.write_json wrote it: no version, no error on a probe that ran, NaN tokens
    (tmp_path / "preflight.json").write_text(json.dumps({
        "placement_before": BEFORE.to_record().model_dump(), "gate_ms": 50.0,
        "runs": [{"users": 4, "requests": 12, "lag_p99_ms": 3.0, "lag_p50_ms": 1.0, "busiest_cpu_pct": float("nan"),
                  "total_cpu_pct": float("nan"), "chunks_per_s": 80.0, "processes_seen": 1, "processes": 1,
                  "chunk_cpu_us": float("nan")}],
        "idle": {"samples": 95, "lag_p50_ms": 0.1, "lag_p99_ms": 0.4, "lag_max_ms": 1.0, "cpu_pct": 0.5},
        "verdict": "stop", "reason": "pre-flight at 4 users: client starved", "a_later_field": [1]}, indent=1))
    record = read_preflight(tmp_path)
    assert record.version == 1 and record.verdict == "stop" and record.placement is None
    assert record.runs[0].users == 4 and math.isnan(record.runs[0].chunk_cpu_us)
    assert record.model_extra == {"a_later_field": [1]}
    write_preflight(tmp_path, record)  # a field this version does not name is written back, not dropped
    assert json.loads((tmp_path / "preflight.json").read_text())["a_later_field"] == [1]


def test_a_file_missing_fields_reads_with_defaults(tmp_path):
    (tmp_path / "preflight.json").write_text('{"verdict": "not judged", "runs": [{"users": 4}], "idle": {}}')
    record = read_preflight(tmp_path)
    assert record.version == PREFLIGHT_VERSION and record.reason == "" and record.placement is None
    assert record.placement_before is None and math.isnan(record.gate_ms)
    assert math.isnan(record.idle.lag_p99_ms) and record.idle.error == ""
    run = record.runs[0]
    assert (run.users, run.requests, run.processes, run.processes_seen) == (4, 0, 1, 0) and math.isnan(run.lag_p99_ms)
    assert PlacementRecord.model_validate({}) == PlacementRecord(mode="off", processes=1)


def test_a_missing_or_unreadable_file_is_no_preflight(tmp_path):
    assert read_preflight(tmp_path) is None
    for text in ('{"verdict": "ok", "runs": [', "[1, 2]", '{"runs": "many"}', '{"idle": {"lag_p99_ms": "slow"}}'):
        (tmp_path / "preflight.json").write_text(text)
        assert read_preflight(tmp_path) is None, text
    (tmp_path / "preflight.json").unlink()
    (tmp_path / "preflight.json").mkdir()
    assert read_preflight(tmp_path) is None


def test_the_report_rows_read_the_typed_records():
    planned = BEFORE.to_record()
    assert placement_rows(None, None) == []
    assert placement_rows(None, planned) == [{"label": "placement", "value": BEFORE.describe()}]
    rows = placement_rows(_record(), planned)  # the pre-flight's placement wins over plan.json's
    assert rows == [{"label": "placement", "value": AFTER.describe()},
                    {"label": "pre-flight", "value": "ok; server idle: Locust's CPUs wake late by p99 1.2 ms; at 8 "
                     "users: loop lag p99 \u2013 ms, busiest process \u2013% of a core, \u2013 us per chunk"}]
    stopped = _record(runs=_record().runs[:1], placement=None, verdict="stop", reason="pre-flight at 8 users: starved")
    assert placement_rows(stopped, planned) == [
        {"label": "placement", "value": BEFORE.describe()},
        {"label": "pre-flight", "value": "stop; server idle: Locust's CPUs wake late by p99 1.2 ms; at 8 users: loop "
                                         "lag p99 12.3 ms, busiest process 55.5% of a core, 800.0 us per chunk; "
                                         "pre-flight at 8 users: starved"}]
    bare = PreflightRecord.model_validate({})
    assert placement_rows(bare, None) == [{"label": "pre-flight",
                                           "value": "\u2013; server idle: Locust's CPUs wake late by p99 \u2013 ms"}]


def test_the_windows_advice_follows_the_placement_the_lives_ran_with():
    planned = Placement("off", host_cpus=(0, 1, 2, 3)).to_record()
    settled = Placement("auto", (0,), (1,), 1, host_cpus=(0, 1)).to_record()
    assert lag_advice(None) == LagAdvice() and lag_advice(None, PreflightRecord()) == LagAdvice()
    assert lag_advice(planned).starved.startswith('set load.placement = "auto"')
    assert lag_advice(planned, PreflightRecord(verdict="stop")) == lag_advice(planned)  # it stopped: no placement
    assert "other processes run on the load's CPUs 1" in lag_advice(planned, PreflightRecord(placement=settled)).starved


def test_the_idle_probe_reads_as_a_typed_record():
    idle = idle_lag((), seconds=0.1)
    assert idle.error == "" and idle.lag_p99_ms >= idle.lag_p50_ms >= 0.0 and idle.model_extra["samples"] > 0
    assert isinstance(PreflightRecord(idle=idle, runs=[PreflightRun(users=2)]).runs[0], PreflightRun)


def test_a_ray_runs_report_names_every_slots_preflight_not_only_the_last(tmp_path):
    """Each Ray slot runs its own pre-flight and may settle another Locust count: the report lists each slot's verdict
    and count (before, it showed the last slot's alone, as if every life ran on that placement)."""
    from lookahead_runner.runfolder.preflight import SLOT_PREFLIGHTS, read_slot_preflights

    for name, record in (("001-10.0.0.1_aaaa", _record()), ("002-10.0.0.2_bbbb", _record(placement=BEFORE.to_record(),
                                                                                          verdict="not judged"))):
        (tmp_path / SLOT_PREFLIGHTS / name).mkdir(parents=True)
        write_preflight(tmp_path / SLOT_PREFLIGHTS / name, record)
    (tmp_path / SLOT_PREFLIGHTS / "003-broken").mkdir()
    slots = read_slot_preflights(tmp_path)
    assert list(slots) == ["001-10.0.0.1_aaaa", "002-10.0.0.2_bbbb", "003-broken"]
    rows = placement_rows(_record(), BEFORE.to_record(), slots)
    assert rows[-1] == {"label": "pre-flight per slot", "value": "001-10.0.0.1_aaaa: ok, 2 Locust processes; "
                        "002-10.0.0.2_bbbb: not judged, 1 Locust process; 003-broken: \u2013 (preflight-slots/)"}
    assert placement_rows(_record(), None, dict(list(slots.items())[:1])) == placement_rows(_record(), None)
