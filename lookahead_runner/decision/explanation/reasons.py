"""The decision in words: verdict, reasons, diagnoses and what to run next, every figure with its
interval. Built from a judged stage (stage.py); nothing here changes what is decided.
"""
from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from ...config import DecisionConfig
from ...contracts.records import ALL_FAILED_REASON
from ..gates import rules
from ..schema import Check
from ..gates.stage import StageEval, gain_bounds
from ..cells.restart_spread import borrowed, lives_advice, measured, off_earlier_text
from ..cells.stats import interval, repeats_needed
from .text import pct, rate, share
from .tradeoffs import tradeoffs

OBJECTIVE_LABEL = {"req_per_s": "req/s", "output_tok_per_s": "output tok/s", "goodput": "goodput (req/s within SLO)"}


def _label(p: DecisionConfig) -> str:
    return OBJECTIVE_LABEL[p.objective]


def _gain(stage: StageEval, k: int, other: int, p: DecisionConfig) -> str:
    b = gain_bounds(stage, k, other, p)
    g = rules.rel(stage.stats[k].objective(p.objective), stage.stats[other].objective(p.objective))
    return f"{pct(g, signed=True)} [{pct(b.low, signed=True)}, {pct(b.high, signed=True)}]"


def _blockers(stage: StageEval, k: int) -> str:
    return "; ".join(f"{c.name}: {c.evidence}" for c in stage.blocked_by(k))


def _wins(stage: StageEval, p: DecisionConfig) -> str:
    others = sorted(((k, v) for k, v in stage.shares.items() if k != stage.pick and v >= 0.01),
                    key=lambda kv: -kv[1])
    text = f"K={stage.pick} wins in {share(stage.shares.get(stage.pick, 0.0))} of {stage.resamples} resamples"
    if others:
        text += " (" + ", ".join(f"{'no K' if k is None else f'K={k}'} in {share(v)}" for k, v in others[:3]) + ")"
    return text


def faster_blocked(stage: StageEval, p: DecisionConfig) -> list[int]:
    """K with a better objective than the pick that a gate or the stop rule kept out."""
    if stage.pick is None:
        return []
    mine = stage.stats[stage.pick].objective(p.objective)
    return [k for k, s in stage.stats.items()
            if s.objective(p.objective) > mine * (1 + p.tie_tolerance_frac)
            and (stage.blocked_by(k) or (stage.stopped_at is not None and k >= stage.stopped_at))]


def _why_out(stage: StageEval, k: int) -> str:
    if stage.blocked_by(k):
        return f"blocked by {_blockers(stage, k)}"
    return f"beyond the stop rule at K={stage.stopped_at}"


def no_measurement(users: int, invalid: Mapping[tuple[int, int], str] | None = None) -> str:
    return f"No valid measurement at {users} users: nothing can be recommended." + unmeasured(invalid, users=users)


def unmeasured(invalid: Mapping[tuple[int, int], str] | None, k: int | None = None, users: int | None = None,
               all_failed_only: bool = False) -> str:
    """" At K=0, 4 users: every request failed, most often HTTP 404: ... (n of n)." for the stages (of K `k`, or at
    `users`) without a valid window: why they have no measurement ("every request failed" ones alone where
    `all_failed_only`)."""
    mine = sorted((key, why) for key, why in (invalid or {}).items()
                  if (k is None or key[0] == k) and (users is None or key[1] == users)
                  and (not all_failed_only or why.startswith(ALL_FAILED_REASON)))
    if not mine:
        return ""
    (first_k, first_users), why = mine[0]
    more = f" (and {len(mine) - 1} more stage{'s' if len(mine) > 2 else ''})" if len(mine) > 1 else ""
    return f" At K={first_k}, {first_users} users{more}: {why}."


def _waivers(stage: StageEval) -> str:
    """The gates of the pick decided without (decision.waive): said in the verdict, never hidden as a pass."""
    gone = stage.waived_gates(stage.pick) if stage.pick is not None else []
    return (" Decided without " + "; ".join(f"{c.name} (waived by decision.waive; {_cause(c)})" for c in gone)
            + ".") if gone else ""


def _cause(check: Check) -> str:
    """A waived gate's evidence up to its first "; ": what was missing, without the fix."""
    return check.evidence.split("): ", 1)[-1].split("; ", 1)[0]


