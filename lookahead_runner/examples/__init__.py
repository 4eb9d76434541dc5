"""The example configs that ship in the package, so an installed wheel has them: each is named by its file
(eagle3-chat.toml is "eagle3-chat") and described by its first line; written out, an example takes the request set
it reads along, beside it, and names it by the path it was written to, so the config loads as it is from the folder
it was written from. Nothing a user has is overwritten unless asked (force)."""
from __future__ import annotations

import difflib
import re
import sys
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from ..contracts.paths import write_whole

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

FOLDER = resources.files(__name__)


class ExampleError(ValueError):
    """An unknown example name or a file that is already there: one line for the user."""


@dataclass(frozen=True)
class Example:
    name: str
    summary: str        # the first line, without its "# "
    text: str

    @property
    def request_set(self) -> str:
        """The request set the example reads (load.requests), relative to the examples folder; "" for none."""
        return tomllib.loads(self.text).get("load", {}).get("requests", "")


def catalogue() -> list[Example]:
    """Every example, by name."""
    examples = []
    for entry in sorted(FOLDER.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".toml"):
            text = entry.read_text(encoding="utf-8")
            examples.append(Example(entry.name[:-len(".toml")], text.splitlines()[0].removeprefix("# "), text))
    return examples


def _renamed(text: str, old: str, new: str) -> str:
    """The TOML text with the quoted path `old` written as `new`, a comment after it kept in its column."""
    quoted = re.search(rf'"{re.escape(old)}"( *)(?=#)?', text)
    if quoted is None:
        return text
    gap = quoted.group(1)
    if gap and text[quoted.end():quoted.end() + 1] == "#":
        gap = " " * max(1, len(gap) + len(old) - len(new))
    return text[:quoted.start()] + f'"{new}"' + gap + text[quoted.end():]


def listing() -> str:
    """Every example's name and first line, one a line, then how to write one."""
    examples = catalogue()
    width = max(len(example.name) for example in examples)
    lines = [f"{example.name:<{width}}  {example.summary}" for example in examples]
    return "\n".join([*lines, "write one: lookahead-runner example NAME [--out FILE.toml] [--force]"])


def find(name: str) -> Example:
    examples = {example.name: example for example in catalogue()}
    if name in examples:
        return examples[name]
    nearest = difflib.get_close_matches(name, list(examples), n=1, cutoff=0) or sorted(examples)[:1]
    raise ExampleError(f"no example {name!r}; the nearest is {nearest[0]!r} (lookahead-runner example lists them)")


def write(example: Example, out: Path, force: bool = False) -> list[Path]:
    """Write the example to `out` and its request set beside it; the paths written. A file already there is an
    ExampleError unless `force`, checked before anything is written; a request set already there with the same
    bytes is left as it is (two examples reading one set)."""
    text, files = example.text, [(out, example.text.encode("utf-8"))]
    if example.request_set:
        source = FOLDER
        for part in example.request_set.split("/"):   # Traversable.joinpath takes one part before Python 3.11
            source = source / part
        target = out.parent / source.name
        if target.resolve() == out.resolve():
            raise ExampleError(f"{out.as_posix()} is where the example's request set goes; write the config to "
                               "another name, e.g. --out my-sweep.toml")
        text = _renamed(text, example.request_set, target.as_posix())
        try:
            files = [(out, text.encode("utf-8")), (target, source.read_bytes())]
        except UnicodeEncodeError:
            raise ExampleError(f"{out.as_posix()}: the path is not UTF-8 text, which the config's load.requests "
                               "must be; write it to another folder") from None
    if not force:
        for path, data in files:
            if path.exists() and (path == out or path.read_bytes() != data):
                raise ExampleError(f"{path.as_posix()} exists: pass --force to overwrite it, or --out OTHER.toml")
    done = []
    for path, data in files:
        if path != out and path.exists() and path.read_bytes() == data:
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        write_whole(path, data, replace=force)
        done.append(path)
    return done
