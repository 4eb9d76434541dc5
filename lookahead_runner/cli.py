"""`lookahead-runner`: demo, sweep, ramp, init, report, locustfile, example. Bad input is one line on stderr and exit
code 2."""
from __future__ import annotations

import argparse
import copy
import json
import sys
from importlib import resources
from pathlib import Path

from pydantic import ValidationError

from .decision.schema import Decision
from .runfolder.plan import RunDirError, has_plan, plan_path, read_plan
from .config import ConfigError, ResolvedServer, SweepConfig, config_from_dict, error_line, load_config

DEMO_CONFIG = resources.files("lookahead_runner") / "presets" / "demo.toml"
COMMANDS_SOURCE = "--serve-cmd/--bench-cmd"   # what a config error names where the config is the commands'
EXIT_NOT_DECIDED = 3
CONFIRM_WHAT = {"schedule": "when it is a per-batch-size schedule", "always": "a schedule or a single K"}


class UsageError(ValueError):
    """A problem with what the user asked for: printed as one line, exit code 2."""


class ResultsError(RuntimeError):
    """The run folder could not be written (disk full, read-only): one line, exit code 74 (EX_IOERR)."""


class Interrupted(KeyboardInterrupt):
    """Ctrl-C, SIGTERM or SIGHUP during a run; carries the run folder to resume."""

    def __init__(self, run_dir: Path) -> None:
        super().__init__(str(run_dir))
        self.run_dir = run_dir


class _Parser(argparse.ArgumentParser):
    """argparse, with its errors on one line (no usage block): exit code 2."""

    def error(self, message: str):
        self.exit(2, one_line(f"{self.prog}: {message} (see {self.prog} --help)") + "\n")


def _ignore_interrupts() -> None:
    """After the unwinding: further Ctrl-C / SIGTERM / SIGHUP until exit would only print a traceback."""
    import signal

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)


