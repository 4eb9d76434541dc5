"""The top of the report, from the typed decision: verdict and its confidence, checklist, gates,
candidates with intervals, the evidence table, per-stage picks, the knee and the run's thresholds.

Pure: a `Decision` (and plan parts) in, plain dicts of display strings out. Strings stay raw; the
template escapes.
"""

from __future__ import annotations

import json
import math

from ..config import DecisionConfig
from ..decision.schema import Check, Decision, Percentile, Range
from ..decision.confirmation.schedule import OPEN_END
from ..runfolder.plan import LifeResult
from ..vllm.schedule import SCHEDULE_KEY
from .cells import MISSING, format_cell, is_missing, shell_text

STATUS_TEXT = {"pass": "✔ pass", "fail": "✘ fail", "unknown": "? unknown", "waived": "– waived (not judged)"}
DECISION_STATUS_TEXT = {"decided": "decided", "not_decided": "not decided yet", "no_eligible": "no K passes the gates",
                        "no_measurement": "no valid measurement"}


def _num(value: float | None, digits: int = 2) -> str:
    return MISSING if is_missing(value) else f"{value:,.{digits}f}"


def _pct(value: float | None, signed: bool = False) -> str:
    if is_missing(value):
        return MISSING
    return f"{value:+.1%}" if signed else f"{value:.1%}"


def range_text(r: Range, fmt=_num) -> str:
    """[low, high], "∞" for an unbounded side."""
    low = "−∞" if r.low is None else fmt(r.low)
    high = "∞" if r.high is None else fmt(r.high)
    return f"[{low}, {high}]"


def check_rows(checks: list[Check]) -> list[dict]:
    return [{"name": c.name, "kind": c.kind, "status": c.status, "status_text": STATUS_TEXT[c.status],
             "evidence": c.evidence + (f" ({c.unknown_because})" if c.unknown_because else ""),
             "n": "" if c.n is None else f"{c.n:,}"} for c in checks]


def recommendation(decision: Decision) -> dict | None:
    chosen = decision.recommended
    if chosen is None:
        return None
    return {"k": chosen.k, "setting": chosen.setting, "argv": chosen.argv, "argv_shell": shell_text(chosen.argv)}


def verdict_tone(decision: Decision) -> str:
    if decision.status in ("no_eligible", "no_measurement"):
        return "bad"
    if decision.status == "not_decided":
        return "warn"
    return "ok" if all(c.status == "pass" for c in decision.checklist) else "warn"


def confidence_text(decision: Decision) -> str:
    if decision.confidence is None or decision.leading_k is None or decision.mode == "ramp":
        return ""
    looks = decision.looks
    if looks is not None and looks.stopped_by == "tie" and decision.status == "decided":
        return (f"K={decision.leading_k} is kept on a tie: every other K stays inside the tie band in at least "
                f"{math.floor(decision.confidence * 100):.0f}% of {decision.resamples} resamples of the evidence; "
                + looks_text(decision))
    needs = (looks_text(decision) if looks is not None else
             f"a verdict needs {decision.confidence_threshold:.0%}.")
    return (f"K={decision.leading_k} was picked in {math.floor(decision.confidence * 100):.0f}% of "
            f"{decision.resamples} resamples of the evidence (requests within windows, and repeats or, with one "
            f"server life per K, a restart spread per life); {needs}")


def _short_of_certainty(level: float) -> str:
    """A level near 100 % with the decimals that keep it short of 100 % (an early look's: "99.999 %")."""
    miss = (1 - level) * 100
    if miss <= 0:
        return "100 %"
    return f"{level * 100:.{max(1, -math.floor(math.log10(miss)))}f} %"


def looks_text(decision: Decision) -> str:
    """Where a sweep that looked at its verdict as lives ended stopped, and why its bar is not one look's."""
    looks = decision.looks
    counted = "life measured" if looks.unit == "lives" else "round of repeats"
    level = decision.thresholds.get("interval_level", DecisionConfig.model_fields["interval_level"].default)
    intervals = (f" Its gain and restart spread intervals are at {_short_of_certainty(looks.interval_level)} there, "
                 f"so they hold at {float(level) * 100:g} % over the looks together." if looks.interval_level else "")
    return (f"the sweep looked at its verdict after each {counted}: {looks.text} (each look's bar spends part of "
            f"the {1 - looks.confidence:.0%} error a verdict at {looks.confidence:.0%} may make, so it holds over all "
            f"the looks together).{intervals}")


