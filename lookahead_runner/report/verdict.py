"""The top of the report, from decision.json: verdict, checklist, candidates and the per-stage recommendation.

Pure: decision (and plan parts) in, plain dicts of display strings out. Strings stay raw; the template escapes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from .cells import MISSING, as_bool, format_cell, is_missing, shell_text

PER_BATCH_SIZE_KEY = "num_speculative_tokens_per_batch_size"
PER_BATCH_SIZE_SINCE = "0.33"


def checklist_rows(decision: Mapping) -> list[dict]:
    rows = []
    for item in decision.get("checklist") or []:
        if not isinstance(item, Mapping):
            continue
        passed = as_bool(item.get("passed"))
        rows.append({"name": str(item.get("name", "")), "passed": passed,
                     "status": "passed" if passed else "failed", "evidence": str(item.get("evidence", ""))})
    return rows


def recommendation(decision: Mapping) -> dict | None:
    chosen = decision.get("recommended")
    if not isinstance(chosen, Mapping):
        return None
    argv = [str(part) for part in chosen.get("argv") or []]
    return {"k": chosen.get("k"), "setting": str(chosen.get("setting", "")), "argv": argv,
            "argv_shell": shell_text(argv)}


def verdict_tone(chosen: dict | None, checklist: list[dict]) -> str:
    if chosen is None or chosen.get("k") is None:
        return "bad"
    return "ok" if checklist and all(row["passed"] for row in checklist) else "warn"


def per_stage_rows(decision: Mapping) -> list[dict]:
    rows = []
    for row in decision.get("per_stage") or []:
        if isinstance(row, Mapping):
            rows.append({"users": format_cell("users", row.get("users")), "best_k": format_cell("k", row.get("best_k")),
                         "running_mean": format_cell("running_mean", row.get("running_mean")),
                         "tok_per_s": format_cell("tok_per_s", row.get("tok_per_s")),
                         "argv_shell": shell_text(row.get("argv")) if row.get("argv") else ""})
    return rows


def _range_text(entry: object) -> str:
    if isinstance(entry, (list, tuple)) and len(entry) == 3:
        lo, hi, k = entry
        upper = "and up" if isinstance(hi, int) and hi >= 1_000_000 else f"to {hi}"
        return f"batch {lo} {upper}: K={k}"
    return str(entry)


def per_batch_size(decision: Mapping, vllm_version: str) -> dict:
    """The recommendation in the installed version's form: one config keyed by real batch size on vLLM >= 0.33,
    else one command per stage (the per-stage rows carry them)."""
    form = decision.get("per_batch_size")
    if not isinstance(form, Mapping):
        return {"available": False, "note": (
            f"vLLM {vllm_version or MISSING} has no per-batch-size K ({PER_BATCH_SIZE_KEY} needs >= "
            f"{PER_BATCH_SIZE_SINCE}): a server runs one K. Use the command of the stage that matches "
            "production concurrency, or the target's recommendation above.")}
    ranges = form.get(PER_BATCH_SIZE_KEY) or []
    argv = form.get("argv")
    note = "" if argv else "No stage gains from speculation, or the winning argv has no --speculative-config to extend."
    return {"available": True, "ranges": [_range_text(entry) for entry in ranges],
            "json": json.dumps({PER_BATCH_SIZE_KEY: ranges}), "argv_shell": shell_text(argv) if argv else "",
            "note": note}


def candidate_rows(decision: Mapping) -> list[dict]:
    """Every K the walk kept at the target, with its checks, so the choice can be re-read."""
    chosen = decision.get("recommended") if isinstance(decision.get("recommended"), Mapping) else {}
    rows = []
    for candidate in decision.get("candidates") or []:
        if not isinstance(candidate, Mapping):
            continue
        checks = checklist_rows({"checklist": candidate.get("checklist")})
        rows.append({
            "k": format_cell("k", candidate.get("k")),
            "chosen": candidate.get("k") is not None and candidate.get("k") == chosen.get("k"),
            "req_per_s": format_cell("req_per_s", candidate.get("req_per_s")),
            "conservative_req_per_s": format_cell("conservative_req_per_s", candidate.get("conservative_req_per_s")),
            "tok_per_s": format_cell("tok_per_s", candidate.get("tok_per_s")),
            "passed": f"{sum(row['passed'] for row in checks)}/{len(checks)}" if checks else MISSING,
            "checks": checks,
        })
    return rows


def failed_lives(decision: Mapping, lives: list[Mapping]) -> list[dict]:
    """Server lives that failed or never finished: what the decision had to do without."""
    rows = []
    for life in lives:
        status = str(life.get("status", "") or "")
        if status in ("failed", "missing"):
            rows.append({"life": str(life.get("dir") or f"{life.get('setting')}/r{life.get('repeat')}"),
                         "status": status,
                         "reason": str(life.get("reason") or ("" if status == "failed" else "not run or cut half-way"))})
    listed = {row["life"] for row in rows}
    for item in decision.get("failed_lives") or []:
        if isinstance(item, Mapping) and str(item.get("life", "")) not in listed:
            rows.append({"life": str(item.get("life", "")), "status": "failed", "reason": str(item.get("reason", ""))})
    return rows


def token_accounting(tokens: object) -> dict:
    """lives.csv's closed-window token check for one life, with a flag when it does not add up.

    The server keeps generating for a request the client cut, so server > client is expected when
    requests were cut; any other difference means tokens the client never saw (or counted twice).
    """
    tokens = tokens if isinstance(tokens, Mapping) else {}
    client, served = tokens.get("client_output_tokens"), tokens.get("server_generation_tokens")
    difference, cut = tokens.get("difference"), tokens.get("cut_requests")
    if is_missing(client) and is_missing(served):
        return {"text": MISSING, "status": ""}
    if is_missing(served) or is_missing(difference):
        return {"text": f"client {format_cell('client_output_tokens', client)}; server counter not sampled",
                "status": ""}
    explained = difference == 0 or (difference > 0 and (cut or 0) > 0)
    text = (f"client {format_cell('client_output_tokens', client)} / server "
            f"{format_cell('server_generation_tokens', served)} (difference {int(difference):+,}, "
            f"{format_cell('cut_requests', cut)} cut)")
    return {"text": text, "status": "" if explained else "check"}


def axis_rows(decision: Mapping) -> list[dict]:
    """With a second sweep axis (grid), the decision made at each value of that flag."""
    rows = []
    for item in decision.get("by_axis") or []:
        if isinstance(item, Mapping):
            score = item.get("conservative_req_per_s")
            finite = isinstance(score, (int, float)) and score not in (float("inf"), float("-inf"))
            rows.append({"flag": str(item.get("flag", "")), "value": str(item.get("value", "")),
                         "k": format_cell("k", item.get("k")),
                         "conservative_req_per_s": format_cell("conservative_req_per_s", score) if finite else MISSING,
                         "verdict": str(item.get("verdict", ""))})
    return rows
