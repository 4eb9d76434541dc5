"""One setting of the sweep -> the `vllm serve` argv for the installed version.

The swept knob is the per-sequence lookahead K (speculative tokens per step; K = 0 = no
speculation). How K is written depends on the version (docs/vllm-facts.md):
`--speculative-model/--num-speculative-tokens` up to 0.8.1, `--speculative-config` JSON after,
and the `--spec-method/--spec-model/--spec-tokens` shorthands where the help lists them.
The literal `--num-lookahead-slots` is only rendered in raw mode, and only where it has effect.
"""
from __future__ import annotations

import difflib
import json
from dataclasses import dataclass

from ..contracts.paths import path_safe
from .probe import LOOKAHEAD_FLAG, SPEC_METRICS_FLAG, SPEC_METRICS_LEVEL, SPEC_STYLE_FLAGS, Capabilities
from .schedule import Schedule, render_argv
from .spec_keys import facts_for, typed_constants


# What each flag the runner writes on every server life carries (the rest of the argv is the config's
# extra_args, which must not repeat them); "-sc" is vLLM's short form of --speculative-config.
SPEC_FLAG_CARRIES: dict[str, tuple[str, ...]] = {
    "--speculative-config": ("k", "method", "draft_model"), "-sc": ("k", "method", "draft_model"),
    "--spec-method": ("method",), "--spec-model": ("draft_model",), "--spec-tokens": ("k",),
    "--speculative-model": ("draft_model",), "--num-speculative-tokens": ("k",),
}
ADDRESS_FLAGS = ("--host", "--port")


def flag_name(arg: str) -> str:
    """`--api_key=K` -> `--api-key` (vLLM's parser accepts underscores in flag names)."""
    name = arg.split("=", 1)[0]
    return name[:2] + name[2:].replace("_", "-") if name.startswith("--") else name


def runner_flag(arg: str) -> str:
    """The flag of the runner's own that `arg` sets (`--speculative_config=...`, `--speculative-config.method`
    are --speculative-config to vLLM's parser), or ""."""
    if not arg.startswith("-"):
        return ""
    name = flag_name(arg)
    if name.startswith("--speculative-config."):
        name = "--speculative-config"
    return name if name in SPEC_FLAG_CARRIES or name in ADDRESS_FLAGS or name == SPEC_METRICS_FLAG else ""


def spec_metrics_args(caps: Capabilities, setting: Setting) -> list[str]:
    """--per-request-spec-decode-metrics summary for a life that speculates, where this vLLM lists the flag: each
    response then carries its own acceptance. The runner owns the flag (vLLM refuses it without speculation)."""
    if setting.k == 0 or setting.raw_slots or not caps.per_request_spec_metrics:
        return []
    return [SPEC_METRICS_FLAG, SPEC_METRICS_LEVEL]


def raw_knob_args(k: int) -> list[str]:
    """The literal lookahead flag with its value (raw-slots mode)."""
    return [LOOKAHEAD_FLAG, str(k)]


def knob_flag(raw_slots: bool, style: str) -> str:
    """The flag that carries K's value in this run: the literal lookahead flag, or the style's last flag."""
    return LOOKAHEAD_FLAG if raw_slots else SPEC_STYLE_FLAGS[style][-1]


MAX_NUM_SEQS_FLAG = "--max-num-seqs"  # caps the real batch
MAX_MODEL_LEN_FLAG = "--max-model-len"  # caps prompt + output tokens of a request


def flag_value(argv: list[str], flag: str) -> str | None:
    """The value argv gives `flag` (`--flag V` or `--flag=V`, `--the_flag` too as vLLM reads it; the last one wins,
    as in argparse), or None."""
    value = None
    for index, part in enumerate(argv):
        if flag_name(part) != flag:
            continue
        if "=" in part:
            value = part.split("=", 1)[1]
        elif index + 1 < len(argv):
            value = argv[index + 1]
    return value


class KnobError(ValueError):
    """This setting cannot be rendered for this vLLM: the message names the field and the fix."""


@dataclass(frozen=True)
class Setting:
    """One point of the sweep grid, or the configuration a confirmation life runs (`label` names its
    folder; `schedule` = [(lo, hi, K), ...] per batch size, K = the schedule's largest)."""

    k: int
    raw_slots: bool = False
    axis_flag: str = ""
    axis_value: str = ""
    schedule: tuple[tuple[int, int, int], ...] = ()
    schedule_form: str = "list"
    label: str = ""
    spec_key: str = ""          # the grid sweeps this speculative config key (axis_value is its value), not a flag

    @property
    def name(self) -> str:
        """k4, k4-max-num-seqs64, ...: the life's folder name too, so one safe folder name whatever the grid's value
        (contracts/paths.py: a value with a separator or a quote gets its safe characters and a digest)."""
        if self.label:
            return path_safe(self.label)
        base = f"slots{self.k}" if self.raw_slots else f"k{self.k}"
        if self.spec_key:
            return path_safe(f"{base}-{self.spec_key}-{self.axis_value}")
        return path_safe(f"{base}-{self.axis_flag.lstrip('-')}{self.axis_value}") if self.axis_flag else base


