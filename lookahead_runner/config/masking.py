"""Secrets in the server's argv, environment and log: recognised, written as ${NAME}, filled in only
for the server process. Pure: the environment is passed in.

Every argv, config and log line that is recorded or shown carries `${NAME}` where a secret value
stood; the value itself lives only in memory (taken from the config) or in the environment variable
NAME (a `${NAME}` already in the config: a resumed run's plan.json, or a config written that way).
A paste-ready command reads it back from the shell: `--api-key "$VLLM_API_KEY"` (`shell_join`).

Recognised: vLLM's `--api-key K1 [K2 ...]` and `--api-key=K` (VLLM_API_KEY, VLLM_API_KEY_2, ...),
`--hf-token [V]` (HF_TOKEN), each flag of `server.secret_flags` (one value; NAME is the flag in
capitals: --my-token -> MY_TOKEN), and wherever a name and a value stand together, by the name alone
(one of `server.secret_env`, or one that says it holds a secret: SECRET_WORDS, the one list): `NAME=VALUE`
inside any argv element (a launcher's `-e HF_TOKEN=...`, `env OPENAI_KEY=... vllm`), a `server.env` pair,
and a `"key": "value"` of a JSON text in either (`--model-loader-extra-config '{"token": ...}'`: NAME is
the key in capitals). In either too, where no name stands before the value: a secret flag inside a command string
(`bash -lc "vllm serve ... --api-key K"`: its one value), a URL's password (`http://me:PW@proxy`: URL_PASSWORD) and
an Authorization header's credentials (AUTHORIZATION).
"""
from __future__ import annotations

import html
import json
import re
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from urllib.parse import quote, quote_plus

from ..vllm.knob import flag_name
from ..vllm.secrets import API_KEY_FLAG, HF_TOKEN_ENV, HF_TOKEN_FLAG, SECRET_FLAGS, SERVER_KEY_ENV

PLACEHOLDER_RE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# The one list of words that make a name (an environment variable, a NAME=VALUE in an argv, a JSON key) name a
# secret: a whole word of a snake_case name in any case, or of a camelCase one ("apiKey", "hfToken"). KEY alone counts
# only in capitals (OPENAI_KEY, AZURE_OPENAI_KEY): lower-case "key" and "spec_key" are this product's own fields.
SECRET_WORDS = ("API_?KEY", "ACCESS_?KEY", "PRIVATE_?KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "PASSPHRASE",
                "CREDENTIALS?", "CREDS", "AUTH")
SECRET_NAME_RE = re.compile(rf"(?i:(^|_)({'|'.join(SECRET_WORDS)})(_|$))|(^|_)KEY(_|$)"
                            rf"|(?<=[a-z0-9])(ApiKey|Key|Token|Secret|Password|Credentials?)(?=[A-Z_]|$)")
# NAME=VALUE inside an argv element (a launcher's `-e`, `env NAME=V cmd`, a command string): the value quoted or a word
ASSIGNMENT_RE = re.compile(r"""(?<![\w$])([A-Za-z_][A-Za-z0-9_]*)=("[^"]*"|'[^']*'|[^\s'"]+)""")
WHOLE_ASSIGNMENT_RE = re.compile(r"(-[\w-]*=)?([A-Za-z_][A-Za-z0-9_]*)=(.*)", re.DOTALL)
# "key": "value" inside a JSON text (a flag's JSON value, an environment value): the value as JSON escapes it
JSON_PAIR_RE = re.compile(r'"((?:[^"\\]|\\.)+)"(\s*:\s*)"((?:[^"\\]|\\.)*)"')
# Where no name stands before the value: a secret flag inside a command string (`bash -lc "vllm serve --api-key K"`;
# the value a word or quoted, one value), a URL's user:password (`http://me:PW@proxy:3128`), an Authorization header
INLINE_FLAG_RE = re.compile(r"""(?<![\w-])(--?[A-Za-z][\w-]*)(=|\s+)("[^"]*"|'[^']*'|[^\s'"-][^\s'"]*)""")
URL_PASSWORD_RE = re.compile(r"""(?<=://)([^/\s:@'"]*:)([^/\s@'"]+)(?=@)""")
AUTHORIZATION_RE = re.compile(r"""(?i)(\bauthorization\s*:\s*(?:(?:bearer|basic|token)\s+)?)([^\s'"]+)""")
PLAIN_SETTING_RE = re.compile(r"(?i:true|false|yes|no|on|off|none|null|-?\d+(\.\d+)?)")  # no secret ("1", "false")
MIN_TEXT_LEN = 4  # shorter values are masked where they are recognised, not in free text (a log)


