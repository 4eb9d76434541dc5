"""A `vllm serve` command line, as the user runs it in production, read as vLLM 0.32 reads it, and mapped to the
[server] and [speculation] keys: the model, the speculative method, draft and the fixed speculative keys to
[speculation], every other flag to server.extra_args unchanged. Pure: text in, a `ServeCommand` out, or one
`CommandError` line naming the part that cannot be honoured.

As vLLM 0.32 parses it (vllm/utils/argparse_utils.py FlexibleArgumentParser, vllm/engine/arg_utils.py): the line is
split as a shell splits it (`vllm bench sweep serve` splits --serve-cmd with shlex.split); a flag's name takes
`_` or `-` before its first dot; `--model M` stands for the positional model; `--speculative-config` (`-sc`) is
JSON, and its dotted form `--speculative-config.KEY VALUE` (a JSON value, else the text) builds one more JSON that
is appended last, so it replaces any `--speculative-config` JSON; `--spec-method`, `--spec-model`, `--spec-tokens`
fill `method`, `model`, `num_speculative_tokens` and are refused beside the same key in the JSON. A speculative
config without `method` gets the one vLLM's SpeculativeConfig infers from the model's name (ngram, eagle, eagle3,
dflash, dspark); where vLLM would read the draft's config.json to tell, the method must be written.

In front of the command: `NAME=VALUE` assignments (or `env NAME=VALUE ...`) go to server.env. `docker run ...
vllm/vllm-openai[:TAG] MODEL ...` (the image's entrypoint is `vllm serve`) becomes server.argv_template with
{port} in the host side of `-p HOST:CONTAINER`, {model} for the model and {args} for the flags.
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field

from ..masking import ENV_NAME_RE
from ..server import SERVED_MODEL_NAME_FLAG, is_simulator_command
from ...vllm.knob import ADDRESS_FLAGS, NGRAM_LOOKUP_MAX, SPEC_FLAG_CARRIES, loads_draft_model
from ...vllm.probe import LOOKAHEAD_FLAG, SPEC_METRICS_FLAG
from ...vllm.secrets import SECRET_FLAGS
from .entries import CommandError, Mapped, k_entry, split_command

FLAG = "--serve-cmd"
SPEC_JSON_FLAGS = ("--speculative-config", "-sc")
SHORTHANDS = {"--spec-method": "method", "--spec-model": "model", "--spec-tokens": "num_speculative_tokens"}
LEGACY_SPEC_FLAGS = ("--speculative-model", "--num-speculative-tokens")   # up to vLLM 0.8.1
# vLLM 0.32's SpeculativeConfig.__post_init__: ngram / ngram_gpu with neither lookup key set get min = max = 5
VLLM_NGRAM_LOOKUP = 5
# vllm/vllm-openai's image runs `vllm serve` with the arguments after the image name
IMAGE_RE = re.compile(r"(^|/)vllm-openai[^/]*$")
DOCKER_PROGRAMS = ("docker", "podman")
PUBLISH_FLAGS = ("-p", "--publish")
HOST_NETWORK = ("--network=host", "--net=host")
# docker run options whose value is a name or a path (one may end in "vllm-openai"): the value is not the image
NAME_OPTIONS = ("--name", "--hostname", "-h", "--network", "--net", "-v", "--volume", "--mount", "-w", "--workdir",
                "-e", "--env", "--env-file", "-l", "--label", "--entrypoint", "--tmpfs", "--device", "--cidfile")
SCHEDULE_KEY = "num_speculative_tokens_per_batch_size"
# The flags the runner reads from the line or writes itself. vLLM's parser also takes an unambiguous start of a flag
# (argparse's allow_abbrev): `--api-k K`, `--spec-tok 5` passed on unread would write a key in clear and set K behind
# the runner's back. No start of one of these is a flag of vLLM 0.32's own (checked against its `serve --help=all`).
READ_FLAGS = ("--model", "--config", SERVED_MODEL_NAME_FLAG, SPEC_METRICS_FLAG, LOOKAHEAD_FLAG, *ADDRESS_FLAGS,
              *SECRET_FLAGS, *(flag for flag in SPEC_FLAG_CARRIES if flag.startswith("--")))
HUMAN_INT_RE = re.compile(r"(\d+(?:\.\d+)?)([kKmMgGtT])")


@dataclass(frozen=True)
class ServeCommand:
    """A parsed `vllm serve` command line."""

    model: str
    command: list[str]                        # the argv prefix before `serve` (with docker: the probe's command)
    extra_args: list[str]                     # every flag the runner does not write itself, unchanged, in order
    env: dict[str, str] = field(default_factory=dict)
    argv_template: list[str] = field(default_factory=list)
    host: str | None = None
    port: int | None = None
    method: str | None = None                 # None: the command does not speculate
    method_origin: str = ""
    draft_model: str | None = None
    k: int | None = None                      # its num_speculative_tokens
    spec_config: dict[str, object] = field(default_factory=dict)
    spec_origins: dict[str, str] = field(default_factory=dict)

    def entries(self, k_given: list[int] | None) -> list[Mapped]:
        """The [server] and [speculation] keys it sets (with `--k`, the K list)."""
        out = [Mapped("server.command", self.command, "the program before `serve`" if not self.argv_template else
                      "the image's `vllm`, for the probe (vllm --version, vllm serve --help=all)")]
        if self.argv_template:
            out.append(Mapped("server.argv_template", self.argv_template,
                              "the docker run line: {port} the host port, {model} the model, {args} the flags"))
        out.append(Mapped("server.model", self.model, "the model `serve` loads"))
        if self.host is not None:
            out.append(Mapped("server.host", self.host, "--host"))
        if self.port is not None:
            out.append(Mapped("server.port", self.port, "--port (0 would pick a free port per server life)"))
        out.append(Mapped("server.extra_args", self.extra_args, "every other flag of the serve command, unchanged"))
        if self.env:
            out.append(Mapped("server.env", self.env, "the NAME=VALUE assignments before the command"))
        out.append(k_entry(k_given, self.k))
        if self.method is not None:
            out.append(Mapped("speculation.method", self.method, self.method_origin))
            if loads_draft_model(self.method):
                out.append(Mapped("speculation.draft_model", self.draft_model, "the speculative config's model"))
        if self.spec_config:
            out.append(Mapped("speculation.config", self.spec_config, "; ".join(
                f"{key}: {self.spec_origins.get(key, 'the speculative config')}" for key in self.spec_config)))
        return out


def parse_serve_cmd(text: str) -> ServeCommand:
    """The serve command line -> ServeCommand, or CommandError naming what cannot be honoured."""
    env, argv = _leading_env(split_command(text, FLAG))
    host_network = False
    if os.path.basename(argv[0]) in DOCKER_PROGRAMS and argv[1:2] == ["run"]:
        command, template, args, host_network = _docker(argv)
    else:
        if "serve" not in argv[1:]:
            raise CommandError(f"{FLAG}: write the command as you run it, e.g. \"vllm serve MODEL --flag ...\" "
                               "(no `serve` in it)")
        at = argv.index("serve", 1)
        command, template, args = argv[:at], [], argv[at + 1:]
    parsed = _ServeArgs.read(args)
    host, port = parsed.host, parsed.port
    if template:   # the container's own --host/--port stay in the template; with the host's network, its port is {port}
        inside = ["--host", host] if host is not None else []
        inside += ["--port", "{port}"] if host_network else ["--port", str(port)] if port is not None else []
        template, host, port = [*template, "{model}", *inside, "{args}"], None, None
    spec = parsed.spec_config()
    serve = ServeCommand(parsed.model, command, parsed.extra, env, template, host, port)
    if spec is None:
        if not is_simulator_command(template or command):
            raise CommandError(f"{FLAG}: no speculative config in it (--speculative-config '{{\"method\": ..., "
                               "\"model\": ...}' or --spec-method/--spec-model): the sweep varies its "
                               "num_speculative_tokens; add the one you run")
        return serve
    return _with_speculation(serve, spec)


def _leading_env(argv: list[str]) -> tuple[dict[str, str], list[str]]:
    env: dict[str, str] = {}
    if argv[:1] == ["env"]:
        argv = argv[1:]
    while argv and "=" in argv[0] and ENV_NAME_RE.fullmatch(argv[0].split("=", 1)[0]):
        name, value = argv[0].split("=", 1)
        env[name] = value
        argv = argv[1:]
    if not argv:
        raise CommandError(f"{FLAG}: no command in it; write e.g. \"vllm serve MODEL --flag ...\"")
    return env, argv


def _docker(argv: list[str]) -> tuple[list[str], list[str], list[str], bool]:
    """(the probe's command, the template up to the image, the arguments after it, whether the container runs on the
    host's network)."""
    image_at = next((i for i, part in enumerate(argv[2:], start=2) if IMAGE_RE.search(part)
                     and argv[i - 1] not in NAME_OPTIONS), None)
    if image_at is None:
        raise CommandError(f"{FLAG}: {argv[0]} run without a vllm/vllm-openai image: the runner knows that image's "
                           "entrypoint (vllm serve); for another launcher write server.argv_template in a config")
    options, published, host_network = [], False, False
    i = 0
    opts = argv[2:image_at]
    while i < len(opts):
        part = opts[i]
        if part in ("-d", "--detach") or part.startswith("--detach="):
            raise CommandError(f"{FLAG}: {part}: the runner watches the server as its own child process; remove it")
        name, eq, value = part.partition("=")
        if name in PUBLISH_FLAGS and (eq or i + 1 < len(opts)):
            value = value if eq else opts[i + 1]
            options += [f"{name}={_publish_with_port(value)}"] if eq else [name, _publish_with_port(value)]
            published = True
            i += 1 if eq else 2
            continue
        host_network |= part in HOST_NETWORK or (part in ("--network", "--net") and opts[i + 1:i + 2] == ["host"])
        options.append(part)
        i += 1
    if not published and not host_network:
        raise CommandError(f"{FLAG}: {argv[0]} run publishes no port (-p HOST:8000, or --network host): the load "
                           "could not reach the server; add -p 8000:8000")
    probe = [argv[0], "run", "--rm", "--entrypoint", "vllm", argv[image_at]]
    template = [argv[0], "run", *options, argv[image_at]]
    return probe, template, argv[image_at + 1:], not published


def _publish_with_port(value: str) -> str:
    """`8000:8000` -> `{port}:8000`, `127.0.0.1:8000:8000` -> `127.0.0.1:{port}:8000`: the host side is the life's
    port."""
    parts = value.split(":")
    if len(parts) < 2:
        raise CommandError(f"{FLAG}: -p {value}: write the host port too, e.g. -p 8000:8000")
    return ":".join([*parts[:-2], "{port}", parts[-1]])


def _normal(name: str) -> str:
    """A flag's name as vLLM's parser reads it: `_` -> `-` before the first dot."""
    if not name.startswith("--"):
        return name
    head, dot, tail = name.partition(".")
    return head.replace("_", "-") + dot + tail


@dataclass
class _ServeArgs:
    model: str = ""
    host: str | None = None
    port: int | None = None
    extra: list[str] = field(default_factory=list)
    spec_json: str | None = None
    dotted: dict[str, dict] = field(default_factory=dict)
    shorthands: dict[str, str] = field(default_factory=dict)

    @classmethod
    def read(cls, args: list[str]) -> "_ServeArgs":
        out = cls()
        i = 0
        if args and not args[0].startswith("-"):
            out.model, i = args[0], 1
        while i < len(args):
            arg = args[i]
            name, eq, value = arg.partition("=") if arg.startswith("-") else (arg, "", "")
            name = _normal(name)
            base = name.split(".", 1)[0]
            takes = name in ("--model", "--host", "--port", *SPEC_JSON_FLAGS, *SHORTHANDS) or (
                base in SPEC_JSON_FLAGS and "." in name)
            if takes and not eq:
                if i + 1 >= len(args):
                    raise CommandError(f"{FLAG}: {arg} needs a value after it")
                value, i = args[i + 1], i + 1
            i += 1
            if name == "--model":
                if out.model:
                    raise CommandError(f"{FLAG}: the model twice ({out.model} after serve, --model {value}); give it "
                                       "once, right after serve")
                out.model = value
            elif name in ("--host", "--port"):
                out._address(name, value)
            elif name in SPEC_JSON_FLAGS:
                out.spec_json = value
            elif base in SPEC_JSON_FLAGS and "." in name:
                out._dotted(base, name.split(".", 1)[1], value)
            elif name in SHORTHANDS:
                out.shorthands[name] = value
            elif name in LEGACY_SPEC_FLAGS:
                raise CommandError(f"{FLAG}: {name} is vLLM 0.8.1's; write --speculative-config '{{\"model\": ..., "
                                   "\"num_speculative_tokens\": N}' as vLLM 0.8.2 and later read it")
            elif name == "--config":
                raise CommandError(f"{FLAG}: --config FILE: the runner reads the flags on the command line; put the "
                                   "file's flags there")
            elif whole := _abbreviated(base):
                raise CommandError(f"{FLAG}: {base}: vLLM would read it as {whole} (the start of a flag); write "
                                   f"{whole} in full, the runner reads it")
            else:
                out.extra.append(arg)
        if not out.model:
            raise CommandError(f"{FLAG}: no model; write it right after serve, e.g. \"vllm serve MODEL --flag ...\"")
        return out

    def _address(self, name: str, value: str) -> None:
        if name == "--host":
            self.host = value
            return
        try:
            self.port = int(value)
        except ValueError:
            raise CommandError(f"{FLAG}: --port {value}: give a port number, e.g. --port 8000") from None

    def _dotted(self, base: str, path: str, text: str) -> None:
        """As vLLM 0.32: JSON, else the text; `KEY+ a,b` a list of strings; the same flag's keys merge."""
        if path.endswith("+"):
            path, text = path[:-1], json.dumps(text.split(","))
        try:
            value = json.loads(text)
        except ValueError:
            value = _human_readable_int(text)
        node = self.dotted.setdefault(base, {})
        *parents, leaf = path.split(".")
        for key in parents:
            node = node.setdefault(key, {})
        node[leaf] = node[leaf] + value if isinstance(value, list) and isinstance(node.get(leaf), list) else value

    def spec_config(self) -> dict | None:
        """The speculative config vLLM builds from the JSON, its dotted form and the shorthands; None: none."""
        spec = None
        if self.spec_json is not None:
            try:
                spec = json.loads(self.spec_json)
            except ValueError:
                raise CommandError(f"{FLAG}: --speculative-config {self.spec_json}: not JSON; write it as vLLM reads "
                                   "it, e.g. '{\"method\": \"eagle3\", \"model\": ..., \"num_speculative_tokens\": 3}'"
                                   ) from None
            if not isinstance(spec, dict):
                raise CommandError(f"{FLAG}: --speculative-config {self.spec_json}: give a JSON object")
        if self.dotted:   # appended after every other flag: the last one wins, as vLLM parses it
            spec = dict(list(self.dotted.values())[-1])
        for flag, key in SHORTHANDS.items():
            if flag in self.shorthands:
                if spec is not None and key in spec:
                    raise CommandError(f"{FLAG}: {flag} and --speculative-config['{key}'] are mutually exclusive "
                                       "(vLLM refuses both); keep one")
                spec = (spec or {}) | {key: self.shorthands[flag]}
        return None if spec is None else {str(key).replace("-", "_"): value for key, value in spec.items()}


def _with_speculation(serve: ServeCommand, spec: dict) -> ServeCommand:
    method, model, k = spec.pop("method", None), spec.pop("model", None), spec.pop("num_speculative_tokens", None)
    if SCHEDULE_KEY in spec:
        raise CommandError(f"{FLAG}: {SCHEDULE_KEY} is what the runner writes for a per-batch-size schedule's "
                           "confirmation life; remove it (the sweep measures each K on its own)")
    k = _k_of(k)
    method_origin = "the speculative config's method"
    if method is None:
        method = _method_from_name(model)
        method_origin = f"no method in the speculative config: {method}, as vLLM infers it from the model's name"
    if method in ("[ngram]",):
        method = "ngram"
    if loads_draft_model(method) and not model:
        raise CommandError(f"{FLAG}: the speculative config has no model, and method {method} loads a draft; add "
                           "\"model\": the draft's path or Hugging Face name")
    if not loads_draft_model(method) and model not in (None, method, "ngram", "[ngram]", serve.model):
        raise CommandError(f"{FLAG}: method {method} takes no draft model (vLLM fills it in), and the speculative "
                           f"config names {model}; remove \"model\"")
    origins = {}
    for key, value in spec.items():
        if not _spec_value(value):
            raise CommandError(f"{FLAG}: the speculative config's {key} is {type(value).__name__} {value!r}; the "
                               "runner carries numbers, strings, booleans and lists of them")
    if method in ("ngram", "ngram_gpu") and "prompt_lookup_min" not in spec and "prompt_lookup_max" not in spec:
        spec = {"prompt_lookup_min": VLLM_NGRAM_LOOKUP, "prompt_lookup_max": VLLM_NGRAM_LOOKUP} | spec
        origins = {key: f"none given: vLLM 0.32's own {VLLM_NGRAM_LOOKUP} (the runner would write prompt_lookup_max "
                        f"= {NGRAM_LOOKUP_MAX})" for key in ("prompt_lookup_min", "prompt_lookup_max")}
    return ServeCommand(serve.model, serve.command, serve.extra_args, serve.env, serve.argv_template, serve.host,
                        serve.port, method, method_origin, model if loads_draft_model(method) else None, k, spec,
                        origins)


def _abbreviated(name: str) -> str:
    """The flag of READ_FLAGS that `name` (a flag's name alone) is a shorter start of, or ""."""
    if len(name) <= 2 or not name.startswith("--"):
        return ""
    return next((flag for flag in READ_FLAGS if flag.startswith(name) and flag != name), "")


def _human_readable_int(text: str) -> int | str:
    """vLLM 0.32's reading of a dotted value that is no JSON (utils/argparse_utils.py human_readable_int): "4k" =
    4000, "4K" = 4096, "1_000" = 1000; the text itself where that refuses it ("1.5K", "greedy")."""
    value = text.strip()
    match = HUMAN_INT_RE.fullmatch(value)
    if match:
        number, suffix = match.groups()
        if suffix in "kmgt":
            return int(float(number) * 10 ** (3 + 3 * "kmgt".index(suffix)))
        return int(number) * 2 ** (10 + 10 * "KMGT".index(suffix)) if "." not in number else text
    try:
        return int(value)
    except ValueError:
        return text


def _k_of(value: object) -> int | None:
    if value is None:
        return None
    text = str(value).strip()
    if isinstance(value, bool) or not text.isdigit():
        raise CommandError(f"{FLAG}: num_speculative_tokens {value!r}: give a whole number, e.g. 3")
    return int(text)


def _method_from_name(model: object) -> str:
    """vLLM 0.32's SpeculativeConfig: no method -> ngram for the model "ngram", else from the draft's name; where the
    name does not tell, vLLM reads the draft's config.json (medusa, mlp_speculator, MTP), which the runner cannot."""
    name = str(model or "").lower()
    if name in ("ngram", "[ngram]"):
        return "ngram"
    for marker, method in (("eagle-", "eagle"), ("eagle3", "eagle3"), ("dflash", "dflash"), ("dspark", "dspark")):
        if marker in name:
            return method
    raise CommandError(f"{FLAG}: the speculative config has no method, and vLLM would read it from {model}'s "
                       "config.json; write it, e.g. \"method\": \"draft_model\" (or eagle3, mtp, ...)")


def _spec_value(value: object) -> bool:
    scalar = (bool, int, float, str)
    return isinstance(value, scalar) or (isinstance(value, list) and all(isinstance(v, scalar) for v in value))