def check_raw_mode(caps: Capabilities) -> None:
    """Refuse a literal --num-lookahead-slots sweep where the flag is missing or has no effect."""
    state = caps.lookahead_flag
    if state == "effective":
        return
    why = (
        f"vLLM {caps.version} has no {LOOKAHEAD_FLAG} (removed in 0.12)"
        if state == "absent"
        else f"vLLM {caps.version} accepts {LOOKAHEAD_FLAG} but its V1 engine never reads it"
    )
    raise KnobError(
        f"speculation.raw_lookahead_slots: {why}, so the sweep would measure nothing; "
        "sweep the effective lookahead K instead: set raw_lookahead_slots = false "
        "(or run `lookahead-runner sweep --config FILE --set speculation.raw_lookahead_slots=false`)"
    )


def check_flags(caps: Capabilities, extra_args: list[str]) -> None:
    for arg in extra_args:
        if arg.startswith("--") and not caps.accepts(arg):
            raise KnobError(
                f"server.extra_args: vLLM {caps.version} does not accept {arg.split('=', 1)[0]}; "
                "remove it or check `vllm serve --help=all`"
            )


def resolve_style(caps: Capabilities, wanted: str = "auto") -> str:
    """The way K is written: the best this vLLM accepts, or the one the config asks for if accepted."""
    if wanted == "auto":
        return caps.spec_style
    if wanted not in caps.spec_styles:
        raise KnobError(
            f"speculation.flag_style = {wanted!r}: vLLM {caps.version} does not accept "
            f"{' / '.join(SPEC_STYLE_FLAGS[wanted])}; set flag_style = \"auto\" (here: {caps.spec_style}) "
            f"or one of {', '.join(caps.spec_styles)}"
        )
    return wanted


NGRAM_LOOKUP_MAX = 4  # the runner's prompt_lookup_max for ngram (vLLM's own default is 5)


def check_method(caps: Capabilities, method: str) -> None:
    """Refuse a speculative method this vLLM's `--spec-method` does not offer (a life would die of it), naming the
    nearest it offers; where the help lists no methods (before 0.32), vLLM itself answers at the start."""
    if not caps.spec_methods or method in caps.spec_methods:
        return
    choices = sorted(caps.spec_methods)
    near = difflib.get_close_matches(method, choices, n=1)
    hint = f'did you mean "{near[0]}"?' if near else f"its methods: {', '.join(choices)}"
    raise KnobError(f'speculation.method = "{method}": vLLM {caps.version} has no such speculative method '
                    f"(`serve --help=all` lists them under --spec-method); {hint}")


def loads_draft_model(method: str) -> bool:
    """Whether the runner names a draft model for this method. vLLM 0.32's SpeculativeConfig fills `model` itself
    for ngram, ngram_gpu and suffix (they look tokens up) and for mtp (the target's own MTP layers; the *_mtp
    names are deprecated spellings of mtp)."""
    return method not in ("ngram", "ngram_gpu", "suffix", "mtp") and not method.endswith("_mtp")


def speculation_args(caps: Capabilities, k: int, method: str, draft_model: str, style: str = "auto",
                     keys: dict[str, object] | None = None) -> list[str]:
    """The flags that turn speculation on with K tokens; [] for K = 0 (the baseline).

    ngram gets prompt_lookup_max = NGRAM_LOOKUP_MAX in every style; `keys` are more speculative config keys
    (speculation.config's, a spec_key axis), which replace the runner's own of the same name."""
    if k == 0:
        return []
    style = resolve_style(caps, style)
    extra = ({"prompt_lookup_max": NGRAM_LOOKUP_MAX} if method == "ngram" else {}) | (keys or {})
    if style == "legacy-flags":
        if keys:
            raise KnobError(f"grid.spec_key / speculation.config: vLLM {caps.version} has no speculative config "
                            f"to carry {', '.join(keys)}; remove grid.spec_key and speculation.config")
        model = "[ngram]" if method == "ngram" else draft_model
        args = ["--speculative-model", model, "--num-speculative-tokens", str(k)]
        if method == "ngram":
            args += ["--ngram-prompt-lookup-max", str(NGRAM_LOOKUP_MAX)]
        return args
    if style == "shorthand":
        args = ["--spec-method", method, "--spec-tokens", str(k)]
        args += ["--spec-model", draft_model] if loads_draft_model(method) else []
        # no shorthand exists for the other keys; dotted keys merge with the shorthands (0.32)
        return args + [part for key, value in extra.items()
                       for part in (f"--speculative-config.{key}", _dotted(value))]
    spec: dict = {"method": method, "num_speculative_tokens": k}
    if loads_draft_model(method):
        spec["model"] = draft_model
    return ["--speculative-config", json.dumps(spec | extra, separators=(",", ":"))]


