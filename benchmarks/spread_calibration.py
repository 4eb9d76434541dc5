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
No HTTP, no server process: what it measures is the statistics alone, not the simulator's fidelity. With
`--ledger`, every trial's server (its spread unknown) also has an earlier run in the product's ledger: more lives of
each K drawn alike, decided and handed over as adaptive_replay.with_earlier_run does, and every strategy decides
with it (a sweep after the first on a server).

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
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

import adaptive_replay as replay
from decision_scenarios import SPREAD_SCENARIOS, TIE, config_toml, scenarios_named
from lookahead_runner.config import SweepConfig
from lookahead_runner.decision import decide, engine, evidence
from lookahead_runner.decision.adaptive import ModelView
from lookahead_runner.decision.cells.stats import wilson
from lookahead_runner.run.strategies.adaptive_sweep import MIN_LEADER_LIVES

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "unit"))
from synthetic import window  # noqa: E402

STRATEGIES = ("adaptive", "adaptive_fixed_bar", "grid_repeats_1", "grid_repeats_2")
FLOOR = "adaptive_first_decided"   # --floor: the chooser stopping at its first look decided at decision.confidence
BASE_REQ_PER_S = 20.0   # K=0's level (the roomy-kv scenario at 32 users reads about this)
STAGE_S = 5.0           # the spread study's stage
START_S = 120.0         # a life's priced start (a GPU server's: decision_accuracy.py --start-s)
LEDGER_LIVES = 2        # --ledger: the earlier run's lives per K (the grid's: decision_accuracy.py's ledger mode)
BUCKETS = ((0.90, 0.95), (0.95, 0.99), (0.99, 1.01))   # stated confidence, as the calibration suite buckets it


@dataclass(frozen=True)
class Profile:
    """A sweep of several K whose true req/s per K is a recorded scenario's (decision_scenarios.py's simulator
    model figures, `why`), every life at its own speed: the adaptive sweep's saving where it has K to leave out."""

    name: str
    levels: tuple[float, ...]     # req/s per K of `ks`, as the scenario's model reads them
    ks: tuple[int, ...] = (0, 2, 4, 8)
    users: int = 32

    def truth(self, tie: float) -> int:
        best = max(self.levels)
        return min(k for k, v in zip(self.ks, self.levels) if v >= best / (1 + tie))


PROFILES = (Profile("tight-kv", (22.4, 43.2, 49.1, 37.5)), Profile("not-the-lever", (20.0, 19.9, 19.9, 19.7)),
            Profile("high-concurrency", (31.4, 58.4, 53.1, 41.1)), Profile("low-acceptance", (22.4, 21.3, 17.4, 9.8)))


def life_speeds(rng: np.random.Generator, spread: float, count: int) -> np.ndarray:
    """The simulator's restart draw (sim/restart.py): lognormal of mean 1 with this relative SD."""
    sigma = math.sqrt(math.log1p(spread * spread))
    return np.exp(rng.normal(-sigma * sigma / 2, sigma, count))


def trial_windows(s, rng: np.random.Generator, lives: int, trial: int, levels: dict[int, float] | None = None
                  ) -> list:
    """`lives` restarted lives of each K, each at its own drawn speed (repeat numbers make each window's jitter
    its own draw); each K at its `levels` req/s, else K=0 at BASE_REQ_PER_S and K=4 at the scenario's gain."""
    windows = []
    for k in s.ks:
        level = levels[k] if levels else BASE_REQ_PER_S * (1 + s.gain if k else 1.0)
        for r, speed in enumerate(life_speeds(rng, s.restart_spread, lives)):
            windows.append(window(k, s.users, level * speed, trial * lives + r, duration_s=STAGE_S))
    return windows


def _outcome(decision, truth: int) -> str:
    if decision.status != "decided":
        return "not decided"
    return "right" if decision.recommended is not None and decision.recommended.k == truth else "wrong"


def scenario_config(s, server: str = "simulator drawing a restart spread") -> SweepConfig:
    """`server`: the kind the config is for: one whose restart spread is unknown until measured (the default, as
    on real vLLM), or "simulator" (its documented 1 % assumed, as the decision-accuracy recordings were decided)."""
    config = SweepConfig.model_validate(tomllib.loads(config_toml(s, 2, STAGE_S, 1.0)))
    config.decision.for_server(server)
    return config


def profile_scenario(profile: Profile, spread: float):
    """A profile as a scenario the product's config is built from (decision_scenarios.config_toml)."""
    return replace(SPREAD_SCENARIOS[0], name=f"{profile.name}-spread{spread * 100:g}", ks=profile.ks,
                   users=profile.users, truth=profile.truth(TIE), restart_spread=spread, gain=None)


