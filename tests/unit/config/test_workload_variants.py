"""Workload variants (issue 22): the config's axes, the variants they cross into, the per-variant decision and
the answer over them, the per-variant tables; pure parts (tests/e2e/test_workload_variants_sim.py runs them)."""
import json
from pathlib import Path

import pandas as pd
import pytest
from unit.synthetic import table

from lookahead_runner.runfolder.analysis import block_token_check, summary_frame
from lookahead_runner.cli import exit_code
from lookahead_runner.config import ConfigError, DecisionConfig, config_from_dict
from lookahead_runner.decision import Decision, decide
from lookahead_runner.decision.schema import PerBatchSchedule
from lookahead_runner.decision.per_variant import by_variant
from lookahead_runner.report.variant_section import lives_tokens, variant_rows
from lookahead_runner.runfolder.plan import LifeResult, LifeStatus, PlannedLife, VariantTokens
from lookahead_runner.runfolder.results import write_lives
from lookahead_runner.config.workload_variants import variants_of

P = DecisionConfig(resamples=300)
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def test_one_value_per_axis_is_one_unnamed_variant_as_before():
    config = config_from_dict({})
    assert config.load.prompt_tokens == 128 and config.load.output_tokens == 64 and config.load.temperature == 0.0
    (only,) = config.load.variants
    assert (only.key, only.label, only.prompt_tokens, only.output_tokens, only.temperature) == ("", "", 128, 64, 0.0)


def test_lists_cross_in_the_order_given_and_name_only_what_varies():
    variants = variants_of([4000, 400], 64, [0, 0.7])
    assert [v.key for v in variants] == ["p4000-t0", "p4000-t0.7", "p400-t0", "p400-t0.7"]
    assert variants[1].label == "4,000-token prompts, temperature 0.7"
    assert [(v.prompt_tokens, v.temperature) for v in variants] == [(4000, 0.0), (4000, 0.7), (400, 0.0), (400, 0.7)]
    assert variants_of(128, [16, 256], 0)[1].label == "256 output tokens"


@pytest.mark.parametrize("load, message", [
    ({"prompt_tokens": []}, "load.prompt_tokens: list at least one value"),
    ({"prompt_tokens": [400, 0]}, "load.prompt_tokens: 0: every value must be >= 1"),
    ({"prompt_tokens": [400, 400]}, "load.prompt_tokens: the values of a workload axis must be unique"),
    ({"output_tokens": [64, 1]}, "load.output_tokens: 1: every value must be >= 2"),
    ({"temperature": [0, -0.5]}, "load.temperature: -0.5: every value must be >= 0"),
    ({"prompt_tokens": [400, 12.5]}, "load.prompt_tokens: 12.5: give a whole number"),
    ({"temperature": ["hot"]}, "load.temperature: 'hot': give a number"),
])
def test_a_bad_axis_value_is_one_line_naming_the_field(load, message):
    with pytest.raises(ConfigError) as err:
        config_from_dict({"load": load})
    assert message in str(err.value) and "\n" not in str(err.value)


def test_a_target_per_variant_or_one_for_all():
    stages = [{"users": 64, "duration_s": 5}, {"users": 256, "duration_s": 5}]
    config = config_from_dict({"load": {"stages": stages, "prompt_tokens": [400, 4000]},
                               "decision": {"target_users": [256, 64]}})
    assert [config.target_for(i) for i in range(2)] == [256, 64] and config.target_users == 256
    assert config_from_dict({"load": {"stages": stages, "prompt_tokens": [400, 4000]}}).target_for(1) == 256
    with pytest.raises(ConfigError, match=r"decision.target_users: give one users count per workload variant "
                                          r"\(2: 400-token prompts, 4,000-token prompts\), or one for all"):
        config_from_dict({"load": {"stages": stages, "prompt_tokens": [400, 4000]}, "decision": {"target_users": [64]}})
    with pytest.raises(ConfigError, match="decision.target_users = 32 is not a stage's users"):
        config_from_dict({"load": {"stages": stages, "prompt_tokens": [400, 4000]},
                          "decision": {"target_users": [64, 32]}})


