"""How often a confident verdict is wrong where every server life lands elsewhere, over independent trials.

    python benchmarks/spread_calibration.py [--trials 300] [--lives 4] [--seed 0] [--scenarios a,b]

The spread study (spread_study.py) replays orders of one recording per scenario: its trials share that
recording's lives, so one unlucky recording weighs on all of them. Here every trial draws its own lives, as a
fresh sweep on a fresh server would: each K's lives run at a speed drawn from the simulator's own restart draw
(sim/restart.py: lognormal of mean 1, the scenario's relative SD) times the scenario's true level (K=4 at the true
gain over K=0), each life a synthetic closed-loop window (tests/unit/synthetic.py: completions spread evenly with
jitter, latencies by Little's law). Each trial is decided three ways, by the product's own code: the grid with
one life per K, the grid with two, and the adaptive sweep (the chooser of decision/adaptive.py replayed over the
trial's lives as adaptive_replay.py does, its default budget of two lives per K), each by the decision engine.
No HTTP, no server process: what it measures is the statistics alone, not the simulator's fidelity.

Per scenario (decision_scenarios.SPREAD_SCENARIOS: spread 3, 8, 15 % x true gain -10, +5, +15, +40 %) and
strategy: right / not decided / wrong, with the wrong share's Wilson interval; a verdict stated at 90 % may be wrong
up to 10 % of the time where the truth sits at the tie band's edge (+3 %), and less the further it is from it.
Prints one JSON line.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
import tomllib
from collections import Counter
from pathlib import Path

import numpy as np

import adaptive_replay as replay
from decision_scenarios import SPREAD_SCENARIOS, config_toml, scenarios_named
from lookahead_runner.config import SweepConfig
from lookahead_runner.decision import decide, evidence
from lookahead_runner.decision.adaptive import ModelView
from lookahead_runner.decision.cells.stats import wilson
from lookahead_runner.run.adaptive_sweep import MIN_LEADER_LIVES

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "unit"))
from synthetic import window  # noqa: E402

STRATEGIES = ("adaptive", "grid_repeats_1", "grid_repeats_2")
BASE_REQ_PER_S = 20.0   # K=0's level (the roomy-kv scenario at 32 users reads about this)
STAGE_S = 5.0           # the spread study's stage


def life_speeds(rng: np.random.Generator, spread: float, count: int) -> np.ndarray:
    """The simulator's restart draw (sim/restart.py): lognormal of mean 1 with this relative SD."""
    sigma = math.sqrt(math.log1p(spread * spread))
    return np.exp(rng.normal(-sigma * sigma / 2, sigma, count))


def trial_windows(s, rng: np.random.Generator, lives: int, trial: int) -> list:
    """`lives` restarted lives of each K, each at its own drawn speed (repeat numbers make each window's jitter
    its own draw)."""
    windows = []
    for k in s.ks:
        level = BASE_REQ_PER_S * (1 + s.gain if k else 1.0)
        for r, speed in enumerate(life_speeds(rng, s.restart_spread, lives)):
            windows.append(window(k, s.users, level * speed, trial * lives + r, duration_s=STAGE_S))
    return windows


def _outcome(decision, truth: int) -> str:
    if decision.status != "decided":
        return "not decided"
    return "right" if decision.recommended is not None and decision.recommended.k == truth else "wrong"


def scenario_config(s) -> SweepConfig:
    config = SweepConfig.model_validate(tomllib.loads(config_toml(s, 2, STAGE_S, 1.0)))
    config.decision.for_server("simulator drawing a restart spread")
    return config


def study(s, args: argparse.Namespace) -> dict:
    config = scenario_config(s)
    p = config.decision
    rng = np.random.default_rng([args.seed, round(s.restart_spread * 1000), round((s.gain + 1) * 1000)])
    price = {k: replay.Price(start_s=120.0, measure_s=STAGE_S) for k in s.ks}
    budget = len(s.ks) * MIN_LEADER_LIVES
    no_model = (lambda seen: ModelView(why_not="two K: nothing to predict"))
    rows: dict[str, list[tuple[str, int, float]]] = {name: [] for name in STRATEGIES}
    for trial in range(args.trials):
        ev = evidence(trial_windows(s, rng, args.lives, trial), s.users)
        repeats = {k: sorted(w.repeat for w in cell.windows) for k, cell in ev.at(s.users).items()}
        adaptive = replay.replay(ev, repeats, config, price, budget, no_model)
        shown = {"adaptive": adaptive.revealed, "grid_repeats_1": {k: r[:1] for k, r in repeats.items()},
                 "grid_repeats_2": {k: r[:2] for k, r in repeats.items()}}
        for name, revealed in shown.items():
            decision = decide(ev.subset(revealed), p, {})
            rows[name].append((_outcome(decision, s.truth), sum(map(len, revealed.values())),
                               decision.confidence or 0.0))
    return {"truth": s.truth, "gain": s.gain, "restart_spread": s.restart_spread,
            **{name: summary(r, p.interval_level) for name, r in rows.items()}}


def summary(rows: list[tuple[str, int, float]], level: float) -> dict:
    counts = Counter(outcome for outcome, _, _ in rows)
    decided = [(o, lives, c) for o, lives, c in rows if o != "not decided"]
    wrong_range = wilson(counts["wrong"], len(rows), level)
    return {"trials": len(rows), "right": counts["right"], "not_decided": counts["not decided"],
            "wrong": counts["wrong"],
            "wrong_share": round(counts["wrong"] / len(rows), 4) if rows else None,
            "wrong_share_range": [round(wrong_range.low, 4), round(wrong_range.high, 4)],
            "decided_stated_mean": round(float(np.mean([c for _, _, c in decided])), 3) if decided else None,
            "decided_hit": round(counts["right"] / len(decided), 3) if decided else None,
            "lives_median": float(np.median([lives for _, lives, _ in rows])) if rows else None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=300, help="independent trials per scenario")
    parser.add_argument("--lives", type=int, default=4, help="lives drawn per K and trial (the adaptive budget "
                        "never asks for more than 2 x the number of K in all)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--scenarios", default="", help="comma-separated spread scenarios (default: all)")
    args = parser.parse_args()
    if args.trials < 1 or args.lives < 2:
        parser.error("--trials must be >= 1 and --lives >= 2 (the grid of two lives per K needs two)")
    started = time.monotonic()
    out = {s.name: study(s, args) for s in scenarios_named(parser, args.scenarios, SPREAD_SCENARIOS)}
    totals = {name: {key: sum(v[name][key] for v in out.values()) for key in ("right", "not_decided", "wrong")}
              for name in STRATEGIES}
    print(json.dumps({"benchmark": "spread_calibration", "trials_per_scenario": args.trials,
                      "lives_per_k": args.lives, "seed": args.seed, "scenarios": out, "totals": totals,
                      "wall_s": round(time.monotonic() - started, 1)}))


if __name__ == "__main__":
    main()
