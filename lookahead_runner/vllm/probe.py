"""What vLLM is installed: its version, the flags `vllm serve` accepts, the speculative methods its
`--spec-method` offers (0.32+), and whether its speculative config takes a per-batch-size schedule (and in which
form). A `--version` that prints none is one line naming the command, its exit code and its last line.

Parsing is pure (`parse_version`, `parse_help_flags`, `parse_method_choices`, `capabilities_from`,
`schedule_from_answer`);
`run_probe` is the only function that starts processes (the CLI with `--version` and
`serve --help[=all]`, and vLLM's Python through introspect.py). Version facts come from
docs/vllm-facts.md.
"""
from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from dataclasses import asdict, dataclass, field, replace

from . import schedule as sched
from .introspect import ask_speculative_config

_VERSION_RE = re.compile(r"\b(\d+)\.(\d+)(?:\.(\d+))?[\w.+-]*")
_OPTION_LINE_RE = re.compile(r"^ {1,4}(-{1,2}[A-Za-z0-9].*)$")
_FLAG_RE = re.compile(r"^--[A-Za-z0-9][\w.-]*")
_METHODS_RE = re.compile(r"^ {1,4}--spec-method \{([^}]*)\}", re.MULTILINE)  # argparse's choices, maybe wrapped

LOOKAHEAD_FLAG = "--num-lookahead-slots"
SPEC_STYLE_FLAGS = {  # how K can be written, best first, and the flags each way needs
    "shorthand": ("--spec-method", "--spec-model", "--spec-tokens"),
    "config-json": ("--speculative-config",),
    "legacy-flags": ("--speculative-model", "--num-speculative-tokens"),
}
SPEC_STYLE_TEXT = {"shorthand": "--spec-method/--spec-model/--spec-tokens", "config-json": "--speculative-config JSON",
                   "legacy-flags": "--speculative-model/--num-speculative-tokens"}
LOOKAHEAD_TEXT = {"absent": f"no {LOOKAHEAD_FLAG}", "ignored": f"{LOOKAHEAD_FLAG} accepted but never read",
                  "effective": f"{LOOKAHEAD_FLAG} in effect"}


class ProbeError(RuntimeError):
    """The vLLM command could not be probed; the message says what to check."""


@dataclass(frozen=True)
class ScheduleCapability:
    """Whether `num_speculative_tokens_per_batch_size` is accepted, in which form ("list" | "dict"),
    and how that was found: "asked" (vLLM's own Python) or "version-table"; `detail` says the way."""

    supported: bool
    form: str | None
    source: str
    detail: str = ""

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "ScheduleCapability":
        return cls(bool(data["supported"]), data.get("form"), str(data["source"]), str(data.get("detail", "")))


def schedule_from_version(version: str, why: str = "") -> ScheduleCapability:
    form = sched.form_for_version(parse_version(version))
    since = ".".join(map(str, sched.SCHEDULE_SINCE))
    detail = f"vLLM {version} {'>=' if form else '<'} {since}" + (f" (not asked: {why})" if why else "")
    return ScheduleCapability(form is not None, form, "version-table", detail)


def schedule_from_answer(answer: dict, how: str) -> ScheduleCapability:
    """What vLLM's Python said (introspect.CHECK's JSON) as a capability."""
    where = f"vLLM {answer.get('vllm_version') or '?'} asked via {how}"
    if not answer.get("has_field"):
        return ScheduleCapability(False, None, "asked", f"{where}: SpeculativeConfig has no {sched.SCHEDULE_KEY}")
    annotation = str(answer.get("annotation", ""))
    form = sched.form_of_annotation(annotation)
    return ScheduleCapability(True, form, "asked", f"{where}: SpeculativeConfig.{sched.SCHEDULE_KEY}: {annotation}")


# vLLM 0.32's per-request speculative-decoding metrics (vllm/config/observability.py): none | summary | detailed;
# it refuses to start with any value but none when speculation is off
SPEC_METRICS_FLAG = "--per-request-spec-decode-metrics"
SPEC_METRICS_LEVEL = "summary"


