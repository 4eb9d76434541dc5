"""OpenAI/vLLM wire format of the simulator: request parsing and response bodies. Pure.

The simulator's tokenizer is one token per whitespace-separated word (a list of ints is that
many tokens); generated text is one short word per token, each with a leading space, so a
client that counts words counts tokens. Chunk shapes follow fixtures/stream-sample.txt.

The chat endpoint renders `messages` with the simulator's own chat template, ChatML-like, in tokens:
each message is CHAT_TOKENS_PER_MESSAGE tokens (<|im_start|>, the role, <|im_end|>) plus its content's
words; add_generation_prompt (the default, as in vLLM) adds CHAT_GENERATION_PROMPT_TOKENS (<|im_start|>,
assistant), and chat_template_kwargs {"enable_thinking": false} adds CHAT_NO_THINKING_TOKENS more (an
empty <think></think> block, as Qwen3's template writes). /tokenize with `messages` counts the same way.
A streamed chat answer opens with a role-only chunk ({"role":"assistant","content":""}, no token), written
with the first token's chunk, then content deltas, as vLLM 0.32's chat serving does.
"""
from __future__ import annotations

import json
import zlib
from dataclasses import dataclass, replace

_WORDS = ("the", "a", "of", "sea", "light", "keeper", "night", "storm", "ship", "wave", "old", "bright",
          "lamp", "rock", "tide", "wind", "far", "cold", "grey", "salt", "star", "fog", "bell", "stone",
          "harbor", "cliff", "moon", "dark", "long", "quiet", "watch", "shore")
VOCAB_SIZE = 32000
CHAT_TOKENS_PER_MESSAGE = 3
CHAT_GENERATION_PROMPT_TOKENS = 2
CHAT_NO_THINKING_TOKENS = 2
# vLLM 0.32's answer (HTTP 400) to a chat request or a /tokenize with messages when the served model's tokenizer has
# no chat template and none was given (tests/fixtures/tokenize-no-chat-template-400.json)
NO_CHAT_TEMPLATE = ("As of transformers v4.44, default chat template is no longer allowed, so you must provide a chat "
                    "template if the tokenizer does not define one.")


class RequestError(ValueError):
    """A request vLLM would refuse: message, OpenAI error type, HTTP status."""

    def __init__(self, message: str, err_type: str = "BadRequestError", status: int = 400) -> None:
        super().__init__(message)
        self.message, self.err_type, self.status = message, err_type, status


@dataclass(frozen=True)
class CompletionParams:
    prompt_tokens: int
    max_tokens: int
    min_tokens: int
    ignore_eos: bool
    temperature: float
    stream: bool
    include_usage: bool
    continuous_usage: bool
    model: str | None
    chat: bool = False          # /v1/chat/completions: the prompt came through the chat template
    content_key: int = 0          # a hash of the prompt: its natural end and its output text follow from it
    content_words: tuple[str, ...] = ()   # the prompt's first words (its category, scenarios.category_of)


def token_ids(prompt: str | list) -> list[int]:
    if isinstance(prompt, list):
        return [int(t) for t in prompt]
    return [zlib.crc32(word.encode()) % VOCAB_SIZE for word in prompt.split()]


def detokenize(tokens: list[int]) -> str:
    return " ".join(_WORDS[t % len(_WORDS)] for t in tokens)


def words(offset: int, n: int) -> str:
    return "".join(" " + _WORDS[(offset + i) % len(_WORDS)] for i in range(n))


def _count_prompt(prompt: object) -> int:
    if isinstance(prompt, str):
        return len(prompt.split())
    if isinstance(prompt, list) and prompt and all(isinstance(t, int) and not isinstance(t, bool) for t in prompt):
        return len(prompt)
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], (str, list)):
        return _count_prompt(prompt[0])
    if isinstance(prompt, list) and len(prompt) > 1:
        raise RequestError("the simulator serves one prompt per request; send a string or a list of token ids")
    raise RequestError("prompt must be a string or a list of token ids")


def _number(body: dict, key: str, default, kind: type):
    value = body.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (kind is int and value != int(value)):
        raise RequestError(f"{key} must be a{'n integer' if kind is int else ' number'}, got {value!r}")
    return kind(value)


def _message_words(message: object) -> int:
    if not isinstance(message, dict) or not isinstance(message.get("role"), str):
        raise RequestError("each message must be an object with a string 'role'")
    content = message.get("content")
    if content is None or isinstance(content, str):
        return len((content or "").split())
    if isinstance(content, list) and all(isinstance(part, dict) and part.get("type") == "text"
                                         and isinstance(part.get("text"), str) for part in content):
        return sum(len(part["text"].split()) for part in content)
    raise RequestError("the simulator serves text messages only: 'content' must be a string or text parts")


