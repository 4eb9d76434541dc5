"""The simulator's own answer: its pure engine model in a closed loop of N users (each sends its next request
when one finishes), no clock, no server. The truth an end-to-end sweep on the simulator is checked against: of
the server (every life's mean: speed 1), or of one named server life, with its restart spread's draw
(sim/restart.py), and the spread itself (`restart_spread`)."""
from __future__ import annotations

import json
from collections.abc import Sequence

from .cli import parse_serve
from .model import EngineModel
from .profiles import get_profile
from .restart import draw, for_life


def steady_req_per_s(server_args: Sequence[str], k: int, prompt: int, output: int, temperature: float, users: int,
                     engine_s: float = 40.0, model: str = "sim/e2e-model", draft: str = "sim/llama-68m",
                     chat: bool = False, life: str | None = None) -> float:
    """Requests per second at K over the engine time after the first fifth (`chat`: chat-formatted requests);
    `life`: of that server life (its name as LOOKAHEAD_SIM_LIFE gives it), else of the server (speed 1)."""
    spec = json.dumps({"method": "draft_model", "model": draft, "num_speculative_tokens": k})
    args = parse_serve([model, *server_args, *(["--speculative-config", spec] if k else [])], get_profile())
    scenario = args.scenario if life is None else for_life(args.scenario, draw(args.scenario, args.engine.seed, life))
    engine = EngineModel(scenario, args.engine)
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


def restart_spread(server_args: Sequence[str], model: str = "sim/e2e-model") -> float:
    """The relative SD of a server life's speed that these flags draw (--sim-restart-spread; 0: none)."""
    return parse_serve([model, *server_args], get_profile()).scenario.restart_spread_frac