def study(s, args: argparse.Namespace, levels: dict[int, float] | None = None, server: str | None = None) -> dict:
    config = unledgered = scenario_config(s, server) if server and not getattr(args, "ledger", False) \
        else scenario_config(s)
    p = config.decision
    truth, gain = s.truth, s.gain
    rng = np.random.default_rng([args.seed, round(s.restart_spread * 1000),
                                 round((gain + 1) * 1000) if gain is not None else sum(map(ord, s.name))])
    price = {k: replay.Price(start_s=START_S, measure_s=STAGE_S) for k in s.ks}
    budget = len(s.ks) * MIN_LEADER_LIVES
    no_model = (lambda seen: ModelView(why_not="no performance model in this benchmark"))
    rows: dict[str, list[tuple[str, int, float, str]]] = {name: [] for name in strategies(args)}
    ledger = getattr(args, "ledger", False)
    drawn, missed = args.lives + (LEDGER_LIVES if ledger else 0), 0
    for trial in range(args.trials):
        ev = evidence(trial_windows(s, rng, drawn, trial, levels), s.users)
        every = {k: sorted(w.repeat for w in cell.windows) for k, cell in ev.at(s.users).items()}
        repeats = {k: r[:args.lives] for k, r in every.items()}
        if ledger:   # an earlier run on this server: the lives drawn after this trial's, in the ledger
            config = replay.with_earlier_run(unledgered, ev, {k: r[args.lives:] for k, r in every.items()})
            missed += config is None    # that run measured no spread: this trial runs with it unknown (counted)
            config = config or unledgered
            p = config.decision
        for name, fixed in (("adaptive", False), ("adaptive_fixed_bar", True), (FLOOR, True)):
            if name not in rows:
                continue
            with first_decided_look(name == FLOOR):
                replayed = replay.replay(ev, repeats, config, price, budget, no_model, fixed_bar=fixed)
            revealed = replayed.revealed
            decision = replay.decide_replayed(ev, revealed, config, budget, fixed_bar=fixed)
            # a futile look's stop is judged as the last look; counted apart (what it cost: the grid's outcomes)
            stop = "futile" if replayed.stop == "futile" else decision.looks.stopped_by if decision.looks else ""
            rows[name].append((_outcome(decision, truth), sum(map(len, revealed.values())),
                               decision.confidence or 0.0, stop))
        for name, count in (("grid_repeats_1", 1), ("grid_repeats_2", 2)):
            revealed = {k: r[:count] for k, r in repeats.items()}
            decision = decide(ev.subset(revealed), p, {})
            rows[name].append((_outcome(decision, truth), sum(map(len, revealed.values())),
                               decision.confidence or 0.0, ""))
    return {"truth": truth, "gain": gain, "restart_spread": s.restart_spread, "ks": list(s.ks),
            **({"trials_without_a_ledger_spread": missed} if ledger else {}),
            **{name: summary(r, p.interval_level) for name, r in rows.items()}}


def strategies(args: argparse.Namespace) -> tuple[str, ...]:
    return STRATEGIES + ((FLOOR,) if getattr(args, "floor", False) else ())


@contextmanager
def first_decided_look(on: bool):
    """The fixed early-stop bar lowered to decision.confidence (engine.EARLY_STOP_ERROR_SHARE = 1): the chooser
    stops at its first decided look, the most lives any stop bar can save with this chooser (and the optional
    stopping the bar was brought in against)."""
    if not on:
        yield
        return
    kept = engine.EARLY_STOP_ERROR_SHARE
    engine.EARLY_STOP_ERROR_SHARE = 1.0
    try:
        yield
    finally:
        engine.EARLY_STOP_ERROR_SHARE = kept


def priced_s(lives: int, stages_s: float = STAGE_S) -> float:
    """A life priced at a GPU-like start plus its load (every life here runs the target stage alone)."""
    return lives * (START_S + stages_s)


def buckets(rows: list[tuple[str, int, float, str]], level: float) -> dict:
    """Per stated-confidence bucket: decided, wrong, the mean stated, the wrong share's Wilson interval, and
    whether it holds what it states (the interval reaches down to 1 - the mean stated)."""
    out = {}
    for low, high in BUCKETS:
        mine = [(o, c) for o, _, c, _ in rows if o != "not decided" and low <= c < high]
        if not mine:
            continue
        wrong = sum(o == "wrong" for o, _ in mine)
        stated = float(np.mean([c for _, c in mine]))
        bounds = wilson(wrong, len(mine), level)
        out[f"{low:.0%}-{min(high, 1):.0%}"] = {"decided": len(mine), "wrong": wrong, "stated_mean": round(stated, 4),
                                                "wrong_share_range": [round(bounds.low, 4), round(bounds.high, 4)],
                                                "holds": bounds.low <= 1 - stated}
    return out


def summary(rows: list[tuple[str, int, float, str]], level: float) -> dict:
    counts = Counter(outcome for outcome, _, _, _ in rows)
    decided = [(o, lives, c) for o, lives, c, _ in rows if o != "not decided"]
    wrong_range = wilson(counts["wrong"], len(rows), level)
    lives = [n for _, n, _, _ in rows]
    stops = Counter(stop for *_, stop in rows if stop)
    return {"trials": len(rows), "right": counts["right"], "not_decided": counts["not decided"],
            "wrong": counts["wrong"],
            "wrong_share": round(counts["wrong"] / len(rows), 4) if rows else None,
            "wrong_share_range": [round(wrong_range.low, 4), round(wrong_range.high, 4)],
            "decided_stated_mean": round(float(np.mean([c for _, _, c in decided])), 3) if decided else None,
            "decided_hit": round(counts["right"] / len(decided), 3) if decided else None,
            "lives_median": float(np.median(lives)) if rows else None, "lives": int(sum(lives)),
            "priced_s": round(sum(priced_s(n) for n in lives), 1), "buckets": buckets(rows, level),
            **({"stopped_by": dict(stops.most_common())} if stops else {})}