def chat_prompt_tokens(messages: object, add_generation_prompt: bool = True,
                       template_kwargs: object = None) -> int:
    """The prompt tokens of `messages` under the simulator's chat template (module docstring)."""
    if not isinstance(messages, list) or not messages:
        raise RequestError("messages must be a non-empty list")
    if template_kwargs is not None and not isinstance(template_kwargs, dict):
        raise RequestError("chat_template_kwargs must be an object")
    tokens = sum(CHAT_TOKENS_PER_MESSAGE + _message_words(m) for m in messages)
    if add_generation_prompt:
        tokens += CHAT_GENERATION_PROMPT_TOKENS
        if (template_kwargs or {}).get("enable_thinking") is False:
            tokens += CHAT_NO_THINKING_TOKENS
    return tokens


def parse_completion(body: object, max_model_len: int) -> CompletionParams:
    """Validate a /v1/completions body the way vLLM does for the fields the simulator uses."""
    if not isinstance(body, dict):
        raise RequestError("request body must be a JSON object")
    if "prompt" not in body:
        raise RequestError("[{'type': 'missing', 'loc': ('body', 'prompt'), 'msg': 'Field required'}]")
    n_prompt = _count_prompt(body["prompt"])
    if n_prompt == 0:
        raise RequestError("Prompt cannot be empty")
    return _sampling(body, n_prompt, _number(body, "max_tokens", 16, int), max_model_len)


def parse_chat(body: object, max_model_len: int) -> CompletionParams:
    """Validate a /v1/chat/completions body: messages through the chat template; max_completion_tokens (or the
    deprecated max_tokens), by default all the context the prompt leaves, as vLLM does."""
    if not isinstance(body, dict):
        raise RequestError("request body must be a JSON object")
    if "messages" not in body:
        raise RequestError("[{'type': 'missing', 'loc': ('body', 'messages'), 'msg': 'Field required'}]")
    n_prompt = chat_prompt_tokens(body["messages"], bool(body.get("add_generation_prompt", True)),
                                  body.get("chat_template_kwargs"))
    limit = _number(body, "max_completion_tokens", None, int)
    if limit is None:
        limit = _number(body, "max_tokens", max(max_model_len - n_prompt, 1), int)
    return replace(_sampling(body, n_prompt, limit, max_model_len), chat=True)


def _sampling(body: dict, n_prompt: int, max_tokens: int, max_model_len: int) -> CompletionParams:
    """What the two endpoints share: lengths, sampling and stream options."""
    min_tokens = _number(body, "min_tokens", 0, int)
    temperature = _number(body, "temperature", 1.0, float)
    if _number(body, "n", 1, int) != 1:
        raise RequestError("the simulator supports n = 1 only")
    if max_tokens < 1:
        raise RequestError(f"max_tokens must be at least 1, got {max_tokens}.")
    if not 0 <= min_tokens <= max_tokens:
        raise RequestError(f"min_tokens must be less than or equal to max_tokens={max_tokens}, got {min_tokens}.")
    if temperature < 0:
        raise RequestError(f"temperature must be non-negative, got {temperature}.")
    if n_prompt >= max_model_len:
        raise RequestError(f"This model's maximum context length is {max_model_len} tokens. However, your "
                           f"request has {n_prompt} input tokens. Please reduce the length of the input messages.")
    if n_prompt + max_tokens > max_model_len:
        raise RequestError(f"This model's maximum context length is {max_model_len} tokens. However, you "
                           f"requested {max_tokens} output tokens and your prompt contains at least {n_prompt} "
                           f"input tokens, for a total of at least {n_prompt + max_tokens} tokens. Please reduce "
                           "the length of the input prompt or the number of requested output tokens.")
    stream = bool(body.get("stream", False))
    options = body.get("stream_options") or {}
    if body.get("stream_options") is not None and not stream:
        raise RequestError("Stream options can only be defined when `stream=True`.")
    if not isinstance(options, dict):
        raise RequestError("stream_options must be an object")
    model = body.get("model")
    content = body["prompt"] if "prompt" in body else body.get("messages")
    return CompletionParams(
        prompt_tokens=n_prompt, max_tokens=max_tokens, min_tokens=min_tokens,
        ignore_eos=bool(body.get("ignore_eos", False)), temperature=temperature, stream=stream,
        include_usage=bool(options.get("include_usage", False)),
        continuous_usage=bool(options.get("continuous_usage_stats", False)),
        model=str(model) if model is not None else None,
        content_key=content_key(content),
        content_words=tuple(_content_text(content).split()[:CATEGORY_WORDS]),
    )


CATEGORY_WORDS = 64   # the words a category is looked for in


