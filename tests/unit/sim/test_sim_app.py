"""The simulator's HTTP routes, in-process (aiohttp test server on 127.0.0.1, no subprocess)."""
from __future__ import annotations

import asyncio
import json
from dataclasses import replace

import aiohttp
import pytest
from aiohttp.test_utils import TestServer

from lookahead_runner.sim.app import SimServer
from lookahead_runner.sim.faults import parse_faults
from lookahead_runner.sim.kv_pool import EngineConfig
from lookahead_runner.sim.model import EngineModel
from lookahead_runner.sim.profiles import get_profile
from lookahead_runner.sim.scenarios import get_scenario

MODEL = "sim/llama-3-8b"
FAST = replace(get_scenario("tight-kv"), fixed_ms=1.0, weight_read_ms=2.0, draft_step_ms=0.1)
TIMEOUT = aiohttp.ClientTimeout(total=10)


def run_with_server(check, k: int = 4, faults: list[str] | None = None, stream_interval: int = 1,
                    version: str = "0.32.0", spec_metrics_level: str = "summary") -> None:
    async def main():
        cfg = EngineConfig(num_speculative_tokens=k, method="draft_model" if k else "", lookahead_tokens=k)
        sim = SimServer(EngineModel(FAST, cfg), get_profile(version), MODEL, parse_faults(faults), lambda *a: None,
                        stream_interval=stream_interval, spec_metrics_level=spec_metrics_level)
        engine = asyncio.create_task(sim.engine_loop())
        server = TestServer(sim.build_app(), host="127.0.0.1", port=0)
        await server.start_server()
        try:
            async with aiohttp.ClientSession(str(server.make_url("")), timeout=TIMEOUT) as session:
                await check(session, sim)
        finally:
            engine.cancel()
            await server.close()

    asyncio.run(asyncio.wait_for(main(), 20))


async def sse_events(response: aiohttp.ClientResponse) -> list:
    events = []
    async for raw in response.content:
        line = raw.decode().strip()
        if line.startswith("data: "):
            payload = line[len("data: "):]
            events.append(payload if payload == "[DONE]" else json.loads(payload))
    return events


def completion(max_tokens: int = 20, **extra) -> dict:
    return {"model": MODEL, "prompt": "one two three four five", "max_tokens": max_tokens, "ignore_eos": True,
            "temperature": 0.0, **extra}


def test_stream_has_the_recorded_shape_and_exactly_max_tokens(fixtures_dir):
    real = [json.loads(line[6:]) for line in (fixtures_dir / "stream-sample.txt").read_text().splitlines()
            if line.startswith("data: {")]

    async def check(session, sim):
        body = completion(37, stream=True, stream_options={"include_usage": True})
        async with session.post("/v1/completions", json=body) as r:
            assert r.status == 200 and r.headers["Content-Type"].startswith("text/event-stream")
            events = await sse_events(r)
        assert events[-1] == "[DONE]"
        content, final = events[:-2], events[-2]
        assert list(content[0]) == list(real[0]) and list(content[0]["choices"][0]) == list(real[0]["choices"][0])
        assert set(final) == set(real[-1]) and final["choices"] == []
        assert [c["choices"][0]["finish_reason"] for c in content] == [None] * (len(content) - 1) + ["length"]
        tokens = sum(len(c["choices"][0]["text"].split()) for c in content)
        assert tokens == 37 and final["usage"] == {"prompt_tokens": 5, "total_tokens": 42, "completion_tokens": 37}
        assert len(content) < 37                      # speculation: several tokens per chunk
        spec = final["metrics"]["speculative_decoding"]
        assert spec["num_spec_tokens"] == 4 and len(spec["acceptance_histogram"]) == 5
        assert len({c["id"] for c in content + [final]}) == 1

    run_with_server(check)


def test_continuous_usage_and_no_spec_metrics_without_speculation():
    async def check(session, sim):
        body = completion(6, stream=True, stream_options={"include_usage": True, "continuous_usage_stats": True})
        async with session.post("/v1/completions", json=body) as r:
            events = await sse_events(r)
        content = events[:-2]
        assert [c["usage"]["completion_tokens"] for c in content] == [1, 2, 3, 4, 5, 6]   # K = 0: one per step
        assert "metrics" not in events[-2]

    run_with_server(check, k=0)


def test_stream_interval_buffers_tokens_after_the_first():
    async def check(session, sim):
        async with session.post("/v1/completions", json=completion(10, stream=True)) as r:
            events = await sse_events(r)
        assert [len(e["choices"][0]["text"].split()) for e in events[:-1]] == [1, 4, 4, 1]

    run_with_server(check, k=0, stream_interval=4)


def test_non_stream_completion_and_token_id_prompt():
    async def check(session, sim):
        async with session.post("/v1/completions", json=completion(9, prompt=[5, 6, 7])) as r:
            body = await r.json()
        assert body["usage"]["prompt_tokens"] == 3 and body["usage"]["completion_tokens"] == 9
        assert len(body["choices"][0]["text"].split()) == 9 and body["choices"][0]["finish_reason"] == "length"

    run_with_server(check)


