"""`lookahead-runner`: demo, sweep, report. Bad input is one line on stderr and exit code 2."""
from __future__ import annotations

import argparse
import json
import shlex
import sys
from importlib import resources
from pathlib import Path

from .config import ConfigError, SweepConfig, config_from_dict, load_config

DEMO_CONFIG = resources.files("lookahead_runner") / "presets" / "demo.toml"


class UsageError(ValueError):
    """A problem with what the user asked for: printed as one line, exit code 2."""


def _parse_set(items: list[str]) -> dict:
    """`--set load.repeats=3` -> {"load.repeats": 3}; values are JSON when they parse, else strings."""
    overrides = {}
    for item in items or []:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--set {item!r}: write KEY=VALUE, e.g. --set load.repeats=3")
        try:
            overrides[key.strip()] = json.loads(raw)
        except ValueError:
            overrides[key.strip()] = raw
    return overrides


def _config(path: Path | None, args: argparse.Namespace) -> SweepConfig:
    overrides = _parse_set(args.set)
    if args.out:
        overrides["out"] = args.out
    return load_config(path, overrides)


def _start_run(config: SweepConfig, args: argparse.Namespace, mode: str = "sweep") -> int:
    from . import results
    from .life import render_argv
    from .runner import plan_lives, probe_and_check, run_sweep

    caps = probe_and_check(config, Path(args.resume) if args.resume else None)
    print(f"vLLM {caps.version} ({caps.generation}); flags from {caps.help_source}; "
          f"--num-lookahead-slots: {caps.lookahead_flag}; K written as {caps.spec_style}")
    if args.dry_run:
        for life in plan_lives(config):
            argv = render_argv(config, caps, life.setting, config.server.port or 8000)
            print(f"{life.key}: {shlex.join(results.redact(argv))}")
        return 0
    if args.resume:
        run_dir = Path(args.resume)
        if not (run_dir / "plan.json").exists():
            raise UsageError(f"--resume {run_dir}: no plan.json there; pass a folder made by an earlier sweep")
    else:
        run_dir = results.new_run_dir(Path(config.out), config.name)
    print(f"run folder: {run_dir}")
    report = run_sweep(config, run_dir, caps, early_stop=not args.no_early_stop, mode=mode)
    decision = json.loads((run_dir / "decision.json").read_text(encoding="utf-8"))
    print(f"\n{decision.get('verdict', '')}")
    for reason in decision.get("reasons", []) + decision.get("diagnoses", []):
        print(f"  - {reason}")
    print(f"\nreport: {report}")
    failed = decision.get("failed_lives", [])
    if failed:
        print(f"{len(failed)} server lives failed; first: {failed[0]['life']}: {failed[0]['reason']}", file=sys.stderr)
    return 0 if decision.get("recommended") else 1


def cmd_demo(args: argparse.Namespace) -> int:
    with resources.as_file(DEMO_CONFIG) as path:
        config = _config(path, args)
    return _start_run(config, args)


def cmd_sweep(args: argparse.Namespace) -> int:
    if args.resume and not args.config:
        plan = Path(args.resume) / "plan.json"
        if not plan.exists():
            raise UsageError(f"--resume {args.resume}: no plan.json there; pass a folder made by an earlier sweep")
        config = config_from_dict(json.loads(plan.read_text(encoding="utf-8"))["config"], str(plan))
        return _start_run(config, args)
    if not args.config:
        raise UsageError("sweep: --config FILE.toml is required (see examples/sweep.toml)")
    return _start_run(_config(Path(args.config), args), args)


def cmd_ramp(args: argparse.Namespace) -> int:
    from .ramp import ramp_config

    if args.config:
        config = _config(Path(args.config), args)
    else:
        with resources.as_file(DEMO_CONFIG) as path:
            config = _config(path, args)
    users = None
    if args.users:
        try:
            users = [int(u) for u in args.users.split(",")]
        except ValueError:
            raise UsageError(f"--users {args.users!r}: write rising user counts, e.g. --users 1,2,4,8,16") from None
    config = ramp_config(config, args.k, users, args.stage_s)
    if args.url:
        config = config_from_dict(config.model_dump() | {"server": config.server.model_dump() | {"url": args.url}})
    return _start_run(config, args, mode="ramp")


def cmd_report(args: argparse.Namespace) -> int:
    from .finalize import finalize

    print(f"report: {finalize(Path(args.run_dir))}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="lookahead-runner", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    def run_options(p: argparse.ArgumentParser) -> None:
        p.add_argument("--out", help="output root for run folders (default: reports/)")
        p.add_argument("--set", action="append", metavar="KEY=VALUE",
                       help="override a config value, e.g. --set load.repeats=3 (repeatable)")
        p.add_argument("--dry-run", action="store_true", help="print the probe and every server argv; start nothing")
        p.add_argument("--resume", metavar="RUN_DIR", help="continue an interrupted run; finished lives are kept")
        p.add_argument("--no-early-stop", action="store_true",
                       help="measure every K even after the stop rule fired at the target concurrency")

    demo = sub.add_parser("demo", help="sweep K in {0,2,4,8} on the simulated vLLM server and write a report")
    run_options(demo)
    demo.set_defaults(func=cmd_demo)
    sweep = sub.add_parser("sweep", help="run the sweep described by a TOML config")
    sweep.add_argument("--config", metavar="FILE.toml", help="sweep configuration (see examples/sweep.toml)")
    run_options(sweep)
    sweep.set_defaults(func=cmd_sweep)
    ramp = sub.add_parser("ramp", help="the concurrency-scaling check alone: one K, rising stages, the knee")
    ramp.add_argument("--config", metavar="FILE.toml", help="server and load settings (default: the demo's)")
    ramp.add_argument("--k", type=int, help="the lookahead K to ramp (default: the config's first K)")
    ramp.add_argument("--users", help="rising user counts, e.g. 1,2,4,8,16,32,64 (default: the config's stages)")
    ramp.add_argument("--stage-s", type=float, help="seconds per stage")
    ramp.add_argument("--url", help="ramp an already-running server instead of starting one")
    run_options(ramp)
    ramp.set_defaults(func=cmd_ramp)
    report = sub.add_parser("report", help="re-analyse a run folder's files and re-render its report")
    report.add_argument("run_dir", help="a run folder (holds plan.json)")
    report.set_defaults(func=cmd_report)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from .finalize import RunDirError
    from .server import ServerError
    from .vllm.knob import KnobError
    from .vllm.probe import ProbeError

    try:
        return args.func(args)
    except (ConfigError, UsageError, KnobError, ProbeError, RunDirError, ServerError) as err:
        print(f"lookahead-runner: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("lookahead-runner: interrupted; finished server lives are kept (continue with --resume RUN_DIR)",
              file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