def candidate_rows(decision: Decision) -> list[dict]:
    rows = []
    for c in decision.candidates:
        rows.append({
            "k": str(c.k), "chosen": decision.recommended is not None and c.k == decision.recommended.k,
            "leading": c.k == decision.leading_k,
            "objective": _num(c.objective), "objective_range": range_text(c.objective_range),
            "gain": MISSING if c.gain is None else _pct(c.gain, signed=True),
            "gain_range": "" if c.gain is None else range_text(c.gain_range, lambda v: _pct(v, signed=True)),
            "win_share": f"{math.floor(c.win_share * 100):.0f}%",
            "state": ("blocked: " + ", ".join(c.blocked_by)) if c.blocked_by else
                     "beyond the stop rule" if c.beyond_stop else
                     "gates unknown" if any(g.status == "unknown" for g in c.gates) else
                     "gates waived: " + ", ".join(g.name for g in c.gates if g.status == "waived")
                     if any(g.status == "waived" for g in c.gates) else "passes every gate",
            "gates": check_rows(c.gates), "tradeoffs": [t.text for t in c.tradeoffs],
        })
    return rows


def _percentile_text(p: Percentile | None) -> str:
    if p is None or p.value_ms is None:
        return MISSING
    text = f"{p.value_ms:,.0f} {range_text(p.range, lambda v: f'{v:,.0f}')}"
    return text if p.decisive else text + " ⚠"


def evidence_rows(decision: Decision) -> list[dict]:
    """The (K, users) table the decision read: pooled requests, intervals, n."""
    rows = []
    for cell in decision.cells:
        by = {(p.metric, p.q): p for p in cell.percentiles}
        rows.append({
            "k": str(cell.k), "users": str(cell.users), "repeats": str(cell.repeats), "requests": f"{cell.requests:,}",
            "req_per_s": f"{_num(cell.req_per_s)} {range_text(cell.req_per_s_range)}",
            "by_repeat": ", ".join(_num(v) for v in cell.req_per_s_by_repeat),
            "tok_per_s": f"{_num(cell.output_tok_per_s, 0)} {range_text(cell.output_tok_per_s_range, lambda v: _num(v, 0))}",
            "goodput": "" if cell.goodput is None else f"{_num(cell.goodput)} {range_text(cell.goodput_range)}",
            "ttft_p50": _percentile_text(by.get(("ttft", 0.5))), "ttft_p99": _percentile_text(by.get(("ttft", 0.99))),
            "tpot_p50": _percentile_text(by.get(("tpot", 0.5))), "e2e_p90": _percentile_text(by.get(("e2e", 0.9))),
            "e2e_p99": _percentile_text(by.get(("e2e", 0.99))),
            "failures": f"{cell.failures} ({_pct(cell.failure_rate)} {range_text(cell.failure_rate_range, _pct)})",
            "running": _measured("running_mean", cell.running_mean, cell.not_measured),
            "waiting": format_cell("waiting_mean", cell.waiting_mean),
            "kv_peak": _measured("kv_usage_peak", cell.kv_usage_peak, cell.not_measured),
            "preemptions": format_cell("preemptions", cell.preemptions),
            "acceptance": _measured("acceptance_rate", cell.acceptance_rate, cell.not_measured),
            "drafted": format_cell("drafted_per_step", cell.drafted_per_step),
        })
    return rows


def _measured(column: str, value: float | None, not_measured: dict[str, str]) -> str:
    """A server figure, or the empty mark with why it is empty (the metric and its source)."""
    text = format_cell(column, value)
    return f"{text} ({not_measured[column]})" if is_missing(value) and column in not_measured else text