class MissingSecret(ValueError):
    """A `${NAME}` whose variable is not set: the message names the variable."""


def placeholder(name: str) -> str:
    return "${" + name + "}"


def env_name_of_flag(flag: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", flag.lstrip("-")).upper()


def looks_secret(name: str, value: str = "x") -> bool:
    """A name that says it holds a secret (HF_TOKEN, OPENAI_API_KEY; not TOKENIZERS_PARALLELISM), with a value
    that can be one (not "1" or "false", as in HF_HUB_DISABLE_TOKEN=1)."""
    return bool(SECRET_NAME_RE.search(name)) and bool(value) and not PLAIN_SETTING_RE.fullmatch(value)


def encodings(value: str) -> set[str]:
    """The ways a value shows up in text: as is, JSON-escaped, Python repr (vLLM's "non-default args"
    log line), HTML-escaped, URL-quoted, quoted for a shell (a launcher echoing its command)."""
    return {value, json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1], repr(value)[1:-1],
            html.escape(value), html.escape(value, quote=False), quote(value, safe=""), quote(value), quote_plus(value),
            shlex.quote(value)}


@dataclass
class Secrets:
    """The secret values of one server config, by the NAME of their placeholder."""

    flags: dict[str, tuple[str, str]] = field(default_factory=lambda: dict(SECRET_FLAGS))
    env_names: tuple[str, ...] = ()
    values: dict[str, str] = field(default_factory=dict, repr=False)
    missing: list[tuple[str, str]] = field(default_factory=list)  # (config field, NAME) without a value
    api_key_names: list[str] = field(default_factory=list)  # the --api-key values, in order
    # a value's other form that text may hold (masked there, never filled in): a JSON value as the server parsed it
    text_forms: dict[str, str] = field(default_factory=dict, repr=False)
    _patterns: "_Patterns | None" = field(default=None, repr=False)  # compiled on use, reset by a new value

    @classmethod
    def for_rules(cls, secret_flags: Iterable[str] = (), secret_env: Iterable[str] = ()) -> "Secrets":
        flags = dict(SECRET_FLAGS) | {flag_name(f): (env_name_of_flag(f), "1") for f in secret_flags
                                      if flag_name(f) not in SECRET_FLAGS}
        return cls(flags, tuple(secret_env))

    # --- masking (records the values) --------------------------------------------------------------

    def take(self, base: str, value: str) -> str:
        """The placeholder standing for `value`: NAME = base, or base_2, ... when base holds another value."""
        if not value or PLACEHOLDER_RE.fullmatch(value):
            return value
        name, n = base, 1
        while self.values.get(name, value) != value:
            n += 1
            name = f"{base}_{n}"
        self.values[name] = value
        self._patterns = None
        return placeholder(name)

    def mask_argv(self, argv: Iterable[str]) -> list[str]:
        """The argv with each secret value replaced by its placeholder (values are taken as argparse would)."""
        args = [str(a) for a in argv]
        out: list[str] = []
        i = 0
        while i < len(args):
            arg = args[i]
            i += 1
            rule = self.flags.get(flag_name(arg)) if arg.startswith("-") else None
            if rule is None:
                out.append(self._mask_assignments(arg))
                continue
            base, nargs = rule
            flag, eq, value = arg.partition("=")
            if eq:
                out.append(f"{flag}={self._take_flag_value(flag, base, value)}")
                continue
            out.append(arg)
            taken = 0
            while i < len(args) and not args[i].startswith("-") and (nargs == "+" or taken < 1):
                out.append(self._take_flag_value(flag, base, args[i]))
                i += 1
                taken += 1
        return out

    def _take_flag_value(self, flag: str, base: str, value: str) -> str:
        masked = self.take(base, value)
        named = PLACEHOLDER_RE.fullmatch(masked)
        if flag_name(flag) == API_KEY_FLAG and named:
            self.api_key_names.append(named[1])
        return masked

    def _secret_name(self, name: str, value: str) -> bool:
        return name in self.env_names or looks_secret(name, value)

    def _mask_assignments(self, arg: str) -> str:
        """`NAME=VALUE` for a secret NAME (server.secret_env, or a name that says so): as a whole element (`-e`,
        `--env=`) the rest of it; inside a command string (or where the value opens with a quote) a word or a quoted
        value; and each secret key of a JSON text in it."""
        whole = WHOLE_ASSIGNMENT_RE.fullmatch(arg)
        if whole and whole[3][:1] not in "'\"" and not PLACEHOLDER_RE.fullmatch(whole[3]) \
                and self._secret_name(whole[2], whole[3]):
            return f"{whole[1] or ''}{whole[2]}={self.take(whole[2], whole[3])}"

        def word(m: re.Match) -> str:
            value = m[2][1:-1] if m[2][:1] in "'\"" else m[2]
            if not self._secret_name(m[1], value):
                return m[0]
            quote = m[2][0] if m[2][:1] in "'\"" else ""
            return f"{m[1]}={quote}{self.take(m[1], value)}{quote}"

        return self._mask_inline(self._mask_json(ASSIGNMENT_RE.sub(word, arg)))

    def _mask_inline(self, text: str) -> str:
        """In a text (a command string, an environment value): each secret flag's value (INLINE_FLAG_RE), a URL's
        password and an Authorization header's credentials."""
        def flag(m: re.Match) -> str:
            rule = self.flags.get(flag_name(m[1]))
            if rule is None or PLACEHOLDER_RE.search(m[3]):
                return m[0]
            quote = m[3][0] if m[3][:1] in "'\"" else ""
            value = m[3][1:-1] if quote else m[3]
            return f"{m[1]}{m[2]}{quote}{self._take_flag_value(m[1], rule[0], value)}{quote}"

        def after(name: str):  # a value holding a placeholder (masked already) is left whole: filled in once
            return lambda m: m[0] if PLACEHOLDER_RE.search(m[2]) else m[1] + self.take(name, m[2])

        text = INLINE_FLAG_RE.sub(flag, text) if "-" in text else text
        return AUTHORIZATION_RE.sub(after("AUTHORIZATION"), URL_PASSWORD_RE.sub(after("URL_PASSWORD"), text))

    def _mask_json(self, text: str) -> str:
        """Each `"key": "value"` of a JSON text whose key names a secret: the value (as JSON escapes it, so the text
        filled in is the same JSON) taken under the key's name in capitals."""
        if "{" not in text:
            return text

        def pair(m: re.Match) -> str:
            if not looks_secret(m[1], m[3]) or PLACEHOLDER_RE.fullmatch(m[3]):
                return m[0]
            taken = self.take(env_name_of_flag(m[1]), m[3])
            try:
                parsed = json.loads(f'"{m[3]}"')
            except ValueError:
                parsed = m[3]
            if parsed != m[3]:
                self.text_forms[PLACEHOLDER_RE.fullmatch(taken)[1]] = parsed
                self._patterns = None
            return f'"{m[1]}"{m[2]}"{taken}"'

        return JSON_PAIR_RE.sub(pair, text)

    def mask_env(self, env: Mapping[str, str]) -> dict[str, str]:
        """server.env with secret values replaced: under a name of secret_env, or one that looks secret; in any other
        value, a secret key of a JSON text."""
        return {key: self.take(key, value) if self._secret_name(key, value)
                else self._mask_inline(self._mask_json(value)) for key, value in env.items()}

    def fill(self, fields: Mapping[str, Iterable[str]], environ: Mapping[str, str]) -> None:
        """Take the value of every `${NAME}` in these fields that the config did not give from `environ`;
        one not set there (or empty) is listed in `missing` with the field it stands in."""
        for name_of_field, texts in fields.items():
            for text in texts:
                for name in PLACEHOLDER_RE.findall(str(text)):
                    if name in self.values:
                        continue
                    if environ.get(name):
                        self.values[name] = environ[name]
                        self._patterns = None
                    elif (name_of_field, name) not in self.missing:
                        self.missing.append((name_of_field, name))

    # --- filling in (for the process only) ---------------------------------------------------------

    def resolve(self, text: str) -> str:
        def value(match: re.Match) -> str:
            if match[1] not in self.values:
                raise MissingSecret(f"the environment variable {match[1]} is not set; export {match[1]}=... "
                                    f"(the config reads {match[0]} from it)")
            return self.values[match[1]]

        return PLACEHOLDER_RE.sub(value, text)

    def resolve_argv(self, argv: Iterable[str]) -> list[str]:
        return [self.resolve(str(arg)) for arg in argv]

    def resolve_env(self, env: Mapping[str, str]) -> dict[str, str]:
        return {key: self.resolve(value) for key, value in env.items()}

    @property
    def server_key(self) -> str:
        """The first key given to the server with --api-key ("" without one, or while it is missing)."""
        return self.values.get(self.api_key_names[0], "") if self.api_key_names else ""

    # --- masking free text ---------------------------------------------------------------------------

    def _compiled(self) -> "_Patterns":
        if self._patterns is None:
            self._patterns = _Patterns.of({form: placeholder(name)
                                           for name, value in [*self.values.items(), *self.text_forms.items()]
                                           if len(value) >= MIN_TEXT_LEN for form in encodings(value)})
        return self._patterns

    def mask_text(self, text: str) -> str:
        """Every known secret value in `text`, in any of its encodings, replaced by its placeholder."""
        patterns = self._compiled()
        return patterns.text.sub(lambda m: patterns.by_form[m[0]], text) if patterns.text else text

    def mask_value(self, value):
        """mask_text over the strings of a JSON-like value (dicts, lists)."""
        if isinstance(value, dict):
            return {k: self.mask_value(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.mask_value(v) for v in value]
        return self.mask_text(value) if isinstance(value, str) else value


@dataclass(frozen=True)
class _Patterns:
    """One regex over every encoded form of every value (the longest form first: nothing half-masked)."""

    text: re.Pattern | None
    data: re.Pattern | None
    by_form: dict[str, str]
    by_data: dict[bytes, bytes]
    longest_data: int

    @classmethod
    def of(cls, forms: dict[str, str]) -> "_Patterns":
        ordered = sorted(forms, key=len, reverse=True)
        by_data = {_utf8(form): forms[form].encode() for form in ordered}
        data = sorted(by_data, key=len, reverse=True)
        return cls(re.compile("|".join(map(re.escape, ordered))) if ordered else None,
                   re.compile(b"|".join(map(re.escape, data))) if data else None,
                   forms, by_data, max(map(len, data), default=0))


class StreamMasker:
    """Masks a byte stream (a server's stdout) as it arrives. Output is released at line ends (\\n, \\r),
    so a value split between two reads is still found; a line longer than `max_pending` is released
    early, less a tail long enough to hold any secret that starts in the released part."""

    def __init__(self, secrets: Secrets, max_pending: int = 65536) -> None:
        self.secrets = secrets
        self.max_pending = max_pending
        self._pending = b""

    def feed(self, chunk: bytes) -> bytes:
        self._pending += chunk
        end = max(self._pending.rfind(b"\n"), self._pending.rfind(b"\r")) + 1
        if not end and len(self._pending) > self.max_pending:
            end = len(self._pending) - max(self.secrets._compiled().longest_data - 1, 0)
        return self._release(end)

    def flush(self) -> bytes:
        """The rest, at the end of the stream."""
        return self._release(len(self._pending))

    def _release(self, end: int) -> bytes:
        patterns = self.secrets._compiled()
        pattern, replacement, data = patterns.data, patterns.by_data, self._pending
        if pattern is None:
            self._pending = data[end:]
            return data[:end]
        out, start = [], 0
        for match in pattern.finditer(data):
            if match.start() >= end:
                break
            end = max(end, match.end())  # a value found across the cut goes out whole, masked
            out += [data[start:match.start()], replacement[match[0]]]
            start = match.end()
        out.append(data[start:end])
        self._pending = data[end:]
        return b"".join(out)


def _utf8(text: str) -> bytes:
    """The bytes a process writes for `text` (an environment value may carry undecodable bytes)."""
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass")


def shell_join(argv: Iterable[object]) -> str:
    """A paste-ready POSIX command line: each argument quoted, each `${NAME}` read from the shell's
    environment (`--api-key "$VLLM_API_KEY"`), never printed."""
    return " ".join(_shell_word(str(arg)) for arg in argv)


def _shell_word(arg: str) -> str:
    parts, start = [], 0
    for match in PLACEHOLDER_RE.finditer(arg):
        if match.start() > start:
            parts.append(shlex.quote(arg[start:match.start()]))
        parts.append(f'"${match[1]}"')
        start = match.end()
    if start < len(arg) or not parts:
        parts.append(shlex.quote(arg[start:]))
    return "".join(parts)


def mask_server(server, environ: Mapping[str, str]):
    """(the server config as it may be recorded, its Secrets). Secret values in `command`, `argv_template`,
    `extra_args` and `env` become placeholders; each placeholder's value is the config's, else `environ`'s."""
    secrets = Secrets.for_rules(server.secret_flags, server.secret_env)
    masked = server.model_copy(update={
        "command": secrets.mask_argv(server.command), "argv_template": secrets.mask_argv(server.argv_template),
        "extra_args": secrets.mask_argv(server.extra_args), "env": secrets.mask_env(server.env)})
    secrets.fill({"server.command": masked.command, "server.argv_template": masked.argv_template,
                  "server.extra_args": masked.extra_args,
                  **{f"server.env.{key}": [value] for key, value in masked.env.items()}}, environ)
    if server.api_key_env and environ.get(server.api_key_env):  # the load's key: kept out of the log too
        secrets.take(server.api_key_env, environ[server.api_key_env])
    return masked, secrets


def api_key_to_env(argv: list[str]) -> tuple[list[str], dict[str, str]]:
    """A lone `--api-key ${NAME}` taken off the argv: (the argv without it, {VLLM_API_KEY: "${NAME}"}).
    vLLM reads its key from VLLM_API_KEY when the flag is absent, so the key stays out of the process
    table and the server's own "non-default args" log line. Several keys stay on the argv."""
    return _flag_to_env(argv, API_KEY_FLAG, SERVER_KEY_ENV)


def hf_token_to_env(argv: list[str]) -> tuple[list[str], dict[str, str]]:
    """`--hf-token ${NAME}` taken off the argv: (the argv without it, {HF_TOKEN: "${NAME}"}), which vLLM reads
    through huggingface_hub when the flag is absent (vllm/secrets.py). A bare --hf-token (the saved login) stays."""
    return _flag_to_env(argv, HF_TOKEN_FLAG, HF_TOKEN_ENV)


def _flag_to_env(argv: list[str], flag: str, env_name: str) -> tuple[list[str], dict[str, str]]:
    for i, arg in enumerate(argv):
        if flag_name(arg) != flag:
            continue
        _, eq, value = arg.partition("=")
        rest = argv[i + 1:]
        if not eq:
            value = rest[0] if rest and not rest[0].startswith("-") else ""
            rest = rest[1:] if value else rest
            if rest and not rest[0].startswith("-"):
                return argv, {}  # more than one key
        if not PLACEHOLDER_RE.fullmatch(value):
            return argv, {}
        return argv[:i] + rest, {env_name: value}
    return argv, {}
