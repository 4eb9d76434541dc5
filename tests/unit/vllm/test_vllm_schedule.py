import json

import pytest

from lookahead_runner.vllm.schedule import (BatchRange, Schedule, ScheduleError, check, lookup_table, parse_value,
                                            render_argv)


def per_batch_size_argv(ranges, argv_by_k):
    return render_argv(Schedule.from_ranges(ranges), argv_by_k)


def test_per_batch_size_form_with_shorthand_flags_sets_spec_tokens_and_folds_dotted_keys():
    ranges = [[1, 17, 4], [18, 1_000_000, 2]]
    ngram = {k: ["vllm", "serve", "m", "--spec-method", "ngram", "--spec-tokens", str(k),
                 "--speculative-config.prompt_lookup_max", "4", "--max-num-seqs", "64"] for k in (2, 4)}
    argv = per_batch_size_argv(ranges, ngram)
    assert argv[:7] == ["vllm", "serve", "m", "--spec-method", "ngram", "--spec-tokens", "4"]
    assert "--speculative-config.prompt_lookup_max" not in argv and argv[7:9] == ["--max-num-seqs", "64"]
    assert argv[-2] == "--speculative-config"
    assert json.loads(argv[-1]) == {"prompt_lookup_max": 4, "num_speculative_tokens_per_batch_size": ranges}
    draft = {4: ["vllm", "serve", "m", "--spec-method", "draft_model", "--spec-tokens", "4", "--spec-model", "d"]}
    argv = per_batch_size_argv([[1, 9, 4], [10, 1_000_000, 0]], draft)
    assert argv[:9] == draft[4]
    assert list(json.loads(argv[-1])) == ["num_speculative_tokens_per_batch_size"]  # --spec-tokens has K
    assert per_batch_size_argv([[1, 1_000_000, 0]], draft) is None


def test_json_config_gets_the_largest_k_and_the_schedule_in_its_form():
    spec = '{"method":"ngram","num_speculative_tokens":%d,"prompt_lookup_max":4}'
    argv_by_k = {k: ["vllm", "serve", "m", "--speculative-config", spec % k] for k in (2, 4)}
    listed = Schedule.from_ranges([[1, 8, 2], [9, 30, 4], [31, 64, 0]])
    config = json.loads(render_argv(listed, argv_by_k)[-1])
    assert config == {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4,
                      "num_speculative_tokens_per_batch_size": [[1, 8, 2], [9, 30, 4], [31, 64, 0]]}
    as_dict = Schedule.from_ranges([[1, 8, 2], [9, 30, 4], [31, 64, 0]], form="dict")
    config = json.loads(render_argv(as_dict, argv_by_k)[-1])
    assert config["num_speculative_tokens_per_batch_size"] == {"1-8": 2, "9-30": 4, "31-64": 0}


def test_argv_without_a_speculation_flag_or_with_a_broken_json_has_no_form():
    schedule = Schedule.from_ranges([[1, 8, 2]])
    assert render_argv(schedule, {2: ["vllm", "serve", "m"]}) is None
    assert render_argv(schedule, {2: ["vllm", "serve", "m", "--speculative-config", "{oops"]}) is None
    assert render_argv(schedule, {2: ["vllm", "serve", "m", "--speculative-config", "[1]"]}) is None


def test_both_forms_parse_to_the_same_ranges():
    listed = parse_value([[1, 16, 3], [64, 128, 2], [256, 4096, 0]])
    as_dict = parse_value({"1-16": 3, "64-128": 2, "256-4096": 0})  # the example of vLLM PR #32374
    assert listed.ranges == as_dict.ranges and (listed.form, as_dict.form) == ("list", "dict")
    assert as_dict.value() == {"1-16": 3, "64-128": 2, "256-4096": 0}
    assert listed.top_k == 3


@pytest.mark.parametrize("value, message", [
    ({"1:16": 3}, "range key '1:16' is not 'lo-hi'"),
    ("1-16", "must be a non-empty list"),
    ([[1, 16]], "3-item sequence"),
    ([[1, 16, "x"]], "'x' is not an integer"),
    ([[1, 16, 2.5]], "2.5 is not an integer"),
])
def test_shapes_vllm_cannot_read_are_refused(value, message):
    with pytest.raises(ScheduleError, match=message):
        parse_value(value)


@pytest.mark.parametrize("ranges, message", [
    ([], "must not be empty"),
    ([[0, 4, 2]], r"range \(0, 4\) must be positive"),
    ([[5, 4, 2]], r"start must be <= end for \(5, 4, 2\)"),
    ([[1, 4, -1]], "values must be >= 0"),
    ([[1, 8, 2], [8, 16, 1]], "non-overlapping"),
    ([[2, 8, 2]], "first batch-size range must start at 1"),
])
def test_vllm_rules_refuse_what_vllm_refuses(ranges, message):
    with pytest.raises(ScheduleError, match=message):
        check(Schedule.from_ranges(ranges))


def test_gaps_carry_the_previous_k_and_k_is_clamped_like_vllm():
    # vLLM's own docstring example: [(1, 16, 3), (32, 128, 2)] maps 17-31 to K=3
    schedule = check(Schedule.from_ranges([[32, 128, 2], [1, 16, 3]]))
    assert schedule.ranges[0] == BatchRange(1, 16, 3)
    table = lookup_table(schedule, max_batch_size=200, max_k=4)
    assert table[0] == 0 and table[1] == table[16] == table[17] == table[31] == 3
    assert table[32] == table[128] == table[129] == table[200] == 2  # the tail keeps the last K
    assert lookup_table(schedule, 20, max_k=2)[1:] == [2] * 20      # K above num_speculative_tokens: clamped
    assert [schedule.k_for(b) for b in (1, 20, 500)] == [3, 3, 2]


def test_lookup_refuses_a_schedule_vllm_would_not_start_with():
    with pytest.raises(ScheduleError, match="start at 1"):
        lookup_table(Schedule.from_ranges([[4, 8, 2]]), 16, 4)
    with pytest.raises(ScheduleError, match="num_speculative_tokens must be > 0"):
        lookup_table(Schedule.from_ranges([[1, 8, 2]]), 16, 0)
