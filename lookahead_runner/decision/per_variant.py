"""One decision per workload variant, and the sweep's answer over them.

Each variant is decided alone, by the same engine, from its own windows (its cells, per-stage picks and
schedule). The answer over them: decided only when every variant is decided (the exit code a script reads
then means "act on every line"); otherwise the least settled status of any variant, in the order
no measurement, no K passes the gates, not decided yet (a rerun helps the last one only). A recommendation
stands at the top only when every variant picks the same K. When the picks differ, the verdict says where
("K=4 at 4,000-token prompts; K=0 at 400-token prompts") and that one server cannot serve both: vLLM
0.32/0.33 choose K per step by batch size only (num_speculative_tokens_per_batch_size), never by context
or sampling, so each workload needs a server of its own, set as its variant's decision says.
Pure: decisions in, a decision out.
"""
from __future__ import annotations

from .schema import Decision

# the order in which a variant's status makes the whole sweep's (the first present wins)
UNSETTLED = ("no_measurement", "no_eligible", "not_decided")
ONE_SCHEDULE = ("a single schedule cannot serve them all: vLLM 0.32/0.33 choose K by batch size only "
                "(num_speculative_tokens_per_batch_size), not by prompt length or sampling; run each workload "
                "on a server of its own, with its variant's K or schedule")
STATUS_WORDS = {"not_decided": "not decided yet", "no_eligible": "no K passes the gates",
                "no_measurement": "no valid measurement"}


def stamped(decision: Decision, variant: str) -> Decision:
    """The decision with its variant named in it and in every cell, candidate and per-stage pick."""
    out = decision.model_copy(deep=True)
    out.variant = variant
    for item in (*out.cells, *out.candidates, *out.per_stage):
        item.variant = variant
    return out


def note_unconfirmed_schedules(decision: Decision, mode: str) -> None:
    """A variant's schedule that no life confirmed (decision.confirm = "off") says so."""
    for part in decision.by_variant:
        if mode == "off" and part.confirmation is None and part.per_batch_size and part.per_batch_size.argv:
            part.diagnoses.append("This variant's per-batch-size schedule was not run in a life of its own "
                                  "(decision.confirm = \"off\"): a schedule can cost every step and collapse at a "
                                  "boundary, which no per-K life shows; confirm it (--confirm) before using it.")


def answer(decision: Decision) -> str:
    """One variant's answer in a few words: "K=4", or its status (with the leading K)."""
    if decision.status == "decided" and decision.recommended is not None:
        return f"K={decision.recommended.k}"
    lead = f" (K={decision.leading_k} leads)" if decision.leading_k is not None else ""
    return STATUS_WORDS.get(decision.status, decision.status) + lead


def by_variant(decisions: list[tuple[str, Decision]]) -> Decision:
    """The sweep's decision over its workload variants: each one's decision in `by_variant`, their cells and
    per-stage picks (each naming its variant) at the top, the verdict saying where the answers differ."""
    parts = [stamped(d, label) for label, d in decisions]
    status = next((s for s in UNSETTLED if any(d.status == s for d in parts)), "decided")
    ks = {d.recommended.k for d in parts if d.recommended is not None}
    same = status == "decided" and len(ks) == 1
    where = "; ".join(f"{answer(d)} at {d.variant}" for d in parts)
    if same:
        verdict = f"Set K={ks.pop()} for every workload variant ({', '.join(d.variant for d in parts)})."
    elif status == "decided":
        verdict = f"The answer differs by workload: {where}. {ONE_SCHEDULE[0].upper()}{ONE_SCHEDULE[1:]}."
    else:
        verdict = f"Not decided for every workload variant: {where}."
    diagnoses = [f"Per workload variant, {ONE_SCHEDULE}; each variant's per-batch-size schedule, where one is "
                 "offered, is for that workload alone."] if len({answer(d) for d in parts}) > 1 else []
    first = parts[0]
    return Decision(
        status=status, verdict=verdict, objective=first.objective,
        target_users=first.target_users if len({d.target_users for d in parts}) == 1 else None,
        baseline_k=first.baseline_k, recommended=first.recommended if same else None,
        resamples=first.resamples, confidence_threshold=first.confidence_threshold,
        cells=[c for d in parts for c in d.cells], candidates=[c for d in parts for c in d.candidates],
        per_stage=[p for d in parts for p in d.per_stage],
        stopped_at_k=max((d.stopped_at_k for d in parts if d.stopped_at_k is not None), default=None),
        reasons=[f"{d.variant}: {d.verdict}" for d in parts], diagnoses=diagnoses,
        next_runs=[f"{d.variant}: {step}" for d in parts for step in d.next_runs],
        thresholds=first.thresholds, by_variant=parts)
