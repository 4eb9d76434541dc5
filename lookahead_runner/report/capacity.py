"""The report's capacity within the SLO (decision.json's `capacity`) and the verdict at the target rate beside
the users one (`at_rate`). Pure: the decision in, display values out (the template escapes them)."""
from __future__ import annotations

from ..config.slo import parse_slos
from ..decision.schema import Decision
from .cells import MISSING
from .verdict import DECISION_STATUS_TEXT, candidate_rows, check_rows, recommendation, verdict_tone


def capacity_view(decision: Decision) -> dict | None:
    """The capacity table: per K its highest rate and concurrency within the SLO, with intervals."""
    if not decision.capacity:
        return None
    rows = [{"k": str(row.k), "variant": row.variant, "rate": row.rate_text or MISSING, "rate_from": row.rate_from,
             "users": row.users_text or MISSING, "users_from": row.users_from,
             "gain": MISSING if row.gain is None else f"{row.gain:+.0%}", "text": row.text}
            for row in decision.capacity]
    return {"rows": rows, "slos": slos_text(decision), "variants": any(row.variant for row in decision.capacity)}


def slos_text(decision: Decision) -> str:
    """"TTFT p90 <= 500 ms, TPOT p99 <= 40 ms": the SLOs the capacity holds, each at its own percentile (a run from
    before issue 46 held every SLO at once at decision.slo_attainment: its capacity_target says so)."""
    if decision.capacity_target is not None:
        return f"every SLO at once for {decision.capacity_target:.1%} of the requests"
    slo = decision.thresholds.get("slo")
    try:
        slos = parse_slos(tuple(sorted((str(key), float(limit)) for key, limit in slo.items()))) \
            if isinstance(slo, dict) else ()
    except (TypeError, ValueError):
        slos = ()
    return ", ".join(s.text() for s in slos) or MISSING


def at_rate_view(decision: Decision) -> dict | None:
    """The verdict at the target rate where it stands beside the users one (both targets given)."""
    part = decision.at_rate
    if part is None:
        return None
    return {"rate": f"{part.target_rate:g}", "verdict": part.verdict, "tone": verdict_tone(part),
            "status": DECISION_STATUS_TEXT[part.status], "recommended": recommendation(part),
            "checklist": check_rows(part.checklist), "candidates": candidate_rows(part), "objective": part.objective,
            "reasons": list(part.reasons), "next_runs": list(part.next_runs)}


def target_rate_text(decision: Decision) -> str:
    rate = decision.target_rate
    return "" if rate is None else f"{rate:g} req/s"
