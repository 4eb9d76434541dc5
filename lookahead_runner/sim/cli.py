"""`vllm serve`-like argv for the simulator: parsing, validation and the help screens. Pure.

The accepted flags and their help come from the profile, so the help lists exactly what the parser
accepts. The simulator's own flags (--sim-*) sit in a last group of their own, "SimulatorConfig",
so a capability probe accepts them too (the runner passes them as extra args); the group summary
of plain `--help` (0.11+) does not mention them.
"""
from __future__ import annotations

import argparse
import json
import re
import textwrap
from dataclasses import dataclass, replace

from lookahead_runner.sim.faults import Faults, parse_faults
from lookahead_runner.sim.kv_pool import EngineConfig
from lookahead_runner.sim.profiles import Profile, speculative_method
from lookahead_runner.sim.scenarios import DEFAULT_SCENARIO, SCENARIOS, Scenario, get_scenario, with_overrides
from lookahead_runner.vllm.schedule import SCHEDULE_KEY, ScheduleError, parse_value
from lookahead_runner.vllm.spec_keys import spec_config_error

DEFAULT_MAX_NUM_SEQS = 128
DEFAULT_MAX_NUM_BATCHED_TOKENS = 2048
DEFAULT_BLOCK_SIZE = 16
_SPEC_FLAG = "--speculative-config"


_PYDANTIC = "pydantic_core._pydantic_core.ValidationError: "


class ConfigError(ValueError):
    """Flags that parse but describe an engine vLLM would refuse to build (exit 1 at startup).

    The message starts with the exception vLLM would raise ("ValueError: ...")."""


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
    spec_metrics_level: str = "none"     # --per-request-spec-decode-metrics (0.32)


class _Formatter(argparse.RawTextHelpFormatter):
    """vLLM's help layout (0.10+): 80 columns, every help ends with its default."""

    show_defaults = True

    def __init__(self, prog: str) -> None:
        super().__init__(prog, width=80, max_help_position=24)

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if self.show_defaults and "%(default)" not in text and action.default is not argparse.SUPPRESS:
            text += " (default: %(default)s)"
        return text

    def _split_lines(self, text: str, width: int) -> list[str]:
        return [line for part in text.splitlines() for line in (textwrap.wrap(part, width) or [""])]


class _PlainFormatter(_Formatter):
    """V0's: no defaults in the help."""

    show_defaults = False


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse's format, vLLM's prog name
        self.print_usage()
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser(profile: Profile) -> argparse.ArgumentParser:
    parser = _Parser(prog="vllm serve", usage=profile.usage, description=profile.description or None,
                     epilog=profile.help_epilog or None, add_help=False,
                     formatter_class=_Formatter if profile.show_defaults else _PlainFormatter)
    groups: dict[str, argparse._ActionsContainer] = {}
    for name, description in profile.groups.items():
        if name == "positional arguments":
            groups[name] = parser._positionals
        elif name == "options":
            groups[name] = parser._optionals
        else:
            groups[name] = parser.add_argument_group(name, description or None)
    if not any("--help" in spec.names for spec in profile.flags):
        groups["options"].add_argument("-h", "--help", action="store_true", default=argparse.SUPPRESS,
                                       help="show this help message and exit")
    for spec in profile.flags:
        kwargs = dict(spec.kwargs)
        if "--help" in spec.names:
            kwargs.update(default=argparse.SUPPRESS, help="show this help message and exit")
        groups[spec.group].add_argument(*spec.names, **kwargs)
    sim = parser.add_argument_group("SimulatorConfig", "The simulated engine (lookahead-runner), not part of vLLM.")
    sim.add_argument("--sim-scenario", default=DEFAULT_SCENARIO, choices=sorted(SCENARIOS),
                     help="Named hardware and workload physics the engine model runs on.")
    sim.add_argument("--sim-fault", action="append", default=[], metavar="NAME[=VALUE]",
                     help="Inject a fault (repeatable); see lookahead_runner/sim/faults.py.")
    sim.add_argument("--sim-set", action="append", default=[], metavar="FIELD=VALUE",
                     help="Override one scenario field, e.g. alpha=0.5 (repeatable).")
    sim.add_argument("--sim-restart-spread", type=float, default=None, metavar="F",
                     help="Each server life draws its speed factor (lognormal, mean 1, relative SD F, e.g. 0.08) "
                          "from --seed and the life's name (LOOKAHEAD_SIM_LIFE); scenario field "
                          "restart_spread_frac. An acceptance offset per life: --sim-set restart_alpha_sd=0.05.")
    return parser


