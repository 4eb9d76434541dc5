"""The simulator's chat endpoint (issue 28): /v1/chat/completions streamed in vLLM 0.32's shape (a role-only
opening chunk, then content deltas, then usage; tests/fixtures/chat-stream-sample.txt is the real one), /tokenize
with `messages` counting the simulator's chat template, and a drafter whose acceptance depends on the format."""
from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from unit.sim.test_sim_app import MODEL, run_with_server, sse_events

from lookahead_runner.sim.closed_loop import best_k
from lookahead_runner.sim.kv_pool import EngineConfig
from lookahead_runner.sim.model import EngineModel
from lookahead_runner.sim.protocol import (CHAT_GENERATION_PROMPT_TOKENS, CHAT_NO_THINKING_TOKENS,
                                           CHAT_TOKENS_PER_MESSAGE)
from lookahead_runner.sim.scenarios import get_scenario, with_overrides

REAL = [json.loads(line[6:]) for line in
        (Path(__file__).resolve().parents[2] / "fixtures" / "chat-stream-sample.txt").read_text().splitlines()
        if line.startswith("data: {")]
USAGE = {"include_usage": True, "continuous_usage_stats": True}


def chat(max_tokens: int = 12, content: str = "one two three four five", **extra) -> dict:
    return {"model": MODEL, "messages": [{"role": "user", "content": content}], "max_completion_tokens": max_tokens,
            "min_tokens": max_tokens, "ignore_eos": True, "temperature": 0.0, **extra}


def shape(event: dict) -> tuple:
    """The keys in order, at each level a client reads by position."""
    choices = event["choices"]
    return (list(event), [list(c) for c in choices], [list(c["delta"]) for c in choices],
            list(event.get("usage") or {}))


def test_chat_stream_has_the_real_shape_a_role_chunk_first_and_exactly_max_tokens():
    async def check(session, sim):
        async with session.post("/v1/chat/completions", json=chat(12, stream=True, stream_options=USAGE)) as r:
            assert r.status == 200
            events = await sse_events(r)
        assert events[-1] == "[DONE]"
        opening, content, final = events[0], events[1:-2], events[-2]
        assert shape(opening) == shape(REAL[0]) and opening["choices"][0]["delta"] == {"role": "assistant",
                                                                                        "content": ""}
        assert opening["usage"]["completion_tokens"] == 0
        assert [shape(c) for c in content[:-1]] == [shape(REAL[1])] * (len(content) - 1)
        assert shape(content[-1]) == shape(REAL[-2]) and content[-1]["choices"][0]["finish_reason"] == "length"
        assert list(final)[:6] == list(REAL[-1])[:6] and final["choices"] == []
        assert {e["object"] for e in events[:-1]} == {"chat.completion.chunk"} and len({e["id"] for e in events[:-1]}) == 1
        tokens = sum(len(c["choices"][0]["delta"]["content"].split()) for c in content)
        prompt = CHAT_TOKENS_PER_MESSAGE + 5 + CHAT_GENERATION_PROMPT_TOKENS
        assert tokens == 12 and final["usage"] == {"prompt_tokens": prompt, "total_tokens": prompt + 12,
                                                   "completion_tokens": 12}
        assert [c["usage"]["completion_tokens"] for c in content][-1] == 12
        assert final["metrics"]["speculative_decoding"]["num_spec_tokens"] == 4

    run_with_server(check)


