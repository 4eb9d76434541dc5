"""The simulator knows the content (issue 28): a greedy request's end of sequence and text follow from its prompt,
the same for every K; a scenario's acceptance per category; vLLM 0.32's --per-request-spec-decode-metrics."""
from __future__ import annotations

import json

import pytest
from unit.sim.test_sim_app import completion, run_with_server, sse_events
from unit.sim.test_sim_model import drain, spec_cfg

from lookahead_runner.sim.cli import ConfigError, parse_serve
from lookahead_runner.sim.model import EngineModel
from lookahead_runner.sim.profiles import get_profile
from lookahead_runner.sim.protocol import content_key
from lookahead_runner.sim.scenarios import category_alphas, get_scenario, with_overrides

ROOMY = get_scenario("roomy-kv")


def lengths_at(k: int, keys: list[int], max_tokens: int = 300) -> list[int]:
    model = EngineModel(ROOMY, spec_cfg(k, seed=k + 11))
    for i, key in enumerate(keys):
        model.add_request(f"r{i}", 20, max_tokens, content_key=key)
    emitted = drain(model)
    return [emitted[f"r{i}"] for i in range(len(keys))]


def test_a_greedy_requests_natural_end_follows_from_its_content_for_every_k():
    keys = [content_key(f"prompt number {i}") for i in range(40)]
    baseline = lengths_at(0, keys)
    assert lengths_at(2, keys) == lengths_at(5, keys) == baseline
    assert len(set(baseline)) > 10 and max(baseline) <= 300     # lengths differ between contents, capped
    assert lengths_at(3, keys, max_tokens=40) == [min(n, 40) for n in baseline]


def test_acceptance_per_category_from_the_contents_words():
    scenario = with_overrides(ROOMY, {"category_alpha": "code:0.9,chat:0.3"})
    assert scenario.category_alpha == (("code", 0.9), ("chat", 0.3))
    assert scenario.category_of("Write code: a chat bot".split()) == "code"
    assert scenario.category_of("Let's chat, no code".split()) == "chat"
    assert scenario.category_of("summarise this".split()) == ""
    assert scenario.alpha_at(0.0, category="code") == 0.9 and scenario.alpha_at(0.0, category="") == ROOMY.alpha
    assert scenario.alpha_at(1.0, category="chat") == pytest.approx(0.15)
    model = EngineModel(scenario, spec_cfg(4, seed=3))
    for i in range(200):
        model.add_request(f"c{i}", 20, 60, ignore_eos=True, category="code")
        model.add_request(f"h{i}", 20, 60, ignore_eos=True, category="chat")
    seqs = {rid: seq for rid, seq in model.by_id.items()}
    drain(model)

    def pooled(prefix):
        chosen = [s for rid, s in seqs.items() if rid.startswith(prefix)]
        return 1 + sum(s.accepted for s in chosen) / sum(s.spec_steps for s in chosen)

    truth = {a: sum(a ** i for i in range(5)) for a in (0.9, 0.3)}   # 1 + E[accepted], K = 4
    assert pooled("c") == pytest.approx(truth[0.9], rel=0.05) and pooled("h") == pytest.approx(truth[0.3], rel=0.05)
    with pytest.raises(ValueError, match="WORD:ALPHA pairs"):
        category_alphas("code=0.9")


def test_the_per_request_metrics_flag_as_vllm_032_has_it():
    profile = get_profile("0.32.0")
    spec = ["--speculative-config", json.dumps({"method": "draft_model", "model": "d", "num_speculative_tokens": 3})]
    assert parse_serve(["m", *spec], profile).spec_metrics_level == "none"
    assert parse_serve(["m", *spec, "--per-request-spec-decode-metrics", "summary"], profile).spec_metrics_level \
        == "summary"
    with pytest.raises(ConfigError, match="requires speculative decoding to be enabled"):
        parse_serve(["m", "--per-request-spec-decode-metrics", "summary"], profile)


@pytest.mark.parametrize("level", ["none", "summary", "detailed"])
def test_the_final_usage_chunk_carries_the_metrics_the_level_asks(level):
    async def check(session, sim):
        body = completion(20, stream=True, stream_options={"include_usage": True})
        async with session.post("/v1/completions", json=body) as r:
            events = await sse_events(r)
        final = events[-2]
        if level == "none":
            assert "metrics" not in final
            return
        spec = final["metrics"]["speculative_decoding"]
        assert spec["num_accepted_draft_tokens"] == sum(j * n for j, n in enumerate(spec["acceptance_histogram"]))
        assert spec["mean_acceptance_length"] == 1 + spec["num_accepted_draft_tokens"] / spec["num_spec_steps"]
        assert ("per_step_accepted" in spec) == (level == "detailed")
        if level == "detailed":
            assert sum(spec["per_step_accepted"]) == spec["num_accepted_draft_tokens"]
            assert spec["per_step_drafted"] == [4] * spec["num_spec_steps"]

    run_with_server(check, spec_metrics_level=level)


def test_greedy_text_is_the_contents_and_natural_requests_stop():
    texts = []

    async def check(session, sim):
        for _ in range(2):
            body = {**completion(300, stream=True), "prompt": "the same prompt every time"}
            body.pop("min_tokens", None), body.pop("ignore_eos", None)
            async with session.post("/v1/completions", json=body) as r:
                events = await sse_events(r)
            content = [e for e in events[:-1] if isinstance(e, dict) and e.get("choices")]
            texts.append(("".join(c["choices"][0]["text"] for c in content), content[-1]["choices"][0]["finish_reason"]))

    run_with_server(check)
    assert texts[0] == texts[1]
    assert texts[0][1] in ("stop", "length") and len(texts[0][0].split()) <= 300
