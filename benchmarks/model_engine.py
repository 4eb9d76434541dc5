"""Windows of a scenario from the simulator's pure engine model (no HTTP, no Locust, no real time): the
performance model's held-out accuracy in seconds, as a cross-check of the recorded benchmark.

Each (K, users) is a closed loop of `users` with no think time on lookahead_runner/sim/model.py, built from
the same server argv the sweep passes; the first 20 % of engine time is the warm-up, the rest one window
whose requests, time-weighted running / waiting / KV usage, preemptions and acceptance counters become a
decision `Window` as the analysis would build it. The HTTP path and the client are left out, so the
client's own overhead and jitter are not in these windows (the recorded benchmark has them).
"""
from __future__ import annotations

import json
import math

import numpy as np

from decision_scenarios import DRAFT_MODEL, SERVER_MODEL, BenchScenario

from lookahead_runner.decision import Evidence, Window, evidence
from lookahead_runner.decision.perfmodel import PositionCounts, WorkloadShape

WARM_SHARE = 0.2


def engine_window(s: BenchScenario, k: int, users: int, engine_s: float, seed: int) -> tuple[Window, PositionCounts | None]:
    from lookahead_runner.sim.cli import parse_serve
    from lookahead_runner.sim.model import EngineModel
    from lookahead_runner.sim.profiles import get_profile

    spec = json.dumps({"method": "draft_model", "model": DRAFT_MODEL, "num_speculative_tokens": k})
    args = parse_serve([SERVER_MODEL, *s.server_args, "--seed", str(seed),
                        *(["--speculative-config", spec] if k else [])], get_profile())
    model = EngineModel(args.scenario, args.engine)
    t, warm_s, sent, born, first, done, tokens = 0.0, engine_s * WARM_SHARE, 0, {}, {}, [], {}
    running = waiting = kv = weight = kv_peak = 0.0
    at_warm = None

    def send() -> None:
        nonlocal sent
        model.add_request(f"r{sent}", s.prompt_tokens, s.output_tokens, min_tokens=s.output_tokens,
                          ignore_eos=True, temperature=s.temperature)
        born[f"r{sent}"], sent = t, sent + 1

    for _ in range(users):
        send()
    returning = 0
    while t < engine_s:
        if not model.has_work():  # every user finished in the last step: they return before the next one
            for _ in range(returning):
                send()
            returning = 0
        result = model.step()
        for _ in range(returning):
            send()
        if result.duration_s <= 0:
            raise RuntimeError(f"{s.name} K={k}: the engine model cannot schedule anything")
        t += result.duration_s
        c = model.counters
        if t <= warm_s:
            at_warm = (c.preemptions, c.spec_drafts, c.spec_accepted_tokens, list(c.accepted_per_pos()))
        else:
            running += model.num_running * result.duration_s
            waiting += model.num_waiting * result.duration_s
            kv += model.kv_usage * result.duration_s
            weight += result.duration_s
            kv_peak = max(kv_peak, model.kv_usage)
        returning = 0
        for out in result.outputs:
            first.setdefault(out.request_id, t)
            tokens[out.request_id] = tokens.get(out.request_id, 0) + out.n_tokens
            if out.finished:
                if t > warm_s:
                    done.append((first[out.request_id] - born[out.request_id], t - born[out.request_id],
                                 t - warm_s, tokens[out.request_id]))
                returning += 1
    c = model.counters
    at_warm = at_warm or (0, 0, 0, [0] * k)
    drafts, accepted = c.spec_drafts - at_warm[1], c.spec_accepted_tokens - at_warm[2]
    per_pos = tuple(float(a - b) for a, b in zip(c.accepted_per_pos(), at_warm[3]))
    ttft = np.array([d[0] for d in done]) * 1000
    e2e = np.array([d[1] for d in done]) * 1000
    out_tokens = np.array([d[3] for d in done], dtype=float)
    tpot = (e2e - ttft) / np.maximum(out_tokens - 1, 1)
    duration = engine_s - warm_s
    w = Window(k=k, repeat=0, users=users, duration_s=duration, t_done_s=np.array([d[2] for d in done]),
               output_tokens=out_tokens, latency_ms=np.column_stack([ttft, tpot, tpot, e2e]), finished=len(done),
               failures=0, timeouts=0,
               server={"running_mean": running / weight, "waiting_mean": waiting / weight, "kv_usage_mean": kv / weight,
                       "kv_usage_peak": kv_peak, "preemptions": float(c.preemptions - at_warm[0]),
                       "kv_pool_tokens": float(model.num_blocks * model.cfg.block_size),
                       "mean_acceptance_length": 1 + accepted / drafts if drafts else math.nan})
    return w, (PositionCounts(float(drafts), per_pos) if k and drafts else None)


def engine_evidence(s: BenchScenario, stages: list[int], engine_s: float,
                    seed: int) -> tuple[Evidence, dict[int, PositionCounts], WorkloadShape]:
    windows, positions = [], {}
    for k in s.ks:
        for users in stages:
            w, counts = engine_window(s, k, users, engine_s, seed)
            windows.append(w)
            if counts is not None:
                prev = positions.get(k)
                positions[k] = counts if prev is None else PositionCounts(
                    prev.drafts + counts.drafts, tuple(a + b for a, b in zip(prev.accepted, counts.accepted)))
    seqs = next((int(a) for flag, a in zip(s.server_args, s.server_args[1:]) if flag == "--max-num-seqs"), None)
    return evidence(windows, s.users), positions, WorkloadShape(s.prompt_tokens, s.output_tokens, seqs)