@dataclass(frozen=True)
class Capabilities:
    """What the probe learnt about one vLLM install."""

    version: str
    flags: frozenset[str] = field(default_factory=frozenset)
    help_source: str = "--help=all"
    command: tuple[str, ...] = ()
    schedule: ScheduleCapability | None = None     # None: not asked; the version table answers
    spec_methods: frozenset[str] = field(default_factory=frozenset)  # --spec-method's choices; empty: not listed

    @property
    def schedule_capability(self) -> ScheduleCapability:
        return self.schedule or schedule_from_version(self.version)

    @property
    def version_tuple(self) -> tuple[int, int, int]:
        return parse_version(self.version)

    @property
    def generation(self) -> str:
        """v0 (<= 0.8.1), v0-config (0.8.2), v1 (0.8.3 - 0.11), v1-no-slots (>= 0.12)."""
        v = self.version_tuple
        if v <= (0, 8, 1):
            return "v0"
        if v == (0, 8, 2):
            return "v0-config"
        if v < (0, 12, 0):
            return "v1"
        return "v1-no-slots"

    @property
    def engine(self) -> str:
        """The engine by the name vLLM's docs give it: V0 up to 0.8.2, V1 after."""
        return "V0 engine" if self.generation in ("v0", "v0-config") else "V1 engine"

    def summary(self, style: str) -> str:
        """The probe in one line of words (the sweep's first line, the dry run's): version, engine, where the flags
        came from, how K is written (`style`: knob.resolve_style's) and what --num-lookahead-slots does here."""
        flags = (f"flags read from `serve {self.help_source}`" if self.help_source != "none" else
                 "flags unknown (extra_args are passed unchecked)")
        return (f"vLLM {self.version} ({self.engine}): {flags}; K written as {SPEC_STYLE_TEXT[style]}; "
                f"{LOOKAHEAD_TEXT[self.lookahead_flag]}")

    @property
    def spec_styles(self) -> tuple[str, ...]:
        """The ways this vLLM accepts K: `--spec-*` shorthands (0.32+), the JSON config (0.8.2+),
        legacy flags (up to 0.8.2); best first. Without a readable help, the version decides."""
        if not self.flags:
            return ("config-json",) if self.generation != "v0" else ("legacy-flags",)
        styles = [style for style, flags in SPEC_STYLE_FLAGS.items() if all(flag in self.flags for flag in flags)]
        return tuple(styles) or ("legacy-flags",)

    @property
    def spec_style(self) -> str:
        """How K is written when the config leaves it to the runner (speculation.flag_style = "auto")."""
        return self.spec_styles[0]

    @property
    def lookahead_flag(self) -> str:
        """What the literal --num-lookahead-slots does here: absent, ignored or effective (V0)."""
        listed = LOOKAHEAD_FLAG in self.flags if self.flags else self.generation != "v1-no-slots"
        if not listed:
            return "absent"
        return "effective" if self.generation in ("v0", "v0-config") else "ignored"

    @property
    def per_request_spec_metrics(self) -> bool:
        """Whether the help lists --per-request-spec-decode-metrics (0.32): each response then can carry its own
        acceptance (metrics.speculative_decoding). Unknown flags: no."""
        return SPEC_METRICS_FLAG in self.flags

    def accepts(self, flag: str) -> bool:
        """True when the flag is known (or when the help could not be read: trust the user)."""
        return not self.flags or flag.split("=", 1)[0] in self.flags

    def to_dict(self) -> dict:
        data = asdict(self)
        data["flags"] = sorted(self.flags)
        data["command"] = list(self.command)
        data["spec_methods"] = sorted(self.spec_methods)
        del data["schedule"]
        data.update(
            schedule_capability=self.schedule_capability.to_dict(),
            generation=self.generation,
            spec_style=self.spec_style,
            lookahead_flag=self.lookahead_flag,
            flags_count=len(self.flags),
        )
        return data

    @classmethod
    def from_dict(cls, data: dict) -> "Capabilities":
        return cls(
            version=data["version"],
            flags=frozenset(data.get("flags", [])),
            help_source=data.get("help_source", "--help=all"),
            command=tuple(data.get("command", [])),
            schedule=ScheduleCapability.from_dict(data["schedule_capability"]) if data.get("schedule_capability")
            else None,
            spec_methods=frozenset(data.get("spec_methods", [])),
        )


def parse_version(text: str) -> tuple[int, int, int]:
    match = _VERSION_RE.search(text)
    if not match:
        raise ProbeError(f"no version number in {text.strip()[:80]!r}")
    return int(match[1]), int(match[2]), int(match[3] or 0)


def version_from_output(text: str) -> str:
    """The last line that looks like a version (the CLI may print warnings first)."""
    for line in reversed(text.strip().splitlines()):
        match = _VERSION_RE.search(line.strip())
        if match and line.strip().startswith(match[0][:1]):
            return match[0]
    raise ProbeError(f"no version number in the output: {last_line(text) or 'nothing'}")


def last_line(output: str) -> str:
    """The last line of a process's output a person reads for why it failed: not blank, not a traceback's frame
    or source line (indented), not a caret marker; "" when there is none."""
    for line in reversed(output.splitlines()):
        text = line.strip()
        if text and not line[:1].isspace() and text.strip("^~ ") and not text.startswith("Traceback "):
            return text
    return ""


def version_from_run(argv: list[str], exit_code: int, output: str) -> str:
    """The version a `--version` run printed; else one line naming the command, its exit code and its last line."""
    try:
        return version_from_output(output)
    except ProbeError:
        said = last_line(output) or "no output"
        raise ProbeError(f"server.command: `{' '.join(argv)}` exited with code {exit_code} and printed no version: "
                         f"{said}; check that vLLM runs in the environment server.command gives it") from None


