"""The decision at an arrival rate in words (decision/rate_decision.py judges it; `ev` is its RateEval):
"At 20 req/s: set K=4: p99 TTFT 610 -> 340 ms [-320, -210], SLO met by 99.4 % [98.8, 99.7] vs 93.0 % at K=0;
K=4 wins in 97 % of 1000 resamples; K=0 falls behind at 20 req/s: 9.8 served, waiting 3 -> 41." Where every K
holds the rate, what decided is named with its figures and their intervals: "set K=4, decided by its capacity
within the SLO (the headroom at 30 req/s): 50.8 req/s [48.0, 60.0] against K=0's 31.4 req/s [30.0, 36.0]" or
"set K=4, decided by the latency at the rate: p90 e2e 3259 -> 1294 ms [-1990, -1915]; capacity within the SLO K=4
> 48 req/s against K=0's 38.7 req/s [36.0, 48.0]: not told apart beyond the tie band (3%)". Nothing here changes
what is decided.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

from ...config import DecisionConfig
from ...telemetry.drafting import LIKELY_CAUSES
from ..cells.rate_window import RateWindow, windows_too_short
from ..cells.stats import Bounds
from ..gates.in_effect import PREFIX
from ..gates.rate_gates import GATE_ATTAINMENT, GATE_KEEPS_UP, attainment, attainment_bounds, missed
from ..gates.rate_pick import more_capacity, rank
from .text import share

SLO_QUANTILES = (0.5, 0.9, 0.99)   # the percentiles a cell keeps (cells/measure.py QUANTILES)
DECIDED_BY_TEXT = {"capacity": "the capacity within the SLO decided", "latency": "the latency at the rate decided",
                   "gates": "every smaller K fails a gate", "tie": "no K beats the smallest"}


def objective_name(p: DecisionConfig) -> str:
    latency = f"1000 / e2e p{p.latency_percentile:g} ms (lower latency wins)"
    return f"capacity within the SLO (the headroom at the rate), then {latency} at the rate" if p.slos else latency


def latency_change(label: str, base_ms: float, k_ms: float, bounds: Bounds) -> str:
    """"TTFT p99 610 -> 340 ms [-320, -210]": the two figures, and the interval of their difference."""
    low = "?" if bounds.low is None else f"{bounds.low:+.0f}"
    high = "?" if bounds.high is None else f"{bounds.high:+.0f}"
    return f"{label} {base_ms:.0f} -> {k_ms:.0f} ms [{low}, {high}]"


def _attained(ev, k: int, p: DecisionConfig) -> str:
    s = ev.stats[k]
    bounds = attainment_bounds(s, p)
    return f"{attainment(s):.1%} [{bounds.low:.1%}, {bounds.high:.1%}]"


def _latencies(ev, k: int, other: int, p: DecisionConfig) -> list[str]:
    """Each SLO metric's percentile (its own, where a cell keeps it), else the e2e at decision.latency_percentile:
    `other`'s -> K's, with the interval of the difference."""
    wanted = [(slo.metric.upper(), slo.column, slo.share if slo.share in SLO_QUANTILES else 0.99) for slo in p.slos] \
        or [("e2e", "e2e_ms", p.latency_percentile / 100)]
    out = []
    for metric, column, q in dict.fromkeys(wanted):
        diff, bounds = ev.difference(k, column, q, p.interval_level, other)
        if math.isfinite(diff):
            out.append(latency_change(f"p{q * 100:g} {metric}", ev.stats[other].quantile(column, q),
                                      ev.stats[k].quantile(column, q), bounds))
    return out


def why_out(ev, k: int, p: DecisionConfig) -> str:
    """Why a K lost at the rate, in its own figures."""
    blocked = ev.blocked_by(k)
    if not blocked:
        return ""
    check = next((c for c in blocked if c.name == GATE_KEEPS_UP), blocked[0])
    if check.name == GATE_KEEPS_UP:
        return check.evidence
    if check.name == GATE_ATTAINMENT:
        return f"misses the SLO: {missed(ev.stats[k], p)}"
    return f"is blocked by {check.name}: {check.evidence}"


def _runner_up(ev, p: DecisionConfig) -> int | None:
    """The K the rule would set without the pick (None where no other K passes every gate)."""
    others = [k for k in ev.eligible if k != ev.pick]
    return rank(ev.standings, others, p.tie_tolerance_frac).pick if others else None


def _speed_change(ev, k: int, other: int, p: DecisionConfig) -> str:
    """"p90 e2e 3259 -> 1294 ms [-1990, -1915]": `other`'s e2e at decision.latency_percentile -> K's."""
    q = p.latency_percentile / 100
    _, bounds = ev.difference(k, "e2e_ms", q, p.interval_level, other)
    return latency_change(f"p{p.latency_percentile:g} e2e", ev.stats[other].quantile("e2e_ms", q),
                          ev.stats[k].quantile("e2e_ms", q), bounds)


def _besides_speed(figures: list[str], p: DecisionConfig) -> list[str]:
    """The latency figures but the e2e at decision.latency_percentile (`_speed_change` names it)."""
    return [f for f in figures if not f.startswith(f"p{p.latency_percentile:g} e2e ")]


def _capacities(ev, k: int, other: int) -> str:
    """"K=4 > 48 req/s against K=0's 38.7 req/s [36.0, 48.0]" ("" without a capacity for both)."""
    mine, theirs = ev.capacity_text.get(k, ""), ev.capacity_text.get(other, "")
    return f"K={k} {mine} against K={other}'s {theirs}" if mine and theirs else ""


def _set_apart(ev, p: DecisionConfig) -> str:
    """What set the pick apart from the smaller K that passes every gate (ev.compared), with its figures."""
    k, other = ev.pick, ev.compared
    capacity = _capacities(ev, k, other)
    if ev.decided_by == "capacity":
        return (f"decided by its capacity within the SLO (the headroom at {ev.rate:g} req/s): "
                f"{capacity.removeprefix(f'K={k} ')}; {_speed_change(ev, k, other, p)}")
    tie = f"not told apart beyond the tie band ({p.tie_tolerance_frac:.0%})"
    return (f"decided by the latency at the rate: {_speed_change(ev, k, other, p)}"
            + (f"; capacity within the SLO {capacity}: {tie}" if capacity else ""))


def verdict(ev, p: DecisionConfig) -> str:
    at = f"{ev.rate:g} req/s"
    lost = "; ".join(f"K={k} {why_out(ev, k, p)}" for k in ev.ks if ev.blocked_by(k))
    if ev.pick is None:
        return (f"No K keeps the SLO at {at}: {lost}. Nothing to set at this rate: lower it below a K's capacity "
                "within the SLO (the capacity table), or relax decision.slo (a limit or its percentile).")
    if ev.status == "not_decided":
        return f"Not decided yet at {at}: K={ev.pick} leads, but {'; '.join(ev.why_not)}. See what to run next."
    wins = f"K={ev.pick} wins in {share(ev.shares.get(ev.pick, 0.0))} of {ev.resamples} resamples"
    if ev.pick != ev.base_k:
        figures = _latencies(ev, ev.pick, ev.base_k, p)
        if p.slos:
            figures.append(f"SLO met by {_attained(ev, ev.pick, p)} vs {_attained(ev, ev.base_k, p)} at K={ev.base_k}")
        if ev.compared is None:     # every smaller K fails a gate here
            text = f"At {at}: set K={ev.pick}: {', '.join(figures)}; {wins}"
        else:
            parts = [_set_apart(ev, p), ", ".join(_besides_speed(figures, p))]
            text = f"At {at}: set K={ev.pick}, {'; '.join(part for part in parts if part)}; {wins}"
    else:
        text = f"At {at}: keep K={ev.base_k}" + (f": SLO met by {_attained(ev, ev.base_k, p)}" if p.slos else "")
        other = _runner_up(ev, p)
        if other is not None and not ev.blocked_by(other):
            capacity = _capacities(ev, other, ev.base_k)
            latency = [_speed_change(ev, other, ev.base_k, p), *_besides_speed(_latencies(ev, other, ev.base_k, p), p)]
            base, rival, tie = ev.standings[ev.base_k], ev.standings[other], p.tie_tolerance_frac
            if more_capacity(base, rival, tie):
                text += f"; K={other} holds it too, with less capacity within the SLO ({capacity})"
            elif math.isfinite(rival.speed) and base.speed > rival.speed * (1 + tie):
                text += (f"; K={other} holds it too, slower at the rate beyond the tie band ({tie:.0%}): "
                         f"{', '.join(latency)}" + (f"; capacity within the SLO {capacity}" if capacity else ""))
            else:
                text += (f"; K={other} holds it too, not told apart beyond the tie band ({tie:.0%})"
                         + (f" by capacity within the SLO ({capacity}) nor" if capacity else "")
                         + f" by latency at the rate ({', '.join(latency)})")
        text += f"; {wins}"
    return text + (f"; {lost}." if lost else ".")


def reasons(ev, p: DecisionConfig) -> list[str]:
    tie = f"({p.tie_tolerance_frac:.0%})"
    lines = [f"At {ev.rate:g} req/s every K that keeps up serves the offered rate, so its goodput there tells the K "
             "apart only once one saturates. Among the K that pass every gate "
             + ("(keeping up, and each SLO of decision.slo met by its own percentile of the arrivals), "
                "the capacity within the SLO decides first, the headroom at the rate: a K that holds a rate more "
                f"than the tie band {tie} above one where another does not puts it out (a capacity between two rates "
                "measured could sit anywhere between them); then the lower "
                if p.slos else "(no decision.slo given: no capacity within it), the lower ")
             + f"e2e p{p.latency_percentile:g} at the rate, beyond the tie band {tie}; then the smallest K."
             + (" The pick stands only where no K's capacity bracket leaves room for a capacity beyond the pick's "
                f"by more than the tie band {tie}, unless neither fails at any rate measured." if p.slos else "")
             + (f" Here: {DECIDED_BY_TEXT[ev.decided_by]}." if ev.decided_by in DECIDED_BY_TEXT
                and not ev.capacity_open else "")]   # open: what decides is not known yet (why_not)
    for k in ev.ks:
        s = ev.stats[k]
        figures = f"{s.finished} arrivals over {len(ev.cells[k].windows)} window(s), {s.req_per_s:.2f} served per s"
        latency = s.quantile("e2e_ms", p.latency_percentile / 100)
        if math.isfinite(latency):
            figures += f", e2e p{p.latency_percentile:g} {latency:.0f} ms"
        if p.slos:
            figures += f", SLO met by {_attained(ev, k, p)}"
        if ev.capacity_text.get(k):
            figures += f", capacity within the SLO {ev.capacity_text[k]}"
        lost = why_out(ev, k, p)
        short = windows_too_short(ev.cells[k].windows)
        kept = f"; keeping up not judged ({short})" if short else "; keeps up"
        lines.append(f"K={k} at {ev.rate:g} req/s: {figures}" + (f"; {lost}" if lost else kept) + ".")
    return lines


def diagnoses(ev) -> list[str]:
    """What the verdict cannot see: a K measured at the rate in fewer windows than the others."""
    counts = {k: len(cell.windows) for k, cell in ev.cells.items()}
    if len(set(counts.values())) <= 1:
        return []
    return [f"At {ev.rate:g} req/s the K have different numbers of windows ("
            + ", ".join(f"K={k}: {n}" for k, n in sorted(counts.items())) + "): the ones with fewer are less sure."]


def _bracket(standing) -> str:
    """"holds 20 req/s, fails at 24" of one K's capacity bracket within the SLO (unbounded ends said as such)."""
    held = "holds no rate measured" if math.isinf(standing.holds) else f"holds {standing.holds:.3g} req/s"
    failed = "fails at none measured" if math.isinf(standing.fails) else f"fails at {standing.fails:.3g}"
    return f"{held}, {failed}"


