"""The concurrency-scaling check alone (`lookahead-runner ramp`): evidence of one setting over rising
stages in, a `Decision` out (the knee where more users buy little throughput at a latency or KV cost),
so the same report machinery renders it.
"""
from __future__ import annotations

from ..config import DecisionConfig
from .engine import cell_summaries, evaluate_stages
from .cells.evidence import Evidence
from .explanation.reasons import unmeasured
from .gates.knee import find_knee
from .schema import Decision, Recommended, StagePick


def ramp_decision(ev: Evidence, k: int, setting: str, argv: list[str], p: DecisionConfig) -> Decision:
    """The knee of one K (its setting's name: `setting`) over the ramp's stages, as a decision."""
    stages = evaluate_stages(ev, p)
    stages = {u: st for u, st in stages.items() if k in st.stats}
    base = {"mode": "ramp", "objective": p.objective, "resamples": p.resamples, "confidence_threshold": p.confidence,
            "thresholds": p.model_dump(mode="json"), "recommended": Recommended(k=k, setting=setting, argv=argv)}
    if not stages:
        return Decision(status="no_measurement",
                        verdict=f"No valid stage at K={k}: no knee to find.{unmeasured(ev.invalid, k=k)}", **base)
    knee = find_knee(k, {u: st.stats[k] for u, st in stages.items()}, {u: st.draws[k] for u, st in stages.items()}, p)
    verdict = (f"The knee at K={k} is {knee.users} users: {knee.reason.split(': ', 1)[1]}." if knee.users is not None
               else f"No knee found at K={k}: {knee.reason}.")
    per_stage = [StagePick(users=u, status="decided", k=k, leading_k=k, running_mean=st.stats[k].running_mean,
                           objective=st.stats[k].objective(p.objective), argv=argv) for u, st in sorted(stages.items())]
    return Decision(status="decided" if knee.users is not None else "not_decided", verdict=verdict,
                    target_users=knee.users, leading_k=k, knee=knee, per_stage=per_stage,
                    cells=cell_summaries(stages, p), reasons=[step_text(s) for s in knee.steps], **base)


def step_text(step) -> str:
    gain = "?" if step.gain_per_doubling is None else f"{step.gain_per_doubling:+.1%}"
    low = "?" if step.gain_range.low is None else f"{step.gain_range.low:+.1%}"
    high = "?" if step.gain_range.high is None else f"{step.gain_range.high:+.1%}"
    return f"{step.users_from} -> {step.users_to} users: {gain} [{low}, {high}] per doubling; {step.cost or 'no cost measured'}."