def verdict(stage: StageEval, p: DecisionConfig) -> str:
    text = _verdict(stage, p)
    return (text + _waivers(stage) + _restart_note(stage) + borrowed(stage.noise, stage.prepared, p.spread_unknown)
            if stage.status == "decided" else text)


def tie_text(stage: StageEval, p: DecisionConfig, confidence: float, bar: float) -> str:
    """A verdict decided as a tie told by equivalence (a sweep's look, gates/stage.tie_confidence), in words."""
    return (f" A tie, told by equivalence: every other K's {_label(p)} stays within ±{pct(p.tie_tolerance_frac)} "
            f"of K={stage.pick} on each side in at least {share(confidence)} of the resamples (the look's bar "
            f"{bar * 100:.1f} %), so the smallest K is kept.")


def _restart_note(stage: StageEval) -> str:
    """A verdict decided on one life per K with the restart spread assumed: said, so it is not read as measured."""
    if not stage.noise.restart_unknown:
        return ""
    return (f" One life per K: restart spread unknown, taken as {stage.noise.restart_sd:.0%} per server life; the "
            "verdict clears it.")


def _verdict(stage: StageEval, p: DecisionConfig) -> str:
    at = f"at {stage.users} users"
    if stage.pick is None:
        return (f"No K passes the gates {at}: " + "; ".join(f"K={k} {_blockers(stage, k)}" for k in stage.ks
                                                           if stage.blocked_by(k))
                + ". Nothing to set until the blocker is fixed (see the diagnoses).")
    if stage.status == "not_decided":
        return (f"Not decided yet {at}: K={stage.pick} leads, but {'; '.join(stage.why_not_decided)}. "
                "See what to run next.")
    wins = _wins(stage, p)
    blocked = faster_blocked(stage, p)
    blocked_text = "; ".join(f"K={k} is faster ({_gain(stage, k, stage.pick, p)} {_label(p)}) but "
                             f"{_why_out(stage, k)}" for k in blocked)
    if stage.pick == stage.base_k:
        head = f"Keep K={stage.pick} {at}: "
        if blocked:
            return head + blocked_text + f"; {wins}."
        others = [k for k in stage.ks if k != stage.pick]
        best = max(others, key=lambda k: stage.stats[k].objective(p.objective), default=None)
        if best is None:
            tail = "no other K measured"
        elif gain_bounds(stage, best, stage.pick, p).high < 0:
            tail = f"every other K is slower (best: K={best}, {_gain(stage, best, stage.pick, p)} {_label(p)})"
        else:
            tail = (f"no larger K pays off (best: K={best}, {_gain(stage, best, stage.pick, p)} {_label(p)}, within "
                    f"the {pct(p.tie_tolerance_frac)} tie band or the noise)")
        return head + tail + f"; {wins}."
    gain = rules.rel(stage.stats[stage.pick].objective(p.objective), stage.base.objective(p.objective))
    if gain > 0:
        head = (f"Set K={stage.pick} {at}: {_gain(stage, stage.pick, stage.base_k, p)} {_label(p)} over "
                f"K={stage.base_k}; {wins}.")
    else:
        head = (f"Set K={stage.pick} {at}: the best K that passes every gate ({_label(p)} "
                f"{_gain(stage, stage.pick, stage.base_k, p)} vs K={stage.base_k}, which is "
                f"{_why_out(stage, stage.base_k)}); {wins}.")
    return head + (f" {blocked_text}." if blocked else "")


