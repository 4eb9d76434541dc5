"""The configuration reference (docs/reference/config.md), written from the models themselves: every section and
key with its type, default, allowed values and the description its Field carries, so the page cannot drift from
the code. The docs build writes it (docs/hooks/config_reference.py); tests/unit/test_docs.py fails when the
committed page differs from what this module writes. By hand: `python -m lookahead_runner.config.reference`.

Pure, but for `write_reference` and `main`.
"""
from __future__ import annotations

import json
import sys
import types
import typing
from dataclasses import dataclass
from pathlib import Path

import annotated_types
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from .server import SIM_COMMAND
from .sweep import SweepConfig

PAGE = Path("reference/config.md")   # under the docs folder
HEADER = """# Configuration reference

<!-- Written by lookahead_runner/config/reference.py from the configuration models; do not edit by hand:
     `python -m lookahead_runner.config.reference` rewrites it (the docs build does too), and
     tests/unit/test_docs.py fails when it is stale. -->

Every key of a sweep's TOML file, by section, as the code defines it. Every key is optional on the
simulator; against a real vLLM, a key whose default is one of the simulator's models must be given
(marked *Real server: give it.*). An unknown key or a bad value is one line naming the key and the fix,
exit code 2, before anything starts. `--set SECTION.KEY=VALUE` overrides one key from the command line;
`--dry-run` prints what a config would start. How the keys are used: [configuration](../configuration.md),
[your traffic](../traffic.md), [how the decision is made](../decision.md).
"""
REQUIRED, NOT_SET = "(required)", "(not set)"  # defaults that are no TOML value
# annotated_types constraints as the page writes them
_BOUNDS = ((annotated_types.Ge, ">="), (annotated_types.Gt, ">"), (annotated_types.Le, "<="), (annotated_types.Lt, "<"))


@dataclass(frozen=True)
class Key:
    """One key of one section, as the page lists it."""

    section: str      # "" for the top level, "decision", "load.stages", ...
    name: str
    type: str
    default: str
    allowed: str
    description: str
    real_server: bool  # its default is a simulator's name: a real server needs it given

    @property
    def dotted(self) -> str:
        return f"{self.section}.{self.name}" if self.section else self.name


@dataclass(frozen=True)
class Section:
    name: str            # "" for the top level
    table: str           # as TOML writes its header: "[server]", "[[load.stages]]"
    doc: str
    keys: tuple[Key, ...]


def _model_of(annotation) -> type[BaseModel] | None:
    """The section model a field holds (directly, or as the items of a list), else None."""
    for candidate in (annotation, *typing.get_args(annotation)):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    return None


def type_text(annotation) -> str:
    """A field's type as a TOML writer reads it: `int`, `list[int]`, `"auto" | "nvml"`, `float | "auto"`."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Literal:
        return " | ".join(json.dumps(value) for value in args)
    if origin is typing.Annotated:
        return type_text(args[0])
    if origin in (typing.Union, types.UnionType):
        return " | ".join(type_text(arg) for arg in args if arg is not type(None))
    if origin is list:
        return f"list[{type_text(args[0])}]"
    if origin is dict:
        return "table"
    if annotation is typing.Any:
        return "any"
    return getattr(annotation, "__name__", str(annotation))


def toml_text(value) -> str:
    """A default as TOML writes it; the simulator's command with `python` for this machine's interpreter."""
    if value == SIM_COMMAND:
        value = ["python", *SIM_COMMAND[1:]]
    if isinstance(value, BaseModel):
        value = value.model_dump()
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_text(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{key} = {toml_text(item)}" for key, item in value.items()) + "}" if value else "{}"
    return json.dumps(value)


def default_text(field: FieldInfo) -> str:
    if field.default_factory is not None:
        return toml_text(field.default_factory())
    if field.default is PydanticUndefined:
        return REQUIRED
    if field.default is None:
        return NOT_SET
    return toml_text(field.default)


def allowed_text(field: FieldInfo) -> str:
    """What the field accepts beyond its type: the bounds of its metadata, or what its validator says."""
    extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
    if "allowed" in extra:
        return str(extra["allowed"])
    bounds = [f"{sign} {getattr(meta, kind.__name__.lower())}" for meta in field.metadata
              for kind, sign in _BOUNDS if isinstance(meta, kind)]
    return ", ".join(bounds)


def _section_keys(section: str, model: type[BaseModel]) -> tuple[list[Key], list[tuple[str, type[BaseModel], bool]]]:
    """The keys of one model, and the sub-models it holds: (dotted name, model, an array of tables)."""
    keys, subs = [], []
    for name, field in model.model_fields.items():
        sub = _model_of(field.annotation)
        dotted = f"{section}.{name}" if section else name
        if sub is not None and typing.get_origin(field.annotation) is not list:
            subs.append((dotted, sub, False))
            continue
        if sub is not None:
            subs.append((dotted, sub, True))
        kind = f"list of tables ([[{dotted}]])" if sub is not None else type_text(field.annotation)
        extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
        keys.append(Key(section, name, kind, default_text(field), allowed_text(field),
                        " ".join((field.description or "").split()), bool(extra.get("simulator_default"))))
    return keys, subs


def sections(model: type[BaseModel] = SweepConfig) -> list[Section]:
    """Every section of the config, the top level first, each sub-table after its parent."""
    out: list[Section] = []
    todo: list[tuple[str, type[BaseModel], bool]] = [("", model, False)]
    while todo:
        name, section_model, array = todo.pop(0)
        keys, subs = _section_keys(name, section_model)
        table = "" if not name else f"[[{name}]]" if array else f"[{name}]"
        out.append(Section(name, table, " ".join((section_model.__doc__ or "").split()), tuple(keys)))
        todo[:0] = subs  # depth first: [load] then [[load.stages]], before [grid]
    return out


def _cell(text: str) -> str:
    """Plain text in a table cell (a code span keeps its pipes: the table reads past them)."""
    return text.replace("|", "\\|")


def _code(text: str) -> str:
    return f"`{text}`" if text else ""


def reference_text(model: type[BaseModel] = SweepConfig) -> str:
    """The whole page."""
    parts = [HEADER]
    for section in sections(model):
        title = section.table or "Top level"
        anchor = f"section-{section.name or 'top-level'}"  # the keys' own anchors are their dotted names
        parts.append(f"## {_code(title) if section.table else title} {{#{anchor}}}\n")
        if section.doc:
            parts.append(section.doc + "\n")
        parts.append("| key | type | default | allowed | what it is |\n|---|---|---|---|---|")
        for key in section.keys:
            note = " *Real server: give it.*" if key.real_server else ""
            default = key.default if key.default in (REQUIRED, NOT_SET) else _code(key.default)
            kind = key.type if key.type.startswith("list of tables") else _code(key.type)
            parts.append(f"| <a id=\"{key.dotted}\"></a>`{key.name}` | {kind} | {default} | "
                         f"{_cell(key.allowed)} | {_cell(key.description)}{note} |")
        parts.append("")
    return "\n".join(parts)


def write_reference(docs_dir: Path) -> bool:
    """Write the page under `docs_dir` when it differs from what is there; True when it was written."""
    path = Path(docs_dir) / PAGE
    text = reference_text()
    if path.is_file() and path.read_text(encoding="utf-8") == text:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return True


def main(argv: list[str] | None = None) -> int:
    """`python -m lookahead_runner.config.reference [DOCS_DIR]` (default: docs)."""
    args = sys.argv[1:] if argv is None else argv
    docs_dir = Path(args[0] if args else "docs")
    written = write_reference(docs_dir)
    print(f"{docs_dir / PAGE}: {'written' if written else 'up to date'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
