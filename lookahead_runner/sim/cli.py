"""`vllm serve`-like argv for the simulator: parsing, validation and the help screens. Pure.

The accepted flags and their help come from the profile, so `serve --help=all` lists exactly
what the parser accepts. The simulator's own flags (--sim-*) sit in a last group of their own,
"SimulatorConfig", so a capability probe accepts them too (the runner passes them as extra args);
the group summary of plain `--help` does not mention them.
"""
from __future__ import annotations

import argparse
import json
import re
from dataclasses import dataclass

from lookahead_runner.sim.faults import Faults, parse_faults
from lookahead_runner.sim.model import EngineConfig
from lookahead_runner.sim.profiles import Profile, speculative_method
from lookahead_runner.sim.scenarios import DEFAULT_SCENARIO, SCENARIOS, Scenario, get_scenario, with_overrides

DEFAULT_MAX_NUM_SEQS = 128
DEFAULT_MAX_NUM_BATCHED_TOKENS = 2048
DEFAULT_BLOCK_SIZE = 16
_SPEC_FLAG = "--speculative-config"


class ConfigError(ValueError):
    """Flags that parse but describe an engine vLLM would refuse to build (exit 1 at startup)."""


@dataclass(frozen=True)
class ServeArgs:
    model: str
    served_model_name: str
    host: str
    port: int
    engine: EngineConfig
    scenario: Scenario
    faults: Faults
    speculative_config: dict | None
    api_keys: tuple[str, ...]
    stream_interval: int
    log_stats: bool
    access_log: bool
    non_default: dict


class _Formatter(argparse.RawTextHelpFormatter):
    def __init__(self, prog: str) -> None:
        super().__init__(prog, width=80, max_help_position=24)

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if "%(default)" not in text and action.default is not argparse.SUPPRESS:
            text += " (default: %(default)s)"
        return text

    def _split_lines(self, text: str, width: int) -> list[str]:
        import textwrap
        return [line for part in text.splitlines() for line in (textwrap.wrap(part, width) or [""])]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse's format, vLLM's prog name
        self.print_usage()
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser(profile: Profile) -> argparse.ArgumentParser:
    parser = _Parser(prog="vllm serve", usage=profile.usage, description=profile.description,
                     epilog=profile.help_all_epilog, formatter_class=_Formatter, add_help=False)
    groups = {}
    for name, description in profile.groups.items():
        if name == "positional arguments":
            groups[name] = parser._positionals
        elif name == "options":
            groups[name] = parser._optionals
        else:
            groups[name] = parser.add_argument_group(name, description or None)
    groups["options"].add_argument("-h", "--help", action="store_true", help="show this help message and exit",
                                   default=argparse.SUPPRESS)
    for spec in profile.flags:
        groups[spec.group].add_argument(*spec.names, **spec.kwargs)
    sim = parser.add_argument_group("SimulatorConfig", "The simulated engine (lookahead-runner), not part of vLLM.")
    sim.add_argument("--sim-scenario", default=DEFAULT_SCENARIO, choices=sorted(SCENARIOS),
                     help="Named hardware and workload physics the engine model runs on.")
    sim.add_argument("--sim-fault", action="append", default=[], metavar="NAME[=VALUE]",
                     help="Inject a fault (repeatable); see lookahead_runner/sim/faults.py.")
    sim.add_argument("--sim-set", action="append", default=[], metavar="FIELD=VALUE",
                     help="Override one scenario field, e.g. alpha=0.5 (repeatable).")
    return parser


def help_text(argv: list[str], profile: Profile) -> str | None:
    """The text for -h / --help / --help=TOPIC, or None when argv asks for no help."""
    for arg in argv:
        if arg in ("-h", "--help"):
            return profile.help_summary or build_parser(profile).format_help()
        if arg.startswith("--help="):
            return _help_topic(arg.split("=", 1)[1], profile)
    return None


def _help_topic(topic: str, profile: Profile) -> str:
    full = build_parser(profile).format_help()
    if topic.lower() == "all":
        return full
    sections = re.split(r"\n\n(?=\S[^\n]*:\n)", full)
    for section in sections:
        if section.split(":", 1)[0].strip().lower() == topic.lower():
            return section.rstrip() + "\n"
    key = topic.replace("_", "-").lstrip("-").lower()
    entries = re.split(r"\n(?=  -)", full)
    hits = [e for e in entries[1:] if key in e.split("\n", 1)[0].lower() and e.startswith("  -")]
    if not hits:
        return f"No group or arguments matching '{topic}'\n"
    return f"Parameters matching '{topic}':\n\n" + "\n".join(h.split("\n\n")[0] for h in hits) + "\n"