def help_text(argv: list[str], profile: Profile) -> str | None:
    """The text for -h / --help / --help=TOPIC, or None when argv asks for no help.

    V0 knows no topics: `--help=all` is an argparse error there (exit 2), as on vLLM <= 0.8.
    """
    for arg in argv:
        if arg in ("-h", "--help"):
            return profile.help_summary or build_parser(profile).format_help()
        if arg.startswith("--help="):
            topic = arg.split("=", 1)[1]
            if profile.help_style == "v0-flat":
                build_parser(profile).error(f"argument -h/--help: ignored explicit argument {topic!r}")
            return _help_topic(topic, profile)
    return None


def _help_topic(topic: str, profile: Profile) -> str:
    full = build_parser(profile).format_help()
    if topic.lower() == "all":
        return full
    sections = re.split(r"\n\n(?=\S[^\n]*:\n)", full)
    if topic.lower() == "listgroup" and profile.help_style == "flat":
        names = [s.split(":", 1)[0] for s in sections[1:] if not s.startswith(("When passing", "Tip:"))]
        return "Available argument groups:\n" + "".join(f"  - {name}\n" for name in names)
    for section in sections:
        if section.split(":", 1)[0].strip().lower() == topic.lower():
            return section.rstrip() + "\n"
    key = topic.replace("_", "-").lstrip("-").lower()
    entries = re.split(r"\n(?=  -)", full)
    hits = [e for e in entries[1:] if key in e.split("\n", 1)[0].lower() and e.startswith("  -")]
    if not hits:
        return f"No group or arguments matching '{topic}'\n"
    return f"Parameters matching '{topic}':\n\n" + "\n".join(h.split("\n\n")[0] for h in hits) + "\n"


def _split_dotted(argv: list[str], json_flags: frozenset[str]) -> tuple[list[str], dict[str, dict]]:
    """`--speculative-config.num_speculative_tokens 3` (or `=3`) -> {flag: {key: 3}}; as in 0.32, `KEY+ a,b`
    appends the strings a and b to a list, and list values given twice are concatenated."""
    rest: list[str] = []
    dotted: dict[str, dict] = {}
    i = 0
    while i < len(argv):
        arg = argv[i]
        flag, dot, path = arg.partition(".")
        if dot and flag in json_flags and path:
            path, eq, value = path.partition("=")
            if not eq:
                i += 1
                value = argv[i] if i < len(argv) else ""
            if path.endswith("+"):
                path, value = path[:-1], json.dumps(value.split(","))
            try:
                parsed = json.loads(value)
            except json.JSONDecodeError:
                parsed = value
            node = dotted.setdefault(flag, {})
            *parents, leaf = path.split(".")
            for key in parents:
                node = node.setdefault(key, {})
            if isinstance(parsed, list) and isinstance(node.get(leaf), list):
                node[leaf] += parsed
            else:
                node[leaf] = parsed
        else:
            rest.append(arg)
        i += 1
    return rest, dotted


def _config_json_spec(ns: argparse.Namespace, dotted: dict, parser: argparse.ArgumentParser) -> dict | None:
    spec: dict = {}
    text = ns.speculative_config
    if text is not None:
        try:
            spec = json.loads(text)
        except json.JSONDecodeError:
            parser.error(f"argument --speculative-config/-sc: Value {text} cannot be converted to "
                         "<function loads>.")
        if not isinstance(spec, dict):
            parser.error("argument --speculative-config/-sc: expected a JSON object")
    if dotted.get(_SPEC_FLAG):  # vLLM appends the dotted keys as one more JSON: the last one wins
        spec = dict(dotted[_SPEC_FLAG])
    for flag, key in (("spec_method", "method"), ("spec_model", "model"), ("spec_tokens", "num_speculative_tokens")):
        value = getattr(ns, flag, None)
        if value is not None:
            if key in spec:
                raise ConfigError(f"ValueError: --{flag.replace('_', '-')} and --speculative-config['{key}'] "
                                  "are mutually exclusive")
            spec[key] = value
    return spec or None


