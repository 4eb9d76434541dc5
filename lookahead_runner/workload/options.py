"""The scenario's custom Locust options: defined once here, registered on Locust's parser, read back typed."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, fields
from typing import Any

from lookahead_runner.workload.arrivals import ARRIVALS, POISSON, ArrivalProcess, burstiness_problem
from lookahead_runner.workload.prompt import read_corpus_file
from lookahead_runner.workload.request_set import RequestSetError, read_request_set
from lookahead_runner.workload.stages import STAGES_OPTION, Stage, parse_stages

NATURAL_OUTPUT = "natural"   # --output-tokens natural (the config's load.output_tokens = "natural")


ENDPOINT_COMPLETIONS, ENDPOINT_CHAT = "completions", "chat"
ENDPOINTS = (ENDPOINT_COMPLETIONS, ENDPOINT_CHAT)


@dataclass(frozen=True)
class ScenarioSettings:
    """Typed values of the custom options; the field defaults are the options' defaults."""

    stages: str = "4:20,16:20,32:20"
    prompt_tokens: int = 128
    output_tokens: int | str = 64          # or NATURAL_OUTPUT
    model: str = ""
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int | None = None
    prompt_file: str = ""
    requests_csv: str = ""
    stages_csv: str = ""
    workload_json: str = ""
    request_timeout_s: float = 120.0
    # the endpoint (issue 28): completions or chat, and the chat template's kwargs as a JSON object
    endpoint: str = ENDPOINT_COMPLETIONS
    chat_template_kwargs: str = ""
    # --- the user's request set (issue 28)
    request_set: str = ""
    # --- rate stages (issue 37): how arrivals are paced, and the cap on requests in flight (0 = none)
    arrival: str = POISSON
    burstiness: float = 1.0
    arrival_seed: int = 0
    max_in_flight: int = 0

    @classmethod
    def from_options(cls, parsed_options: Any) -> ScenarioSettings:
        """Read from Locust's parsed options; missing attributes (e.g. a bare Environment) keep defaults."""
        values = {f.name: getattr(parsed_options, f.name, f.default) for f in fields(cls)}
        settings = cls(**values)
        settings.validate()
        return settings

    def validate(self) -> None:
        parse_stages(self.stages)
        if self.prompt_tokens < 1:
            raise ValueError(f"--prompt-tokens: must be >= 1, got {self.prompt_tokens}")
        if self.output_tokens == NATURAL_OUTPUT:
            if not self.request_set:
                raise ValueError("--output-tokens natural: needs --request-set (requests with their own max_tokens)")
        elif not isinstance(self.output_tokens, int) or self.output_tokens < 1:
            raise ValueError(f"--output-tokens: must be >= 1 or \"{NATURAL_OUTPUT}\", got {self.output_tokens}")
        if self.request_timeout_s <= 0:
            raise ValueError(f"--request-timeout-s: must be > 0, got {self.request_timeout_s}")
        if self.temperature < 0:
            raise ValueError(f"--temperature: must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"--top-p: must be in (0, 1], got {self.top_p}")
        if self.endpoint not in ENDPOINTS:
            raise ValueError(f"--endpoint: must be one of {', '.join(ENDPOINTS)}, got {self.endpoint!r}")
        kwargs = template_kwargs(self.chat_template_kwargs)
        if kwargs and self.endpoint != ENDPOINT_CHAT:
            raise ValueError("--chat-template-kwargs: only with --endpoint chat")
        if self.arrival not in ARRIVALS:
            raise ValueError(f"--arrival: must be one of {', '.join(ARRIVALS)}, got {self.arrival!r}")
        if problem := burstiness_problem(self.burstiness):
            raise ValueError(f"--burstiness {self.burstiness:g}: {problem}")
        if self.max_in_flight < 0:
            raise ValueError(f"--max-in-flight: must be >= 0 (0 = no cap), got {self.max_in_flight}")
        if self.arrival_seed < 0:
            raise ValueError(f"--arrival-seed: must be >= 0, got {self.arrival_seed}")

    @property
    def chat(self) -> bool:
        return self.endpoint == ENDPOINT_CHAT

    @property
    def template_kwargs(self) -> dict[str, Any]:
        return template_kwargs(self.chat_template_kwargs)

    @property
    def parsed_stages(self) -> list[Stage]:
        return parse_stages(self.stages)

    @property
    def arrival_process(self) -> ArrivalProcess:
        return ArrivalProcess(self.arrival, self.burstiness, self.arrival_seed)  # type: ignore[arg-type]

    @property
    def exact_output_tokens(self) -> int | None:
        """Every response's completion tokens; None with natural lengths."""
        return None if self.output_tokens == NATURAL_OUTPUT else int(self.output_tokens)


def template_kwargs(text: str) -> dict[str, Any]:
    """The chat template's kwargs from their JSON text ("" = none); ValueError naming the option."""
    if not text.strip():
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        raise ValueError(f"--chat-template-kwargs: not JSON: {text!r}; write an object, e.g. "
                         '{"enable_thinking": false}') from None
    if not isinstance(value, dict):
        raise ValueError(f"--chat-template-kwargs: not a JSON object: {text!r}")
    return value


_HELP = {
    "stages": "Load stages as USERS:SECONDS,... (each stage holds USERS users for SECONDS, spawned at USERS/s; "
    "closed loop), or RATE/s:SECONDS (RATE requests per second for SECONDS, whatever is outstanding; open loop); "
    "both kinds mix, e.g. 8:20,4/s:30.",
    "prompt_tokens": "Prompt length in tokens, exact for the served model: text calibrated through POST "
    "/tokenize, or token ids where the server has no /tokenize.",
    "output_tokens": "Output length in tokens, exact (max_tokens = min_tokens, ignore_eos); \"natural\" with "
    "--request-set: each request ends at its end of sequence, capped by its own max_tokens.",
    "model": "Model name for requests; empty: the first id from GET /v1/models.",
    "temperature": "Sampling temperature of every request.",
    "top_p": "Sampling top_p of every request.",
    "seed": "Sampling seed sent with every request (unset: none sent).",
    "prompt_file": "Prompt corpus, JSONL with one {\"text\": ...} per line (empty: the built-in corpus).",
    "requests_csv": "Write one row per finished request to this CSV file (empty: no file).",
    "stages_csv": "Write one row per stage as it ran to this CSV file (empty: no file).",
    "workload_json": "Write how prompts were built (method, source, token count) to this JSON file (empty: no file).",
    "request_timeout_s": "Timeout in seconds for one request, end to end (also the socket timeout).",
    "endpoint": "completions: POST /v1/completions with a raw prompt; chat: POST /v1/chat/completions, the "
    "prompt as one user message, its length counted with the server's chat template (/tokenize with messages).",
    "chat_template_kwargs": "With --endpoint chat: a JSON object passed to the chat template in every request "
    "and in /tokenize, e.g. {\"enable_thinking\": false} (empty: none).",
    "request_set": "Your own requests: JSONL of {\"prompt\": ...} or {\"messages\": [...]} per line (optional "
    "max_tokens, category), vLLM bench's custom JSONL (output_tokens), SpecBench's question.jsonl, SPEED-Bench or "
    "ShareGPT JSON; each user sends them in the same order in every run, starting again "
    "at the end (empty: synthetic prompts of --prompt-tokens).",
    "arrival": "Rate stages: poisson (gamma gaps of shape --burstiness, as vllm bench serve) or constant gaps.",
    "burstiness": "Rate stages, --arrival poisson: the gamma shape of the gaps (1 = Poisson; < 1 burstier, "
    "> 1 more even), as vllm bench serve --burstiness.",
    "arrival_seed": "Rate stages: the seed of the arrival times and of the synthetic prompts (the same schedule "
    "and requests in every run with it).",
    "max_in_flight": "Rate stages: at most this many requests in flight (0 = no cap), as vllm bench serve "
    "--max-concurrency; an arrival that finds them all busy waits for one and is counted as held.",
}


def _checked_stages(text: str) -> str:
    try:
        parse_stages(text)
    except ValueError as exc:
        # argparse already prefixes "argument --stages: "
        raise argparse.ArgumentTypeError(str(exc).removeprefix(STAGES_OPTION + ": ")) from exc
    return text


def _unit_interval(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"must be in (0, 1], got {text!r}")
    return value


def _non_negative(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text!r}")
    return value


def _corpus_file(text: str) -> str:
    if text:
        try:
            read_corpus_file(text)
        except OSError as exc:
            raise argparse.ArgumentTypeError(f"cannot read {text!r} ({exc.strerror})") from None
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def _template_kwargs_text(text: str) -> str:
    try:
        template_kwargs(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--chat-template-kwargs: ")) from None
    return text


def _request_set_file(text: str) -> str:
    if text:
        try:
            read_request_set(text)
        except OSError as exc:
            raise argparse.ArgumentTypeError(f"cannot read {text!r} ({exc.strerror})") from None
        except UnicodeDecodeError:
            raise argparse.ArgumentTypeError(f"{text!r} is not UTF-8 text; save it as UTF-8") from None
        except RequestSetError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def _non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text!r}")
    return value


def _output_tokens(text: str) -> int | str:
    if text == NATURAL_OUTPUT:
        return text
    return _positive(int)(text)


def _positive(kind: type) -> Any:
    def check(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(f"not {'an integer' if kind is int else 'a number'}: {text!r}") from exc
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be > 0, got {text!r}")
        return value

    check.__name__ = kind.__name__
    return check


def _burstiness(text: str) -> float:
    value = float(text)
    if problem := burstiness_problem(value):
        raise argparse.ArgumentTypeError(problem)
    return value


_burstiness.__name__ = "float"   # argparse names a value it cannot read by its type's name


_TYPES = {
    "stages": _checked_stages,
    "prompt_tokens": _positive(int),
    "output_tokens": _output_tokens,
    "model": str,
    "temperature": _non_negative,
    "top_p": _unit_interval,
    "seed": int,
    "prompt_file": _corpus_file,
    "requests_csv": str,
    "stages_csv": str,
    "workload_json": str,
    "request_timeout_s": _positive(float),
    "endpoint": str,
    "chat_template_kwargs": _template_kwargs_text,
    "request_set": _request_set_file,
    "arrival": str,
    "burstiness": _burstiness,
    "arrival_seed": _non_negative_int,
    "max_in_flight": _non_negative_int,
}


def add_scenario_options(parser: Any) -> None:
    """Register the options on Locust's parser (from an ``init_command_line_parser`` listener)."""
    # On the parser itself, not a group: only LocustArgumentParser.add_argument marks options for the web UI.
    for f in fields(ScenarioSettings):
        flag = "--" + f.name.replace("_", "-")
        parser.add_argument(
            flag,
            type=_TYPES[f.name],
            default=f.default,
            env_var="LOCUST_" + f.name.upper(),
            help=_HELP[f.name] + f" Default: {f.default!r}.",
            **({"choices": ENDPOINTS} if f.name == "endpoint" else {"choices": ARRIVALS} if f.name == "arrival"
               else {}),
        )