def test_errors_look_like_vllm():
    async def check(session, sim):
        async with session.post("/v1/completions", json=completion(10, prompt="w " * 5000)) as r:
            assert r.status == 400
            error = (await r.json())["error"]
        assert error["type"] == "BadRequestError" and error["code"] == 400
        assert "maximum context length is 4096" in error["message"]
        async with session.post("/v1/completions", json=completion(10, model="other")) as r:
            assert r.status == 404
        async with session.post("/v1/completions", data=b"{not json") as r:
            assert r.status == 400
        async with session.post("/v1/completions", json=completion(10, stream_options={"include_usage": True})) as r:
            assert r.status == 400

    run_with_server(check)


def test_info_routes():
    async def check(session, sim):
        async with session.get("/health") as r:
            assert r.status == 200
        async with session.get("/version") as r:
            assert await r.json() == {"version": "0.32.0"}
        async with session.get("/v1/models") as r:
            assert (await r.json())["data"][0]["id"] == MODEL
        async with session.post("/tokenize", json={"prompt": "a b c d"}) as r:
            body = await r.json()
        assert body["count"] == 4 and len(body["tokens"]) == 4 and body["max_model_len"] == 4096
        async with session.get("/metrics") as r:
            assert "vllm:num_requests_running" in await r.text()

    run_with_server(check)


def test_a_dropped_client_frees_its_kv_blocks():
    async def check(session, sim):
        body = completion(400, stream=True)
        async with session.post("/v1/completions", json=body) as r:
            await r.content.readline()
            assert sim.model.num_running == 1
        for _ in range(200):
            if not sim.model.has_work():
                break
            await asyncio.sleep(0.01)
        assert sim.model.free_blocks == sim.model.num_blocks
        assert sim.model.counters.finished["abort"] == 1

    run_with_server(check)


def test_fault_http_500_and_short_stream():
    async def check(session, sim):
        async with session.post("/v1/completions", json=completion(4)) as r:
            assert r.status == 500

    run_with_server(check, faults=["http-500=1"])

    async def short(session, sim):
        async with session.post("/v1/completions", json=completion(40, stream=True,
                                                                   stream_options={"include_usage": True})) as r:
            events = await sse_events(r)
        assert events[-1] == "[DONE]" and all("usage" not in e for e in events[:-1])
        assert sum(len(e["choices"][0]["text"].split()) for e in events[:-1]) < 40

    run_with_server(short, faults=["short-stream=1"])


def test_fault_http_429_and_an_unresponsive_server():
    async def limited(session, sim):
        async with session.post("/v1/completions", json=completion(4)) as r:
            assert r.status == 429 and (await r.json())["error"]["code"] == 429

    run_with_server(limited, faults=["http-429=1"])

    async def mute(session, sim):
        sim.unresponsive = True
        for path in ("/health", "/metrics"):
            with pytest.raises(asyncio.TimeoutError):
                async with session.get(path, timeout=aiohttp.ClientTimeout(total=0.3)):
                    pass

    run_with_server(mute)


def test_schedule_trace_only_when_asked(monkeypatch):
    async def check(session, sim):
        async with session.post("/v1/completions", json=completion(12, stream=True)) as r:
            events = await sse_events(r)
        content = events[:-1]
        if not sim.trace:
            assert all("sim_t" not in e for e in content)
            return
        due = [e["sim_t"] for e in content]
        assert due == sorted(due) and len(set(due)) == len(due)
        assert all(e["sim_w"] >= e["sim_t"] for e in content)      # never before the model's time

    run_with_server(check)
    monkeypatch.setenv("LOOKAHEAD_SIM_TRACE_SCHEDULE", "1")
    run_with_server(check)


def test_older_generations_answer_in_their_own_shapes():
    async def check(session, sim):
        async with session.post("/v1/completions", json=completion(10, prompt="w " * 5000)) as r:
            body = await r.json()
        assert body["object"] == "error" and body["code"] == 400 and "error" not in body
        body = completion(9, stream=True, stream_options={"include_usage": True})
        async with session.post("/v1/completions", json=body) as r:
            events = await sse_events(r)
        final = events[-2]
        assert final["usage"]["completion_tokens"] == 9 and "metrics" not in final
        assert "system_fingerprint" not in final
        async with session.get("/version") as r:
            assert (await r.json())["version"] == sim.profile.version

    run_with_server(check, version="0.6.6")
    run_with_server(check, version="0.10.2")


def test_fault_malformed_stream_carries_one_event_that_is_not_json():
    async def check(session, sim):
        async with session.post("/v1/completions", json=completion(12, stream=True)) as r:
            lines = [raw.decode().strip() async for raw in r.content]
        payloads = [line[len("data: "):] for line in lines if line.startswith("data: ") and line != "data: [DONE]"]
        bad = []
        for payload in payloads:
            try:
                json.loads(payload)
            except json.JSONDecodeError:
                bad.append(payload)
        assert len(bad) == 1 and "data: [DONE]" in lines

    run_with_server(check, faults=["malformed-stream=1"])
