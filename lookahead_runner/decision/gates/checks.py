"""The gates of one K at one stage, with intervals and evidence (rules.py's point rules, refined).

A point rule says a gate fails; here it fails only when the difference is also beyond its interval
("statistically real"), and is unknown when the data cannot tell: too little data, or not measured
(naming the metric, where it comes from, and the fix). Missing data is never a pass. A gate named
in decision.waive that could not be judged reads "waived": it blocks nothing and passes nothing.
"""
from __future__ import annotations

import math

import numpy as np

from ...config import DecisionConfig
from ...vllm.metrics import SIGNALS
from . import rules
from ..cells.measure import CellStats
from ..schema import Check
from ..cells.stats import interval, min_samples_for_upper_bound, quantile_bounds, wilson
from ..explanation.text import ms as _ms, pct, pp


def _check(name: str, status: str, evidence: str, because: str = "", n: int | None = None) -> Check:
    return Check(name=name, kind="gate", status=status, evidence=evidence,
                 unknown_because=because if status == rules.UNKNOWN else "", n=n)


# gate name -> its key in decision.waive
def waive_key(name: str) -> str:
    return {rules.GATE_MEMORY: "memory", rules.GATE_BATCH: "batch", rules.GATE_LATENCY: "latency",
            rules.GATE_FAILURES: "failures"}.get(name, "slo" if name.startswith(rules.SLO_GATE_PREFIX) else name)


def _absent(signal: str) -> str:
    names = SIGNALS[signal]
    older = f" (or {', '.join(names[1:])} on older vLLM)" if len(names) > 1 else ""
    return f"{names[0]}{older} absent from /metrics (vLLM 0.32 names)"


def not_measured(s: CellStats) -> dict[str, str]:
    """The evidence table's empty server columns of one cell, each with why (the metric and its source)."""
    out = {}
    for column, signal in (("running_mean", "running"), ("waiting_mean", "waiting"), ("kv_usage_peak", "kv_usage"),
                           ("preemptions", "preemptions_total")):
        if math.isnan(getattr(s, column)):
            out[column] = _absent(signal)
    if math.isnan(s.acceptance_rate):
        out["acceptance_rate"] = ("K=0 drafts nothing" if s.k == 0 else
                                  f"{' / '.join(SIGNALS[n][0] for n in ('spec_accepted_total', 'spec_draft_tokens_total'))}"
                                  " absent from /metrics (vLLM 0.32 names), or no draft in the window: acceptance is "
                                  "shown, it decides nothing")
    return out


def _fix(key: str) -> str:
    return (f"check that the server's /metrics answers and carries it (--disable-log-stats removes the stats; a "
            f"proxy or another vLLM version may rename them), or set decision.waive = [\"{key}\"] to decide without it")


def failures_check(s: CellStats, base: CellStats, p: DecisionConfig) -> Check:
    name = rules.GATE_FAILURES
    if not s.finished:
        return _check(name, rules.UNKNOWN, "no request finished in the window", "not measured", 0)
    level = p.interval_level
    text = (f"failures {s.failures}/{s.finished} ({pct(s.failure_rate)}), timeouts {s.timeouts}/{s.finished}")
    if s.k == base.k:
        return _check(name, rules.PASS, text + " (the baseline)", n=s.finished)
    text += f" vs baseline {base.failures}/{base.finished}, {base.timeouts}/{base.finished}"
    for mine, theirs, label in ((s.failures, base.failures, "failure"), (s.timeouts, base.timeouts, "timeout")):
        diff = mine / s.finished - theirs / base.finished
        if diff > p.failure_rate_slack:
            bounds = rules.failure_difference(mine, s, theirs, base, level)
            real = bounds.low is not None and bounds.low > p.failure_rate_slack
            text += (f"; {label} rate {pp(diff)} [{pp(bounds.low)}, {pp(bounds.high)}] over the baseline "
                     f"(slack {pp(p.failure_rate_slack)})" + ("" if real else ": its interval reaches back inside the slack, not proven"))
    # the status by the rule every resample applies (rules.failures_status): one rule, measured and resampled
    return _check(name, rules.failures_status(s, base, p), text, "too little data", s.finished)


def slo_checks(s: CellStats, pooled: dict[str, np.ndarray], p: DecisionConfig) -> list[Check]:
    checks = []
    for index, slo in enumerate(p.slos):
        name = rules.SLO_GATE_PREFIX + slo.key
        if not s.finished:
            checks.append(_check(name, rules.UNKNOWN, "no request finished", "not measured", 0))
            continue
        met = s.slo_met[index]
        bounds = wilson(met, s.finished, p.interval_level)
        value = pooled[slo.column]
        q = quantile_bounds(value, slo.share, p.interval_level)
        point = float(np.nanquantile(value, slo.share)) if len(value) and np.isfinite(value).any() else math.nan
        text = (f"{slo.text()}: met by {met}/{s.finished} = {pct(met / s.finished)} [{pct(bounds.low)}, "
                f"{pct(bounds.high)}] (needs {pct(slo.share)}); measured p{slo.share * 100:g} {point:.0f} ms "
                f"[{_ms(q.low)}, {_ms(q.high)}]")
        if bounds.low >= slo.share:
            status = rules.PASS
        elif bounds.high < slo.share:
            status = rules.FAIL
        else:
            status = rules.UNKNOWN
            text += (f"; too few requests to tell: {_requests_to_tell(met, s.finished, slo.share, p.interval_level)}"
                     f"{_stage_length(s, met, slo.share, p.interval_level)}")
        checks.append(_check(name, status, text, "too little data", s.finished))
    return checks


