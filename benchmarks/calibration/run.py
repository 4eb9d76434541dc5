"""The calibration suite's entry point: every claim's stated rate against the rate measured over independent trials.

    python -m benchmarks.calibration [--trials 200] [--groups sweeps,rate,capacity,behind] [--seed 0] [--json FILE]
    python benchmarks/calibration/run.py ...            (the same)

Claim: the table it prints is each claim's stated rate, measured rate, trials and met / missed (tally.py's band),
with the regime factor that misses the most; a claim listed under "not yet measured" has no trials here yet.
Each group of trials draws its own regimes (regimes.py) from its own seed stream, so --groups and --trials
change nothing in the other groups' draws; exit 1 where a claim missed (0 otherwise), 2 on bad arguments.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

if __package__ in (None, ""):   # run as a file: the repository root on the path, then as the package
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    __package__ = "benchmarks.calibration"

import numpy as np  # noqa: E402

from . import findings, intervals, rate_verdicts, verdicts  # noqa: E402
from .rate_trials import (attainment_trial, capacity_trial, draw_spread, queue_trial, spread_at_the_edge,  # noqa: E402
                          spread_trial)
from .regimes import draw_attainment, draw_closed_loop, draw_queue  # noqa: E402
from .sweeps import at_the_edge, run_trial  # noqa: E402
from .tally import Tallies, table  # noqa: E402
from . import users_capacity  # noqa: E402
from . import capacity_verdicts  # noqa: E402
from . import acceptance, model_claims  # noqa: E402
from . import adapters  # noqa: E402
from . import drafting_findings, gate_findings  # noqa: E402
from . import outliers, set_apart  # noqa: E402


def _sweeps(rng: np.random.Generator, tallies: Tallies) -> None:
    trial = run_trial(draw_closed_loop(rng), rng)
    verdicts.score_sweep(trial, tallies)
    verdicts.score_reference(trial, tallies)
    intervals.score_sweep(trial, tallies)
    findings.score_outlier_flag(trial, tallies)
    # the same regime with K=4's gain at the tie band's edge, from a child stream: the trials' draws stay as they were
    edge_rng = rng.spawn(1)[0]
    verdicts.score_edge(run_trial(at_the_edge(trial.regime), edge_rng), tallies)


def _rate(rng: np.random.Generator, tallies: Tallies) -> None:
    trial = attainment_trial(draw_attainment(rng), rng)
    intervals.score_attainment(trial, tallies)
    # the verdict with a restart spread draws from a child stream: the attainment trials' draws stay as they were;
    # each regime twice, as drawn and with K=4's true gain at the tie band's edge
    spread_rng = rng.spawn(1)[0]
    regime = draw_spread(spread_rng)
    rate_verdicts.score_spread(spread_trial(regime, spread_rng), tallies)
    rate_verdicts.score_edge(spread_trial(spread_at_the_edge(regime), spread_rng), tallies)


def _capacity(rng: np.random.Generator, tallies: Tallies) -> None:
    regime = draw_attainment(rng, max_servable_arrivals=CAPACITY_ARRIVALS)
    intervals.score_capacity(capacity_trial(regime, rng, probe=False), tallies, "rate ramp")
    intervals.score_capacity(capacity_trial(regime, rng, probe=True), tallies, "capacity search")


def _behind(rng: np.random.Generator, tallies: Tallies) -> None:
    regime = draw_queue(rng, behind=bool(rng.uniform() < 0.5))
    findings.score_queue(regime, queue_trial(regime, rng), tallies)


# a capacity trial measures rates up to twice what the server serves: its stage holds at most this many arrivals
# at the servable rate (each window a Python loop over its arrivals)
CAPACITY_ARRIVALS = 5_000


@dataclass(frozen=True)
class Group:
    name: str
    run: Callable[[np.random.Generator, Tallies], None]
    what: str
    weight: float   # trials per --trials (at least 1 a run): a cheaper trial runs more (seconds per trial on 2 busy
    #                 cores, 2026-12-06: sweeps ~1.3, rate ~0.6, capacity ~0.1, behind ~0.02, rate-capacity ~1.5,
    #                 acceptance ~0.06, model ~1, knee ~0.08, gates ~0.04, drafting ~0.007, outliers ~0.08,
    #                 set-apart ~0.3)


GROUPS = {g.name: g for g in (
    Group("sweeps", _sweeps, "closed-loop sweeps: verdicts (grid x1/x2, ledger, adaptive, auto) and their error at "
                             "the tie band's edge, gain, restart spread", 1),
    Group("rate", _rate, "a target rate on M/M/c: SLO attainment, the gain at the rate, the verdict at the rate "
                         "with a restart spread", 1),
    Group("capacity", _capacity, "capacity within the SLO: a rate ramp and the capacity search", 2),
    Group("behind", _behind, "falls behind / keeps up: false alarms and misses", 10),
    Group("users", users_capacity.run_trial, "closed-loop users stages: capacity in users, goodput and SLO "
                                             "attainment per cell; Little's law users and a rate window's goodput", 1),
    Group("rate-capacity", capacity_verdicts.run_trial, "the verdict at a rate where the capacity within the SLO "
                                                        "decides: its error at the tie band's edge", 0.2),
    Group("acceptance", acceptance.trial, "a request set's acceptance length per category and for the mix "
                                          "(pooled, request-weighted, token-weighted) against its population's", 2),
    Group("model", model_claims.trial, "the performance model on a known curve: its req/s intervals, the held-out "
                                       "error at the target, trusted", 0.25),
    Group("knee", gate_findings.score_knee, "users ramps with a known knee: a knee named too early, missed", 1),
    Group("gates", gate_findings.score_gate, "the failures, latency, memory and real-batch gates on synthetic server "
                                             "signals: false alarms and misses", 3),
    Group("drafting", drafting_findings.score_drafting, "the drafts-short flag and a K never in effect, on drafting "
                                                        "counters with a known schedule: false alarms and misses", 10),
    Group("outliers", outliers.run_trial, "the outlier guard: false alarms, and the outlier lives caught by size", 2),
    Group("set-apart", set_apart.run_trial, "a K on one life beside a pair the F test set apart: its gain interval",
          0.4),
)}
FAMILIES = ("verdict", "interval", "finding")

NOT_YET = (
)


def run(groups: list[str], trials: int, seed: int, say=print) -> tuple[Tallies, dict[str, float]]:
    """Every group's trials; per group the seconds it took."""
    tallies, seconds = Tallies(), {}
    for index, name in enumerate(GROUPS):
        if name not in groups:
            continue
        rng = np.random.default_rng([seed, index])
        started = time.monotonic()
        count = max(1, round(trials * GROUPS[name].weight))
        for _ in range(count):
            GROUPS[name].run(rng, tallies)
        seconds[name] = round(time.monotonic() - started, 1)
        say(f"{name}: {count} trials in {seconds[name]:.0f} s", file=sys.stderr)
    return tallies, seconds