@pytest.mark.parametrize("extra, grid, fits", [
    (["--max-model-len", "4096"], {}, True),              # 4000 + 64 fits
    (["--max-model-len=4k"], {}, False),                  # 4k = 4000 (vLLM's human-readable integers)
    (["--max-model-len", "4K"], {}, True),                # 4K = 4096
    ([], {"flag": "--max-model-len", "values": ["8192", "2048"]}, False),
    ([], {}, True),                                       # no limit in the config: the model's own
])
def test_the_longest_variant_is_checked_against_max_model_len_before_any_server(extra, grid, fits):
    data = {"server": {"extra_args": extra}, "grid": grid, "load": {"prompt_tokens": [400, 4000]}}
    if fits:
        config_from_dict(data)
        return
    with pytest.raises(ConfigError) as err:
        config_from_dict(data)
    assert "the workload variant of 4,000-token prompts needs 4,064 tokens per request" in str(err.value)
    assert "raise --max-model-len" in str(err.value)


def decided(k_fast: int, users: int = 64) -> Decision:
    return decide(table({0: {users: 20}, k_fast: {users: 30}} if k_fast else {0: {users: 30}, 4: {users: 20}}, users),
                  P, {0: ["serve", "k0"], 4: ["serve", "k4"]})


def test_answers_that_differ_are_said_per_variant_with_why_one_schedule_cannot_serve_both():
    decision = by_variant([("4,000-token prompts", decided(4)), ("400-token prompts", decided(0))])
    assert decision.status == "decided" and decision.recommended is None
    assert decision.verdict.startswith("The answer differs by workload: K=4 at 4,000-token prompts; K=0 at "
                                       "400-token prompts. A single schedule cannot serve them all: vLLM 0.32/0.33 "
                                       "choose K by batch size only")
    assert [d.variant for d in decision.by_variant] == ["4,000-token prompts", "400-token prompts"]
    assert {c.variant for c in decision.cells} == {"4,000-token prompts", "400-token prompts"}
    assert all(p.variant for p in decision.per_stage) and all(c.variant for c in decision.candidates)
    assert decision.reasons[0].startswith("4,000-token prompts: Set K=4")
    assert exit_code(decision) == 0  # every variant decided: an answer to act on for each
    rows = variant_rows(decision)
    assert rows["differ"] and [r["answer"] for r in rows["rows"]] == ["K=4", "K=0"]


def test_the_same_answer_everywhere_is_one_recommendation():
    decision = by_variant([("temperature 0", decided(4)), ("temperature 0.7", decided(4))])
    assert decision.recommended.k == 4 and decision.verdict == (
        "Set K=4 for every workload variant (temperature 0, temperature 0.7).")
    assert exit_code(decision) == 0 and not decision.diagnoses


def test_one_undecided_variant_leaves_the_sweep_undecided():
    undecided = decide(table({0: {64: 20}, 4: {64: 20.3}}, 64, spread=0.3), P, {})
    assert undecided.status == "not_decided"
    decision = by_variant([("400-token prompts", decided(0)), ("4,000-token prompts", undecided)])
    assert decision.status == "not_decided" and exit_code(decision) == 3
    assert decision.verdict.startswith("Not decided for every workload variant: K=0 at 400-token prompts; "
                                       "not decided yet")


def test_decision_json_of_main_before_variants_still_reads():
    """A decision.json written by main's code (schema 2, a real simulator sweep) reads as one unnamed variant."""
    data = json.loads((FIXTURES / "decision_schema2.json").read_text())
    assert data["schema_version"] == 2 and "by_variant" not in data
    decision = Decision.model_validate(data)
    assert decision.by_variant == [] and decision.variant == "" and decision.cells
    assert all(c.variant == "" for c in decision.cells)
    assert exit_code(decision) == exit_code(Decision.model_validate_json(decision.model_dump_json()))


def row(k, variant, order, stage):
    return {"setting": f"k{k}", "k": k, "repeat": 0, "variant": variant, "variant_order": order, "stage": stage,
            "users": 8 * (stage + 1)}


def test_summary_keeps_each_variants_block_together_after_k_and_repeat():
    rows = [row(4, "b", 1, 0), row(0, "b", 1, 1), row(0, "a", 0, 1), row(0, "b", 1, 0), row(0, "a", 0, 0)]
    frame = summary_frame(rows)
    assert list(frame.columns[:5]) == ["setting", "k", "repeat", "variant", "stage"]
    assert "variant_order" not in frame
    assert list(zip(frame["k"], frame["variant"], frame["stage"])) == [
        (0, "a", 0), (0, "a", 1), (0, "b", 0), (0, "b", 1), (4, "b", 0)]
    assert "variant" not in summary_frame([{k: v for k, v in r.items() if k not in ("variant", "variant_order")}
                                           for r in rows]).columns