def totals_of(out: dict, level: float, names: tuple[str, ...] = STRATEGIES) -> dict:
    """Over scenarios: right / not decided / wrong, lives and priced server-seconds (and the saving against the
    grid of two lives per K, the adaptive sweep's budget), and the buckets of stated confidence pooled."""
    totals = {}
    for name in names:
        row = {key: sum(v[name][key] for v in out.values()) for key in ("right", "not_decided", "wrong", "lives",
                                                                         "priced_s")}
        grid = sum(v["grid_repeats_2"]["priced_s"] for v in out.values())
        row["priced_s_saving_vs_grid_2"] = round(1 - row["priced_s"] / grid, 4) if grid else None
        pooled: dict[str, dict] = {}
        for v in out.values():
            for bucket, b in v[name]["buckets"].items():
                into = pooled.setdefault(bucket, {"decided": 0, "wrong": 0, "stated_sum": 0.0})
                into["decided"] += b["decided"]
                into["wrong"] += b["wrong"]
                into["stated_sum"] += b["stated_mean"] * b["decided"]
        row["buckets"] = {}
        for bucket, b in pooled.items():
            stated = b["stated_sum"] / b["decided"]
            bounds = wilson(b["wrong"], b["decided"], level)
            row["buckets"][bucket] = {"decided": b["decided"], "wrong": b["wrong"], "stated_mean": round(stated, 4),
                                      "wrong_share_range": [round(bounds.low, 4), round(bounds.high, 4)],
                                      "holds": bounds.low <= 1 - stated}
        totals[name] = row
    return totals


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=300, help="independent trials per scenario")
    parser.add_argument("--lives", type=int, default=4, help="lives drawn per K and trial (the adaptive budget "
                        "never asks for more than 2 x the number of K in all)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--scenarios", default="", help="comma-separated spread scenarios (default: all; "
                        "\"none\": none)")
    parser.add_argument("--profiles", default="none", help="comma-separated K profiles of four K (" + ", ".join(
        p.name for p in PROFILES) + "; \"all\"; default none)")
    parser.add_argument("--profile-spreads", default="0.01,0.03", help="restart spreads each profile is drawn at")
    parser.add_argument("--floor", action="store_true", help="also the chooser stopping at its first decided look "
                        "(the most lives a stop bar can save)")
    parser.add_argument("--profile-server", choices=("simulator", "unknown"), default="simulator",
                        help="the profiles decided as for the simulator (its 1 %% spread assumed, as the recordings "
                        "were) or for a server whose spread is unknown until measured (real vLLM)")
    parser.add_argument("--ledger", action="store_true",
                        help=f"every trial's server (its spread unknown, as real vLLM's) has an earlier run in the "
                        f"ledger: {LEDGER_LIVES} more lives per K drawn alike, decided by the engine and handed over "
                        "as the product's ledger does; every strategy decides with it")
    args = parser.parse_args()
    if args.trials < 1 or args.lives < 2:
        parser.error("--trials must be >= 1 and --lives >= 2 (the grid of two lives per K needs two)")
    known = {p.name: p for p in PROFILES}
    names = list(known) if args.profiles == "all" else [n for n in args.profiles.split(",") if n and n != "none"]
    if unknown := sorted(set(names) - set(known)):
        parser.error(f"--profiles: unknown {', '.join(unknown)}; known: {', '.join(known)}")
    try:
        spreads = [float(x) for x in args.profile_spreads.split(",") if x]
    except ValueError:
        parser.error("--profile-spreads: comma-separated fractions, e.g. 0.03,0.08")
    started = time.monotonic()
    chosen = [] if args.scenarios == "none" else scenarios_named(parser, args.scenarios, SPREAD_SCENARIOS)
    out = {s.name: study(s, args) for s in chosen}
    for name in names:
        for spread in spreads:
            s = profile_scenario(known[name], spread)
            out[s.name] = study(s, args, dict(zip(known[name].ks, known[name].levels)),
                                "simulator" if args.profile_server == "simulator" else None)
    level = scenario_config(chosen[0] if chosen else profile_scenario(known[names[0]], spreads[0])
                            ).decision.interval_level if out else 0.95
    print(json.dumps({"benchmark": "spread_calibration", "trials_per_scenario": args.trials,
                      "lives_per_k": args.lives, "seed": args.seed, "ledger": args.ledger, "scenarios": out,
                      "totals": totals_of(out, level, strategies(args)), "wall_s": round(time.monotonic() - started, 1)}))


if __name__ == "__main__":
    main()