def reasons(stage: StageEval, stages: dict[int, StageEval], p: DecisionConfig) -> list[str]:
    base = stage.base
    out = []
    if stage.base_k != 0:
        out.append(f"No valid K=0 window at {stage.users} users: the smallest measured K={stage.base_k} stands in "
                   "as the baseline, so gains are relative to it, not to no speculation.")
    b = interval(stage.objective_draws(stage.base_k, p.objective), p.interval_level)
    out.append(f"Baseline K={base.k} at {stage.users} users: {rate(base.objective(p.objective))} {_label(p)} "
               f"[{rate(b.low)}, {rate(b.high)}], {base.output_tok_per_s:.0f} output tok/s, "
               + ("" if math.isnan(base.running_mean) else f"{base.running_mean:.1f} running, ")
               + f"{base.requests} requests over {base.repeats} repeat(s).")
    own = [n for k, n in sorted(stage.noise_by_k.items()) if n is not stage.noise]
    if stage.noise.source != "none":
        out.append(f"At {stage.users} users, {stage.noise.text()}"
                   + "".join(f"; {n.text()}, wider than the others'" for n in own) + ".")
    if stage.stopped_at is not None:
        prev = rules.stop_step(stage.stats, p)[0]
        now, before = stage.stats[stage.stopped_at], stage.stats[prev]
        out.append(f"Stop rule at K={stage.stopped_at}: memory rose clearly since K={prev} "
                   f"({_memory_rise_text(before, now, p)}) while {_label(p)} changed "
                   f"{_gain(stage, stage.stopped_at, prev, p)} vs K={prev}; K >= {stage.stopped_at} left out (the stop "
                   f"fires in {share(stage.stop_share)} of the resamples).")
    if stage.stop_gaps:
        out.append("Stop rule not evaluated between " + ", ".join(f"K={a} and K={b}" for a, b in stage.stop_gaps)
                   + ": no KV usage, preemption or device memory reading on either side, so a memory rise "
                     "that buys nothing could not be seen there.")
    for k in stage.ks:
        if k == stage.base_k:
            continue
        unknown, waived = stage.unknown_gates(k), stage.waived_gates(k)
        state = (_why_out(stage, k) if stage.blocked_by(k) or (stage.stopped_at is not None and k >= stage.stopped_at)
                 else "gates unknown: " + ", ".join(c.name for c in unknown) if unknown
                 else "passes every gate" if not waived
                 else "passes every gate not waived (waived: " + ", ".join(c.name for c in waived) + ")")
        out.append(f"K={k}: {_gain(stage, k, stage.base_k, p)} {_label(p)} vs K={stage.base_k}; "
                   f"picked in {share(stage.shares.get(k, 0.0))} of resamples; {state}.")
    if stage.pick is not None and stage.pick != stage.base_k:
        shown = [t.text for t in tradeoffs(stage, stage.pick, p)]
        if shown:
            out.append(f"Trade-offs of K={stage.pick} vs K={stage.base_k} (shown, not gating"
                       f"{'' if p.slos else '; only e2e p' + format(p.latency_percentile, 'g') + ' gates'}): "
                       + "; ".join(shown) + ".")
    others = [f"{u} users -> {_stage_short(st)}" for u, st in sorted(stages.items())
              if u != stage.users and (st.pick != stage.pick or st.status != "decided")]
    if others:
        out.append("Per stage, by the same gates: " + "; ".join(others) + " (see the per-stage table).")
    return out


def _reading_text(name: str, before, now) -> str:
    if name == "device memory":
        return (f"device memory peak {before.gpu_mem_peak_mib:,.0f} -> {now.gpu_mem_peak_mib:,.0f} MiB of "
                f"{now.gpu_mem_total_mib:,.0f}")
    if name == "preemptions":
        return f"preemptions {before.preemptions:.0f} -> {now.preemptions:.0f}"
    column = "kv_usage_mean" if name == "KV usage mean" else "kv_usage_peak"
    return f"{name} {pct(getattr(before, column))} -> {pct(getattr(now, column))}"


def _memory_rise_text(before, now, p: DecisionConfig) -> str:
    """The readings that rose clearly (the stop rule's evidence), then the others as context; a KV pool that
    shrank is context only: it is no reading rising."""
    rises = rules.memory_rises(now, before)
    risen = [name for name in rules.MEMORY_READINGS if rises.get(name, -math.inf) >= p.memory_rise_frac]
    rest = [name for name in rules.MEMORY_READINGS if name in rises and name not in risen]
    text = f"clear rises, {p.memory_rise_frac * 100:g} points or more: " + ", ".join(
        _reading_text(name, before, now) + ("" if name == "preemptions" else f" (+{rises[name] * 100:.0f})")
        for name in risen)
    context = [_reading_text(name, before, now) for name in rest]
    if not math.isnan(before.kv_pool_tokens) and not math.isnan(now.kv_pool_tokens):
        context.append(f"KV pool {before.kv_pool_tokens:,.0f} -> {now.kv_pool_tokens:,.0f} tokens")
    return text + ("; besides: " + ", ".join(context) if context else "")


def _stage_short(stage: StageEval) -> str:
    if stage.pick is None:
        return "no K passes the gates"
    confidence = share(stage.shares.get(stage.pick, 0.0))
    return f"K={stage.pick} ({confidence})" if stage.status == "decided" else f"not decided (K={stage.pick} leads, {confidence})"


