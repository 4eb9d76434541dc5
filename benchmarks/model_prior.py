"""What the performance model as a prior saves, and how often it leaves the winner out, over independent trials.

    python benchmarks/model_prior.py [--trials 100] [--seed 0] [--error 0.078] [--profiles tight-kv,high-concurrency]

Each trial draws its lives as spread_calibration.py does (each K's restarted lives at a speed drawn around its
profile's true req/s: tight-kv, K=4 best, K=2 12 % behind; high-concurrency, K=2 best, K=4 10 % behind; K 0/2/4/8,
at restart spreads of 1 and 3 %) and runs the product's chooser (decision/adaptive.py, replayed as
adaptive_replay.py does, its default budget of two lives per K) three ways on the same lives:
- "free": no model (the model-free bracket);
- "model": a trusted model as the product forms its view (run/strategies/adaptive_sweep.view_of): its prediction of a
  K not measured is the true level times (1 + an error drawn per K and trial, normal, its median |error| `--error`;
  of a measured K, 1 % SD), its interval +-`--error`; its held-out errors at the target, two per K measured (a stage
  and a K left out), drawn as a new prediction's; the skip at the early-stop bar's error (perfmodel/prior.py);
- "largest": the same model with the rule before, the largest held-out error as the bound (for the comparison).
Each verdict by the decision engine as the product's finalize judges it. Per profile and spread, and in total:
right / not decided / wrong, lives run, and "truth_not_run" (trials whose true best K was never run: the winner
left out). The model's errors here are what its held-out errors claim (normal, as wide); a model whose errors at a
K are wider than its held-out ones would be trusted no more than its held-out check allows.
Prints one JSON line per profile and spread, then the totals.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from contextlib import contextmanager

import numpy as np

import adaptive_replay as replay
import spread_calibration as sc
from lookahead_runner.decision import evidence
from lookahead_runner.decision.adaptive import ModelView, Prediction
from lookahead_runner.decision.engine import early_look
from lookahead_runner.decision.perfmodel import prior
from lookahead_runner.run.strategies.adaptive_sweep import MIN_LEADER_LIVES

MEDIAN_OF_HALF_NORMAL = 0.6745   # the median |x| of a standard normal: a normal error's SD from its median |error|
FIT_ERROR_SD = 0.01              # a measured K's prediction (a fitted figure) off its truth by this SD
STRATEGIES = ("free", "model", "largest")


@contextmanager
def largest_as_bound():
    """The rule before: a K given up to its prediction / (1 - the largest held-out error)."""
    kept = prior.skip_bound
    prior.skip_bound = lambda model: model.heldout_error
    try:
        yield
    finally:
        prior.skip_bound = kept


def model_view(levels: dict[int, float], drawn, measured: list[int], error: float, level: float) -> ModelView:
    """The model as the chooser sees it, with the K measured so far (each trial's errors drawn once, up front)."""
    unseen, held, fitted = drawn
    predictions = {}
    for k, true in levels.items():
        x = true * (1 + (fitted[k] if k in measured else unseen[k]))
        predictions[k] = Prediction(x, x * (1 - error), x * (1 + error))
    shown = tuple(float(e) for e in held[:2 * len(measured)])
    return ModelView(True, predictions, "", heldout_error=max(map(abs, shown)), unit="req/s", heldout_errors=shown,
                     skip_level=level)


def study(profile, spread: float, args) -> dict:
    s = sc.profile_scenario(profile, spread)
    config = sc.scenario_config(s, "simulator")
    level = 1 - early_look(config.decision).confidence
    levels = dict(zip(profile.ks, profile.levels))
    sd = args.error / MEDIAN_OF_HALF_NORMAL
    seed = [args.seed, round(spread * 1000), sum(map(ord, s.name))]
    rng, model_rng = np.random.default_rng(seed), np.random.default_rng([seed[0] + 1, *seed[1:]])
    price = {k: replay.Price(start_s=sc.START_S, measure_s=sc.STAGE_S) for k in s.ks}
    budget = len(s.ks) * MIN_LEADER_LIVES
    rows = {name: [] for name in STRATEGIES}
    for trial in range(args.trials):
        ev = evidence(sc.trial_windows(s, rng, 4, trial, levels), s.users)
        repeats = {k: sorted(w.repeat for w in c.windows) for k, c in ev.at(s.users).items()}
        drawn = ({k: model_rng.normal(0, sd) for k in levels}, model_rng.normal(0, sd, 16),
                 {k: model_rng.normal(0, FIT_ERROR_SD) for k in levels})
        for name in STRATEGIES:
            if name == "free":
                of = lambda seen: ModelView(why_not="no model")     # noqa: E731
            else:
                of = lambda seen: model_view(levels, drawn, sorted(seen.ks), args.error, level)  # noqa: E731
            with largest_as_bound() if name == "largest" else _nothing():
                revealed = replay.replay(ev, repeats, config, price, budget, of).revealed
            decision = replay.decide_replayed(ev, revealed, config, budget)
            rows[name].append((sc._outcome(decision, s.truth), sum(map(len, revealed.values())),
                               s.truth not in [k for k, r in revealed.items() if r]))
    return {name: {"right": sum(o == "right" for o, _, _ in r), "not_decided": sum(o == "not decided" for o, _, _ in r),
                   "wrong": sum(o == "wrong" for o, _, _ in r), "lives": sum(n for _, n, _ in r),
                   "truth_not_run": sum(left for _, _, left in r)} for name, r in rows.items()}


@contextmanager
def _nothing():
    yield


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=100, help="independent trials per profile and spread")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--error", type=float, default=0.078, help="the model's median |relative error| on a K")
    parser.add_argument("--spreads", default="0.01,0.03", help="restart spreads each profile is drawn at")
    parser.add_argument("--profiles", default="tight-kv,high-concurrency",
                        help="comma-separated profiles (" + ", ".join(p.name for p in sc.PROFILES) + ")")
    args = parser.parse_args()
    known = {p.name: p for p in sc.PROFILES}
    names = [n for n in args.profiles.split(",") if n]
    if args.trials < 1 or not 0 < args.error < 1:
        parser.error("--trials must be >= 1 and --error a fraction in (0, 1)")
    if args.seed < 0:
        parser.error(f"--seed: give 0 or more (numpy's seeds are non-negative), got {args.seed}")
    if unknown := sorted(set(names) - set(known)):
        parser.error(f"--profiles: unknown {', '.join(unknown)}; known: {', '.join(known)}")
    try:
        spreads = [float(x) for x in args.spreads.split(",") if x]
    except ValueError:
        parser.error("--spreads: comma-separated fractions, e.g. 0.01,0.03")
    started, out = time.monotonic(), {}
    for name in names:
        for spread in spreads:
            key = f"{name}-spread{spread * 100:g}"
            out[key] = study(known[name], spread, args)
            print(json.dumps({key: out[key]}), flush=True)
    grid = args.trials * len(out) * 2 * len(known[names[0]].ks) if out else 0
    totals = {name: {field: sum(v[name][field] for v in out.values())
                     for field in ("right", "not_decided", "wrong", "lives", "truth_not_run")} for name in STRATEGIES}
    for t in totals.values():
        t["saving_vs_grid_x2"] = round(1 - t["lives"] / grid, 4) if grid else None
    print(json.dumps({"benchmark": "model_prior", "trials": args.trials, "seed": args.seed, "error": args.error,
                      "grid_x2_lives": grid, "totals": totals, "wall_s": round(time.monotonic() - started, 1)}))


if __name__ == "__main__":
    sys.exit(main())
