"""The adaptive sweep's capacity probes judge the verdict at the rate after each probe and stop at the first that
decides it (run/strategies/adaptive_sweep.py): a sequence of looks at one bar. Is the verdict still wrong no more
often than it states? Measured on the calibration suite's rate-capacity trials at the tie band's edge
(benchmarks/calibration/capacity_verdicts.py: K=0 and K=4 on M/M/c servers, K=4's true capacity gain on the edge
whose side the latency contradicts, so a verdict naming either K is an error), each trial's ramp followed by the
capacity search's probes two ways: judged once after the search (the calibration suite's "after the capacity
search" pass) and judged after each probe, the first decided verdict kept (the adaptive sweep's way).

    python benchmarks/probe_sequential.py --trials 200 --seed 0

Prints per way: trials, decided, wrong naming K=0 / K=4 (each stated at 1 - decision.confidence, 10 %), probes per
trial (mean). One run is one sample of each rate: their binomial intervals are printed beside them.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.calibration import adapters  # noqa: E402
from benchmarks.calibration.capacity_verdicts import (at_the_edge, capacity_search, draw,  # noqa: E402
                                                      ramp_windows, truth)
from lookahead_runner.decision.cells.stats import wilson  # noqa: E402


def one_trial(rng: np.random.Generator) -> dict:
    """One drawn regime at the edge: its ramp, then both ways of judging the search's probes."""
    regime = draw(rng)
    edge_rng = rng.spawn(1)[0]
    r = at_the_edge(regime, edge_rng)
    p, slo, windows, seeds = ramp_windows(r, edge_rng)
    past = 4 if r.capacity_gain > 0 else 0
    k_true, _ = truth(r)
    out = {}
    for way, judge in (("once after the search", None),
                       ("after each probe", lambda ws: adapters.verdict(adapters.decide_rate(ws, r.rate, p))[0])):
        probed = capacity_search(r, windows, slo, np.random.default_rng(seeds), judge)
        decided, k, _ = adapters.verdict(adapters.decide_rate(probed, r.rate, p))
        out[way] = {"decided": decided, "k": k, "probes": len(probed) - len(windows),
                    "wrong": decided and (k != k_true or k != past)}
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if args.trials < 1:
        print("probe_sequential.py: --trials must be at least 1", file=sys.stderr)
        return 2
    rng, started, rows = np.random.default_rng(args.seed), time.monotonic(), []
    for _ in range(args.trials):
        rows.append(one_trial(rng))
    report = {"trials": args.trials, "seed": args.seed, "wall_s": round(time.monotonic() - started, 1)}
    for way in rows[0]:
        got = [row[way] for row in rows]
        n = len(got)
        wrong = {k: sum(1 for g in got if g["wrong"] and g["k"] == k) for k in (0, 4)}
        report[way] = {"decided": sum(g["decided"] for g in got),
                       "probes_mean": round(float(np.mean([g["probes"] for g in got])), 2),
                       **{f"wrong naming K={k}": f"{c}/{n} = {c / n:.1%} [{wilson(c, n, 0.95).low:.1%}, "
                                                  f"{wilson(c, n, 0.95).high:.1%}] (stated 10%)"
                          for k, c in wrong.items()}}
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
