"""A minimal vLLM-shaped streaming server with known timing, for the locustfile's e2e test.

    python tests/e2e/stub_vllm.py [--port 0] [--first-token-ms 50] [--chunk-interval-ms 10]
        [--tokens-per-chunk 3] [--api-key KEY] [--no-tokenize]

Binds 127.0.0.1 (port 0: the kernel picks a free one) and prints ``LISTENING <port>`` once serving.
/v1/completions streams like vLLM 0.32 (fixtures stream-sample.txt): the first chunk carries one token,
later chunks `tokens_per_chunk` (as under speculative decoding), usage on every chunk when
``continuous_usage_stats`` is set, a ``"choices": []`` usage chunk when ``include_usage`` is set,
then ``data: [DONE]``. Only the fields the scenario reads are honoured.
POST /tokenize counts one token per whitespace-separated word plus one BOS token (as a BPE model's
tokenizer adds one; a text prompt to /v1/completions is counted the same way), unless
``--no-tokenize`` (then 404, like a server without the route). With ``--api-key`` every route but
/health answers 401 without ``Authorization: Bearer KEY``; every request's headers are checked.
/v1/chat/completions streams the same tokens as content deltas (JSON with spaces: the client's full parse),
after a role-only chunk written at once, before the first token's wait (as a queued or prefilling request's
would be): a client that took it for a token would see a TTFT near 0. A chat prompt counts CHAT_FRAME_TOKENS
plus its words, in /tokenize with ``messages`` too.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time

from aiohttp import web

MODEL = "stub-model"


def _chunk(request_id: str, text: str | None, finish: str | None, usage: dict | None, chat: bool = False,
           role: bool = False) -> bytes:
    body: dict = {"id": request_id, "object": "chat.completion.chunk" if chat else "text_completion",
                  "created": int(time.time()), "model": MODEL}
    choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish, "stop_reason": None}
    if chat:
        del choice["text"]
        choice["delta"] = {"role": "assistant", "content": ""} if role else {"content": text}
    body["choices"] = [] if text is None else [choice]
    if usage is not None:
        body["usage"] = usage
    return b"data: " + json.dumps(body).encode() + b"\n\n"


BOS_TOKENS = 1
CHAT_FRAME_TOKENS = 4


def _count_text(text: str) -> int:
    return BOS_TOKENS + len(text.split())


def _count_chat(messages: object) -> int:
    (message,) = messages  # the scenario sends one user message
    return CHAT_FRAME_TOKENS + len(message["content"].split())


def make_app(first_token_s: float, chunk_interval_s: float, tokens_per_chunk: int, api_key: str = "",
             tokenize: bool = True) -> web.Application:
    counter = iter(range(1, 10**9))

    @web.middleware
    async def auth(request: web.Request, handler):
        if api_key and request.path != "/health" and request.headers.get("Authorization") != f"Bearer {api_key}":
            return web.json_response({"error": "Unauthorized"}, status=401)
        return await handler(request)

    async def tokenize_route(request: web.Request) -> web.Response:
        body = await request.json()
        if "messages" in body:
            count = _count_chat(body["messages"])
            return web.json_response({"count": count, "max_model_len": 4096, "tokens": list(range(count))})
        prompt = body.get("prompt")
        if not isinstance(prompt, str):
            return web.json_response({"error": {"message": "prompt must be a string"}}, status=400)
        count = _count_text(prompt)
        return web.json_response({"count": count, "max_model_len": 4096, "tokens": list(range(count))})

    async def completions(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        chat = request.path.endswith("/chat/completions")
        prompt = body.get("prompt", [])
        if chat:
            prompt_tokens = _count_chat(body.get("messages"))
        else:
            prompt_tokens = len(prompt) if isinstance(prompt, list) else _count_text(str(prompt))
        if body.get("model") != MODEL:
            error = {"message": f"model {body.get('model')!r} not found"}
            return web.json_response({"error": error}, status=404)
        max_tokens = int(body.get("max_completion_tokens" if chat else "max_tokens", 16))
        options = body.get("stream_options") or {}
        continuous = bool(options.get("continuous_usage_stats"))
        request_id = f"cmpl-stub{next(counter)}"
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        sent = 0
        if chat:
            zero = {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens, "completion_tokens": 0}
            await response.write(_chunk(request_id, "", None, zero if continuous else None, chat=True, role=True))
        await asyncio.sleep(first_token_s)
        while sent < max_tokens:
            n = 1 if sent == 0 else min(tokens_per_chunk, max_tokens - sent)
            sent += n
            usage = {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens + sent, "completion_tokens": sent}
            finish = "length" if sent == max_tokens else None
            await response.write(_chunk(request_id, " tok" * n, finish, usage if continuous else None, chat))
            if sent < max_tokens:
                await asyncio.sleep(chunk_interval_s)
        if options.get("include_usage"):
            usage = {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens + sent, "completion_tokens": sent}
            await response.write(_chunk(request_id, None, None, usage, chat))
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response

    async def health(_request: web.Request) -> web.Response:
        return web.Response(text="")

    async def models(_request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": MODEL, "object": "model"}]})

    app = web.Application(middlewares=[auth])
    app.add_routes([web.post("/v1/completions", completions), web.post("/v1/chat/completions", completions),
                    web.get("/health", health),
                    web.get("/v1/models", models)])
    if tokenize:
        app.add_routes([web.post("/tokenize", tokenize_route)])
    return app


async def _serve(args: argparse.Namespace) -> None:
    app = make_app(args.first_token_ms / 1000.0, args.chunk_interval_ms / 1000.0, args.tokens_per_chunk,
                   args.api_key, not args.no_tokenize)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", args.port)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    print(f"LISTENING {port}", flush=True)
    await asyncio.Event().wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--first-token-ms", type=float, default=50.0)
    parser.add_argument("--chunk-interval-ms", type=float, default=10.0)
    parser.add_argument("--tokens-per-chunk", type=int, default=3)
    parser.add_argument("--api-key", default="")
    parser.add_argument("--no-tokenize", action="store_true")
    asyncio.run(_serve(parser.parse_args()))


if __name__ == "__main__":
    main()
