"""``--stages`` parsing and the stage schedule: pure, importable without Locust (no gevent patching)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

STAGES_OPTION = "--stages"


@dataclass(frozen=True)
class Stage:
    """Hold `users` concurrent users (closed loop) for `duration_s` seconds."""

    users: int
    duration_s: float


def parse_stages(text: str) -> list[Stage]:
    """Parse "USERS:SECONDS,USERS:SECONDS,..." (e.g. "4:20,16:20"); ValueError naming the option otherwise."""
    expected = "expected USERS:SECONDS[,USERS:SECONDS...] with USERS >= 1 and SECONDS > 0, e.g. 4:20,16:20"
    items = [item.strip() for item in str(text).split(",")]
    if not any(items):
        raise ValueError(f"{STAGES_OPTION}: empty; {expected}")
    stages = []
    for item in items:
        users_text, sep, seconds_text = item.partition(":")
        try:
            if not sep:
                raise ValueError
            users = int(users_text)
            duration_s = float(seconds_text)
        except ValueError:
            raise ValueError(f"{STAGES_OPTION}: bad stage {item!r}; {expected}") from None
        if users < 1 or not duration_s > 0 or duration_s == float("inf"):
            raise ValueError(f"{STAGES_OPTION}: bad stage {item!r}; {expected}")
        stages.append(Stage(users=users, duration_s=duration_s))
    return stages


def stage_at(stages: Sequence[Stage], elapsed_s: float) -> int | None:
    """Index of the stage scheduled at `elapsed_s` seconds into the run, None once all have ended."""
    end_s = 0.0
    for index, stage in enumerate(stages):
        end_s += stage.duration_s
        if elapsed_s < end_s:
            return index
    return None