def per_stage_rows(decision: Decision) -> list[dict]:
    rows = []
    for pick in decision.per_stage:
        shown_k = pick.k if pick.k is not None else pick.leading_k
        rows.append({
            "users": str(pick.users), "status": pick.status, "status_text": DECISION_STATUS_TEXT[pick.status],
            "k": MISSING if shown_k is None else (str(shown_k) if pick.k is not None else f"({shown_k} leads)"),
            "confidence": MISSING if pick.confidence is None else f"{math.floor(pick.confidence * 100):.0f}%",
            "running_mean": format_cell("running_mean", pick.running_mean),
            "objective": _num(pick.objective),
            "blocked": "; ".join(f"K={k}: {', '.join(names)}" for k, names in pick.blocked.items()),
            "reason": pick.reason, "argv_shell": shell_text(pick.argv) if pick.argv else "",
        })
    return rows


def _range_entry(entry: object) -> str:
    if isinstance(entry, (list, tuple)) and len(entry) == 3:
        lo, hi, k = entry
        upper = "and up" if isinstance(hi, int) and hi >= OPEN_END else f"to {hi}"
        return f"batch {lo} {upper}: K={k}"
    return str(entry)


def per_batch_size(decision: Decision) -> dict:
    """A schedule (K by real batch size) when decided stages want different K and the server takes one."""
    form = decision.per_batch_size
    if not form:
        return {"available": False, "note": "No schedule: the decided stages agree on one K, too few stages are "
                                            "decided, or this vLLM takes no per-batch-size K."}
    ranges, argv, left_out = form.ranges, form.argv, form.left_out_users
    note = (f"Anchored on the decided stages ({', '.join(map(str, form.anchored_on_users))} users)"
            + (f"; left out (not decided): {', '.join(map(str, left_out))} users" if left_out else "") + "."
            + (f" Boundaries at the performance model's crossovers (halfway between stages: {form.stage_ranges})."
               if form.boundaries == "model crossovers" else ""))
    value = form.num_speculative_tokens_per_batch_size
    return {"available": True, "ranges": [_range_entry(entry) for entry in ranges],
            "json": json.dumps({SCHEDULE_KEY: ranges if value is None else value}),
            "argv_shell": shell_text(argv) if argv else "",
            "note": note + ("" if argv else " The argv of the largest K has no speculative config to extend.")}


def knee_view(decision: Decision) -> dict | None:
    knee = decision.knee
    if knee is None:
        return None
    return {"k": str(knee.k), "users": MISSING if knee.users is None else str(knee.users), "reason": knee.reason,
            "steps": [{"from": str(s.users_from), "to": str(s.users_to),
                       "gain": _pct(s.gain_per_doubling, signed=True),
                       "range": range_text(s.gain_range, lambda v: _pct(v, signed=True)),
                       "cost": s.cost or MISSING, "costly": s.costly} for s in knee.steps]}


def threshold_rows(decision: Decision) -> list[dict]:
    return [{"name": name, "value": json.dumps(value) if isinstance(value, (dict, list)) else str(value)}
            for name, value in sorted(decision.thresholds.items())]


def axis_rows(decision: Decision) -> list[dict]:
    """With a second sweep axis (grid), the decision made at each value of that flag."""
    return [{"flag": a.flag, "value": a.value, "k": MISSING if a.k is None else str(a.k),
             "objective": _num(a.objective), "status": DECISION_STATUS_TEXT[a.status], "verdict": a.verdict}
            for a in decision.by_axis]


def failed_lives(decision: Decision, lives: list[LifeResult]) -> list[dict]:
    """Server lives that failed or never finished: what the decision had to do without."""
    rows = []
    for life in lives:
        if life.state in ("failed", "missing"):
            rows.append({"life": life.planned.dir, "status": life.state,
                         "reason": life.reason or ("" if life.state == "failed" else "not run or cut half-way")})
    listed = {row["life"] for row in rows}
    rows += [{"life": note.life, "status": "failed", "reason": note.reason}
             for note in decision.failed_lives if note.life not in listed]
    return rows


def token_accounting(tokens: object) -> dict:
    """lives.csv's closed-window token check for one life, with a flag when it does not add up.

    The server keeps generating for a request the client cut, so server > client is expected when
    requests were cut; any other difference means tokens the client never saw (or counted twice).
    """
    tokens = tokens if isinstance(tokens, dict) else {}
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