def test_tokenize_with_messages_counts_the_template_as_the_chat_request_does():
    async def check(session, sim):
        for kwargs, extra in ((None, 0), ({"enable_thinking": False}, CHAT_NO_THINKING_TOKENS),
                              ({"enable_thinking": True}, 0)):
            body = {"model": MODEL, "messages": [{"role": "user", "content": "a b c"}],
                    **({"chat_template_kwargs": kwargs} if kwargs else {})}
            async with session.post("/tokenize", json=body) as r:
                count = (await r.json())["count"]
            assert count == CHAT_TOKENS_PER_MESSAGE + 3 + CHAT_GENERATION_PROMPT_TOKENS + extra
            async with session.post("/v1/chat/completions", json={**chat(2, "a b c"), **body}) as r:
                assert (await r.json())["usage"]["prompt_tokens"] == count
        async with session.post("/tokenize", json={"messages": [{"role": "user", "content": "a"}],
                                                   "add_generation_prompt": False}) as r:
            assert (await r.json())["count"] == CHAT_TOKENS_PER_MESSAGE + 1
        async with session.post("/v1/chat/completions", json={"model": MODEL, "messages": [{"content": "x"}]}) as r:
            assert r.status == 400 and "role" in (await r.json())["error"]["message"]

    run_with_server(check, k=0)


def test_without_continuous_usage_the_role_chunk_carries_no_usage():
    async def check(session, sim):
        async with session.post("/v1/chat/completions", json=chat(3, stream=True)) as r:
            events = await sse_events(r)
        assert "usage" not in events[0] and events[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
        assert len(events) == 1 + 3 + 1  # role, 3 tokens (K = 0), [DONE]

    run_with_server(check, k=0)


def test_chat_drafter_accepts_more_on_chat_requests_and_turns_the_closed_loop_answer():
    scenario = get_scenario("chat-drafter")
    assert scenario.alpha_at(0.0, chat=True) == 0.85 and scenario.alpha_at(0.0) == 0.3
    assert get_scenario("tight-kv").alpha_at(0.0, chat=True) == get_scenario("tight-kv").alpha  # unset: alpha
    # a category's own acceptance wins over the chat format's (request sets of chat messages with categories)
    both = with_overrides(scenario, {"category_alpha": "code:0.6"})
    assert both.alpha_at(0.0, chat=True, category="code") == 0.6
    assert both.alpha_at(0.0, chat=True, category="poem") == 0.85 and both.alpha_at(0.0, category="poem") == 0.3
    cfg = EngineConfig(num_speculative_tokens=4, method="draft_model", lookahead_tokens=4)
    rates = {}
    for is_chat in (False, True):
        engine = EngineModel(replace(scenario, natural_stop_prob_per_token=0.0), cfg)
        for i in range(40):
            engine.add_request(f"r{i}", 64, 48, ignore_eos=True, chat=is_chat)
        while engine.has_work():
            engine.step()
        c = engine.counters
        rates[is_chat] = c.spec_accepted_tokens / c.spec_draft_tokens
    assert rates[True] > 2 * rates[False]
    args = ["--max-num-seqs", "64", "--sim-scenario", "chat-drafter"]
    assert best_k(args, (0, 4), 64, 24, 0.0, 12, chat=True)[0] == 4
    assert best_k(args, (0, 4), 64, 24, 0.0, 12, chat=False)[0] == 0


NO_TEMPLATE = json.loads((Path(__file__).resolve().parents[2] / "fixtures" /
                          "tokenize-no-chat-template-400.json").read_text())  # vLLM 0.32's answer, captured


def test_without_a_chat_template_chat_and_tokenize_messages_answer_as_vllm_does_and_raw_prompts_still_work():
    async def check(session, sim):
        for path, body in (("/tokenize", {"model": MODEL, "messages": chat()["messages"]}),
                           ("/v1/chat/completions", chat()), ("/v1/chat/completions", chat(stream=True))):
            async with session.post(path, json=body) as r:
                assert r.status == 400 and await r.json() == NO_TEMPLATE, path
        async with session.post("/tokenize", json={"model": MODEL, "prompt": "one two"}) as r:
            assert r.status == 200
        async with session.post("/v1/completions", json={"model": MODEL, "prompt": "one two", "max_tokens": 2}) as r:
            assert r.status == 200

    run_with_server(check, faults=["no-chat-template"])
