"""Two decision.json files of one run folder (e.g. before and after a change to how it is computed): the verdict,
the recommended K and every gate's result must be identical; intervals and confidences may differ by the
resampling's Monte Carlo error. Prints one JSON line; exit 1 when they differ beyond it.

    python benchmarks/compare_decisions.py BEFORE.json AFTER.json

Tolerances (two independent Monte Carlo runs of R resamples each, R = the decision's `resamples`, 4 standard
errors of their difference):
- a share (confidence, win share): its standard error is sqrt(p (1 - p) / R), so |a - b| <= 4 sqrt(2 p (1 - p) / R)
  + 2 / R (0.058 at p = 0.9 and R = 1000);
- an interval's end (the 2.5 % or 97.5 % percentile of R draws): its standard error is sqrt(q (1 - q) / R) / phi(z)
  standard deviations of the draws, 0.085 sigma at R = 1000, 2.2 % of a 95 % interval's 3.92 sigma; so
  |a - b| <= 4 x sqrt(2) x 2.2 % = 12 % of the interval's width (scaled by sqrt(1000 / R)), plus 1e-9.
- a latency percentile's difference (the trade-offs): 3 x that. Its draws are lumpy: the p99 of a few hundred
  requests is one of a handful of order statistics, so an interval end moves in steps. Measured: the e2e p99
  trade-off of an e2e folder (3 K x 2 repeats, 32 users) decided under 8 seeds by the code before issue 39 put its
  high end between -0.275 and -0.243 (an interval 0.12 wide: 27 % of it), where the smooth formula allows 12 %.
Point figures (req/s, gains as measured, percentiles of the pooled requests) are not resampled: equal to 1e-9.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from scipy import stats

LEVEL_DEFAULT = 0.95
LUMPY = 3.0                   # a percentile's draws take few values: its interval ends move in steps


def _share_tolerance(p: float, resamples: int) -> float:
    return 4 * math.sqrt(2 * p * (1 - p) / resamples) + 2 / resamples


def _end_tolerance(width: float, resamples: int, level: float) -> float:
    q = (1 - level) / 2
    sd_share = math.sqrt(q * (1 - q) / resamples) / stats.norm.pdf(stats.norm.ppf(q))   # in sigma of the draws
    return 4 * math.sqrt(2) * sd_share / (2 * stats.norm.ppf(1 - q)) * abs(width) + 1e-9


class Comparison:
    def __init__(self, resamples: int, level: float) -> None:
        self.resamples, self.level = resamples, level
        self.differences: list[str] = []
        self.checked = {"exact": 0, "share": 0, "interval": 0}
        self.worst = {"share": 0.0, "interval_of_width": 0.0}

    def exact(self, where: str, a, b) -> None:
        self.checked["exact"] += 1
        same = (math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9) if isinstance(a, float) and isinstance(b, float)
                and math.isfinite(a) and math.isfinite(b) else a == b)
        if not same:
            self.differences.append(f"{where}: {a!r} != {b!r}")

    def share(self, where: str, a, b) -> None:
        if a is None or b is None:
            return self.exact(where, a, b)
        self.checked["share"] += 1
        tolerance = _share_tolerance(min(max((a + b) / 2, 0.0), 1.0), self.resamples)
        self.worst["share"] = max(self.worst["share"], abs(a - b))
        if abs(a - b) > tolerance:
            self.differences.append(f"{where}: {a:.4f} vs {b:.4f} (tolerance {tolerance:.4f})")

    def interval(self, where: str, a: dict | None, b: dict | None, lumpy: bool = False) -> None:
        a, b = a or {}, b or {}
        ends = [(a.get(side), b.get(side)) for side in ("low", "high")]
        if any((x is None) != (y is None) for x, y in ends):
            self.differences.append(f"{where}: bounded differently {a} vs {b}")
            return
        if any(x is None for x, _ in ends):
            return
        width = max(a["high"] - a["low"], b["high"] - b["low"])
        tolerance = _end_tolerance(width, self.resamples, self.level) * (LUMPY if lumpy else 1)
        self.checked["interval"] += 1
        for side, (x, y) in zip(("low", "high"), ends):
            if width > 0:
                self.worst["interval_of_width"] = max(self.worst["interval_of_width"], abs(x - y) / width)
            if abs(x - y) > tolerance:
                self.differences.append(f"{where}.{side}: {x:.6g} vs {y:.6g} (tolerance {tolerance:.3g})")


def compare(before: dict, after: dict) -> Comparison:
    level = (before.get("thresholds") or {}).get("interval_level", LEVEL_DEFAULT)
    resamples = (before.get("thresholds") or {}).get("resamples", before.get("resamples") or 1000)
    c = Comparison(resamples, level)
    for key in ("status", "baseline_k", "leading_k", "stopped_at_k", "target_users", "objective"):
        c.exact(key, before.get(key), after.get(key))
    c.exact("recommended.k", (before.get("recommended") or {}).get("k"), (after.get("recommended") or {}).get("k"))
    c.share("confidence", before.get("confidence"), after.get("confidence"))
    for side in ("low", "high"):  # the share's own Monte Carlo interval: it moves with the share
        c.share(f"confidence_range.{side}", *((d.get("confidence_range") or {}).get(side) for d in (before, after)))
    for i, (x, y) in enumerate(zip(before.get("checklist", []), after.get("checklist", []))):
        c.exact(f"checklist[{x['name']}].status", x["status"], y["status"])
    c.exact("checklist length", len(before.get("checklist", [])), len(after.get("checklist", [])))
    by_k = {cand["k"]: cand for cand in after.get("candidates", [])}
    c.exact("candidate K", sorted(cand["k"] for cand in before.get("candidates", [])), sorted(by_k))
    for x in before.get("candidates", []):
        y = by_k.get(x["k"])
        if y is None:
            continue
        where = f"candidates[K={x['k']}]"
        c.exact(f"{where}.objective", x["objective"], y["objective"])
        c.exact(f"{where}.gain", x.get("gain"), y.get("gain"))
        c.exact(f"{where}.blocked_by", x.get("blocked_by"), y.get("blocked_by"))
        c.exact(f"{where}.gates", [(g["name"], g["status"]) for g in x.get("gates", [])],
                [(g["name"], g["status"]) for g in y.get("gates", [])])
        c.share(f"{where}.win_share", x.get("win_share"), y.get("win_share"))
        c.interval(f"{where}.gain_range", x.get("gain_range"), y.get("gain_range"))
        c.interval(f"{where}.objective_range", x.get("objective_range"), y.get("objective_range"))
        for t, u in zip(x.get("tradeoffs", []), y.get("tradeoffs", [])):
            c.exact(f"{where}.tradeoff {t['metric']}", t["difference"], u["difference"])
            c.interval(f"{where}.tradeoff {t['metric']}.range", t.get("range"), u.get("range"), lumpy=True)
    stages = {s["users"]: s for s in after.get("per_stage", [])}
    for x in before.get("per_stage", []):
        y = stages.get(x["users"], {})
        for key in ("status", "k", "leading_k", "blocked"):
            c.exact(f"per_stage[{x['users']}].{key}", x.get(key), y.get(key))
        c.share(f"per_stage[{x['users']}].confidence", x.get("confidence"), y.get("confidence"))
    cells = {(s["k"], s["users"]): s for s in after.get("cells", [])}
    for x in before.get("cells", []):
        y = cells.get((x["k"], x["users"]), {})
        where = f"cells[K={x['k']}, {x['users']} users]"
        for key in ("req_per_s", "requests", "failures", "repeats"):
            c.exact(f"{where}.{key}", x.get(key), y.get(key))
        for key in ("req_per_s_range", "output_tok_per_s_range", "goodput_range"):
            c.interval(f"{where}.{key}", x.get(key), y.get(key))
    knee_a, knee_b = before.get("knee") or {}, after.get("knee") or {}
    c.exact("knee.users", knee_a.get("users"), knee_b.get("users"))
    for i, (x, y) in enumerate(zip(knee_a.get("steps", []), knee_b.get("steps", []))):
        c.interval(f"knee.steps[{i}].gain_range", x.get("gain_range"), y.get("gain_range"))
    model_a, model_b = before.get("performance_model") or {}, after.get("performance_model") or {}
    c.exact("performance_model.trusted", model_a.get("trusted"), model_b.get("trusted"))
    return c


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before")
    parser.add_argument("after")
    args = parser.parse_args()
    before, after = (json.loads(Path(p).read_text(encoding="utf-8")) for p in (args.before, args.after))
    c = compare(before, after)
    print(json.dumps({"benchmark": "compare_decisions", "same": not c.differences, "checked": c.checked,
                      "worst_share_difference": round(c.worst["share"], 4),
                      "worst_interval_end_difference_of_width": round(c.worst["interval_of_width"], 4),
                      "differences": c.differences[:20], "difference_count": len(c.differences)}))
    sys.exit(0 if not c.differences else 1)


if __name__ == "__main__":
    main()
