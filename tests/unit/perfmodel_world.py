"""A world the performance model describes exactly: its own equations run forward with known parameters,
turned into decision windows (synthetic.window) and per-position acceptance counts."""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from unit.synthetic import window

from lookahead_runner.decision import evidence
from lookahead_runner.decision.perfmodel.model import PositionCounts, WorkloadShape
from lookahead_runner.decision.perfmodel.acceptance import Acceptance
from lookahead_runner.decision.perfmodel.fit import Params, predict_draws, stack

SHAPE = WorkloadShape(prompt_tokens=128, output_tokens=64, max_num_seqs=128)
TRUE = Params(step_ms=8.0, step_ms_per_k=1.5, step_ms_per_seq=0.1, step_ms_per_token=0.02,
              step_ms_per_token_past_knee=0.12, knee_tokens=250.0, step_ms_per_prefill_token=0.03, ttft_ms=20.0,
              ttft_steps=1.5, client_ms=3.0, running_share=0.95, kv_tokens_per_seq=200.0,
              kv_tokens_per_seq_per_k=1.0, kv_peak_ratio=1.1, tpot_p50_ratio=1.0, tpot_p90_ratio=1.0,
              ttft_p50_ratio=1.0, ttft_p90_ratio=1.0)


@dataclass(frozen=True)
class World:
    alpha: float = 0.8
    params: Params = TRUE
    pool: dict[int, float] = field(default_factory=lambda: {0: 22000.0, 2: 19000.0, 4: 18000.0, 8: 16000.0})

    def acceptance(self, k: int) -> Acceptance:
        return Acceptance(tuple(self.alpha ** (i + 1) for i in range(k)), "per-position counters")

    def truth(self, k: int, users: int):
        tau = self.acceptance(k).tokens_per_decode_step(k, SHAPE.output_tokens - 1)
        return predict_draws(stack([self.params]), k, users, tau, SHAPE, float(SHAPE.output_tokens),
                             self.pool.get(k, 12000.0 - 300.0 * k))

    def rate(self, k: int, users: int) -> float:
        return float(self.truth(k, users).req_per_s[0])

    def evidence(self, ks=(0, 2, 4, 8), stages=(8, 16, 24, 32, 48, 64), repeats=2, distort=None):
        """Windows at every (K, users); `distort(k, users, req_per_s)` bends what was served."""
        windows = []
        for k in ks:
            for users in stages:
                d = self.truth(k, users)
                served = float(d.req_per_s[0])
                served = distort(k, users, served) if distort else served
                usage = float(d.kv_usage[0])
                for r in range(repeats):
                    windows.append(window(
                        k, users, served, r, duration_s=60.0, e2e_ms=float(d.e2e_ms[0]), ttft_ms=float(d.ttft_ms[0]),
                        spread=0.01, running_mean=float(d.real_batch[0]), waiting_mean=0.0, kv_usage_mean=usage,
                        kv_usage_peak=usage * 1.1, kv_pool_tokens=self.pool.get(k, 12000.0 - 300.0 * k),
                        mean_acceptance_length=self.acceptance(k).tokens_per_step(k),
                        preemptions=1.0 if usage * 1.1 >= 1 else 0.0))
        return evidence(windows, max(stages))

    def positions(self, ks=(2, 4, 8)) -> dict[int, PositionCounts]:
        return {k: PositionCounts(10_000.0, tuple(10_000.0 * p for p in self.acceptance(k).by_position)) for k in ks}

    def with_params(self, **changes) -> "World":
        return replace(self, params=replace(self.params, **changes))
