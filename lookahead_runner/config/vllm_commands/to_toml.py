"""The config keys a command line set, written as a TOML file the user keeps: every key under its section with the
part of the command it came from as a comment above it, secrets as `${NAME}` (read from the environment when the
sweep runs, never written). Pure: entries in, text out; `tomllib` reads it back to the same values."""
from __future__ import annotations

import json
import re
import textwrap

from ..masking import Secrets, shell_join
from .entries import Mapped

BARE_KEY_RE = re.compile(r"[A-Za-z0-9_-]+")
COMMENT_WIDTH = 116
SECTION_ORDER = ("server", "speculation", "load", "decision")


def masked(entries: list[Mapped], secrets: Secrets | None = None) -> tuple[list[Mapped], list[str]]:
    """The entries with every secret of the server's argv and environment as `${NAME}` (the names in order of
    appearance), as every file the runner writes records them (config/masking.py); `secrets`: one shared with the
    header's commands (masked_command), so that a value has one NAME in both."""
    secrets = secrets if secrets is not None else Secrets.for_rules()
    out = []
    for entry in entries:
        value = entry.value
        if entry.key in ("server.command", "server.argv_template", "server.extra_args"):
            value = secrets.mask_argv(value)
        elif entry.key == "server.env":
            value = secrets.mask_env(value)
        out.append(Mapped(entry.key, value, entry.origin))
    return out, list(secrets.values)


def masked_command(argv: list[str], secrets: Secrets | None = None) -> str:
    """A command line for a comment: its secrets as shell variables ("$HF_TOKEN")."""
    return shell_join((secrets if secrets is not None else Secrets.for_rules()).mask_argv(argv))


def to_toml(entries: list[Mapped], header: list[str]) -> str:
    """`header` as comment lines, then one table per section, each key with its origin as a comment above it."""
    lines = [f"# {_comment(line)}" if line else "#" for line in header]
    sections = sorted({entry.key.split(".", 1)[0] for entry in entries},
                      key=lambda name: SECTION_ORDER.index(name) if name in SECTION_ORDER else len(SECTION_ORDER))
    for section in sections:
        lines += ["", f"[{section}]"]
        for entry in entries:
            head, _, key = entry.key.partition(".")
            if head != section:
                continue
            lines += [f"# {part}" for part in textwrap.wrap(_comment(entry.origin), COMMENT_WIDTH)]
            lines.append(f"{_key(key)} = {_value(entry.value)}")
    return "\n".join(lines) + "\n"


def _comment(text: str) -> str:
    """A comment's text on one line: a TOML comment holds no control character (a newline in a quoted argument would
    end it), each shown escaped."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _key(key: str) -> str:
    return key if BARE_KEY_RE.fullmatch(key) else _string(key)


def _string(text: str) -> str:
    """A TOML basic string: JSON's escapes are TOML's, less DEL, which TOML wants escaped too."""
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def _value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, list):
        return "[" + ", ".join(_value(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{_key(str(k))} = {_value(v)}" for k, v in value.items()) + " }" if value else "{}"
    raise TypeError(f"no TOML value for {type(value).__name__}")