def test_each_block_is_a_closed_token_window_of_its_own():
    server = pd.DataFrame({"t_s": [0.0, 1.0, 5.0, 9.0, 10.0, 14.0, 15.0],
                           "generation_tokens_total": [0, 0, 40, 100, 100, 130, 160]})
    first = pd.DataFrame({"output_tokens": [50, 50], "error": ["", ""]})
    second = pd.DataFrame({"output_tokens": [30, 30], "error": ["", ""]})
    assert block_token_check(first, server, {"t_start_s": 1.5, "t_end_s": 9.5})["difference"] == 0
    assert block_token_check(second, server, {"t_start_s": 10.0, "t_end_s": 15.0})["difference"] == 0
    assert block_token_check(second, server, {"t_start_s": 1.5, "t_end_s": 15.0})["difference"] == 100
    assert block_token_check(second, server, None)["server_generation_tokens"] is None


def test_lives_csv_has_a_row_per_life_and_variant(tmp_path):
    tokens = {"client_output_tokens": 10, "server_generation_tokens": 10, "difference": 0, "cut_requests": 0}
    life = LifeResult(planned=PlannedLife(setting="k0", k=0, repeat=0, argv=[], dir="k0/r0"),
                      status=LifeStatus(state="done"),
                      variants=[VariantTokens(variant="400-token prompts", tokens=tokens),
                                VariantTokens(variant="4,000-token prompts", tokens=tokens | {"difference": 3})])
    frame = pd.read_csv(write_lives(tmp_path, [life.as_row()]))
    assert list(frame["variant"]) == ["400-token prompts", "4,000-token prompts"]
    assert list(frame["difference"]) == [0, 3]
    shown = lives_tokens(life)
    assert shown["status"] == "check" and shown["text"].startswith("400-token prompts: client 10 / server 10")
    single = pd.read_csv(write_lives(tmp_path, [life.model_copy(update={"variants": [], "tokens": tokens}).as_row()]))
    assert "variant" not in single.columns and len(single) == 1


def test_progress_counts_every_variants_block_and_names_the_variant_beside_the_stage():
    import time

    from lookahead_runner.config import StageConfig
    from lookahead_runner.run.progress import SweepProgress

    stages = [StageConfig(users=8, duration_s=10), StageConfig(users=32, duration_s=10)]
    progress = SweepProgress(stages, 2, enabled=False, blocks=2)
    assert progress._progress.tasks[0].total == 2 * 2 * 20
    first, second = variants_of([400, 4000], 64, 0)
    progress.life_started("k0/r0")
    progress.variant_started(first)
    progress.variant_started(second)
    progress._load_started = time.monotonic() - 12  # 12 s into the second block: its second stage
    text, elapsed = progress._describe()
    assert text == "k0/r0 stage 2/2 (32 users · 4,000-token prompts)" and 32 <= elapsed < 33
    progress.life_finished("k0/r0")
    assert progress._done_s == 40


def test_the_live_view_names_the_variant_beside_the_stage():
    from lookahead_runner.live.charts import marks_between
    from lookahead_runner.live.tables import history_row, history_tab_row
    from lookahead_runner.live.values import LiveValues, stage_now, stage_text
    from lookahead_runner.workload.stages import Stage

    stage = stage_now("running", [Stage(8, 10), Stage(32, 10)], (1, 32), 13.0, False, "4,000-token prompts")
    assert stage_text(stage) == "2 of 2: 32 users, 3 of 10 s · 4,000-token prompts"
    values = LiveValues(t_s=100.0, setting="k4/r0", stage=stage)
    assert history_tab_row(values, "12:00:00")["stage"] == "2 (32) · 4,000-token prompts"
    assert history_row(values)["variant"] == "4,000-token prompts"
    (mark,) = marks_between(None, values)
    assert mark.label == "stage 2: 32 users, 4,000-token prompts"
    alone = stage_now("running", [Stage(8, 10)], (0, 8), 3.0, False)
    assert stage_text(alone) == "1 of 1: 8 users, 3 of 10 s" and history_row(LiveValues(1.0, "", alone))["variant"] == ""


def test_a_variants_schedule_says_no_life_confirmed_it():
    from lookahead_runner.decision.per_variant import note_unconfirmed_schedules

    with_schedule = decided(4).model_copy(update={"per_batch_size": PerBatchSchedule(argv=["serve"], ranges=[[1, 8, 4]])})
    decision = by_variant([("a", with_schedule), ("b", decided(0))])
    note_unconfirmed_schedules(decision, "off")
    assert any("not run in a life of its own" in d for d in decision.by_variant[0].diagnoses)
    assert not any("not run in a life of its own" in d for d in decision.by_variant[1].diagnoses)