def _requests_to_tell(met: int, n: int, share: float, level: float) -> str:
    """Requests at which the attainment measured so far would have a Wilson interval clear of `share`."""
    if met / n == share:
        return "more requests than any run gives (it sits exactly at the objective)"
    needed = _requests_needed(met, n, share, level)
    return "more than 10,000,000 requests" if needed is None else f"about {needed:,} requests at this attainment"


def _stage_length(s: CellStats, met: int, share: float, level: float) -> str:
    """How long a stage would have to be, at this K's request rate and repeats, for the attainment to be
    told apart from the objective (a p99 needs some 370+ requests even when every one meets it)."""
    needed = _requests_needed(met, s.finished, share, level)
    if needed is None or not s.req_per_s > 0 or not s.repeats:
        return ""
    seconds = needed / s.req_per_s / s.repeats
    now = s.duration_s / s.repeats
    return (f": no window here can prove it; stages of about {seconds:,.0f} s at {s.users} users ({s.repeats} "
            f"repeat(s) at {s.req_per_s:.1f} req/s; now {now:.0f} s each) would")


def _requests_needed(met: int, n: int, share: float, level: float) -> int | None:
    rate = met / n
    if rate == share:
        return None

    def clear(m: int) -> bool:
        bounds = wilson(round(rate * m), m, level)
        return bounds.low >= share if rate > share else bounds.high < share

    low, high = n, n
    while not clear(high):
        low, high = high, high * 2
        if high > 10_000_000:
            return None
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if clear(mid) else (mid, high)
    return high


def memory_check(s: CellStats, p: DecisionConfig) -> Check:
    status = rules.memory_status(s, p)
    parts = []
    if not math.isnan(s.kv_usage_peak):
        parts.append(f"KV usage peak {pct(s.kv_usage_peak)} (limit {pct(1 - p.kv_headroom_frac)}), mean "
                     f"{pct(s.kv_usage_mean)}")
    if not math.isnan(s.preemptions):
        parts.append(f"{s.preemptions:.0f} preemptions over {s.repeats} repeat(s)")
    if s.gpu_mem_total_mib and not math.isnan(s.gpu_mem_peak_mib):
        parts.append(f"device memory peak {s.gpu_mem_peak_mib:.0f} / {s.gpu_mem_total_mib:.0f} MiB")
    if not math.isnan(s.kv_pool_tokens):
        parts.append(f"KV pool {s.kv_pool_tokens:,.0f} tokens")
    text = "; ".join(parts)
    if status == rules.UNKNOWN:
        device = ("; device memory alone is not KV headroom (vLLM preallocates the pool)"
                  if s.gpu_mem_total_mib and not math.isnan(s.gpu_mem_peak_mib) else "")
        preempted = "; no preemption only says the pool never ran out" if not math.isnan(s.preemptions) else ""
        text = (f"{_absent('kv_usage')}: memory headroom cannot be judged{device}{preempted}; "
                f"{_fix('memory')}" + (f" (read: {text})" if text else ""))
    return _check(rules.GATE_MEMORY, status, text, "not measured")


