"""The configuration reference (config/reference.py): every key of every section, with its type, default, allowed
values and description, as the models define them."""
from __future__ import annotations

import re
import typing

import pytest
from pydantic import Field

from lookahead_runner.config import Strict, SweepConfig
from lookahead_runner.config.reference import reference_text, sections, write_reference


def _cells(row: str) -> list[str]:
    """A table row's cells: split at each pipe outside a code span and not escaped."""
    cells, cell, in_code, escaped = [], "", False, False
    for char in row:
        if char == "|" and not in_code and not escaped:
            cells.append(cell.strip())
            cell = ""
        else:
            cell += char
        in_code ^= char == "`"
        escaped = char == "\\"
    return cells + [cell.strip()]


def _rows(text: str) -> dict[str, list[str]]:
    """The page's table rows by their key's anchor: [type, default, allowed, description]."""
    rows = {}
    for line in text.splitlines():
        match = re.match(r'\| <a id="([\w.]+)"></a>`\w+` \| (.*) \|$', line)
        if match:
            rows[match.group(1)] = _cells(match.group(2))
    return rows


def _all_keys(model=SweepConfig, prefix="") -> set[str]:
    keys = set()
    for name, field in model.model_fields.items():
        if isinstance(field.annotation, type) and issubclass(field.annotation, Strict):  # a section
            keys |= _all_keys(field.annotation, f"{prefix}{name}.")
            continue
        keys.add(prefix + name)
        items = typing.get_args(field.annotation)
        if items and isinstance(items[0], type) and issubclass(items[0], Strict):  # an array of tables
            keys |= _all_keys(items[0], f"{prefix}{name}.")
    return keys


def test_every_key_of_every_section_has_a_row():
    rows = _rows(reference_text())
    assert set(rows) == _all_keys()
    assert {"server.command", "speculation.draft_model", "load.stages", "load.stages.users", "grid.values",
            "sweep.strategy", "decision.kv_headroom_frac", "cluster.engine", "name"} <= set(rows)


def test_every_key_says_what_it_is():
    """A Field without a description would be a row without its meaning."""
    undescribed = [key.dotted for section in sections() for key in section.keys if not key.description]
    assert undescribed == []


@pytest.mark.parametrize("key, default", [("decision.tie_tolerance_frac", "`0.03`"),
                                          ("decision.throughput_gain_frac", "`0.02`"),
                                          ("decision.memory_rise_frac", "`0.05`"),
                                          ("decision.kv_headroom_frac", "`0.05`"),
                                          ("decision.confidence", "`0.9`"),
                                          ("load.repeats", "`1`"), ("load.seed", "(not set)"),
                                          ("load.stages.duration_s", "(required)")])
def test_the_thresholds_and_defaults_are_shown(key, default):
    assert _rows(reference_text())[key][1] == default


def test_types_allowed_values_and_the_simulator_defaults():
    rows = _rows(reference_text())
    assert rows["server.memory_source"][0] == '`"auto" | "nvml" | "sim" | "process" | "dcgm" | "none"`'
    assert rows["load.repeats"][0] == '`int | "auto"`' and rows["load.repeats"][2] == '1 to 100, or "auto"'
    assert rows["decision.kv_headroom_frac"][2] == ">= 0, <= 1"
    assert rows["decision.interval_level"][2] == "> 0.5, < 1"
    # the simulator's command without this machine's interpreter path
    assert rows["server.command"][1] == '`["python", "-m", "lookahead_runner.sim"]`'
    for key in ("server.model", "speculation.draft_model"):
        assert rows[key][3].endswith("*Real server: give it.*"), rows[key]
    assert not rows["speculation.method"][3].endswith("*Real server: give it.*")


def test_every_default_naming_a_simulator_model_is_marked_for_a_real_server():
    """A new key defaulting to a simulator model must be given against real vLLM too (SweepConfig checks the mark)."""
    for section in sections():
        for key in section.keys:
            if key.default.startswith('"sim/'):
                assert key.real_server, key.dotted


def test_a_new_field_shows_up_with_its_description():
    class Extra(Strict):
        """A section."""

        knob: int = Field(3, ge=1, description="what the knob does")

    class Config(Strict):
        extra: Extra = Field(default_factory=Extra)

    text = reference_text(Config)
    assert "## `[extra]` {#section-extra}" in text
    assert '| <a id="extra.knob"></a>`knob` | `int` | `3` | >= 1 | what the knob does |' in text


def test_write_reference_writes_only_a_changed_page(tmp_path):
    assert write_reference(tmp_path) is True
    page = tmp_path / "reference" / "config.md"
    assert page.read_text(encoding="utf-8") == reference_text()
    assert write_reference(tmp_path) is False  # mkdocs serve would rebuild on every write
    page.write_text("stale", encoding="utf-8")
    assert write_reference(tmp_path) is True and page.read_text(encoding="utf-8") == reference_text()