def _between(ev, k: int) -> tuple[float, float]:
    """The rates the pick's and K's brackets leave unmeasured (the lowest end that holds, the highest that fails)."""
    mine, theirs = ev.standings[k], ev.standings[ev.pick]
    held = [x for x in (mine.holds, theirs.holds) if math.isfinite(x)]
    failed = [x for x in (mine.fails, theirs.fails) if math.isfinite(x)]
    return min(held, default=math.nan), max(failed, default=math.nan)


def capacity_open(ev, k: int, p: DecisionConfig) -> str:
    """Why the pick does not stand while K's capacity bracket leaves room for it beyond the pick's (rate_pick.open)."""
    return (f"K={k}'s capacity within the SLO could set it over K={ev.pick} beyond the tie band "
            f"({p.tie_tolerance_frac:.0%}): K={k} {_bracket(ev.standings[k])}, K={ev.pick} "
            f"{_bracket(ev.standings[ev.pick])}; nothing between was measured")


def next_runs(ev, p: DecisionConfig) -> list[str]:
    out = []
    for k in ev.capacity_open:
        low, high = _between(ev, k)
        span = f" between {low:.3g} and {high:.3g} req/s" if math.isfinite(low) and math.isfinite(high) else ""
        precision = p.tie_tolerance_frac / 2
        arrivals = math.ceil((2 / precision) ** 2 / 1000) * 1000
        out.append(f"Tell K={k}'s and K={ev.pick}'s capacity within the SLO apart: the capacity search "
                   f"(sweep.strategy = \"capacity\") with sweep.capacity_precision = {precision:g} (half the tie "
                   f"band: brackets that narrow apart from each other), or rate stages{span}, each stage long "
                   f"enough for about {arrivals:,} arrivals (a window's offered rate varies by about 1 / "
                   "sqrt(arrivals), and a bracket that narrow needs its rates told apart); or widen "
                   "decision.tie_tolerance_frac where a smaller capacity difference does not matter to you.")
    for k in ev.ks:
        for check in ev.unknown(k):
            short = windows_too_short(ev.cells[k].windows) if check.name == GATE_KEEPS_UP else ""
            if short:
                stage_s = next(w.queue.needed_stage_s for w in ev.cells[k].windows if w.queue is not None)
                out.append(f"Lengthen the rate stage at {ev.rate:g} req/s to about {stage_s:,.0f} s so whether "
                           f"K={k} keeps up can be judged ({short.split('; ')[0]}).")
            if check.name == GATE_ATTAINMENT and "about " in check.evidence:
                needed = int(check.evidence.rsplit("about ", 1)[1].split(" ")[0].replace(",", ""))
                seconds = needed / ev.rate / max(len(ev.cells[k].windows), 1)
                out.append(f"Lengthen the rate stage at {ev.rate:g} req/s to about {seconds:,.0f} s of window "
                           f"(about {needed:,} arrivals) so K={k}'s SLO attainment can be told from its "
                           "percentile, or add repeats (load.repeats).")
    if ev.status == "not_decided" and ev.pick is not None and ev.shares.get(ev.pick, 0.0) < p.confidence \
            and not ev.capacity_open:   # the rates measured settle the capacity, not another life at them
        out.append(f"Add repeats (load.repeats) of the K at {ev.rate:g} req/s: K={ev.pick} leads in "
                   f"{share(ev.shares.get(ev.pick, 0.0))} of the resamples.")
    if ev.pick is None:
        out.append("Lower decision.target_rate to a rate some K holds (the capacity table), or relax decision.slo.")
    return out