def batch_check(s: CellStats, base: CellStats, p: DecisionConfig) -> Check:
    status = rules.batch_status(s, base, p)
    if status == rules.UNKNOWN:
        where = f"K={s.k}" if math.isnan(s.running_mean) else f"the baseline K={base.k}"
        return _check(rules.GATE_BATCH, status, f"{_absent('running')} at {where}: the real batch cannot be "
                                                f"judged; {_fix('batch')}", "not measured")
    if s.k == base.k:
        return _check(rules.GATE_BATCH, status, f"{s.running_mean:.1f} running, {s.waiting_mean:.1f} waiting "
                                                "(the baseline)")
    text = (f"{s.running_mean:.1f} running vs {base.running_mean:.1f} at K={base.k} "
            f"({pct(rules.rel(s.running_mean, base.running_mean), signed=True)}, limit -{pct(p.batch_drop_frac)}); "
            f"{s.waiting_mean:.1f} waiting ({pct(rules.queue_share(s))} of their time at the server queued, "
            f"limit {pct(p.queue_share_frac)})")
    steps = rules.queue_steps(s)
    queued_for = f"{steps:.1f} steps each" if not math.isnan(steps) else "(how many steps unknown)"
    if status == rules.FAIL and rules.kv_has_room(s) and not (s.preemptions > 0):
        text += (f"; the real batch falls with requests queued {queued_for} beside a KV pool at "
                 f"{pct(s.kv_usage_peak)} at its peak: a scheduler limit such as a token budget this K's drafts "
                 "fill; raise --max-num-batched-tokens or lower --max-num-seqs first instead of adding lookahead")
    elif status == rules.FAIL:
        text += "; the real batch falls: lower --max-num-seqs first instead of adding lookahead"
    elif s.running_mean < base.running_mean * (1 - p.batch_drop_frac):
        preempted = "no preemption" if s.preemptions == 0 else "preemptions not measured"
        if rules.queued(s, p):
            text += (f"; fewer running and some queued, but for {queued_for} beside a KV pool at "
                     f"{pct(s.kv_usage_peak)} at its peak ({preempted}): requests waiting for the next step or a "
                     "busy host, not a batch this K made smaller")
        else:
            kv = "KV usage not measured" if math.isnan(s.kv_usage_peak) else "KV not full"
            text += (f"; fewer running, but the server holds nothing back ({preempted}, {kv}, little "
                     "queued): users spend more of their time between requests")
    return _check(rules.GATE_BATCH, status, text)


def latency_check(s: CellStats, base: CellStats, ratio_draws: np.ndarray, pooled_e2e: np.ndarray,
                  p: DecisionConfig) -> Check:
    q = p.latency_percentile / 100
    name = rules.GATE_LATENCY
    label = f"e2e p{p.latency_percentile:g}"
    if s.k == base.k:
        return _check(name, rules.PASS, f"{label} {s.quantile('e2e_ms', q):.0f} ms (the baseline)", n=s.requests)
    ratio = rules.latency_ratio(s, base, p)
    if math.isnan(ratio):
        return _check(name, rules.UNKNOWN, f"{label} not measured: no request with an e2e time at K={s.k} or "
                                           f"K={base.k}; set decision.waive = [\"latency\"] to decide without it",
                      "not measured", s.requests)
    bounds = interval(ratio_draws, p.interval_level)
    text = (f"{label} {s.quantile('e2e_ms', q):.0f} ms vs {base.quantile('e2e_ms', q):.0f} ms at K={base.k} "
            f"({pct(ratio, signed=True)} [{pct(bounds.low, signed=True)}, {pct(bounds.high, signed=True)}], "
            f"limit +{pct(p.latency_tolerance_frac)}; n {s.requests} / {base.requests})")
    needed = min_samples_for_upper_bound(q, p.interval_level)
    # a pass needs K's percentile bounded above and the baseline's below, which fewer requests bound (with long
    # answers the baseline, often the slowest K, ends the fewest in a window): its whole interval inside. Below
    # 1 / (1 - q) requests the percentile is the sample's largest, whose resampled low end overstates that bound
    below = math.ceil(1 / (1 - q) - 1e-9)
    if below <= base.requests < needed <= s.requests and bounds.high is not None \
            and bounds.high <= p.latency_tolerance_frac:
        return _check(name, rules.PASS, text + f": inside the tolerance, interval included (the baseline's "
                                               f"{base.requests} requests bound its p{p.latency_percentile:g} below)",
                      n=s.requests)
    if min(s.requests, base.requests) < needed:
        return _check(name, rules.UNKNOWN, text + f"; a p{p.latency_percentile:g} needs >= {needed} requests to be "
                                                  "bounded", "too little data", s.requests)
    if ratio <= p.latency_tolerance_frac:
        return _check(name, rules.PASS, text, n=s.requests)
    if bounds.low is not None and bounds.low > p.latency_tolerance_frac:
        return _check(name, rules.FAIL, text + ": a regression beyond the tolerance, interval included", n=s.requests)
    return _check(name, rules.UNKNOWN, text + ": beyond the tolerance, but its interval reaches back inside it",
                  "too little data", s.requests)


def gate_checks(s: CellStats, base: CellStats, pooled: dict[str, np.ndarray], latency_ratio_draws: np.ndarray,
                p: DecisionConfig) -> list[Check]:
    checks = [failures_check(s, base, p), *slo_checks(s, pooled, p), memory_check(s, p), batch_check(s, base, p)]
    if not p.slos:
        checks.append(latency_check(s, base, latency_ratio_draws, pooled["e2e_ms"], p))
    return [waived(c) if c.status == rules.UNKNOWN and waive_key(c.name) in p.waive else c for c in checks]


def waived(check: Check) -> Check:
    """A gate that could not be judged, let go by the user: shown as waived with why it was unknown."""
    return check.model_copy(update={
        "status": rules.WAIVED, "unknown_because": "",
        "evidence": f"waived by decision.waive (unknown: {check.unknown_because}): {check.evidence}"})
