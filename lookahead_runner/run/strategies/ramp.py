"""The scaling check alone (`lookahead-runner ramp`): the sweep config turned into one setting over rising
stages (pure: a config in, a config out): users stages (closed loop) by default or `--users`, rate stages (open
loop) with `--rates`. Its decision: decision/ramp.py.
"""
from __future__ import annotations

from ...config import StageConfig, SweepConfig

DEFAULT_USERS = (1, 2, 4, 8, 16, 32, 64, 128)


def ramp_config(config: SweepConfig, k: int | None, users: list[int] | None, stage_s: float | None,
                rates: list[float] | None = None) -> SweepConfig:
    """The sweep config turned into a ramp: one K, one repeat, doubling users stages unless given, or a rate
    stage per rate given."""
    stages = config.load.stages
    duration = stage_s or stages[0].duration_s
    if rates:
        stages = [StageConfig(rate=r, duration_s=duration) for r in rates]
    elif users or stage_s:
        stages = [StageConfig(users=u, duration_s=duration) for u in (users or DEFAULT_USERS)]
    data = config.model_dump()
    data["speculation"]["k"] = [config.speculation.k[0] if k is None else k]
    data["load"]["stages"] = [s.model_dump(exclude_none=True) for s in stages]
    data["load"]["repeats"] = 1
    data["grid"] = {"flag": "", "values": []}
    data["decision"]["target_users"] = next((s.users for s in stages if s.users), 0)
    data["name"] = f"{config.name}-ramp"
    return SweepConfig.model_validate(data)
