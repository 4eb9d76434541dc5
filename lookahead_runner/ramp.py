"""The concurrency-scaling check alone (`lookahead-runner ramp`): one setting, rising stages,
the knee where throughput stops growing. Pure: a config in, a config out; a summary in, a
decision-shaped dict out (so the same report machinery renders it).
"""
from __future__ import annotations

import pandas as pd

from .config import SweepConfig, StageConfig

DEFAULT_USERS = (1, 2, 4, 8, 16, 32, 64, 128)


def ramp_config(config: SweepConfig, k: int | None, users: list[int] | None, stage_s: float | None) -> SweepConfig:
    """The sweep config turned into a ramp: one K, one repeat, doubling stages unless given."""
    stages = config.load.stages
    if users or stage_s:
        duration = stage_s or stages[0].duration_s
        stages = [StageConfig(users=u, duration_s=duration) for u in (users or DEFAULT_USERS)]
    data = config.model_dump()
    data["speculation"]["k"] = [config.speculation.k[0] if k is None else k]
    data["load"]["stages"] = [s.model_dump() for s in stages]
    data["load"]["repeats"] = 1
    data["grid"] = {"flag": "", "values": []}
    data["decision"]["target_users"] = stages[0].users
    data["name"] = f"{config.name}-ramp"
    return SweepConfig.model_validate(data)


def find_knee(summary: pd.DataFrame, gain_frac: float) -> dict:
    """The last stage whose req/s still grew by at least `gain_frac` over the stage before it."""
    valid = summary[summary["valid"].astype(bool)].sort_values("users")
    points = valid.groupby("users", as_index=False)["req_per_s"].median()
    if points.empty:
        return {"knee_users": None, "reason": "no valid stage: nothing to judge"}
    knee = points.iloc[0]
    for prev, row in zip(points.itertuples(index=False), points.iloc[1:].itertuples(index=False)):
        growth = (row.req_per_s - prev.req_per_s) / prev.req_per_s if prev.req_per_s else 0.0
        if growth < gain_frac:
            return {"knee_users": int(prev.users), "next_users": int(row.users), "growth": growth,
                    "reason": f"req/s grew {growth:+.1%} from {prev.users} to {row.users} users "
                              f"({prev.req_per_s:.2f} -> {row.req_per_s:.2f}): the knee is {prev.users} users"}
        knee = row
    return {"knee_users": int(knee.users), "next_users": None, "growth": None,
            "reason": f"req/s still grew at the last stage ({int(knee.users)} users): add higher stages to find the knee"}


def ramp_decision(summary: pd.DataFrame, k: int, argv: list[str], gain_frac: float) -> dict:
    knee = find_knee(summary, gain_frac)
    verdict = (f"Throughput stops growing above {knee['knee_users']} users at K={k}."
               if knee.get("next_users") else f"No knee found at K={k}: {knee['reason']}.")
    per_stage = [{"users": int(r.users), "best_k": k, "running_mean": float(r.running_mean),
                  "tok_per_s": float(r.output_tok_per_s)} for r in summary.sort_values("users").itertuples()]
    return {"mode": "ramp", "verdict": verdict, "knee": knee, "reasons": [knee["reason"]], "diagnoses": [],
            "checklist": [], "per_stage": per_stage, "candidates": [], "stopped_at_k": None,
            "recommended": {"k": k, "setting": f"k{k}", "argv": argv}, "target_users": knee["knee_users"]}