def not_in_effect(windows: Sequence[RateWindow], rate: float) -> str:
    """" K=4 cannot be recommended: none of its 1 window at 20 req/s had it in effect (...). Likely causes: ... "
    for each K whose every window at the rate drafted otherwise ("" when none)."""
    lines = []
    for k in sorted({w.k for w in windows}):
        mine = [w for w in windows if w.k == k]
        reasons_ = [_off(w) for w in mine]
        if mine and all(reasons_):
            count = f"{len(mine)} window{'s' if len(mine) > 1 else ''}"
            lines.append(f"K={k} cannot be recommended: none of its {count} at {rate:g} req/s had it in effect "
                         f"({reasons_[0]}), so they were left out of its evidence")
    return f"{'. '.join(lines)}. Likely causes: {'; '.join(LIKELY_CAUSES)}. " if lines else ""


def _off(window: RateWindow) -> str:
    return next((part[len(PREFIX):] for part in window.invalid_reason.split("; ") if part.startswith(PREFIX)), "")


def no_measurement(rate: float, windows: Sequence[RateWindow]) -> str:
    why = next((f" At K={w.k}: {w.invalid_reason}." for w in sorted(windows, key=lambda w: (w.k, w.repeat))
                if w.invalid_reason), "")
    return f"No valid window at {rate:g} req/s: nothing can be recommended at that rate.{why}"