def parse_help_flags(text: str) -> frozenset[str]:
    """Long flag names (`--max-num-seqs`) from argparse help, aliases and --no- forms included."""
    flags: set[str] = set()
    for line in text.splitlines():
        match = _OPTION_LINE_RE.match(line)
        if not match:
            continue
        head = re.split(r"\s{2,}", match[1].strip(), maxsplit=1)[0]
        for part in head.split(", "):
            flag = _FLAG_RE.match(part.strip())
            if flag:
                flags.add(flag[0])
    return frozenset(flags)


def parse_method_choices(text: str) -> frozenset[str]:
    """The speculative methods `--spec-method {a,b,...}` offers in a help text (its "None" left out); empty where
    the help has no such flag (before 0.32: the methods are then not known here)."""
    match = _METHODS_RE.search(text or "")
    if not match:
        return frozenset()
    return frozenset(name.strip() for name in match[1].split(",") if name.strip() and name.strip() != "None")


def help_is_summary(text: str) -> bool:
    """vLLM >= 0.11 prints only config groups for plain --help."""
    return "--help=all" in text and len(parse_help_flags(text)) < 10


def capabilities_from(version_text: str, help_all: str | None, help_plain: str | None,
                      command: tuple[str, ...] = ()) -> Capabilities:
    version = version_from_output(version_text)
    if help_all and len(parse_help_flags(help_all)) >= 10:
        return Capabilities(version, parse_help_flags(help_all), "--help=all", command,
                            spec_methods=parse_method_choices(help_all))
    if help_plain and not help_is_summary(help_plain):
        return Capabilities(version, parse_help_flags(help_plain), "--help", command,
                            spec_methods=parse_method_choices(help_plain))
    return Capabilities(version, frozenset(), "none", command)


def _run(argv: list[str], timeout_s: float, env: dict[str, str] | None = None) -> str:
    return _run_status(argv, timeout_s, env)[1]


def _run_status(argv: list[str], timeout_s: float, env: dict[str, str] | None = None) -> tuple[int, str]:
    """(exit code, stdout and stderr) of one probe command."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False,
                              env=os.environ | env if env else None)
    except FileNotFoundError:
        raise ProbeError(f"server.command: {argv[0]!r} not found; install vLLM or fix the command") from None
    except subprocess.TimeoutExpired:
        raise ProbeError(f"server.command: {' '.join(argv[:4])} took over {timeout_s:.0f} s") from None
    return done.returncode, done.stdout + done.stderr


def run_probe(command: list[str], timeout_s: float = 180.0, env: dict[str, str] | None = None,
              check: Callable[[Capabilities], None] | None = None) -> Capabilities:
    """Ask the installed vLLM CLI for its version and flags; `check` refuses what the flags already tell before
    vLLM's Python is asked about the schedule (a refusal comes one import sooner)."""
    version = version_from_run(*_version_text(command, timeout_s, env))
    help_all = _run([*command, "serve", "--help=all"], timeout_s, env)
    help_plain = None if len(parse_help_flags(help_all)) >= 10 else _run([*command, "serve", "--help"], timeout_s, env)
    caps = capabilities_from(version, help_all, help_plain, tuple(command))
    if check is not None:
        check(caps)
    return replace(caps, schedule=probe_schedule(command, caps.version, timeout_s, env))


def _version_text(command: list[str], timeout_s: float, env: dict[str, str] | None) -> tuple[list[str], int, str]:
    """(the argv asked, its exit code, its output)."""
    argv = [*command, "--version"]
    code, text = _run_status(argv, timeout_s, env)
    if not _VERSION_RE.search(text) and Path(command[0]).name.startswith("python"):
        # `python -m vllm.entrypoints...` has no --version: ask the package itself
        argv = [command[0], "-c", "import vllm; print(vllm.__version__)"]
        code, text = _run_status(argv, timeout_s, env)
    return argv, code, text


def probe_version(command: list[str], timeout_s: float = 180.0, env: dict[str, str] | None = None) -> str:
    """Only the version (a cluster's nodes are compared on it: run/cluster/nodes.py)."""
    return version_from_run(*_version_text(command, timeout_s, env))


def probe_schedule(command: list[str], version: str, timeout_s: float = 180.0,
                   env: dict[str, str] | None = None) -> ScheduleCapability:
    """Ask vLLM's Python whether SpeculativeConfig takes the schedule; the version table where nobody answers."""
    answer, how = ask_speculative_config(command, timeout_s, env)
    return schedule_from_answer(answer, how) if answer is not None else schedule_from_version(version, how)


def probe_running_server(base_url: str, timeout_s: float = 10.0) -> Capabilities:
    """A server someone else started: its version from GET /version; its flags stay unknown."""
    import json
    import urllib.request

    try:
        with urllib.request.urlopen(base_url.rstrip("/") + "/version", timeout=timeout_s) as response:
            version = json.loads(response.read())["version"]
    except (OSError, ValueError, KeyError) as err:
        raise ProbeError(f"server.url: GET {base_url}/version failed ({err}); is the server up?") from None
    version = version_from_output(str(version))
    return Capabilities(version, frozenset(), "none", (),
                        schedule_from_version(version, "a running server's Python cannot be asked"))