class _Parser(argparse.ArgumentParser):
    """argparse with its errors on one line (no usage block), exit 2."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def json_problem(path: Path) -> str:
    """Why --json's file cannot be written ("" where it can), checked before hours of trials, not after."""
    if path.is_dir():
        return f"{path} is a folder; give a file name in it"
    if not path.parent.is_dir():
        return f"folder {path.parent} does not exist; create it or give another path"
    if not os.access(path.parent, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        return f"cannot write {path}; give a path you can write"
    return ""


def main(argv: list[str] | None = None) -> int:
    parser = _Parser(prog="python -m benchmarks.calibration", description=__doc__.splitlines()[0])
    weights = ", ".join(f"{g.name} {g.weight:g}" for g in GROUPS.values())
    parser.add_argument("--trials", type=int, default=200, help="independent trials per group, times the group's "
                        f"weight ({weights}; at least 1 a group; default 200)")
    parser.add_argument("--groups", default=",".join(GROUPS), help=f"comma-separated, of {', '.join(GROUPS)}")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, help="also write every claim's tally (with its per-factor counts) here")
    args = parser.parse_args(argv)
    groups = [g for g in args.groups.split(",") if g]
    unknown = sorted(set(groups) - set(GROUPS))
    if unknown or not groups:
        parser.error(f"--groups: unknown {', '.join(unknown) or '(none given)'}; known: {', '.join(GROUPS)}")
    if args.trials < 1:
        parser.error("--trials: give 1 or more trials per group")
    if args.seed < 0:
        parser.error(f"--seed: give 0 or more (numpy's seeds are non-negative), got {args.seed}")
    if args.json is not None and (problem := json_problem(args.json)):
        parser.error(f"--json: {problem}")
    started = time.monotonic()
    tallies, seconds = run(groups, args.trials, args.seed, say=print)
    claims = sorted(tallies, key=lambda c: (FAMILIES.index(c.family), c.name))
    print(table(claims))
    if NOT_YET:
        print("\nnot yet measured: " + "; ".join(f"{name} (needs {need})" for name, need in NOT_YET))
    wall = round(time.monotonic() - started, 1)
    print(f"\n--trials {args.trials} (x each group's weight), seed {args.seed}, {wall:.0f} s")
    if args.json:
        args.json.write_text(json.dumps({"trials": args.trials, "seed": args.seed, "groups": groups,
                                         "seconds": seconds, "wall_s": wall, "claims": [c.row() for c in claims],
                                         "not_yet": [{"claim": n, "needs": need} for n, need in NOT_YET]}, indent=1))
    return 0 if all(c.met for c in claims) else 1


if __name__ == "__main__":
    sys.exit(main())