def _dotted(value: object) -> str:
    """A dotted key's value as vLLM reads it back (JSON, else a human-readable int like 1k, else the text): a
    word is written as it is, anything JSON or a number would misread is quoted."""
    if isinstance(value, str) and value[:1].isalpha():
        try:
            json.loads(value)
        except ValueError:
            return value
    return json.dumps(value)


def spec_keys_of(caps: Capabilities, setting: Setting, constants: dict[str, object] | None = None) -> dict[str, object]:
    """The speculative config keys beside K: speculation.config's (`constants`), then the key a spec_key setting
    sweeps, each value typed as this version's config takes it."""
    keys = typed_constants(caps.version, caps.version_tuple, constants or {})
    if not setting.spec_key:
        return keys
    fact = facts_for(caps.version_tuple)
    if fact is None or setting.spec_key not in fact.keys:
        raise KnobError(f"grid.spec_key = {setting.spec_key!r}: vLLM {caps.version} has no such speculative config key")
    try:
        return keys | {setting.spec_key: fact.keys[setting.spec_key].parse(setting.axis_value)}
    except ValueError as err:
        raise KnobError(f"grid.values = {setting.axis_value!r}: {setting.spec_key} {err}") from None


def server_argv(
    caps: Capabilities,
    command: list[str],
    model: str,
    host: str,
    port: int | str,
    extra_args: list[str],
    setting: Setting,
    method: str,
    draft_model: str,
    template: list[str] | None = None,
    style: str = "auto",
    spec_config: dict[str, object] | None = None,
) -> list[str]:
    """The full argv of one server life. Never a shell string: each value is one argument.

    With a template (e.g. `docker run ... -p {port}:8000 IMAGE --model {model} {args}`), `{model}`,
    `{host}` and `{port}` are replaced inside its elements and the element `{args}` becomes the
    production flags plus the speculation flags; without one, `COMMAND serve MODEL --host --port ...`.
    `spec_config`: speculation.config, the speculative config keys every life with K > 0 carries.
    """
    knob = (raw_knob_args(setting.k) if setting.raw_slots
            else speculation_args(caps, setting.k, method, draft_model, style,
                                  spec_keys_of(caps, setting, spec_config)))
    args = [*with_axis(extra_args, setting), *spec_metrics_args(caps, setting), *knob]
    if template:
        values = {"model": model, "host": host, "port": str(port)}
        argv = []
        for part in template:
            if part == "{args}":
                argv += args
            else:
                for name, value in values.items():
                    part = part.replace("{" + name + "}", value)
                argv.append(part)
        return with_schedule(argv, setting)
    return with_schedule([*command, "serve", model, "--host", host, "--port", str(port), *args], setting)


def with_schedule(argv: list[str], setting: Setting) -> list[str]:
    """The argv of K = the schedule's largest, its speculative config carrying the schedule: the same
    rendering the report prints (vllm/schedule.py)."""
    if not setting.schedule:
        return argv
    schedule = Schedule.from_ranges(setting.schedule, setting.schedule_form)
    rendered = render_argv(schedule, {schedule.top_k: argv})
    if rendered is None or schedule.top_k != setting.k:
        raise KnobError(f"the per-batch-size schedule {schedule.as_lists()} cannot be written into this argv: "
                        "no range speculates, or the argv has no speculative config to extend")
    return rendered


def with_axis(extra_args: list[str], setting: Setting) -> list[str]:
    """The production flags with the grid's flag set to this setting's value (replaced if present)."""
    if not setting.axis_flag or setting.spec_key:
        return list(extra_args)
    args, skip = [], False
    for arg in extra_args:
        if skip:
            skip = False
            continue
        if arg == setting.axis_flag:
            skip = True
            continue
        if arg.startswith(setting.axis_flag + "="):
            continue
        args.append(arg)
    return args + [setting.axis_flag, setting.axis_value]


def human_int(text: str) -> int:
    """vLLM's human-readable integers (--max-model-len 4k = 4000, 4K = 4096); ValueError otherwise."""
    text = text.strip()
    units = {"k": 10**3, "m": 10**6, "g": 10**9, "K": 2**10, "M": 2**20, "G": 2**30}
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(text)
