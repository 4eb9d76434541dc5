"""Held-out accuracy of the performance model (decision/perfmodel/model.py) on the simulator's scenarios.
Goal: req/s at an unseen stage predicted within 10 % (median over scenarios; the worst is stated).
Prints one JSON line.

    python benchmarks/model_accuracy.py [--scenarios tight-kv,noisy] [--recordings DIR] [--fit-only]
                                        [--stage-s 7] [--warmup-s 2] [--repeats 1]

Each scenario of benchmarks/decision_scenarios.py is recorded through the product's path (`lookahead-runner
sweep --no-early-stop` on a generated config) with four stages, 1/8, 1/4, 1/2 and 1 x its target users,
every K, --repeats same-server repeats. Then the model is fitted as the report fits it
(perfmodel_run.fit_run) and its own held-out validation is read: every stage left out in turn and
predicted from the others ("stage": the unseen-stage figure of the goal; the top stage is an
extrapolation), and every K left out in turn ("K"). The error of a prediction is predicted / measured - 1
of the cell's req/s (its repeats averaged); a scenario's figure is the median |error| of its held-out
predictions, the worst one stated beside it.

Recordings go to --recordings (default reports/model-accuracy/<scenario>/<run>); a finished one with the
same config is reused, an interrupted one resumed, so --fit-only refits without recording. Budget: about
2-3 minutes of recording per scenario on 2 cores at the defaults.

--engine fits windows of the simulator's pure engine model instead (benchmarks/model_engine.py: the same
scenarios, stages and K, --engine-s engine seconds per cell, no HTTP path or client, one core, seconds):
a cross-check of the model on the physics alone, not a measurement of the product.

--run-dir DIR fits any run folder instead (e.g. a sweep of real vLLM on the CPU build) and prints its
held-out figures the same way.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from decision_accuracy import finished_run  # noqa: E402
from decision_scenarios import SCENARIOS, BenchScenario, config_toml, scenarios_named  # noqa: E402

from lookahead_runner.config import config_from_dict  # noqa: E402
from lookahead_runner.decision.perfmodel.model import fit_performance_model  # noqa: E402
from lookahead_runner.decision.perfmodel.trust import SCHEME_K, SCHEME_STAGE, summarize  # noqa: E402
from lookahead_runner.runfolder.read import read_run  # noqa: E402
from lookahead_runner.run.verdict.perfmodel_run import fit_run  # noqa: E402

STAGE_SHARES = (0.125, 0.25, 0.5, 1.0)
GOAL = 0.10


def stages_of(s: BenchScenario) -> list[int]:
    return sorted({max(1, round(s.users * share)) for share in STAGE_SHARES})


def config_text(s: BenchScenario, repeats: int, stage_s: float, warmup_s: float) -> str:
    single = f"stages = [{{ users = {s.users}, duration_s = {stage_s!r} }}]"
    text = config_toml(s, repeats, stage_s, warmup_s)
    many = ", ".join(f"{{ users = {u}, duration_s = {stage_s!r} }}" for u in stages_of(s))
    return text.replace(single, f"stages = [{many}]")


def record(s: BenchScenario, folder: Path, args: argparse.Namespace) -> dict:
    text = config_text(s, args.repeats, args.stage_s, args.warmup_s)
    run_dir, done = finished_run(folder, config_from_dict(tomllib.loads(text), s.name))
    if done:
        return {"dir": str(run_dir), "reused": True, "record_s": 0.0}
    if args.fit_only:
        sys.exit(f"{s.name}: no finished recording in {folder}; run without --fit-only to record it")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{s.name}.toml").write_text(text)
    argv = [sys.executable, "-m", "lookahead_runner", "sweep", "--no-early-stop"]
    config = folder / f"{s.name}.toml"
    argv += ["--resume", str(run_dir)] if run_dir else ["--config", str(config), "--out", str(folder)]
    print(f"[{s.name}] recording: K {list(s.ks)} x stages {stages_of(s)}", file=sys.stderr)
    load_before, started = os.getloadavg()[0], time.monotonic()
    with open(folder / "sweep.log", "a") as log:
        proc = subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT)
    run_dir, done = finished_run(folder, config_from_dict(tomllib.loads(text), s.name))
    if not done:
        sys.exit(f"{s.name}: the sweep did not finish (exit {proc.returncode}); see {folder / 'sweep.log'}")
    return {"dir": str(run_dir), "reused": False, "record_s": round(time.monotonic() - started, 1),
            "loadavg_1m": [round(load_before, 2), round(os.getloadavg()[0], 2)]}


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def scenario_figures(s: BenchScenario | None, run_dir: Path | None, engine_s: float = 0.0) -> dict:
    started = time.monotonic()
    if run_dir is None:
        from model_engine import engine_evidence

        evidence, positions, shape = engine_evidence(s, stages_of(s), engine_s, seed=1)
        model = fit_performance_model(evidence, shape, positions)
    else:
        model = fit_run(run_dir, read_run(run_dir))
    by_scheme = {}
    for scheme in (SCHEME_STAGE, SCHEME_K):
        rows = [h for h in model.held_out if h.scheme == scheme]
        median, worst = summarize([h.error for h in rows])
        top = [h for h in rows if scheme == SCHEME_STAGE and h.users == max(model.users)]
        by_scheme[scheme] = {
            "median_abs_error": _round(median), "worst_abs_error": _round(worst), "predictions": len(rows),
            "top_stage_median_abs_error": _round(summarize([h.error for h in top])[0]) if top else None,
            "cells": [{"k": h.k, "users": h.users, "predicted": round(h.predicted_requests_per_s, 2),
                       "measured": round(h.measured_requests_per_s, 2), "error": round(h.error, 4)} for h in rows]}
    target = s.users if s else max(model.users, default=0)
    best_k, share = model.best_k_at(target) if model.ks else (None, None)
    return {"users": model.users, "ks": model.ks, "windows": len(model.obs), "trusted": model.trusted,
            "trust_reason": model.trust_reason, "acceptance_source": model.acceptance.source,
            "held_out": by_scheme, "truth_at_target": s.truth if s else None, "model_best_k_at_target": best_k,
            "model_share": _round(share), "fit_s": round(time.monotonic() - started, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", default="", help=f"comma-separated, of: {', '.join(s.name for s in SCENARIOS)}")
    parser.add_argument("--recordings", default="reports/model-accuracy", help="where recordings are kept")
    parser.add_argument("--fit-only", action="store_true", help="only fit; every recording must exist")
    parser.add_argument("--stage-s", type=float, default=7.0, help="each stage's length")
    parser.add_argument("--warmup-s", type=float, default=2.0, help="excluded at each stage's start")
    parser.add_argument("--repeats", type=int, default=1, help="same-server repeats per K")
    parser.add_argument("--run-dir", default="", help="fit this run folder alone and print its held-out figures")
    parser.add_argument("--engine", action="store_true", help="the simulator's engine model, not recordings")
    parser.add_argument("--engine-s", type=float, default=40.0, help="engine seconds per (K, users) with --engine")
    args = parser.parse_args()
    selected = scenarios_named(parser, args.scenarios)
    started = time.monotonic()
    if args.run_dir:
        print(json.dumps({"benchmark": "model_accuracy", "source": "run folder", "run_dir": args.run_dir,
                          **scenario_figures(None, Path(args.run_dir)), "goal": {"unseen_stage_median_max": GOAL},
                          "wall_s": round(time.monotonic() - started, 1)}))
        return
    scenarios = {}
    for s in selected:
        if args.engine:
            scenarios[s.name] = scenario_figures(s, None, args.engine_s) | {"recording": {"record_s": 0.0}}
        else:
            recording = record(s, Path(args.recordings) / s.name, args)
            scenarios[s.name] = scenario_figures(s, Path(recording["dir"])) | {"recording": recording}
        print(f"[{s.name}] held-out stage error {scenarios[s.name]['held_out'][SCHEME_STAGE]['median_abs_error']}, "
              f"K error {scenarios[s.name]['held_out'][SCHEME_K]['median_abs_error']}; "
              f"{scenarios[s.name]['trust_reason']}", file=sys.stderr)
    stage = [v["held_out"][SCHEME_STAGE]["median_abs_error"] for v in scenarios.values()]
    stage = [e for e in stage if e is not None]
    worst_name = max(scenarios, key=lambda n: scenarios[n]["held_out"][SCHEME_STAGE]["median_abs_error"] or 0,
                     default=None)
    kk = [v["held_out"][SCHEME_K]["median_abs_error"] for v in scenarios.values()]
    kk = [e for e in kk if e is not None]
    median = float(np.median(stage)) if stage else None
    print(json.dumps({
        "benchmark": "model_accuracy", "source": "engine model" if args.engine else "recordings",
        "stage_s": args.stage_s, "warmup_s": args.warmup_s, "repeats": args.repeats,
        "stage_shares_of_target": list(STAGE_SHARES), "scenarios": scenarios,
        "totals": {"unseen_stage_median_over_scenarios": _round(median),
                   "unseen_stage_worst_scenario": {"scenario": worst_name, "error": _round(max(stage, default=None))},
                   "unseen_stage_worst_cell": _round(max((v["held_out"][SCHEME_STAGE]["worst_abs_error"] or 0
                                                          for v in scenarios.values()), default=None)),
                   "unseen_k_median_over_scenarios": _round(float(np.median(kk)) if kk else None),
                   "trusted": sum(v["trusted"] for v in scenarios.values()), "scenarios": len(scenarios)},
        "goal": {"unseen_stage_median_max": GOAL},
        "goal_met": bool(median is not None and median <= GOAL),
        "wall_s": round(time.monotonic() - started, 1),
        "record_s": round(sum(v["recording"]["record_s"] for v in scenarios.values()), 1), "cpus": os.cpu_count(),
    }))


if __name__ == "__main__":
    main()