def _legacy_spec(ns: argparse.Namespace) -> dict | None:
    """V0's --speculative-model / --num-speculative-tokens, checked like SpeculativeConfig.maybe_create_spec_config."""
    model, k = ns.speculative_model, ns.num_speculative_tokens
    if model is None:
        if k is not None:
            raise ConfigError("ValueError: num_speculative_tokens was provided without speculative_model.")
        return None
    if k is None:
        raise ConfigError("ValueError: Expected both speculative_model and num_speculative_tokens to be provided, "
                          f"but found speculative_model={model!r} and num_speculative_tokens=None.")
    if k <= 0:
        raise ConfigError(f"ValueError: Expected num_speculative_tokens to be greater than zero ({k}).")
    if model == "[ngram]" and (ns.ngram_prompt_lookup_max or 0) < 1:
        raise ConfigError(f"ValueError: ngram_prompt_lookup_max={ns.ngram_prompt_lookup_max} must be > 0")
    return {"model": model, "num_speculative_tokens": k}


def _resolve_spec(spec: dict | None, profile: Profile) -> tuple[int, str]:
    if spec is None:
        return 0, ""
    version = tuple(int(part) for part in profile.version.split("."))
    refused = spec_config_error(version, spec)  # where the profile's version has facts (0.32); 0.10 ignores keys
    if refused:
        raise ConfigError(f"{_PYDANTIC}{refused}")
    k = spec.get("num_speculative_tokens")
    if not isinstance(k, int) or isinstance(k, bool) or k <= 0:
        raise ConfigError(f"{_PYDANTIC}1 validation error for SpeculativeConfig\n  Value error, "
                          "num_speculative_tokens must be provided with speculative model unless the draft model "
                          f"config contains an n_predict parameter, and must be > 0 (got {k!r})")
    method = speculative_method(spec)
    if method in profile.unsupported_methods:
        raise ConfigError(profile.unsupported_methods[method])
    if method not in profile.spec_methods:
        raise ConfigError(f"{_PYDANTIC}1 validation error for SpeculativeConfig\nmethod\n  Input should be "
                          f"{', '.join(repr(m) for m in profile.spec_methods)} (got {method!r})")
    return k, method


def _schedule(spec: dict | None, profile: Profile) -> tuple[tuple[int, int, int], ...] | None:
    """The per-batch-size schedule as SpeculativeConfig's pydantic field takes it (the shape; the range
    rules are the scheduler's, at engine start). Where the profile has no such field its pydantic
    dataclass ignores the unknown key, as 0.10's did: the server runs the static K."""
    if not spec or spec.get(SCHEDULE_KEY) is None or not profile.schedule_form:
        return None
    from pydantic import ValidationError, dataclasses as pydantic_dataclasses

    annotation = list[tuple[int, int, int]] if profile.schedule_form == "list" else dict[str, int]
    SpeculativeConfig = pydantic_dataclasses.dataclass(type(  # noqa: N806 - named for its error title
        "SpeculativeConfig", (), {"__annotations__": {SCHEDULE_KEY: annotation | None}, SCHEDULE_KEY: None}))
    try:
        value = getattr(SpeculativeConfig(**{SCHEDULE_KEY: spec[SCHEDULE_KEY]}), SCHEDULE_KEY)
        schedule = parse_value([list(entry) for entry in value] if isinstance(value, list) else value)
    except ValidationError as err:
        raise ConfigError(f"{_PYDANTIC}{err}") from None
    except ScheduleError as err:
        raise ConfigError(f"ValueError: {err}") from None
    return tuple((r.lo, r.hi, r.k) for r in schedule.ranges)


