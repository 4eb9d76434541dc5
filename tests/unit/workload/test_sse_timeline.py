"""Per-request timing from parsed SSE chunks: TTFT, per-token ITL spreading, TPOT, token counts, verdicts."""

from __future__ import annotations


import pytest

from lookahead_runner.workload.sse import DONE, Chunk, Usage, parse_sse_line
from lookahead_runner.workload.timeline import TokenTimeline, judge, percentile



def _text(text: str, completion_tokens: int | None = None, prompt_tokens: int = 16) -> Chunk:
    usage = None if completion_tokens is None else Usage(prompt_tokens, completion_tokens)
    return Chunk(text=text, has_choices=True, usage=usage)


def _usage_chunk(completion_tokens: int, prompt_tokens: int = 16) -> Chunk:
    return Chunk(usage=Usage(prompt_tokens, completion_tokens))


def test_percentile_interpolates_like_numpy():
    assert percentile([], 50) is None
    assert percentile([5.0], 99) == 5.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == pytest.approx(2.5)
    assert percentile([1.0, 2.0, 3.0, 4.0], 99) == pytest.approx(3.97)
    assert percentile([4.0, 1.0, 3.0, 2.0], 0) == 1.0


def test_speculative_chunks_spread_their_gap_over_their_tokens():
    # first token at 50 ms, then chunks of 3 tokens every 30 ms, then 2 (capped by max_tokens = 9)
    timeline = TokenTimeline()
    timeline.add(_text("a", 1), 0.050)
    timeline.add(_text("b c d", 4), 0.080)
    timeline.add(_text("e f g", 7), 0.110)
    timeline.add(_text("h i", 9), 0.130)
    timeline.add(_usage_chunk(9), 0.131)
    timeline.add(DONE, 0.132)
    result = timeline.result(0.132)

    assert result.ttft_ms == pytest.approx(50.0)
    assert result.itl_samples_s == pytest.approx([0.010] * 6 + [0.010] * 2)
    assert sum(result.itl_samples_s) == pytest.approx(0.130 - 0.050)
    assert result.itl_ms(50) == pytest.approx(10.0)
    assert result.output_tokens == 9 and result.usage_seen and result.chunks == 4
    assert result.prompt_tokens == 16
    assert result.tpot_ms == pytest.approx((132.0 - 50.0) / 8)
    assert judge(result, 9) is None


def test_tokens_arriving_with_the_first_token_get_no_itl_sample():
    timeline = TokenTimeline()
    timeline.add(_text("a b", 2), 0.040)
    timeline.add(_text("c", 3), 0.060)
    timeline.add(DONE, 0.061)
    result = timeline.result(0.061)
    assert result.itl_samples_s == pytest.approx([0.020])
    assert result.output_tokens == 3


def test_ttft_waits_for_text_and_zero_token_chunks_do_not_reset_the_gap():
    timeline = TokenTimeline()
    timeline.add(_text("", 0), 0.010)  # role/empty chunk before any token
    timeline.add(_text("x", 1), 0.050)
    timeline.add(_text("", 1), 0.055)  # no new token
    timeline.add(_text("y", 2), 0.070)
    result = timeline.result(0.071)
    assert result.ttft_ms == pytest.approx(50.0)
    assert result.itl_samples_s == pytest.approx([0.020])
    assert result.chunks == 4


def test_fixture_stream_without_per_chunk_usage_counts_one_token_per_text_chunk(fixtures_dir):
    timeline = TokenTimeline()
    arrival_s = 0.100
    for line in (fixtures_dir / "stream-sample.txt").read_bytes().splitlines(keepends=True):
        chunk = parse_sse_line(line)
        if chunk is not None:
            timeline.add(chunk, arrival_s)
            arrival_s += 0.010
    result = timeline.result(arrival_s)

    assert result.ttft_ms == pytest.approx(100.0)
    assert result.chunks == 3
    assert result.output_tokens == 8  # from the final usage chunk, not the 3 chunks
    assert result.prompt_tokens == 8
    assert len(result.itl_samples_s) == 2  # fallback: one token per chunk without per-chunk usage
    assert result.done and judge(result, 8) is None
    assert judge(result, 16) == "short output (completion_tokens != 16)"


def test_verdicts_for_broken_streams():
    no_done = TokenTimeline()
    no_done.add(_text("a", 1), 0.01)
    assert judge(no_done.result(0.02), 1) == "disconnect mid-stream"

    no_usage = TokenTimeline()
    no_usage.add(_text("a"), 0.01)
    no_usage.add(DONE, 0.02)
    result = no_usage.result(0.02)
    assert not result.usage_seen and result.output_tokens == 1  # client count stands in
    assert judge(result, 1) == "missing usage"

    no_text = TokenTimeline()
    no_text.add(_usage_chunk(0), 0.01)
    no_text.add(DONE, 0.02)
    assert judge(no_text.result(0.02), 0) == "no token received"


def test_running_usage_stands_in_when_the_final_usage_chunk_is_missing():
    timeline = TokenTimeline()
    timeline.add(_text("a", 1), 0.01)
    timeline.add(_text("b c", 3), 0.02)
    timeline.add(DONE, 0.03)
    result = timeline.result(0.03)
    assert result.usage_seen and result.output_tokens == 3


def test_tpot_needs_two_tokens():
    timeline = TokenTimeline()
    timeline.add(_text("a", 1), 0.01)
    timeline.add(DONE, 0.02)
    assert timeline.result(0.02).tpot_ms is None


def test_every_response_usage_is_checked_against_both_lengths():
    def stream(prompt_tokens, completion_tokens):
        timeline = TokenTimeline()
        timeline.add(_text("a", 1, prompt_tokens), 0.01)
        timeline.add(_text("b", completion_tokens, prompt_tokens), 0.02)
        timeline.add(_usage_chunk(completion_tokens, prompt_tokens), 0.021)
        timeline.add(DONE, 0.022)
        return timeline.result(0.022)

    assert judge(stream(16, 2), 2, 16) is None
    assert judge(stream(17, 2), 2, 16) == "wrong prompt length (prompt_tokens != 16)"
    assert judge(stream(16, 3), 2, 16) == "short output (completion_tokens != 2)"
    assert judge(stream(17, 2), 2) is None  # no expectation, no check

    no_prompt_count = TokenTimeline()
    no_prompt_count.add(Chunk(text="a", has_choices=True, usage=Usage(None, 1)), 0.01)
    no_prompt_count.add(DONE, 0.02)
    assert judge(no_prompt_count.result(0.02), 1, 16) == "missing usage"