def _split_dotted_spec(argv: list[str]) -> tuple[list[str], dict]:
    """`--speculative-config.num_speculative_tokens 3` (or `=3`) -> a key of the JSON config."""
    rest, dotted = [], {}
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg.startswith(_SPEC_FLAG + "."):
            key, eq, value = arg[len(_SPEC_FLAG) + 1:].partition("=")
            if not eq:
                i += 1
                value = argv[i] if i < len(argv) else ""
            try:
                dotted[key] = json.loads(value)
            except json.JSONDecodeError:
                dotted[key] = value
        else:
            rest.append(arg)
        i += 1
    return rest, dotted


def _speculative_config(text: str | None, dotted: dict, parser: argparse.ArgumentParser) -> dict | None:
    spec: dict = {}
    if text is not None:
        try:
            spec = json.loads(text)
        except json.JSONDecodeError:
            parser.error(f"argument --speculative-config/-sc: Value {text} cannot be converted to "
                         "<function loads>.")
        if not isinstance(spec, dict):
            parser.error("argument --speculative-config/-sc: expected a JSON object")
    spec.update(dotted)
    return spec or None


def _resolve_spec(spec: dict | None, profile: Profile) -> tuple[int, str, int]:
    if spec is None:
        return 0, "", 0
    k = spec.get("num_speculative_tokens")
    if not isinstance(k, int) or isinstance(k, bool) or k <= 0:
        raise ConfigError("1 validation error for SpeculativeConfig\n  Value error, num_speculative_tokens must be "
                          f"provided with speculative model unless the draft model config contains an n_predict "
                          f"parameter, and must be > 0 (got {k!r})")
    method = speculative_method(spec)
    if method not in profile.spec_methods:
        raise ConfigError(f"1 validation error for SpeculativeConfig\nmethod\n  Input should be "
                          f"{', '.join(repr(m) for m in profile.spec_methods)} (got {method!r})")
    return k, method, profile.lookahead_for(method, k)


def parse_serve(argv: list[str], profile: Profile) -> ServeArgs:
    """argv after `serve` -> typed settings. argparse errors exit 2; ConfigError means exit 1 later."""
    parser = build_parser(profile)
    argv, dotted = _split_dotted_spec(argv)
    ns = parser.parse_args(argv)
    spec = _speculative_config(ns.speculative_config, dotted, parser)
    try:
        scenario = with_overrides(get_scenario(ns.sim_scenario), dict(s.split("=", 1) for s in ns.sim_set))
        faults = parse_faults(ns.sim_fault, ns.seed)
    except ValueError as e:
        parser.error(str(e))
    model = ns.model_tag or ns.model
    non_default = {key: value for key, value in vars(ns).items()
                   if not key.startswith("sim_") and value != parser.get_default(key)}
    if spec is not None:
        non_default["speculative_config"] = spec
    k, method, lookahead = _resolve_spec(spec, profile)
    engine = EngineConfig(
        max_num_seqs=ns.max_num_seqs or DEFAULT_MAX_NUM_SEQS,
        max_num_batched_tokens=ns.max_num_batched_tokens or DEFAULT_MAX_NUM_BATCHED_TOKENS,
        block_size=ns.block_size or DEFAULT_BLOCK_SIZE,
        gpu_memory_utilization=ns.gpu_memory_utilization,
        max_model_len=ns.max_model_len or scenario.max_model_len,
        num_speculative_tokens=k, method=method, lookahead_tokens=lookahead, seed=ns.seed,
        num_gpu_blocks_override=ns.num_gpu_blocks_override, kv_cache_memory_bytes=ns.kv_cache_memory_bytes,
    )
    if not 0 < engine.gpu_memory_utilization <= 1:
        raise ConfigError(f"GPU memory utilization must be within (0, 1]. Got {engine.gpu_memory_utilization}.")
    if min(engine.max_num_seqs, engine.block_size, engine.max_num_batched_tokens, ns.stream_interval) < 1:
        raise ConfigError("max_num_seqs, block_size, max_num_batched_tokens and stream_interval must be positive")
    return ServeArgs(
        model=model, served_model_name=(ns.served_model_name or [model])[0], host=ns.host or "0.0.0.0",
        port=ns.port, engine=engine, scenario=scenario, faults=faults, speculative_config=spec,
        api_keys=tuple(ns.api_key or ()), stream_interval=ns.stream_interval, log_stats=not ns.disable_log_stats,
        access_log=not ns.disable_uvicorn_access_log, non_default=non_default,
    )
