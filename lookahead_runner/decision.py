"""The tuning method (method.md) as pure functions: summary table in, decision out.

At the target concurrency, walk K upward from the baseline (K = 0): stop when memory rises
clearly and req/s does not; diagnose real-batch drops, acceptance-bound and not-the-lever
cases; choose the best conservative throughput (median minus MAD) among settings that pass
the four-point checklist, the smaller K on ties.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd


@dataclass(frozen=True)
class Thresholds:
    memory_rise_frac: float = 0.05
    throughput_gain_frac: float = 0.02
    tie_tolerance_frac: float = 0.03
    repeat_spread_frac: float = 0.10
    low_acceptance: float = 0.3
    kv_headroom_frac: float = 0.05
    batch_drop_frac: float = 0.10
    failure_rate_slack: float = 0.005
    latency_slack_frac: float = 0.10


def _mad(values: pd.Series) -> float:
    values = values.dropna()
    return float((values - values.median()).abs().median()) if len(values) else 0.0


def aggregate(summary: pd.DataFrame) -> pd.DataFrame:
    """One row per (k, users) over repeats, valid windows only."""
    valid = summary[summary["valid"].astype(bool)]
    if valid.empty:
        return pd.DataFrame()
    grouped = valid.groupby(["k", "users"])
    table = grouped.agg(
        req_per_s=("req_per_s", "median"), req_min=("req_per_s", "min"), req_max=("req_per_s", "max"),
        tok_per_s=("output_tok_per_s", "median"), repeats=("repeat", "nunique"),
        running_mean=("running_mean", "median"), waiting_mean=("waiting_mean", "median"),
        kv_usage_mean=("kv_usage_mean", "median"), kv_usage_peak=("kv_usage_peak", "max"),
        gpu_mem_peak_mib=("gpu_mem_peak_mib", "max"), gpu_mem_total_mib=("gpu_mem_total_mib", "max"),
        failure_rate=("failure_rate", "mean"), e2e_p99_ms=("e2e_p99_ms", "median"),
        ttft_p99_ms=("ttft_p99_ms", "median"), acceptance_rate=("acceptance_rate", "median"),
        preemptions=("preemptions", "sum"),
    )
    table["req_mad"] = grouped["req_per_s"].apply(_mad)
    table["conservative_req_per_s"] = table["req_per_s"] - table["req_mad"]
    return table.reset_index()


def _rel(new: float, old: float) -> float:
    return (new - old) / old if old and not math.isnan(old) and not math.isnan(new) else 0.0


def memory_rise(row, prev) -> float:
    """The clearer of the KV-usage rise (points of the pool) and the device-memory rise (share of total)."""
    kv = (row.kv_usage_mean - prev.kv_usage_mean) if not math.isnan(row.kv_usage_mean - prev.kv_usage_mean) else 0.0
    gpu = 0.0
    if row.gpu_mem_total_mib and not math.isnan(row.gpu_mem_peak_mib - prev.gpu_mem_peak_mib):
        gpu = (row.gpu_mem_peak_mib - prev.gpu_mem_peak_mib) / row.gpu_mem_total_mib
    return max(kv, gpu)


def walk_up(at_target: pd.DataFrame, th: Thresholds) -> tuple[list[int], int | None, list[str]]:
    """Method stepping rule 2: returns (ks kept, K where the walk stopped or None, reasons)."""
    rows = list(at_target.sort_values("k").itertuples(index=False))
    kept, reasons = [rows[0].k], []
    for prev, row in zip(rows, rows[1:]):
        rise, gain = memory_rise(row, prev), _rel(row.req_per_s, prev.req_per_s)
        if rise >= th.memory_rise_frac and gain < th.throughput_gain_frac:
            reasons.append(
                f"Stop rule at K={row.k}: memory rose {rise:+.1%} (KV usage {prev.kv_usage_mean:.0%} -> "
                f"{row.kv_usage_mean:.0%}) while req/s changed {gain:+.1%} vs K={prev.k}; keep K <= {prev.k}."
            )
            return kept, int(row.k), reasons
        kept.append(int(row.k))
    return kept, None, reasons


def checklist(row, baseline, above: pd.DataFrame, th: Thresholds) -> list[dict]:
    """The four acceptance checks of method.md for one K at the target concurrency."""
    items = []
    if row.repeats >= 2:
        spread = (row.req_max - row.req_min) / row.req_per_s if row.req_per_s else math.inf
        items.append(_item("repeat stability", spread <= th.repeat_spread_frac,
                           f"req/s over {row.repeats} repeats {row.req_min:.2f}-{row.req_max:.2f} "
                           f"(spread {spread:.1%}, band {th.repeat_spread_frac:.0%})"))
    else:
        items.append(_item("repeat stability", False, "only one repeat: set load.repeats >= 2 to check the spread"))
    fail_ok = row.failure_rate <= baseline.failure_rate + th.failure_rate_slack
    lat_ok = not (row.e2e_p99_ms > baseline.e2e_p99_ms * (1 + th.latency_slack_frac))
    items.append(_item("failures and latency", fail_ok and lat_ok,
                       f"failure rate {row.failure_rate:.2%} vs baseline {baseline.failure_rate:.2%}; "
                       f"e2e p99 {row.e2e_p99_ms:.0f} ms vs {baseline.e2e_p99_ms:.0f} ms"))
    kv_ok = not (row.kv_usage_peak > 1 - th.kv_headroom_frac)
    mem_ok = not (row.gpu_mem_total_mib and row.gpu_mem_peak_mib >= row.gpu_mem_total_mib)
    mem_text = (f"device memory peak {row.gpu_mem_peak_mib:.0f} / {row.gpu_mem_total_mib:.0f} MiB"
                if not math.isnan(row.gpu_mem_peak_mib) else "device memory not sampled")
    items.append(_item("memory headroom", kv_ok and mem_ok and row.preemptions == 0,
                       f"{mem_text}; KV usage peak {row.kv_usage_peak:.0%} (limit {1 - th.kv_headroom_frac:.0%}); "
                       f"{row.preemptions:.0f} preemptions"))
    if above.empty:
        items.append(_item("concurrency scaling", False, "no stage above the target concurrency: add one"))
    else:
        nxt = above.sort_values("users").iloc[0]
        grows = nxt.req_per_s >= row.req_per_s * (1 - th.tie_tolerance_frac)
        items.append(_item("concurrency scaling", bool(grows),
                           f"req/s {row.req_per_s:.2f} at {row.users} users -> {nxt.req_per_s:.2f} at {nxt.users}"))
    return items


def _item(name: str, passed: bool, evidence: str) -> dict:
    return {"name": name, "passed": bool(passed), "evidence": evidence}


def diagnose(at_target: pd.DataFrame, baseline, th: Thresholds) -> list[str]:
    notes = []
    spec = at_target[at_target["k"] > 0]
    for row in spec.itertuples(index=False):
        if row.running_mean < baseline.running_mean * (1 - th.batch_drop_frac):
            notes.append(f"Real batch drops at K={row.k}: {row.running_mean:.1f} running vs {baseline.running_mean:.1f} "
                         f"at K={baseline.k}; lower --max-num-seqs first instead of adding lookahead.")
            break
    medians = at_target["req_per_s"]
    noise = max(th.tie_tolerance_frac, float((at_target["req_max"] - at_target["req_min"]).max() / medians.median()))
    if len(at_target) >= 3 and (medians.max() - medians.min()) / medians.median() <= noise:
        notes.append(f"Throughput across K stays within {noise:.1%} (the noise): this knob is not the lever; "
                     "acceptance or the decoding strategy is.")
    acceptance = spec["acceptance_rate"].dropna()
    if len(acceptance) and acceptance.median() < th.low_acceptance:
        notes.append(f"Acceptance-bound: median acceptance {acceptance.median():.0%} < {th.low_acceptance:.0%}; "
                     "larger K wastes compute and KV.")
    if baseline.running_mean < 0.8 * baseline.users:
        limit = ("the KV cache (preemptions or a full pool)"
                 if baseline.preemptions > 0 or baseline.kv_usage_peak > 1 - th.kv_headroom_frac
                 else "the scheduler (--max-num-seqs / --max-num-batched-tokens)" if baseline.waiting_mean > 1
                 else "request turnaround (users wait between requests)")
        notes.append(f"Concurrency-bound: {baseline.users} users but only {baseline.running_mean:.1f} running "
                     f"at K={baseline.k}; the limit is {limit}.")
    return notes


def per_stage_best(table: pd.DataFrame, th: Thresholds) -> list[dict]:
    best = []
    for users, group in table.groupby("users"):
        top = group["tok_per_s"].max()
        pick = group[group["tok_per_s"] >= top * (1 - th.tie_tolerance_frac)].sort_values("k").iloc[0]
        best.append({"users": int(users), "best_k": int(pick.k), "running_mean": float(pick.running_mean),
                     "tok_per_s": float(pick.tok_per_s)})
    return best


def per_batch_size_config(per_stage: list[dict]) -> list[list[int]]:
    """`num_speculative_tokens_per_batch_size` ranges ([lo, hi, K]) keyed by measured real batch."""
    points = sorted(per_stage, key=lambda p: p["running_mean"])
    ranges, lo = [], 1
    for i, point in enumerate(points):
        hi = 1_000_000 if i == len(points) - 1 else max(lo, int((point["running_mean"] + points[i + 1]["running_mean"]) / 2))
        ranges.append([lo, hi, point["best_k"]])
        lo = hi + 1
    return ranges


def decide(summary: pd.DataFrame, target_users: int, th: Thresholds, argv_by_k: dict[int, list[str]],
           version: tuple[int, int, int] = (0, 0, 0)) -> dict:
    """The whole decision, as written to decision.json."""
    table = aggregate(summary)
    empty = {"recommended": None, "target_users": target_users, "per_stage": [], "checklist": [],
             "diagnoses": [], "reasons": [], "stopped_at_k": None, "candidates": []}
    if table.empty or target_users not in set(table["users"]):
        return empty | {"verdict": f"No valid measurement at {target_users} users: nothing can be recommended.",
                        "reasons": ["Every window at the target concurrency was invalid or missing; see summary.csv."]}
    table["k"] = table["k"].astype(int)
    table["users"] = table["users"].astype(int)
    at_target = table[table["users"] == target_users].sort_values("k").reset_index(drop=True)
    baseline = next(at_target.itertuples(index=False))
    kept, stopped_at, reasons = walk_up(at_target, th)
    reasons.insert(0, f"Baseline K={baseline.k} at {target_users} users: {baseline.req_per_s:.2f} req/s, "
                      f"{baseline.tok_per_s:.0f} output tok/s, {baseline.running_mean:.1f} running.")
    candidates = []
    for row in at_target[at_target["k"].isin(kept)].itertuples(index=False):
        above = table[(table["k"] == row.k) & (table["users"] > target_users)]
        items = checklist(row, baseline, above, th)
        candidates.append({"k": int(row.k), "conservative_req_per_s": float(row.conservative_req_per_s),
                           "tok_per_s": float(row.tok_per_s), "checklist": items,
                           "passed": sum(i["passed"] for i in items)})
    best_passed = max(c["passed"] for c in candidates)
    pool = [c for c in candidates if c["passed"] == best_passed]
    top = max(c["conservative_req_per_s"] for c in pool)
    choice = min((c for c in pool if c["conservative_req_per_s"] >= top * (1 - th.tie_tolerance_frac)),
                 key=lambda c: c["k"])
    gain = _rel(choice["tok_per_s"], float(baseline.tok_per_s))
    reasons.append(f"K={choice['k']} has the best conservative throughput (median - MAD "
                   f"{choice['conservative_req_per_s']:.2f} req/s) among K {kept} passing {best_passed}/4 checks; "
                   f"ties within {th.tie_tolerance_frac:.0%} go to the smaller K.")
    per_stage = per_stage_best(table, th)
    diagnoses = diagnose(at_target, baseline, th)
    checks = f"{choice['passed']}/4 checks pass"
    if choice["k"] == baseline.k:
        verdict = f"Keep K={choice['k']} (no added lookahead) at {target_users} users: no larger K pays off ({checks})."
    else:
        verdict = (f"Set K={choice['k']} at {target_users} users: {gain:+.0%} output tokens/s over K={baseline.k} "
                   f"({checks}).")
    decision = empty | {
        "recommended": {"k": choice["k"], "setting": f"k{choice['k']}", "argv": argv_by_k.get(choice["k"], [])},
        "verdict": verdict, "checklist": choice["checklist"], "diagnoses": diagnoses, "reasons": reasons,
        "per_stage": per_stage, "stopped_at_k": stopped_at, "candidates": candidates,
    }
    if version >= (0, 33, 0):
        decision["per_batch_size"] = {"num_speculative_tokens_per_batch_size": per_batch_size_config(per_stage)}
    return decision
