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

# moved to vllm/schedule.py (issue 16); imported here until the decision engine is rewritten
from .vllm.schedule import SPEC_CONFIG_FLAG, SPEC_TOKENS_FLAG, _without_dotted_spec, per_batch_size_argv  # noqa: F401


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
    latency_slack_ms: float = 10.0  # absolute floor, so a 40 -> 46 ms TTFT is not called worse
    concurrency_bound_frac: float = 0.8  # real batch below this share of the users: concurrency-bound


def _mad(values: pd.Series) -> float:
    values = values.dropna()
    return float((values - values.median()).abs().median()) if len(values) else 0.0


# Columns a summary written by an older analysis may lack; they aggregate to NaN ("not recorded").
_OPTIONAL_COLUMNS = ("timeout_rate", "ttft_p99_ms", "waiting_mean", "acceptance_rate", "preemptions")


def aggregate(summary: pd.DataFrame) -> pd.DataFrame:
    """One row per (k, users) over repeats, valid windows only."""
    valid = summary[summary["valid"].astype(bool)]
    if valid.empty:
        return pd.DataFrame()
    valid = valid.assign(**{name: math.nan for name in _OPTIONAL_COLUMNS if name not in valid.columns})
    grouped = valid.groupby(["k", "users"])
    table = grouped.agg(
        req_per_s=("req_per_s", "median"), req_min=("req_per_s", "min"), req_max=("req_per_s", "max"),
        tok_per_s=("output_tok_per_s", "median"), repeats=("repeat", "nunique"),
        running_mean=("running_mean", "median"), waiting_mean=("waiting_mean", "median"),
        kv_usage_mean=("kv_usage_mean", "median"), kv_usage_peak=("kv_usage_peak", "max"),
        gpu_mem_peak_mib=("gpu_mem_peak_mib", "max"), gpu_mem_total_mib=("gpu_mem_total_mib", "max"),
        failure_rate=("failure_rate", "mean"), timeout_rate=("timeout_rate", "mean"),
        e2e_p99_ms=("e2e_p99_ms", "median"),
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


def _memory_text(prev, row) -> str:
    text = f"KV usage mean {prev.kv_usage_mean:.0%} -> {row.kv_usage_mean:.0%}"
    if not math.isnan(row.gpu_mem_peak_mib - prev.gpu_mem_peak_mib):
        text += f", device memory peak {prev.gpu_mem_peak_mib:.0f} -> {row.gpu_mem_peak_mib:.0f} MiB"
    return text


def walk_up(at_target: pd.DataFrame, th: Thresholds) -> tuple[list[int], int | None, list[str]]:
    """Method stepping rule 2: returns (ks kept, K where the walk stopped or None, reasons)."""
    rows = list(at_target.sort_values("k").itertuples(index=False))
    kept, reasons = [rows[0].k], []
    for prev, row in zip(rows, rows[1:]):
        rise, gain = memory_rise(row, prev), _rel(row.req_per_s, prev.req_per_s)
        if rise >= th.memory_rise_frac and gain < th.throughput_gain_frac:
            reasons.append(
                f"Stop rule at K={row.k}: memory rose {rise:+.1%} ({_memory_text(prev, row)}) while req/s changed "
                f"{gain:+.1%} ({prev.req_per_s:.2f} -> {row.req_per_s:.2f}) vs K={prev.k}; keep K={prev.k}."
            )
            return kept, int(row.k), reasons
        kept.append(int(row.k))
    return kept, None, reasons


def _worse(new: float, old: float, th: Thresholds) -> bool:
    return bool(new > old * (1 + th.latency_slack_frac) + th.latency_slack_ms)


def _rate_text(value: float) -> str:
    return "not recorded" if math.isnan(value) else f"{value:.2%}"


def scaling_check(row, above: pd.DataFrame, th: Thresholds) -> dict:
    """Check 4: req/s keeps growing (or holds within the tie tolerance) at every stage above the target."""
    if above.empty:
        return _item("concurrency scaling", False, "no stage above the target concurrency: add one")
    steps, grows, prev_users, prev_req = [], True, row.users, row.req_per_s
    for nxt in above.sort_values("users").itertuples(index=False):
        ok = nxt.req_per_s >= prev_req * (1 - th.tie_tolerance_frac)
        grows &= ok
        steps.append(f"{nxt.req_per_s:.2f} at {nxt.users}" + ("" if ok else f" (falls from {prev_req:.2f} at {prev_users})"))
        prev_users, prev_req = nxt.users, nxt.req_per_s
    return _item("concurrency scaling", grows, f"req/s {row.req_per_s:.2f} at {row.users} users -> " + " -> ".join(steps))


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
    timeout_ok = not (row.timeout_rate > (0.0 if math.isnan(baseline.timeout_rate) else baseline.timeout_rate)
                      + th.failure_rate_slack)
    lat_ok = not _worse(row.e2e_p99_ms, baseline.e2e_p99_ms, th) and not _worse(row.ttft_p99_ms, baseline.ttft_p99_ms, th)
    items.append(_item("failures and latency", fail_ok and timeout_ok and lat_ok,
                       f"failure rate {row.failure_rate:.2%} vs baseline {baseline.failure_rate:.2%}; "
                       f"timeouts {_rate_text(row.timeout_rate)} vs {_rate_text(baseline.timeout_rate)}; "
                       f"e2e p99 {row.e2e_p99_ms:.0f} ms vs {baseline.e2e_p99_ms:.0f} ms; "
                       f"TTFT p99 {row.ttft_p99_ms:.0f} ms vs {baseline.ttft_p99_ms:.0f} ms"))
    kv_ok = not (row.kv_usage_peak > 1 - th.kv_headroom_frac)
    mem_ok = not (row.gpu_mem_total_mib and row.gpu_mem_peak_mib >= row.gpu_mem_total_mib)
    mem_text = (f"device memory peak {row.gpu_mem_peak_mib:.0f} / {row.gpu_mem_total_mib:.0f} MiB"
                if not math.isnan(row.gpu_mem_peak_mib) else "device memory not sampled")
    items.append(_item("memory headroom", kv_ok and mem_ok and not row.preemptions > 0,
                       f"{mem_text}; KV usage peak {row.kv_usage_peak:.0%} (limit {1 - th.kv_headroom_frac:.0%}); "
                       f"{row.preemptions:.0f} preemptions over {row.repeats} repeat(s)"))
    items.append(scaling_check(row, above, th))
    return items


def _item(name: str, passed: bool, evidence: str) -> dict:
    return {"name": name, "passed": bool(passed), "evidence": evidence}


def batch_limit(row, th: Thresholds) -> str:
    """What the evidence says holds the real batch below the client concurrency."""
    evidence = (f"{row.preemptions:.0f} preemptions over {row.repeats} repeat(s), KV usage peak "
                f"{row.kv_usage_peak:.0%}, {row.waiting_mean:.1f} waiting on average")
    if row.preemptions > 0 or row.kv_usage_peak > 1 - th.kv_headroom_frac:
        return f"the KV cache ({evidence})"
    if row.waiting_mean > 1:
        return f"the scheduler: --max-num-seqs / --max-num-batched-tokens ({evidence})"
    return f"request turnaround: users are between requests, not queued ({evidence})"


def concurrency_bound(table: pd.DataFrame, ks: list[int], target_users: int, th: Thresholds) -> list[str]:
    """Method diagnosis 1, at the target and above, for the baseline and the chosen K."""
    notes = []
    for k in ks:
        rows = table[(table["k"] == k) & (table["users"] >= target_users)].sort_values("users")
        for row in rows.itertuples(index=False):
            if row.running_mean < th.concurrency_bound_frac * row.users:
                notes.append(f"Concurrency-bound at K={row.k}, {row.users} users: only {row.running_mean:.1f} "
                             f"running; the limit is {batch_limit(row, th)}.")
                break
    return notes


def diagnose(at_target: pd.DataFrame, baseline, th: Thresholds) -> list[str]:
    """Method stepping rules 3 and 4 and diagnosis 2, at the target concurrency."""
    notes = []
    spec = at_target[at_target["k"] > baseline.k]
    for row in spec.itertuples(index=False):
        if row.running_mean < baseline.running_mean * (1 - th.batch_drop_frac):
            notes.append(f"Real batch drops at K={row.k}: {row.running_mean:.1f} running vs {baseline.running_mean:.1f} "
                         f"at K={baseline.k}; lower --max-num-seqs first instead of adding lookahead.")
            break
    medians = at_target["req_per_s"]
    noise = max(th.tie_tolerance_frac, float((at_target["req_max"] - at_target["req_min"]).max() / medians.median()))
    if len(at_target) >= 3 and (medians.max() - medians.min()) / medians.median() <= noise:
        notes.append(f"Throughput across K stays within {noise:.1%} (the repeat noise): req/s "
                     f"{medians.min():.2f}-{medians.max():.2f}; this knob is not the lever, "
                     "acceptance or the decoding strategy is.")
    acceptance = at_target[at_target["k"] > 0]["acceptance_rate"].dropna()
    if len(acceptance) and acceptance.median() < th.low_acceptance:
        notes.append(f"Acceptance-bound: median acceptance {acceptance.median():.0%} < {th.low_acceptance:.0%}; "
                     "larger K wastes compute and KV.")
    return notes


def per_stage_best(table: pd.DataFrame, th: Thresholds, argv_by_k: dict[int, list[str]] | None = None) -> list[dict]:
    """The best K at every concurrency stage (highest output tok/s, the smaller K within the tie tolerance)."""
    best = []
    for users, group in table.groupby("users"):
        top = group["tok_per_s"].max()
        pick = group[group["tok_per_s"] >= top * (1 - th.tie_tolerance_frac)].sort_values("k").iloc[0]
        best.append({"users": int(users), "best_k": int(pick.k), "running_mean": float(pick.running_mean),
                     "tok_per_s": float(pick.tok_per_s), "argv": list((argv_by_k or {}).get(int(pick.k), []))})
    return best


def per_batch_size_config(per_stage: list[dict]) -> list[list[int]]:
    """`num_speculative_tokens_per_batch_size` ranges ([lo, hi, K]) keyed by measured real batch.

    Boundaries sit halfway between the stages' measured batches; neighbours with the same K merge.
    vLLM requires the first range to start at 1 and caps each K at num_speculative_tokens.
    """
    points = sorted(per_stage, key=lambda p: p["running_mean"])
    ranges, lo = [], 1
    for i, point in enumerate(points):
        hi = 1_000_000 if i == len(points) - 1 else max(lo, int((point["running_mean"] + points[i + 1]["running_mean"]) / 2))
        if ranges and ranges[-1][2] == point["best_k"]:
            ranges[-1][1] = hi
        else:
            ranges.append([lo, hi, point["best_k"]])
        lo = hi + 1
    return ranges


def per_batch_size_recommendation(per_stage: list[dict], argv_by_k: dict[int, list[str]]) -> dict:
    ranges = per_batch_size_config(per_stage)
    return {"num_speculative_tokens_per_batch_size": ranges, "argv": per_batch_size_argv(ranges, argv_by_k)}


def candidate(row, baseline, above: pd.DataFrame, th: Thresholds) -> dict:
    items = checklist(row, baseline, above, th)
    return {"k": int(row.k), "req_per_s": float(row.req_per_s), "conservative_req_per_s": float(row.conservative_req_per_s),
            "tok_per_s": float(row.tok_per_s), "checklist": items, "passed": sum(i["passed"] for i in items)}


def choose(pool: list[dict], th: Thresholds) -> dict:
    """Best conservative throughput (median - MAD); within the tie tolerance of it, the smaller K."""
    top = max(c["conservative_req_per_s"] for c in pool)
    return min((c for c in pool if c["conservative_req_per_s"] >= top * (1 - th.tie_tolerance_frac)),
               key=lambda c: c["k"])


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
    if baseline.k != 0:
        reasons.insert(0, f"No valid K=0 window at {target_users} users: the smallest measured K={baseline.k} "
                          "stands in as the baseline, so gains are relative to it, not to no speculation.")
    candidates = [candidate(row, baseline, table[(table["k"] == row.k) & (table["users"] > target_users)], th)
                  for row in at_target[at_target["k"].isin(kept)].itertuples(index=False)]
    best_passed = max(c["passed"] for c in candidates)
    pool = [c for c in candidates if c["passed"] == best_passed]
    choice = choose(pool, th)
    gain = _rel(choice["tok_per_s"], float(baseline.tok_per_s))
    if best_passed < 4:
        reasons.append(f"No K passes all four checks; the choice is among the K passing the most ({best_passed}/4).")
    reasons.append(f"K={choice['k']} has the best conservative throughput (median - MAD "
                   f"{choice['conservative_req_per_s']:.2f} req/s) among K {[c['k'] for c in pool]} passing "
                   f"{best_passed}/4 checks; ties within {th.tie_tolerance_frac:.0%} go to the smaller K.")
    per_stage = per_stage_best(table, th, argv_by_k)
    others = [f"{p['users']} users -> K={p['best_k']}" for p in per_stage if p["best_k"] != choice["k"]]
    if others:
        reasons.append(f"K={choice['k']} is not the best at every stage ({'; '.join(others)}): "
                       "see the per-stage recommendation.")
    diagnoses = diagnose(at_target, baseline, th)
    diagnoses += concurrency_bound(table, sorted({int(baseline.k), choice["k"]}), target_users, th)
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
        decision["per_batch_size"] = per_batch_size_recommendation(per_stage, argv_by_k)
    return decision
