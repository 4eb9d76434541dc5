"""Fault modes of the simulated server, for testing the runner's failure handling.

`--sim-fault NAME[=VALUE]` may be repeated. Names (VALUE in brackets, with its default):
  fail-start            the engine fails while starting (exit 1, vLLM-like traceback)
  oom-above-k[=4]       startup fails with vLLM's "No available memory for the cache blocks"
                        error when K (num_speculative_tokens) is above VALUE
  slow-start[=30]       the startup phase lasts VALUE seconds
  die-after[=5]         VALUE seconds after it is ready the engine dies (EngineDeadError, exit 1)
  hang-after[=5]        VALUE seconds after it is ready the engine stops stepping; HTTP stays up
                        (/health 200, /metrics frozen, streams stall)
  unresponsive-after[=5] VALUE seconds after it is ready the process accepts connections and never
                        answers any of them (/health included), as a wedged server does; 0 = from the start
  http-500[=0.1]        that fraction of completion requests answers 500
  http-429[=0.1]        that fraction of completion requests answers 429 (as a rate-limiting proxy would)
  short-stream[=0.1]    that fraction of streams stops halfway and sends [DONE] without usage
  malformed-stream[=0.1] that fraction of streams carries one chunk that is not JSON
  slow-metrics[=2]      /metrics answers after VALUE seconds
  drop-metric=NAME      the metric family NAME (e.g. vllm:kv_cache_usage_perc; a counter with or without
                        _total) is absent from /metrics, as with another vLLM version's names or a
                        filtering proxy; repeat it to drop several
  ignore-spec-schedule  a per-batch-size schedule is accepted and costs what it costs, but every step drafts
                        num_speculative_tokens (the largest K), whatever the schedule says for its batch:
                        the drafter of Model Runner V2 ignores the scheduled K (vLLM issue #51510)
  drafts-short[=0.5]    every draft holds VALUE x K tokens (a running fraction: 0.5 x 3 drafts 1, 2, 1, 2...);
                        a step whose share rounds to 0 drafts nothing, as a draft cut short at max_model_len
  no-chat-template      the served model's tokenizer has no chat template: /tokenize with `messages` and every
                        chat request answer 400 with vLLM 0.32's message (--chat-template is not emulated)
The spec-decode counters (vllm:spec_decode_num_drafts / _num_draft_tokens) count what was drafted, so
both faults show in them, as they do on a real server.
Failing at start without a fault: a KV pool that would be empty (e.g. --gpu-memory-utilization 0.7
with a draft model on tight-kv) exits 1 with vLLM's "No available memory for the cache blocks".
Decisions that draw (fractions) use their own seeded generator, so faults are reproducible.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field

_DEFAULTS = {
    "fail-start": 1.0,
    "oom-above-k": 4.0,
    "slow-start": 30.0,
    "die-after": 5.0,
    "hang-after": 5.0,
    "unresponsive-after": 5.0,
    "http-500": 0.1,
    "http-429": 0.1,
    "short-stream": 0.1,
    "malformed-stream": 0.1,
    "slow-metrics": 2.0,
    "ignore-spec-schedule": 1.0,
    "drafts-short": 0.5,
    "no-chat-template": 1.0,
}


DROP_METRIC = "drop-metric"


@dataclass
class Faults:
    values: dict[str, float] = field(default_factory=dict)
    seed: int = 0
    dropped_metrics: frozenset[str] = frozenset()   # metric family names absent from /metrics

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed + 7919)

    def get(self, name: str) -> float | None:
        return self.values.get(name)

    def __contains__(self, name: str) -> bool:
        return name in self.values

    @property
    def draft_fraction(self) -> float:
        """The share of K each draft holds (drafts-short; 1 without it)."""
        return self.values.get("drafts-short", 1.0)

    def draw(self, name: str) -> bool:
        """True for the configured fraction of calls (per request)."""
        fraction = self.values.get(name)
        return fraction is not None and self._rng.random() < fraction


def parse_faults(specs: list[str] | None, seed: int = 0) -> Faults:
    values: dict[str, float] = {}
    dropped: set[str] = set()
    for spec in specs or []:
        name, _, text = spec.partition("=")
        name = name.strip()
        if name == DROP_METRIC:
            if not text.strip():
                raise ValueError("--sim-fault drop-metric needs the metric's name, e.g. "
                                 "drop-metric=vllm:kv_cache_usage_perc")
            dropped.add(text.strip().removesuffix("_total"))
            continue
        if name not in _DEFAULTS:
            raise ValueError(f"unknown --sim-fault {name!r}; known: {', '.join(sorted([*_DEFAULTS, DROP_METRIC]))}")
        try:
            values[name] = float(text) if text else _DEFAULTS[name]
        except ValueError:
            raise ValueError(f"--sim-fault {name}: {text!r} is not a number") from None
        if name == "drafts-short" and not 0 <= values[name] <= 1:
            raise ValueError(f"--sim-fault drafts-short={text}: the share of K a draft holds must be "
                             "between 0 and 1, e.g. drafts-short=0.5")
    return Faults(values, seed, frozenset(dropped))
