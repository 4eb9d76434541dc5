"""The simulated engine: continuous batching, speculative steps, counters (the KV pool it starts with:
kv_pool.py).

Pure: no clock, no asyncio, no I/O. `EngineModel.step()` advances one scheduler iteration and
says how long it took on the simulated GPU; the caller decides what that means in real time.
Deterministic for a given seed and call order.

Scheduling follows vLLM's V1 scheduler in the parts that matter for the lookahead:
- a running sequence that verifies 1 + K tokens needs KV slots for its length + K drafts + the
  lookahead L (L = K for draft-model/EAGLE, 0 for ngram), rounded up to whole blocks;
- when blocks run out the newest running sequence is preempted (recompute: its blocks are
  freed and it re-enters the waiting queue at the front; on return it prefills prompt +
  generated tokens again), and no new request is admitted in that step;
- waiting requests are admitted FCFS while running < max_num_seqs, the token budget lasts and
  free blocks cover their prompt + L.
L comes from the CLI and the version profile: K (or K+1, or 0 for lookup drafters) with
speculation, and on V0 without speculation the literal --num-lookahead-slots, which reserves
KV but drafts nothing. V0's --speculative-disable-by-batch-size turns drafting off for a step
whose running batch has reached it; the lookahead stays reserved, as in V0's scheduler.
A per-batch-size schedule (num_speculative_tokens_per_batch_size) picks K per step as vLLM 0.32's
scheduler does: lookup[number of requests scheduled in the step that drafted] (drafts made in one
step are verified in the next), K = num_speculative_tokens still sizing the lookahead. Having a
schedule costs every step `schedule_step_ms`, and a step whose K differs from the previous
verifying step's costs `k_switch_ms` more (scenario fields; vLLM issue #49548).
Two drafter faults (sim/faults.py) change what is drafted, not what the counters say of it: `ignore_schedule`
drafts K = num_speculative_tokens in every step whatever the schedule (vLLM #51510), `draft_fraction` F makes
each step's drafts F x K tokens long (a running share; a step whose share rounds to 0 drafts nothing).
A step's time is a roofline: fixed + max(memory, compute) + K draft steps + prefill, where memory is
the target weights plus the KV cache every decoding sequence holds (read once per step however many
positions it verifies: K + 1 positions attend to the same context), compute grows with the verified
tokens, and each draft step also reads the draft model's own KV of those sequences.
"""
from __future__ import annotations

import math
import random
from collections import deque
from dataclasses import dataclass, field
from typing import NamedTuple

from lookahead_runner.sim.kv_pool import EngineConfig, size_kv_pool
from lookahead_runner.sim.scenarios import Scenario
from lookahead_runner.vllm.schedule import Schedule, lookup_table


class TokenOutput(NamedTuple):
    request_id: str
    n_tokens: int
    finished: bool


class StepResult(NamedTuple):
    duration_s: float
    outputs: list[TokenOutput]
    n_tokens: int = 0           # tokens scheduled in the step (prefill + verified)


@dataclass(eq=False)
class Sequence:
    request_id: str
    prompt_tokens: int
    target_tokens: int          # tokens it will produce (max_tokens, or earlier at a natural stop)
    max_tokens: int
    log_alpha: float            # log of the per-token acceptance for this request's temperature
    generated: int = 0
    computed: int = 0           # tokens whose KV exists
    prefill_left: int = 0       # tokens to (re)compute before decoding
    blocks: int = 0
    ever_scheduled: bool = False
    preemptions: int = 0
    spec_steps: int = 0
    drafted: int = 0
    accepted: int = 0
    accept_hist: list[int] = field(default_factory=list)
    per_step_accepted: list[int] = field(default_factory=list)   # --per-request-spec-decode-metrics detailed
    per_step_drafted: list[int] = field(default_factory=list)

    @property
    def finish_reason(self) -> str:
        return "length" if self.target_tokens >= self.max_tokens else "stop"