def stage_reason(stage: StageEval, p: DecisionConfig) -> str:
    if stage.pick is None:
        return "; ".join(f"K={k}: {', '.join(c.name for c in stage.blocked_by(k))}" for k in stage.ks
                         if stage.blocked_by(k)) or "no valid K"
    if stage.status != "decided":
        return "; ".join(stage.why_not_decided)
    return _wins(stage, p)


def _concurrency_limit(s, p: DecisionConfig) -> str:
    """What holds the real batch under the users, a queue read as the real-batch gate reads it
    (rules.queue_is_a_limit): a step or two queued beside a KV pool at most half full is a busy host."""
    if rules.pool_ran_out(s, p):
        return "the KV cache"
    scheduler = "the scheduler (--max-num-seqs / --max-num-batched-tokens)"
    if rules.queue_is_a_limit(s, p):
        return scheduler
    if rules.queued(s, p):
        return "a busy host or turnover (a queue of a step or two beside a KV pool at most half full)"
    return f"request turnaround (users between requests, {'not' if s.waiting_mean < 1.0 else 'little'} queued)"


def diagnoses(stage: StageEval, stages: dict[int, StageEval], p: DecisionConfig) -> list[str]:
    notes = []
    for k, check in ((k, c) for k in stage.ks for c in stage.checks[k]):
        if check.name == rules.GATE_BATCH and check.status == rules.FAIL:
            notes.append(f"Real batch drops at K={k}: {check.evidence}.")
            break
    others = [k for k in stage.ks if k != stage.base_k]
    inside = [gain_bounds(stage, k, stage.base_k, p) for k in others]
    gains = '; '.join(f'K={k} {_gain(stage, k, stage.base_k, p)}' for k in others)
    if others and all(b.bounded and -p.tie_tolerance_frac <= b.low and b.high <= p.tie_tolerance_frac for b in inside):
        notes.append(f"Not the lever: every K's {_label(p)} is within ±{pct(p.tie_tolerance_frac)} of K={stage.base_k} "
                     f"with its interval ({gains}); acceptance or the decoding strategy is the bottleneck, not how "
                     "far to speculate.")
    elif others and all(abs(stage.gain(k, p.objective)) <= p.tie_tolerance_frac for k in others):
        notes.append(f"Possibly not the lever: every K's {_label(p)} is within ±{pct(p.tie_tolerance_frac)} of "
                     f"K={stage.base_k}, but not every interval is ({gains}); more repeats would tell.")
    acceptance = [s.acceptance_rate for k, s in stage.stats.items() if k > 0 and not math.isnan(s.acceptance_rate)]
    if acceptance and float(np.median(acceptance)) < p.low_acceptance:
        notes.append(f"Acceptance-bound: median acceptance {pct(float(np.median(acceptance)))} < "
                     f"{pct(p.low_acceptance)}; larger K wastes compute and KV.")
    for k in sorted({stage.base_k, stage.pick if stage.pick is not None else stage.base_k}):
        s = stage.stats[k]
        if not math.isnan(s.running_mean) and s.running_mean < 0.8 * stage.users:
            notes.append(f"Concurrency-bound at K={k}, {stage.users} users: only {s.running_mean:.1f} running "
                         f"({s.waiting_mean:.1f} waiting, KV peak {pct(s.kv_usage_peak)}, {s.preemptions:.0f} "
                         f"preemptions); the limit is {_concurrency_limit(s, p)}.")
    if p.earlier_spread is not None:
        notes += off_earlier_text(stage.off_earlier, p.earlier_spread)
    if stage.blocked_by(stage.base_k):
        notes.append(f"The baseline K={stage.base_k} itself fails {_blockers(stage, stage.base_k)}: the target "
                     "concurrency is past what this server holds; lower it or --max-num-seqs before tuning K.")
    return notes