def _content_text(content: object) -> str:
    """The words of a prompt (text) or of chat messages (their string contents, in order); "" for token ids."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(m["content"] for m in content if isinstance(m, dict) and isinstance(m.get("content"), str))
    return ""


def content_key(prompt: object) -> int:
    """A stable hash of a prompt (text or token ids): the same content, the same key, in every process."""
    return zlib.crc32(json.dumps(prompt, separators=(",", ":")).encode())


def usage(prompt_tokens: int, completion_tokens: int) -> dict:
    return {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens + completion_tokens,
            "completion_tokens": completion_tokens}


class ChunkWriter:
    """SSE lines of one streamed completion (or chat completion); the per-chunk prefix is built once."""

    def __init__(self, request_id: str, created: int, model: str, chat: bool = False) -> None:
        self.chat = chat
        self.head = {"id": request_id, "object": "chat.completion.chunk" if chat else "text_completion",
                     "created": created, "model": model}
        start = "data: " + json.dumps(self.head, separators=(",", ":"))[:-1] + ',"choices":[{"index":0,'
        self._prefix = start + ('"delta":{"content":' if chat else '"text":')
        self._opening = start + '"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]'

    def content(self, text: str, finish_reason: str | None, usage_now: dict | None = None, trace: str = "") -> bytes:
        """One chunk; `trace` is extra top-level JSON members (",\"k\":v"), only for schedule tracing."""
        reason = "null" if finish_reason is None else json.dumps(finish_reason)
        if self.chat:  # vLLM's chat choice (exclude_unset): stop_reason is set on the finishing chunk only
            stop = "" if finish_reason is None else '"stop_reason":null,'
            tail = f'}},"logprobs":null,"finish_reason":{reason},{stop}"token_ids":null}}]'
        else:
            tail = (f',"logprobs":null,"finish_reason":{reason},"stop_reason":null,"prompt_token_ids":null,'
                    f'"token_ids":null}}]')
        if usage_now is not None:
            tail += ',"usage":' + json.dumps(self._usage(usage_now), separators=(",", ":"))
        return (self._prefix + json.dumps(text) + tail + trace + "}\n\n").encode()

    def opening(self, usage_now: dict | None = None) -> bytes:
        """A chat stream's first chunk: the role and an empty content, no token (usage: 0 completion tokens)."""
        tail = "" if usage_now is None else ',"usage":' + json.dumps(self._usage(usage_now), separators=(",", ":"))
        return (self._opening + tail + ',"prompt_token_ids":null,"prompt_text":null}\n\n').encode()

    def _usage(self, usage_now: dict) -> dict:
        # vLLM's chat serving sets completion_tokens_details (None unless reasoning details are on): it is written
        return {**usage_now, "completion_tokens_details": None} if self.chat else usage_now

    def final_usage(self, usage_now: dict, fingerprint: str | None, spec_metrics: dict | None) -> bytes:
        body = {**self.head, "choices": [], "usage": usage_now}
        if fingerprint is not None:
            body["system_fingerprint"] = fingerprint
        if spec_metrics is not None:
            body["metrics"] = {"speculative_decoding": spec_metrics}
        return ("data: " + json.dumps(body, separators=(",", ":")) + "\n\n").encode()

    def garbled(self) -> bytes:
        """An SSE event that is not JSON (the malformed-stream fault)."""
        return b'data: {"id": "' + self.head["id"].encode() + b'", "choices": [\n\n'

    @staticmethod
    def done() -> bytes:
        return b"data: [DONE]\n\n"


def spec_metrics(k: int, spec_steps: int, drafted: int, accepted: int, accept_hist: list[int],
                 per_step: tuple[list[int], list[int]] | None = None) -> dict:
    """Per-request speculation summary vLLM 0.32 puts in the final usage chunk with --per-request-spec-decode-metrics
    summary (drafted: the tokens its steps drafted, spec_steps x K without a per-batch-size schedule); `detailed`
    adds the per-step accepted and drafted arrays (vllm/v1/metrics/stats.py RequestSpecDecodeMetrics.to_dict)."""
    extra = {"per_step_accepted": per_step[0], "per_step_drafted": per_step[1]} if per_step and per_step[0] else {}
    return {
        "mean_acceptance_length": 1.0 + accepted / spec_steps if spec_steps else 1.0,
        "draft_acceptance_rate": accepted / drafted if drafted else 0.0,
        "acceptance_histogram": list(accept_hist),
        "num_spec_steps": spec_steps,
        "num_accepted_draft_tokens": accepted,
        "num_draft_tokens": drafted,
        "num_spec_tokens": k,
    } | extra


def completion_response(request_id: str, created: int, model: str, text: str, finish_reason: str,
                        prompt_tokens: int, completion_tokens: int, chat: bool = False) -> dict:
    if chat:
        return {
            "id": request_id, "object": "chat.completion", "created": created, "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text, "reasoning": None,
                                                 "tool_calls": []},
                         "logprobs": None, "finish_reason": finish_reason, "stop_reason": None}],
            "usage": {**usage(prompt_tokens, completion_tokens), "prompt_tokens_details": None},
        }
    return {
        "id": request_id, "object": "text_completion", "created": created, "model": model,
        "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": finish_reason,
                     "stop_reason": None, "prompt_logprobs": None}],
        "usage": {**usage(prompt_tokens, completion_tokens), "prompt_tokens_details": None},
    }
