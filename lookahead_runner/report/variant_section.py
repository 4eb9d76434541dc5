"""The report's workload variants: each variant's answer in one table, its charts apart, its token checks.

Pure: a `Decision` and plan parts in, display strings out (the template escapes them).
"""
from __future__ import annotations

from collections.abc import Callable

import pandas as pd

from ..decision.schema import Decision
from ..runfolder.plan import LifeResult
from ..decision.per_variant import ONE_SCHEDULE, answer
from .cells import MISSING, format_cell
from .verdict import DECISION_STATUS_TEXT, token_accounting, verdict_tone


def variant_rows(decision: Decision) -> dict | None:
    """One row per workload variant (its decision and where to read it), and whether the answers differ."""
    if not decision.by_variant:
        return None
    rows = [{"variant": d.variant, "anchor": f"variant-v{i}", "target_users": format_cell("users", d.target_users),
             "status": DECISION_STATUS_TEXT[d.status], "tone": verdict_tone(d), "answer": answer(d),
             "schedule": "offered" if d.per_batch_size else MISSING, "verdict": d.verdict}
            for i, d in enumerate(decision.by_variant)]
    differ = len({row["answer"] for row in rows}) > 1
    return {"rows": rows, "differ": differ, "note": ONE_SCHEDULE if differ else ""}


def variant_charts(valid: pd.DataFrame, decision: Decision, charts: Callable[[pd.DataFrame], list[dict]]) -> list[dict]:
    """The comparison charts; with workload variants, one set per variant (a point per K and users mixes no
    two workloads), each chart's title naming its variant."""
    if not decision.by_variant or "variant" not in valid.columns:
        return charts(valid)
    out = []
    for i, d in enumerate(decision.by_variant):
        for entry in charts(valid[valid["variant"].astype(str) == d.variant]):
            out.append(entry | {"id": f"{entry['id']}-v{i}", "title": f"{entry['title']} · {d.variant}"})
    return out


def lives_tokens(life: LifeResult) -> dict:
    """A life's closed-window token check; with workload variants, one per variant's block."""
    if not life.variants:
        return token_accounting(life.tokens)
    checks = [(block.variant, token_accounting(block.tokens)) for block in life.variants]
    return {"text": "; ".join(f"{name}: {check['text']}" for name, check in checks),
            "status": next((check["status"] for _, check in checks if check["status"]), "")}
