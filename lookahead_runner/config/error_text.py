"""A config error as one line a person reads once: the field and what is wrong, the nearest key for an unknown one
(else the keys its section takes), an example value for a wrong type (the key's default), and the blame on
`--set KEY` where `--set` gave the value, in `--set`'s own form, not on the TOML file. Pure.
"""
from __future__ import annotations

import difflib
import json
import shlex
import typing
from dataclasses import dataclass

from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

# pydantic's own messages that already say what to write (or are the config's own words): no example added
_NO_EXAMPLE = {"extra_forbidden", "value_error", "assertion_error", "literal_error", "missing", "enum"}


@dataclass(frozen=True)
class Source:
    """Where a config's values came from: a file (or "defaults", "config", "ramp"), the keys --set gave, and the keys
    other flags gave beside the file (`command_keys`, from what `command_name` names: --serve-cmd/--bench-cmd)."""

    name: str
    set_keys: tuple[str, ...] = ()
    command_keys: tuple[str, ...] = ()
    command_name: str = ""

    def set_key(self, field: str) -> str:
        """The --set key that gave `field` (the key itself, a table above it, or a key inside it), or ""."""
        return _giver(self.set_keys, field)

    def line(self, field: str, message: str) -> str:
        """`FILE: FIELD: MESSAGE`, `--set KEY: MESSAGE` where --set gave the field, or `COMMANDS: FIELD: MESSAGE`
        where the commands did."""
        key = self.set_key(field)
        if key:
            return f"--set {key}: {message}" if key == field else f"--set {key}: {field}: {message}"
        name = self.command_name if self.command_name and _giver(self.command_keys, field) else self.name
        return f"{name}: {field}: {message}" if field else f"{name}: {message}"


def _giver(keys: tuple[str, ...], field: str) -> str:
    """The key of `keys` that gave `field` (the key itself, a table above it, or a key inside it), or ""."""
    for key in keys:
        if field and (field == key or field.startswith(key + ".") or key.startswith(field + ".")):
            return key
    return ""


def _model_of(annotation) -> type[BaseModel] | None:
    for candidate in (annotation, *typing.get_args(annotation)):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    return None


def _walk(root: type[BaseModel], loc: tuple) -> tuple[type[BaseModel] | None, str, FieldInfo | None]:
    """(the model holding the loc's last key, that key, its field or None) along a pydantic error's loc."""
    model: type[BaseModel] | None = root
    names = [part for part in loc if isinstance(part, str)]
    for depth, name in enumerate(names):
        field = model.model_fields.get(name) if model is not None else None
        if depth == len(names) - 1:
            return model, name, field
        model = _model_of(field.annotation) if field is not None else None
    return None, "", None


def _default(field: FieldInfo):
    """The field's default as an example value, or None where it is none (required, empty, a simulator's name)."""
    if field.is_required():
        return None
    value = field.get_default(call_default_factory=True)
    empty = value is None or value == "" or (isinstance(value, (list, dict)) and not value)
    extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
    return None if empty or extra.get("simulator_default") else _plain(value)


def _plain(value):
    """A default of models (load.stages) as the TOML and JSON values a user writes."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", exclude_none=True)
    return [_plain(item) for item in value] if isinstance(value, list) else value


def _toml(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(_toml(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{key} = {_toml(item)}" for key, item in value.items()) + " }"
    return repr(value) if isinstance(value, float) else json.dumps(value)


def _unknown_key(model: type[BaseModel] | None, name: str, dotted_parent: str, by_set: bool) -> str:
    keys = list(model.model_fields) if model is not None else []
    near = difflib.get_close_matches(name, keys, n=1)
    if near:
        return f"unknown key; did you mean {dotted_parent + '.' if by_set and dotted_parent else ''}{near[0]}?"
    where = f"[{dotted_parent}]" if dotted_parent else "the top level"
    return f"unknown key; remove it or check its spelling ({where} takes {', '.join(keys)})" if keys else \
        "unknown key; remove it or check its spelling"


def error_line(err: ValidationError, source: str | Source, root: type[BaseModel] | None = None) -> str:
    """The first of pydantic's errors as one line (`root`: the model validated, for the keys and defaults)."""
    source = source if isinstance(source, Source) else Source(source)
    first = err.errors()[0]
    loc = tuple(first["loc"])
    field = ".".join(str(p) for p in loc)
    msg = first["msg"]
    model, name, info = _walk(root, loc) if root is not None and loc else (None, "", None)
    dotted = ".".join(part for part in loc if isinstance(part, str))
    set_key = source.set_key(field)
    if first["type"] == "extra_forbidden":
        msg = _unknown_key(model, name, dotted.rpartition(".")[0], bool(set_key))
    elif msg.startswith("Value error, "):
        msg = msg[len("Value error, "):]
        set_key = set_key or next((key for key in source.set_keys if msg.startswith(key)), "")
        if not field and set_key:  # a rule over several sections that opens with the key --set gave
            return f"--set {set_key}: {msg}"
    elif first["type"] not in _NO_EXAMPLE and info is not None and (value := _default(info)) is not None:
        if not set_key:
            msg += f"; e.g. {name} = {_toml(value)}"
        elif set_key == dotted:
            text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
            msg += f"; e.g. --set {shlex.quote(f'{dotted}={text}')}"
    return source.line(field, msg)