def kv_lookahead(profile: Profile, k: int, method: str, slots: int) -> int:
    """Extra KV slots per running sequence: the literal flag counts only on V0 and only without speculation."""
    if k > 0:
        return profile.lookahead_for(method, k)
    return slots if profile.lookahead_slots == "effective" else 0


def parse_serve(argv: list[str], profile: Profile) -> ServeArgs:
    """argv after `serve` -> typed settings. argparse errors exit 2; ConfigError means exit 1 later."""
    parser = build_parser(profile)
    argv, dotted = _split_dotted(argv, profile.json_flags)
    ns = parser.parse_args(argv)
    spec = _legacy_spec(ns) if profile.spec_flags == "legacy" else _config_json_spec(ns, dotted, parser)
    try:
        scenario = with_overrides(get_scenario(ns.sim_scenario), dict(s.split("=", 1) for s in ns.sim_set))
        if ns.sim_restart_spread is not None:
            if not 0 <= ns.sim_restart_spread < 1:
                raise ValueError(f"--sim-restart-spread {ns.sim_restart_spread:g}: give the relative SD of a "
                                 "life's speed, 0 to 1 (e.g. 0.08)")
            scenario = replace(scenario, restart_spread_frac=ns.sim_restart_spread)
        faults = parse_faults(ns.sim_fault, ns.seed)
    except ValueError as e:
        parser.error(str(e))
    model = ns.model_tag or ns.model
    non_default = {key: value for key, value in vars(ns).items()
                   if not key.startswith("sim_") and value != parser.get_default(key)}
    if spec is not None and profile.spec_flags == "config":
        non_default["speculative_config"] = spec
    k, method = _resolve_spec(spec, profile)
    slots = getattr(ns, "num_lookahead_slots", 0) or 0
    engine = EngineConfig(
        max_num_seqs=ns.max_num_seqs or DEFAULT_MAX_NUM_SEQS,
        max_num_batched_tokens=ns.max_num_batched_tokens or DEFAULT_MAX_NUM_BATCHED_TOKENS,
        block_size=ns.block_size or DEFAULT_BLOCK_SIZE,
        gpu_memory_utilization=ns.gpu_memory_utilization,
        max_model_len=ns.max_model_len or scenario.max_model_len,
        num_speculative_tokens=k, method=method, lookahead_tokens=kv_lookahead(profile, k, method, slots),
        seed=ns.seed, num_gpu_blocks_override=ns.num_gpu_blocks_override,
        kv_cache_memory_bytes=getattr(ns, "kv_cache_memory_bytes", None),
        spec_disable_batch_size=getattr(ns, "speculative_disable_by_batch_size", None) if k else None,
        k_schedule=_schedule(spec, profile),
    )
    stream_interval = getattr(ns, "stream_interval", 1)
    if not 0 < engine.gpu_memory_utilization <= 1:
        raise ConfigError(f"ValueError: GPU memory utilization must be within (0, 1]. Got "
                          f"{engine.gpu_memory_utilization}.")
    if min(engine.max_num_seqs, engine.block_size, engine.max_num_batched_tokens, stream_interval) < 1 or slots < 0:
        raise ConfigError("ValueError: max_num_seqs, block_size, max_num_batched_tokens, stream_interval and "
                          "num_lookahead_slots must be positive")
    api_keys = ns.api_key if isinstance(ns.api_key, list) else [ns.api_key] if ns.api_key else []
    spec_metrics_level = getattr(ns, "per_request_spec_decode_metrics", None) or "none"
    if spec_metrics_level != "none" and not k:  # vllm/config/vllm.py, 0.32
        raise ConfigError("ValueError: --per-request-spec-decode-metrics requires speculative decoding to be "
                          "enabled (via --speculative-config).")
    return ServeArgs(
        model=model, served_model_name=(ns.served_model_name or [model])[0], host=ns.host or "0.0.0.0",
        port=ns.port, engine=engine, scenario=scenario, faults=faults, speculative_config=spec,
        api_keys=tuple(api_keys), stream_interval=stream_interval, log_stats=not ns.disable_log_stats,
        access_log=not getattr(ns, "disable_uvicorn_access_log", False), non_default=non_default,
        spec_metrics_level=spec_metrics_level,
    )
