"""The simulator's own answer: its pure engine model in a closed loop of N users (each sends its next request
when one finishes), no clock, no server. The truth an end-to-end sweep on the simulator is checked against."""
from __future__ import annotations

import json
from collections.abc import Sequence

from .cli import parse_serve
from .model import EngineModel
from .profiles import get_profile


def steady_req_per_s(server_args: Sequence[str], k: int, prompt: int, output: int, temperature: float, users: int,
                     engine_s: float = 40.0, model: str = "sim/e2e-model", draft: str = "sim/llama-68m",
                     chat: bool = False) -> float:
    """Requests per second at K over the engine time after the first fifth (`chat`: chat-formatted requests)."""
    spec = json.dumps({"method": "draft_model", "model": draft, "num_speculative_tokens": k})
    args = parse_serve([model, *server_args, *(["--speculative-config", spec] if k else [])], get_profile())
    engine = EngineModel(args.scenario, args.engine)
    sent = 0

    def send() -> None:
        nonlocal sent
        engine.add_request(f"r{sent}", prompt, output, min_tokens=output, ignore_eos=True, temperature=temperature,
                           chat=chat)
        sent += 1

    for _ in range(users):
        send()
    t, warm, done = 0.0, engine_s / 5, 0
    while t < engine_s:
        result = engine.step()
        if result.duration_s <= 0:
            raise RuntimeError("the engine model stalled: nothing fits the KV pool")
        t += result.duration_s
        for out in result.outputs:
            if out.finished:
                done += t > warm
                send()
    return done / (engine_s - warm)


def best_k(server_args: Sequence[str], ks: Sequence[int], prompt: int, output: int, temperature: float,
           users: int, chat: bool = False) -> tuple[int, dict[int, float]]:
    """The K with the most requests per second, and every K's rate."""
    rates = {k: steady_req_per_s(server_args, k, prompt, output, temperature, users, chat=chat) for k in ks}
    return max(rates, key=rates.get), rates
