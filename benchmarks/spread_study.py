"""The restart spread study of benchmarks/decision_accuracy.py --spread (issue 38): what a verdict costs in server
lives when every life of the server lands elsewhere, and whether a confident verdict is ever wrong.

Each scenario (decision_scenarios.SPREAD_SCENARIOS: a restart spread of 3, 8 or 15 % per life, a true gain of K=4
over K=0 of -10, +5, +15 or +40 %) is recorded once as restarted lives (`--lives` per K, each its own draw of the
simulator's speed), then replayed `--subsets` times in drawn orders of each K's lives (adaptive_replay.py says
how): the grid with one life per K (repeats = 1), the grid with two (repeats = 2), and what the product does on
such a server with no strategy given, the adaptive sweep (the chooser of decision/adaptive.py, its default budget
of two lives per K), each decided by the decision engine on the lives it revealed, with no earlier run remembered.
Per scenario and strategy: right / not decided / wrong, and the lives spent (median, max; of the decided ones too).
Goal (issue 38): 0 confident wrong; where |gain| >= 3 x the spread, the adaptive sweep decided in at most (number
of K + 2) lives in at least half of the trials (its median). Confident wrong verdicts are also counted apart where
the true gain is more than one restart spread from the tie band's edge (+3 %): nearer, a verdict at 90 % is a
near coin flip whatever the method (benchmarks/README.md shows the upper end of the spread's chi-square interval
in place of its Student's t: fewer lives decided, the same near-tie wrong verdicts).

Orders of one recording share its lives, so the trials are not independent (see decision_accuracy.py).
"""
from __future__ import annotations

import math
from collections import Counter

import numpy as np

import adaptive_replay as replay
from lookahead_runner.decision import decide
from lookahead_runner.decision.adaptive import ModelView
from lookahead_runner.run.strategies.adaptive_sweep import MIN_LEADER_LIVES
from lookahead_runner.runfolder.read import read_run

STRATEGIES = ("adaptive", "grid_repeats_1", "grid_repeats_2")
TIE = 0.03   # decision.tie_tolerance_frac


def _outcome(decision, truth: int) -> str:
    if decision.status != "decided":
        return "not decided"
    return "right" if decision.recommended is not None and decision.recommended.k == truth else "wrong"


def _median_max(values: list[float]) -> dict:
    finite = [v for v in values if math.isfinite(v)]
    return {"median": float(np.median(values)) if values else None, "max": max(finite) if finite else None}


def _summary(trials: list[dict]) -> dict:
    counts = Counter(t["outcome"] for t in trials)
    decided = [t["lives"] for t in trials if t["outcome"] != "not decided"]
    to_decided = [t["lives"] if t["outcome"] != "not decided" else math.inf for t in trials]
    stated = [t["confidence"] for t in trials if t["outcome"] != "not decided"]
    return {"trials": len(trials), "right": counts["right"], "not_decided": counts["not decided"],
            "wrong": counts["wrong"], "decided_stated_mean": round(float(np.mean(stated)), 3) if stated else None,
            "lives": _median_max([t["lives"] for t in trials]),
            "lives_when_decided": _median_max(decided),
            "lives_to_decided_median": (None if not to_decided or not math.isfinite(np.median(to_decided))
                                        else float(np.median(to_decided)))}


def study(s, run_dir, args) -> dict:
    """The three strategies replayed over one scenario's recording."""
    data = read_run(run_dir)
    config = data.config
    if args.resamples is not None:
        decision = config.decision.model_copy(update={"resamples": args.resamples})
        config = config.model_copy(update={"decision": decision})
        config.decision.for_server("simulator drawing a restart spread")
    p, argv, evidence = config.decision, data.argv_by_k(), data.evidence()
    recorded = {k: [w.repeat for w in cell.windows] for k, cell in evidence.at(s.users).items()}
    price = replay.prices(data.plan.sweep_lives(), data.statuses, config)
    budget = len(s.ks) * MIN_LEADER_LIVES        # the adaptive sweep's default sweep.max_lives with no repeats given
    no_model = (lambda seen: ModelView(why_not="two K: nothing to predict"))
    trials: dict[str, list[dict]] = {name: [] for name in STRATEGIES}
    stops: Counter = Counter()
    for order in replay.orders(recorded, args.subsets, np.random.default_rng(args.seed + 2)):
        adaptive = replay.replay(evidence, order, config, price, budget, no_model)
        stops[adaptive.stop] += 1
        shown = {"adaptive": adaptive.revealed, "grid_repeats_1": {k: r[:1] for k, r in order.items()},
                 "grid_repeats_2": {k: r[:2] for k, r in order.items()}}
        for name, revealed in shown.items():
            decision = decide(evidence.subset(revealed), p, argv)
            trials[name].append({"outcome": _outcome(decision, s.truth), "lives": sum(map(len, revealed.values())),
                                 "confidence": decision.confidence})
    out = {"truth": s.truth, "gain": s.gain, "restart_spread": s.restart_spread, "users": s.users, "ks": list(s.ks),
           "lives_recorded": {str(k): len(r) for k, r in recorded.items()},
           "req_per_s_by_life": {str(k): [round(w.served_per_s, 2) for w in cell.windows]
                                 for k, cell in evidence.at(s.users).items()},
           "adaptive_stops": dict(stops.most_common()),
           **{name: _summary(rows) for name, rows in trials.items()}}
    # a true gain within one restart spread of the tie band's edge (+3 %: above it K=4 is the truth, below it K=0): a
    # 90 % verdict there is wrong up to 10 % of the time however it is reached (one spread: the SD of a gain of two
    # lives each); counted, and apart
    out["clear_of_tie"] = abs(s.gain - TIE) > s.restart_spread
    out["goal_applies"] = abs(s.gain) >= 3 * s.restart_spread
    if out["goal_applies"]:
        within = sum(t["outcome"] != "not decided" and t["lives"] <= len(s.ks) + 2 for t in trials["adaptive"])
        out["adaptive_decided_within_k_plus_2"] = {"n": within, "of": len(trials["adaptive"])}
        out["goal_met"] = within * 2 >= len(trials["adaptive"]) and out["adaptive"]["wrong"] == 0
    return out


def totals(per_scenario: dict[str, dict]) -> dict:
    """Over every scenario: confident wrong verdicts per strategy, and the goal."""
    wrong = {name: sum(v[name]["wrong"] for v in per_scenario.values()) for name in STRATEGIES}
    clear = {name: sum(v[name]["wrong"] for v in per_scenario.values() if v.get("clear_of_tie", True))
             for name in STRATEGIES}
    right = {name: sum(v[name]["right"] for v in per_scenario.values()) for name in STRATEGIES}
    undecided = {name: sum(v[name]["not_decided"] for v in per_scenario.values()) for name in STRATEGIES}
    goal = [name for name, v in per_scenario.items() if v["goal_applies"]]
    return {"confident_wrong": wrong, "confident_wrong_where_clear_of_the_tie_band": clear, "right": right,
            "not_decided": undecided,
            "goal": {"confident_wrong_max": 0,
                     "where_gain_at_least_3x_spread": "adaptive decided in <= number of K + 2 lives, median",
                     "scenarios": goal, "met_in": [name for name in goal if per_scenario[name]["goal_met"]]},
            "goal_met": all(w == 0 for w in wrong.values()) and all(per_scenario[n]["goal_met"] for n in goal),
            "goal_met_where_clear_of_the_tie_band": all(w == 0 for w in clear.values())
            and all(per_scenario[n]["goal_met"] for n in goal)}