@dataclass
class Counters:
    """Cumulative engine counters, named after the vLLM metrics they feed."""

    prompt_tokens: int = 0
    generation_tokens: int = 0
    preemptions: int = 0
    spec_drafts: int = 0
    spec_draft_tokens: int = 0
    spec_accepted_tokens: int = 0
    accept_hist: list[int] = field(default_factory=list)   # drafts by accepted count 0..K
    finished: dict[str, int] = field(default_factory=lambda: {"stop": 0, "length": 0, "abort": 0})
    steps: int = 0

    def accepted_per_pos(self) -> list[int]:
        """Drafts whose position i was accepted, i = 0..K-1."""
        out, running = [], 0
        for count in reversed(self.accept_hist[1:]):
            running += count
            out.append(running)
        return out[::-1]


class StepNoise:
    """A noisy server's step times (scenario fields step_jitter_frac, speed_drift_frac, speed_drift_s):
    each step x its own lognormal factor, and x a speed factor redrawn every speed_drift_s of engine
    time, both of mean 1 so the scenario's physics stay the expected value. Its own seeded stream:
    the acceptance draws are the same with or without noise."""

    def __init__(self, scenario: Scenario, seed: int) -> None:
        self.jitter, self.drift, self.drift_s = scenario.step_jitter_frac, scenario.speed_drift_frac, \
            scenario.speed_drift_s
        self._rng = random.Random(f"step-noise-{seed}")
        self.clock_s = 0.0                      # engine time stepped so far
        self.speed = 1.0
        self._redraw_at_s = 0.0

    def _factor(self, sigma: float) -> float:
        return math.exp(self._rng.gauss(-sigma * sigma / 2, sigma)) if sigma > 0 else 1.0

    def apply(self, seconds: float) -> float:
        if self.drift > 0 and self.clock_s >= self._redraw_at_s:
            self.speed = self._factor(self.drift)
            self._redraw_at_s = self.clock_s + self.drift_s
        seconds *= self.speed * self._factor(self.jitter)
        self.clock_s += seconds
        return seconds