def next_runs(stage: StageEval, p: DecisionConfig, contender_share: float) -> list[str]:
    """What to measure so an undecided verdict can be decided, the cheapest fact first: with the restart spread
    unknown, the one life that measures it (no count of repeats from an assumed spread); with it measured, the
    lives each contender needs, from that spread. `contender_share`: the win share that keeps a K in the running
    at the verdict's bar (engine.contender_share)."""
    if stage.status != "not_decided" or stage.pick is None:
        return []
    out = []
    assumed = stage.noise.restart_unknown and stage.noise.source != "repeats"
    if assumed:
        out.append(f"The cheapest next fact is the restart spread (how far one server life lands from the next; "
                   f"{pct(stage.noise.restart_sd)} assumed here): one more life of K={stage.pick} measures it, and "
                   "every K measured once borrows it. On a real server the sweep does this by itself (no "
                   "sweep.strategy given, or sweep.strategy = \"adaptive\") and remembers the spread for this "
                   "server; or set decision.restart_spread to a spread measured here. No count of repeats is given "
                   "from the assumed spread.")
    contenders = sorted(k for k, v in stage.shares.items()
                        if k is not None and k != stage.pick and v >= contender_share)
    repeats = min(s.repeats for s in stage.stats.values())
    for other in [] if assumed else contenders:  # no repeat count from an assumed spread
        b = gain_bounds(stage, stage.pick, other, p)
        g = rules.rel(stage.stats[stage.pick].objective(p.objective), stage.stats[other].objective(p.objective))
        if not b.bounded or math.isnan(g):
            continue
        half = (b.high - b.low) / 2
        distance = abs(abs(g) - p.tie_tolerance_frac)
        wanted = max(distance, 0.005)
        head = (f"K={stage.pick} vs K={other}: {_label(p)} {_gain(stage, stage.pick, other, p)}, "
                f"{pct(p.tie_tolerance_frac)} tie band")
        if measured(stage.noise):  # from the wider of the two K's noises (a K apart keeps its own)
            noise = max(stage.noise_by_k.get(stage.pick, stage.noise), stage.noise_by_k.get(other, stage.noise),
                        key=lambda n: n.rel_sd)
            out.append(head + "; " + lives_advice(noise, stage.prepared, stage.pick, other, wanted, p))
            continue
        n = repeats_needed(repeats, half, wanted)
        out.append(f"{head}; about {n} repeats of both (load.repeats = {n}, or load.repeats = \"auto\") would "
                   f"narrow the interval to about ±{pct(wanted, digits=1)}.")
    for check in stage.unknown_gates(stage.pick):
        if check.unknown_because == "too little data":
            out.append(f"K={stage.pick} {check.name}: {check.evidence}; lengthen the stages at {stage.users} users "
                       "or add repeats.")
        else:
            out.append(f"K={stage.pick} {check.name} not measured: {check.evidence}.")
    if stage.noise.source == "none":
        out.append(f"At {stage.users} users: run >= 2 repeats, or stages at least two requests long, so the "
                   "throughput noise can be measured.")
    elif stage.noise.restart_unknown and not assumed:
        out.append("One life per K: run load.repeat_mode = \"restart\" (a server start per repeat) so the spread "
                   "from one server life to the next is measured, or set decision.restart_spread to the spread "
                   "restarted repeats measured on this server (the repeat stability check of such a run shows it).")
    return out


def repeat_check(stage: StageEval, k: int, p: DecisionConfig) -> Check:
    """Checklist item 1 (advice): repeats agree, with how many more would narrow the interval."""
    windows = stage.prepared[k].cell.windows
    values = [w.served_per_s for w in windows]
    name = "repeat stability"
    if len(values) < 2:
        return Check(name=name, kind="advice", status="unknown", unknown_because="too little data",
                     evidence=f"one repeat at K={k}: set load.repeats >= 2 (or \"auto\") to see the spread")
    median = float(np.median(values))
    spread = (max(values) - min(values)) / median if median else math.inf
    b = interval(stage.objective_draws(k, "req_per_s"), p.interval_level)
    half = (b.high - b.low) / 2 / median if b.bounded and median else math.nan
    text = (f"req/s over {len(values)} repeats {', '.join(f'{v:.2f}' for v in values)} (spread {pct(spread, digits=1)}, "
            f"band {pct(p.repeat_spread_frac)}); interval ±{pct(half, digits=1)}")
    if spread > p.repeat_spread_frac:
        more = repeats_needed(len(values), spread / 2, p.repeat_spread_frac / 2)
        return Check(name=name, kind="advice", status="fail",
                     evidence=text + f"; add repeats: about {more - len(values)} more would narrow the interval to "
                                     f"about ±{pct(half * math.sqrt(len(values) / more), digits=1)}")
    return Check(name=name, kind="advice", status="pass", evidence=text)
