"""The restart spread of the simulated server: each server life lands at its own speed (and acceptance).

A real vLLM started twice with the same flags does not serve at the same rate (vLLM #53436: a run-to-run CV of
7.5-19.7 % at 1-4 concurrent requests with speculation; #39903: distinct stable regimes after a restart). The
scenario's `restart_spread_frac` (`--sim-restart-spread F`) gives each life a speed factor, lognormal of mean 1
and relative SD F, that divides every step time; `restart_alpha_sd` adds one normal offset to every acceptance
of that life. Both are drawn from the server's --seed and the life's name (LOOKAHEAD_SIM_LIFE, which the runner
sets to the run and the life: one draw per server start, the same for the same life), so a statistic can be
checked against the truth of each life (`life_truth`) and of the server (the scenario without a draw: speed 1).
A process started without a life name is a life of its own: its draw comes from the process's start.
Pure: a scenario and a name in, a scenario out.
"""
from __future__ import annotations

import math
import os
import random
import time
from dataclasses import dataclass, replace

from .scenarios import Scenario

# the step-time fields a life's speed divides (the KV read follows weight_read_ms)
STEP_TIME_FIELDS = ("fixed_ms", "weight_read_ms", "compute_ms_per_token", "draft_step_ms", "prefill_ms_per_token",
                    "schedule_step_ms", "k_switch_ms")


@dataclass(frozen=True)
class LifeDraw:
    """One server life's luck: its speed (x the scenario's) and the offset added to every acceptance."""

    life: str
    speed: float = 1.0
    alpha_offset: float = 0.0

    def text(self, scenario: Scenario) -> str:
        return (f"restart spread {scenario.restart_spread_frac:.1%}: life {self.life!r} runs at {self.speed:.3f} x "
                f"the scenario's speed, acceptance {self.alpha_offset:+.3f}")


def draw(scenario: Scenario, seed: int, life: str) -> LifeDraw:
    """The life's draw, from the seed and its name alone; speed 1 and offset 0 where the scenario has no spread."""
    rng = random.Random(f"restart-{seed}-{life}")
    sigma = math.sqrt(math.log1p(scenario.restart_spread_frac ** 2))  # lognormal of mean 1, this relative SD
    speed = math.exp(rng.gauss(-sigma * sigma / 2, sigma)) if scenario.restart_spread_frac > 0 else 1.0
    offset = rng.gauss(0.0, scenario.restart_alpha_sd) if scenario.restart_alpha_sd > 0 else 0.0
    return LifeDraw(life, speed, offset)


def for_life(scenario: Scenario, luck: LifeDraw) -> Scenario:
    """The scenario this life runs: every step time / its speed, every acceptance + its offset (within [0, 1])."""
    if luck.speed == 1.0 and luck.alpha_offset == 0.0:
        return scenario
    clip = (lambda alpha: min(max(alpha + luck.alpha_offset, 0.0), 1.0))
    return replace(scenario, **{name: getattr(scenario, name) / luck.speed for name in STEP_TIME_FIELDS},
                   alpha=clip(scenario.alpha),
                   alpha_chat=clip(scenario.alpha_chat) if scenario.alpha_chat >= 0 else scenario.alpha_chat,
                   category_alpha=tuple((word, clip(alpha)) for word, alpha in scenario.category_alpha))


def life_name(environ_value: str | None) -> str:
    """The life's name as the runner set it, else one of this process alone (its pid and start)."""
    return environ_value or f"unnamed-{os.getpid()}-{time.time_ns()}"