def one_line(text: str) -> str:
    """A message as one printable line: control characters from the input are shown escaped."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(text))


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
    from .config.vllm_commands import overrides as command_overrides

    given = _parse_set(args.set)
    from_commands = command_overrides(_command_entries(args))
    overrides = from_commands | given  # --set wins over the commands
    if args.out:
        overrides["out"] = args.out
    if getattr(args, "confirm", None) is not None:
        overrides["decision.confirm"] = args.confirm
    if getattr(args, "no_ledger", False):
        overrides["decision.ledger"] = False
    # an error is blamed on --set, on the commands or on the file, whichever gave the key
    return load_config(path, overrides, source=COMMANDS_SOURCE, set_keys=tuple(given),
                       command_keys=tuple(from_commands))


def _command_entries(args: argparse.Namespace) -> list:
    """The config keys --serve-cmd, --bench-cmd and --k set (config/vllm_commands/), their notes printed once."""
    from .config.vllm_commands import command_entries, parse_bench_cmd, parse_k_list, parse_serve_cmd

    # given empty (an unset $SERVE_CMD) is refused by the parsers, never skipped
    serve = parse_serve_cmd(args.serve_cmd) if getattr(args, "serve_cmd", None) is not None else None
    bench = parse_bench_cmd(args.bench_cmd) if getattr(args, "bench_cmd", None) is not None else None
    k_list = parse_k_list(args.k_list) if getattr(args, "k_list", None) is not None else None
    for line in bench.note_lines() if bench is not None else []:
        print(one_line(f"lookahead-runner: note: {line}"), file=sys.stderr)
    return command_entries(serve, bench, k_list)


def _start_run(config: SweepConfig, args: argparse.Namespace, mode: str = "sweep") -> int:
    from .run.life.placement import sweep_placement
    from .run.runner import cluster_slots, plan_lives

    placement = sweep_placement(config)  # a placement this host cannot give is refused first
    server = ResolvedServer.resolve(config.server)  # the secrets and the load's key, once for the whole run
    from .run.before_lives import check_models, slo_warning

    # a model no life could load is refused here; the warnings wait for the probe, so a server command that cannot
    # run is the one line it prints
    warnings = [warning for warning in [*check_models(config), slo_warning(config, mode)] if warning]
    # on a Ray cluster the slots come first: the probe runs on a worker node, whose vLLM is the one that counts
    with cluster_slots(config, len(plan_lives(config)), print) as slots:
        return _probe_and_run(config, args, mode, placement, server, slots, warnings)


def _probe_and_run(config: SweepConfig, args: argparse.Namespace, mode: str, placement, server: ResolvedServer,
                   slots, warnings: list[str]) -> int:
    from .runfolder import results
    from .run.life.launch import render_argv
    from .config.masking import shell_join
    from .run.verdict.request_set_run import request_set_note
    from .run.life.server_check import with_served_model
    from .run.runner import blocks_order, ledger_gear, plan_lives, probe_and_check, run_sweep, server_lives
    from .vllm.knob import resolve_style

    caps = probe_and_check(config, server, Path(args.resume) if args.resume else None, slots)
    for warning in warnings:
        print(one_line(f"lookahead-runner: warning: {warning}"), file=sys.stderr)
    config, server = with_served_model(config, server)   # server.url without a model: the one it serves
    print(caps.summary(resolve_style(caps, config.speculation.flag_style)))
    if note := request_set_note(config):
        print(note)
    if args.dry_run:
        from .runfolder.cost import expected_text

        print(placement.describe())
        if slots is not None and (warning := slots.confound_warning(config)):
            print(warning)
        from .runfolder.spread_ledger import use_for_run

        use, said = use_for_run(config, caps.version, config.decision.ledger, gear=ledger_gear(config, slots))
        if said:
            print(said)
        config.decision.with_earlier(use.earlier_spread() if use else None)   # as the run will (run/runner.py)
        if len(config.load.variants) > 1:
            print(blocks_order(config.load.variants))
        lives = plan_lives(config)
        adaptive_max_lives = None
        if config.sweep.strategy == "adaptive":  # the settings it chooses from, each life chosen as it goes
            from .run.strategies.adaptive_sweep import default_max_lives, describe, model_view

            print(describe(config, model_view(None, config), len(slots.slots) if slots is not None else 1))
            lives = [life for life in lives if life.repeat == 0]
            adaptive_max_lives = default_max_lives(config)
        elif config.sweep.strategy == "capacity":  # every K once, then probes chosen as it goes
            from .run.strategies import capacity_sweep

            print(capacity_sweep.describe(config))
            lives = [life for life in lives if life.repeat == 0]
            adaptive_max_lives = capacity_sweep.default_max_lives(config)
        from .runfolder.price import dry_run_range

        print(expected_text(config, adaptive_max_lives, dry_run_range(config, use)))
        if not config.server.port and not config.server.url:
            print("server.port = 0: each server life listens on a free port picked when it starts (PORT below)")
        for group in server_lives(lives, config.load.repeat_mode == "same-server"):
            argv = render_argv(config, caps, group[0].setting, config.server.port or "PORT", server)
            print(f"{', '.join(life.key for life in group)}: {shell_join(argv)}")
        if mode == "sweep" and config.decision.confirm != "off":
            print(f"then a confirmation life of the recommendation (decision.confirm = {config.decision.confirm}: "
                  f"{CONFIRM_WHAT[config.decision.confirm]}), its argv printed by the report")
        return 0
    if args.resume:
        run_dir = Path(args.resume)
        if not has_plan(run_dir):
            raise UsageError(f"--resume {run_dir}: no plan.json there; pass a folder made by an earlier sweep")
    else:
        run_dir = results.new_run_dir(Path(config.out), config.name)
    print(f"run folder: {run_dir}")
    try:
        report = run_sweep(config, run_dir, caps, early_stop=not getattr(args, "no_early_stop", False), mode=mode,
                           web=args.web, placement=placement, server=server, slots=slots, verbose=args.verbose)
    except KeyboardInterrupt:
        _ignore_interrupts()  # everything is stopped: another Ctrl-C must not cut the goodbye short
        raise Interrupted(run_dir) from None
    except OSError as err:
        raise ResultsError(f"cannot write {err.filename or run_dir}: {err.strerror or err}; the lives finished "
                           f"before are kept: free space, then continue with --resume {run_dir}") from None
    decision = Decision.model_validate_json((run_dir / "decision.json").read_text(encoding="utf-8"))
    print(f"\n{decision.verdict}")
    for reason in decision.reasons + decision.diagnoses:
        print(f"  - {reason}")
    for step in decision.next_runs:
        print(f"  > {step}")
    print(f"\nreport: {report}")
    if decision.cost is not None:
        print(f"this verdict cost {decision.cost.text}")
    if decision.failed_lives:
        first = decision.failed_lives[0]
        print(f"{len(decision.failed_lives)} server lives failed; first: {first.life}: {first.reason}", file=sys.stderr)
    return exit_code(decision)


def exit_code(decision: Decision) -> int:
    """0 a recommendation (or a ramp measured; with workload variants, one for each); 3 measured but not decided
    yet (run more); 1 none can be made."""
    if decision.mode == "ramp":
        return 1 if decision.status == "no_measurement" else 0
    if decision.status == "decided" and (decision.recommended is not None or decision.by_variant):
        return 0  # with workload variants: decided = every variant decided (decision/per_variant.py)
    return EXIT_NOT_DECIDED if decision.status == "not_decided" else 1


def cmd_demo(args: argparse.Namespace) -> int:
    with resources.as_file(DEMO_CONFIG) as path:
        config = _config(path, args)
    return _start_run(config, args)


def cmd_sweep(args: argparse.Namespace) -> int:
    if args.resume and (args.serve_cmd or args.bench_cmd or args.k_list):
        raise UsageError(f"--resume {args.resume} runs the config its plan.json recorded; remove --serve-cmd, "
                         "--bench-cmd and --k")
    if args.resume and not args.config:
        if not has_plan(Path(args.resume)):
            raise UsageError(f"--resume {args.resume}: no plan.json there; pass a folder made by an earlier sweep")
        try:
            data = copy.deepcopy(read_plan(Path(args.resume)).config)
        except RunDirError:
            raise UsageError(f"--resume {args.resume}: plan.json is unreadable or not a sweep's plan") from None
        if args.confirm is not None and isinstance(data.get("decision"), dict):
            data["decision"]["confirm"] = args.confirm
        if args.no_ledger and isinstance(data.get("decision"), dict):
            data["decision"]["ledger"] = False
        config = config_from_dict(data, str(plan_path(Path(args.resume))))
        return _start_run(config, args)
    if not args.config and not args.serve_cmd:
        raise UsageError("sweep: --config FILE.toml or --serve-cmd \"vllm serve ...\" is required (lookahead-runner "
                         "example sweep writes a template)")
    return _start_run(_config(Path(args.config) if args.config else None, args), args)


def cmd_ramp(args: argparse.Namespace) -> int:
    from .run.strategies.ramp import ramp_config

    if args.config or args.serve_cmd:
        config = _config(Path(args.config) if args.config else None, args)
    else:
        with resources.as_file(DEMO_CONFIG) as path:
            config = _config(path, args)
    users = None
    if args.users:
        try:
            users = [int(u) for u in args.users.split(",")]
        except ValueError:
            raise UsageError(f"--users {args.users!r}: write rising user counts, e.g. --users 1,2,4,8,16") from None
        if min(users) < 1:
            raise UsageError(f"--users {args.users!r}: user counts are >= 1, e.g. --users 1,2,4,8,16")
    rates = _rates(args.rates) if args.rates is not None else None   # --rates= (an empty $RATES): not a users ramp
    if users and rates:
        raise UsageError("ramp: give --users (closed loop: concurrent users) or --rates (open loop: requests per "
                         "second), not both")
    if len(config.load.variants) > 1:
        raise UsageError("ramp: one workload at a time; give load.prompt_tokens, load.output_tokens and "
                         "load.temperature one value each, e.g. --set load.prompt_tokens=4000")
    if args.k is not None and args.k < 0:
        raise UsageError(f"--k {args.k}: K is >= 0 (0 is the no-speculation baseline)")
    if args.stage_s is not None and not 0 < args.stage_s < float("inf"):
        raise UsageError(f"--stage-s {args.stage_s:g}: give the seconds per stage, e.g. --stage-s 30")
    # the user's model (their config's, or --set server.model), not the demo's
    model_given = (bool(args.config or args.serve_cmd) and "model" in config.server.model_fields_set) or (
        "server.model" in _parse_set(args.set))
    try:
        config = ramp_config(config, args.k, users, args.stage_s, rates)
    except ValidationError as err:
        raise ConfigError(error_line(err, "ramp")) from None
    if args.url:  # a running server: the model it serves (GET /v1/models) unless the user's config names one
        server = config.server.model_dump() | {"url": args.url} | ({} if model_given else {"model": ""})
        config = config_from_dict(config.model_dump() | {"server": server})
    return _start_run(config, args, mode="ramp")


def _rates(text: str) -> list[float]:
    """`--rates 1,2,4,8` -> [1.0, 2.0, 4.0, 8.0]: requests per second, each above 0."""
    try:
        rates = [float(r) for r in text.split(",")]
    except ValueError:
        raise UsageError(f"--rates {text!r}: write rising rates in requests per second, e.g. --rates 1,2,4,8") from None
    if not all(0 < r < float("inf") for r in rates):
        raise UsageError(f"--rates {text!r}: rates are requests per second above 0, e.g. --rates 1,2,4,8")
    if any(b <= a for a, b in zip(rates, rates[1:])):   # the knee reads each rate from the lower one's steady state
        raise UsageError(f"--rates {text!r}: give each rate once, rising, e.g. --rates 1,2,4,8")
    return rates


def cmd_report(args: argparse.Namespace) -> int:
    from .run.verdict.finalize import finalize
    from .run.verdict.steps import Steps

    steps = Steps(verbose=args.verbose)
    # the folder may be anyone's: its spread goes into this user's ledger only when asked (a sweep's own finalize does)
    remember = args.remember_spread and not args.no_ledger
    print(f"report: {finalize(Path(args.run_dir), steps=steps, ledger=remember)}")
    if args.verbose:
        print(f"total: {steps.total_s():.2f} s")
    return 0


def cmd_init(args: argparse.Namespace) -> int:
    """The TOML of --serve-cmd, --bench-cmd and --k, every key commented, secrets as ${NAME}: checked as `sweep
    --config` reads it, then written (or printed)."""
    from .config.masking import Secrets
    from .config.vllm_commands import masked, masked_command, overrides, split_command, to_toml
    from .contracts.paths import write_whole

    if not args.serve_cmd:
        raise UsageError("init: --serve-cmd \"vllm serve MODEL ...\" is required (the command you run in production)")
    entries = _command_entries(args)
    # what cannot run stops here, before any file; no key came from --set
    load_config(None, overrides(entries), source=COMMANDS_SOURCE, set_keys=())
    secrets = Secrets.for_rules()   # one for the file and its header: a value has one NAME in both
    written, secret_names = masked(entries, secrets)
    commands = [f"--{name.replace('_', '-')} {masked_command(split_command(text, ''), secrets)}"
                for name, text in (("serve_cmd", args.serve_cmd), ("bench_cmd", args.bench_cmd)) if text]
    header = ["Written by lookahead-runner init from:", *[f"  {command}" for command in commands],
              f"Run: lookahead-runner sweep --config {args.out or 'FILE.toml'} [--dry-run]; every key: "
              "docs/reference/config.md"]
    if secret_names:
        header.append(f"Secrets are read from the environment when the sweep runs: export {', '.join(secret_names)}")
    text = to_toml(written, header)
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError as err:
        raise UsageError(f"{COMMANDS_SOURCE}: {err.object[err.start:err.end]!r} is no UTF-8 text, which a TOML file "
                         "holds only; write the command in UTF-8") from None
    if not args.out:
        sys.stdout.write(text)
        return 0
    out = Path(args.out)
    if out.exists() and not args.force:
        raise UsageError(f"--out {out}: the file is already there; pick another name or add --force")
    out.parent.mkdir(parents=True, exist_ok=True)
    write_whole(out, data, replace=args.force)   # whole or not at all; without --force never over a file
    print(f"wrote {out.as_posix()}; check it with: lookahead-runner sweep --config {out.as_posix()} --dry-run")
    return 0


def cmd_locustfile(args: argparse.Namespace) -> int:
    from .run.life.load import DEFAULT_LOCUSTFILE

    print(DEFAULT_LOCUSTFILE)
    return 0


def cmd_example(args: argparse.Namespace) -> int:
    from .examples import ExampleError, find, listing, write

    if not args.name:
        print(listing())
        return 0
    try:
        example = find(args.name)
        out = Path(args.out or f"{example.name}.toml")
        written = write(example, out, force=args.force)
    except ExampleError as err:
        raise UsageError(str(err)) from None
    print(f"wrote {', '.join(path.as_posix() for path in written)}; check it with: "
          f"lookahead-runner sweep --config {out.as_posix()} --dry-run")
    return 0


def _installed_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("lookahead-runner")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "(not installed)"


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="lookahead-runner", description=__doc__)
    parser.add_argument("--version", action="version", version=f"lookahead-runner {_installed_version()}")
    sub = parser.add_subparsers(dest="command", required=True)

    def run_options(p: argparse.ArgumentParser, several_k: bool = True) -> None:
        """The options of a command that starts lives; `several_k`: it compares K (a ramp runs one: no early stop
        over K, no confirmation of a recommendation)."""
        p.add_argument("--out", help="output root for run folders (default: reports/)")
        p.add_argument("--set", action="append", metavar="KEY=VALUE",
                       help="override a config value, e.g. --set load.repeats=3 (repeatable)")
        p.add_argument("--dry-run", action="store_true", help="print the probe and every server argv; start nothing")
        p.add_argument("--resume", metavar="RUN_DIR", help="continue an interrupted run; finished lives are kept")
        if several_k:
            p.add_argument("--no-early-stop", action="store_true",
                           help="measure every K even after the stop rule fired at the target concurrency")
            confirm = p.add_mutually_exclusive_group()
            confirm.add_argument("--confirm", dest="confirm", action="store_const", const="always",
                                 help="after the decision, confirm a single recommended K in a life of its own too "
                                      "(decision.confirm = \"always\"; a per-batch-size schedule is confirmed by "
                                      "default)")
            confirm.add_argument("--no-confirm", dest="confirm", action="store_const", const="off",
                                 help="no confirmation life, not even of a schedule (decision.confirm = \"off\")")
        p.add_argument("--verbose", action="store_true",
                       help="print the time of each step of the decision and report after the last life")
        p.add_argument("--no-ledger", action="store_true",
                       help="neither use nor remember the restart spread measured on this server (decision.ledger)")
        p.add_argument("--web", action="store_true",
                       help="serve the live view (Locust's web UI with the vLLM tabs) on one 127.0.0.1 port for the "
                            "whole sweep, its URL printed once: a browser tab follows the sweep from life to life; "
                            "the stages still start and end by themselves")

    def command_options(p: argparse.ArgumentParser, k_list: bool = True) -> None:
        p.add_argument("--serve-cmd", metavar="\"vllm serve ...\"",
                       help="your vllm serve command as you run it (as vllm bench sweep serve takes it): the model, "
                            "the speculative config and every other flag (docs/on-your-gpu.md)")
        p.add_argument("--bench-cmd", metavar="\"vllm bench serve ...\"",
                       help="your vllm bench serve command: the dataset, lengths, --request-rate (rate stages), "
                            "--max-concurrency, --goodput (the SLOs); a flag the runner cannot honour stops it")
        if k_list:
            p.add_argument("--k", dest="k_list", metavar="K,K,...",
                           help="the K values to sweep, e.g. 0,2,4 (default: 0,2,4,8 and the serve command's own)")

    demo = sub.add_parser("demo", help="sweep K in {0,2,4,8} on the simulated vLLM server and write a report")
    run_options(demo)
    demo.set_defaults(func=cmd_demo)
    sweep = sub.add_parser("sweep", help="run the sweep described by a TOML config, or by your vllm serve and vllm "
                                         "bench serve commands")
    sweep.add_argument("--config", metavar="FILE.toml",
                       help="sweep configuration (lookahead-runner example lists the examples)")
    run_options(sweep)
    command_options(sweep)
    sweep.set_defaults(func=cmd_sweep)
    ramp = sub.add_parser("ramp", help="the scaling check alone: one K, rising stages (users, or --rates), the knee")
    ramp.add_argument("--config", metavar="FILE.toml", help="server and load settings (default: the demo's)")
    ramp.add_argument("--k", type=int, help="the lookahead K to ramp (default: the config's first K)")
    ramp.add_argument("--users", help="rising user counts, e.g. 1,2,4,8,16,32,64 (default: the config's stages)")
    ramp.add_argument("--rates", help="rising arrival rates in requests per second, e.g. 1,2,4,8: rate stages (open "
                                      "loop), the knee in rate terms (where the achieved rate stops following, the "
                                      "queue grows or the SLO attainment falls)")
    ramp.add_argument("--stage-s", type=float, help="seconds per stage")
    ramp.add_argument("--url", help="ramp an already-running server instead of starting one")
    run_options(ramp, several_k=False)
    command_options(ramp, k_list=False)
    ramp.set_defaults(func=cmd_ramp)
    init = sub.add_parser("init", help="write the sweep config of your vllm serve (and vllm bench serve) command, "
                                       "every key commented, to keep in git")
    command_options(init)
    init.add_argument("--out", metavar="FILE.toml", help="where to write it (default: print it)")
    init.add_argument("--force", action="store_true", help="overwrite the file if it is already there")
    init.set_defaults(func=cmd_init)
    report = sub.add_parser("report", help="re-analyse a run folder's files and re-render its report")
    report.add_argument("run_dir", help="a run folder (holds plan.json)")
    report.add_argument("--verbose", action="store_true", help="print the time of each step (reading the folder, "
                                                               "the decision, the performance model, the page)")
    report.add_argument("--remember-spread", action="store_true",
                        help="remember the restart spread this run measured in your ledger, for the next sweeps on "
                             "its server (only for a run of this machine's server; the sweep itself always does)")
    report.add_argument("--no-ledger", action="store_true",
                        help="do not remember the restart spread this run measured (the default for report)")
    report.set_defaults(func=cmd_report)
    locustfile = sub.add_parser("locustfile", help="print the path of the package's locustfile, for "
                                                    "locust -f \"$(lookahead-runner locustfile)\"")
    locustfile.set_defaults(func=cmd_locustfile)
    example = sub.add_parser("example", help="list the example configs, or write one (with its request set) to "
                                              "start from")
    example.add_argument("name", nargs="?", help="the example to write (none: list them with their first line)")
    example.add_argument("--out", help="where to write it (default: NAME.toml here); its request set goes beside it")
    example.add_argument("--force", action="store_true", help="overwrite files that are already there")
    example.set_defaults(func=cmd_example)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from .contracts.paths import OutsideFolder
    from .run.life.package_files import PackageFileError, check_package_files
    from .run.life.placement import PlacementError
    from .run.life.preflight import PreflightError
    from .run.life.server import ServerError
    from .vllm.knob import KnobError
    from .vllm.probe import ProbeError
    from .vllm.spec_keys import SpecKeyError

    try:
        check_package_files(web=getattr(args, "web", False))  # a damaged install fails here, before any life
        return args.func(args)
    except (ConfigError, UsageError, KnobError, SpecKeyError, ProbeError, RunDirError, ServerError, PlacementError,
            PreflightError, PackageFileError, OutsideFolder) as err:
        message = str(err).splitlines()[0] if isinstance(err, ServerError) and str(err) else str(err)
        print(one_line(f"lookahead-runner: {message}"), file=sys.stderr)
        return 2
    except ResultsError as err:
        print(one_line(f"lookahead-runner: {err}"), file=sys.stderr)
        return 74
    except OSError as err:  # e.g. the output root cannot be created
        print(one_line(f"lookahead-runner: {err.filename or ''}{': ' if err.filename else ''}{err.strerror or err}"),
              file=sys.stderr)
        return 74
    except KeyboardInterrupt as err:
        _ignore_interrupts()
        run_dir = getattr(err, "run_dir", "RUN_DIR")
        print(f"lookahead-runner: interrupted; finished server lives are kept (continue with --resume {run_dir})",
              file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