class EngineModel:
    """One engine: a KV block pool, a waiting queue, a running batch."""

    def __init__(self, scenario: Scenario, cfg: EngineConfig, *, ignore_schedule: bool = False,
                 draft_fraction: float = 1.0) -> None:
        self.scenario = scenario
        self.ignore_schedule = ignore_schedule
        self.draft_fraction = draft_fraction
        self._short_carry = 0.0              # drafts-short: the share of a token owed to the next step
        self.cfg = cfg
        self.sizing = size_kv_pool(scenario, cfg)
        self.num_blocks = self.sizing.num_blocks
        self.free_blocks = self.num_blocks
        self.k = cfg.num_speculative_tokens
        draft = scenario.draft_cost(cfg.method) if self.k > 0 else None
        self.draft_step_ms = draft.step_ms if draft else 0.0
        self.draft_kv_kib_per_token = draft.kv_kib_per_token if draft else 0.0
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []
        self.by_id: dict[str, Sequence] = {}
        self.counters = Counters(accept_hist=[0] * (self.k + 1))
        self.admitted_last_step: list[str] = []
        # dense batch size -> K table; ScheduleError (a ValueError) when vLLM's scheduler would refuse it
        self.k_lookup = (lookup_table(Schedule.from_ranges(cfg.k_schedule), cfg.max_num_seqs, self.k)
                         if cfg.k_schedule and self.k > 0 else None)
        self.k_step = self.k_lookup[1] if self.k_lookup else self.k  # K of the step being run
        self._k_verified = self.k_step       # K of the last step that verified drafts
        self.k_switched = False              # this step's K differs from it
        self.last_batch = 0                  # requests scheduled in the previous step
        self._rng = random.Random(cfg.seed)
        self.noise = StepNoise(scenario, cfg.seed)

    # --- requests -------------------------------------------------------------------------
    def add_request(self, request_id: str, prompt_tokens: int, max_tokens: int, *, min_tokens: int = 0,
                    ignore_eos: bool = False, temperature: float = 0.0, chat: bool = False,
                    content_key: int | None = None, category: str = "") -> Sequence:
        """`chat`: the request came chat-formatted; `content_key`: a hash of the prompt; its end of sequence then
        follows from it alone, the same in every life (greedy decoding of one content ends at one place, whatever
        the K); `category`: its content's kind."""
        if request_id in self.by_id:
            raise ValueError(f"duplicate request id {request_id!r}")
        target = max_tokens
        if not ignore_eos and self.scenario.natural_stop_prob_per_token > 0:
            draw = random.Random(content_key).random() if content_key is not None else self._rng.random()
            natural = 1 + int(math.log(1.0 - draw) / math.log1p(-self.scenario.natural_stop_prob_per_token))
            target = min(max_tokens, max(min_tokens, natural))
        alpha = self.scenario.alpha_at(temperature, chat=chat, category=category)
        seq = Sequence(request_id, prompt_tokens, max(target, 1), max_tokens,
                       math.log(alpha) if 0.0 < alpha < 1.0 else (0.0 if alpha >= 1.0 else -math.inf),
                       accept_hist=[0] * (self.k + 1))
        seq.prefill_left = prompt_tokens
        self.waiting.append(seq)
        self.by_id[request_id] = seq
        return seq

    def abort(self, request_id: str) -> bool:
        seq = self.by_id.pop(request_id, None)
        if seq is None:
            return False
        if seq in self.running:
            self.running.remove(seq)
        else:
            self.waiting.remove(seq)
        self._free(seq)
        self.counters.finished["abort"] += 1
        return True

    def has_work(self) -> bool:
        return bool(self.running or self.waiting)

    # --- gauges ---------------------------------------------------------------------------
    @property
    def num_running(self) -> int:
        return len(self.running)

    @property
    def num_waiting(self) -> int:
        return len(self.waiting)

    @property
    def kv_usage(self) -> float:
        return (self.num_blocks - self.free_blocks) / self.num_blocks

    # --- one iteration --------------------------------------------------------------------
    def step(self) -> StepResult:
        budget = self.cfg.max_num_batched_tokens
        scheduled: list[tuple[Sequence, int, bool]] = []
        self.k_step = self._k_for_step()
        budget, preempted = self._schedule_running(budget, scheduled)
        self.admitted_last_step = []
        if not preempted:
            self._admit_waiting(budget, scheduled)
        self.last_batch = len(scheduled)
        if not scheduled:
            return StepResult(0.0, [])
        verifies = any(decode for _, _, decode in scheduled)
        self.k_switched = verifies and self.k_step != self._k_verified
        if verifies:
            self._k_verified = self.k_step
        n_tokens = sum(n for _, n, _ in scheduled)
        return StepResult(self._step_duration_s(scheduled), self._execute(scheduled), n_tokens)

    def _k_for_step(self) -> int:
        return self._drafted(self._scheduled_k())

    def _scheduled_k(self) -> int:
        if self.k_lookup is not None and not self.ignore_schedule:
            return self.k_lookup[self.last_batch] if self.last_batch else self.k_step
        if self.k_lookup is not None:
            return self.k
        limit = self.cfg.spec_disable_batch_size
        return 0 if limit is not None and len(self.running) >= limit else self.k

    def _drafted(self, k: int) -> int:
        """The tokens a draft of this step holds: K, or F x K as a running share under drafts-short."""
        if self.draft_fraction >= 1.0 or k == 0:
            return k
        self._short_carry += self.draft_fraction * k
        drafted = min(k, int(self._short_carry))
        self._short_carry -= drafted
        return drafted

    def _schedule_running(self, budget: int, scheduled: list) -> tuple[int, bool]:
        preempted = False
        i = 0
        while i < len(self.running):
            seq = self.running[i]
            decode = seq.prefill_left == 0
            n_new = 1 + self.k_step if decode else min(seq.prefill_left, budget)
            if n_new <= 0 or n_new > budget:
                i += 1
                continue
            need = self._blocks_for(seq.computed + n_new) - seq.blocks
            while need > self.free_blocks:
                victim = self.running.pop()
                self._preempt(victim)
                preempted = True
                if victim is seq:
                    break
            else:
                self._allocate(seq, need)
                budget -= n_new
                scheduled.append((seq, n_new, decode))
                i += 1
                continue
            break
        return budget, preempted

    def _admit_waiting(self, budget: int, scheduled: list) -> None:
        while self.waiting and len(self.running) < self.cfg.max_num_seqs and budget > 0:
            seq = self.waiting[0]
            n_new = min(seq.prefill_left, budget)
            need = self._blocks_for(n_new)
            if need > self.free_blocks:
                break
            self.waiting.popleft()
            self._allocate(seq, need)
            self.running.append(seq)
            budget -= n_new
            scheduled.append((seq, n_new, False))
            if not seq.ever_scheduled:
                seq.ever_scheduled = True
                self.counters.prompt_tokens += seq.prompt_tokens
                self.admitted_last_step.append(seq.request_id)

    def _step_duration_s(self, scheduled: list[tuple[Sequence, int, bool]]) -> float:
        """Roofline: memory (weights + the KV cache the decoding sequences hold, read once however many
        positions each verifies) against compute per verified token; each draft step reads its own KV."""
        sc = self.scenario
        verified = sum(n for _, n, decode in scheduled if decode)
        prefilled = sum(n for _, n, decode in scheduled if not decode)
        context = sum(seq.computed for seq, _, decode in scheduled if decode)
        memory_ms = sc.weight_read_ms + sc.kv_read_ms(context * sc.kv_kib_per_token)
        ms = sc.fixed_ms + max(memory_ms, sc.compute_ms_per_token * verified)
        if verified and self.k_step:
            ms += self.k_step * (self.draft_step_ms + sc.kv_read_ms(context * self.draft_kv_kib_per_token))
        ms += sc.prefill_ms_per_token * prefilled
        if self.k_lookup is not None:
            ms += sc.schedule_step_ms + (sc.k_switch_ms if self.k_switched else 0.0)
        return self.noise.apply(ms / 1000.0)

    def _execute(self, scheduled: list[tuple[Sequence, int, bool]]) -> list[TokenOutput]:
        outputs: list[TokenOutput] = []
        c = self.counters
        any_finished = False
        for seq, n_new, decode in scheduled:
            if decode:
                accepted = self._draw_accepted(seq.log_alpha) if self.k_step else 0
                if self.k_step:
                    c.spec_drafts += 1
                    c.spec_draft_tokens += self.k_step
                    c.spec_accepted_tokens += accepted
                    c.accept_hist[accepted] += 1
                    seq.spec_steps += 1
                    seq.drafted += self.k_step
                    seq.accepted += accepted
                    seq.accept_hist[accepted] += 1
                    seq.per_step_accepted.append(accepted)
                    seq.per_step_drafted.append(self.k_step)
                emitted = min(accepted + 1, seq.target_tokens - seq.generated)
            else:
                seq.computed += n_new
                seq.prefill_left -= n_new
                if seq.prefill_left > 0:
                    continue
                emitted = 1
            seq.generated += emitted
            seq.computed = seq.prompt_tokens + seq.generated - 1
            c.generation_tokens += emitted
            finished = seq.generated >= seq.target_tokens
            if finished:
                any_finished = True
                self._free(seq)
                self.by_id.pop(seq.request_id, None)
                c.finished[seq.finish_reason] += 1
            outputs.append(TokenOutput(seq.request_id, emitted, finished))
        if any_finished:
            self.running = [s for s in self.running if s.generated < s.target_tokens]
        c.steps += 1
        return outputs

    def _draw_accepted(self, log_alpha: float) -> int:
        """Accepted prefix length: P(accepted >= i) = alpha^i, capped at this step's K. One draw per draft."""
        if log_alpha == 0.0:
            return self.k_step
        if log_alpha == -math.inf:
            return 0
        return min(self.k_step, int(math.log(1.0 - self._rng.random()) / log_alpha))

    # --- blocks ---------------------------------------------------------------------------
    def _blocks_for(self, kv_tokens: int) -> int:
        slots = min(kv_tokens + self.cfg.lookahead_tokens, self.cfg.max_model_len + self.cfg.lookahead_tokens)
        return -(-slots // self.cfg.block_size)

    def _allocate(self, seq: Sequence, n_blocks: int) -> None:
        if n_blocks > 0:
            self.free_blocks -= n_blocks
            seq.blocks += n_blocks

    def _free(self, seq: Sequence) -> None:
        self.free_blocks += seq.blocks
        seq.blocks = 0

    def _preempt(self, seq: Sequence) -> None:
        self._free(seq)
        seq.computed = 0
        seq.prefill_left = seq.prompt_tokens + seq.generated
        seq.preemptions += 1
        self.counters.preemptions += 1
        self.waiting.appendleft(seq)
