"""The schedule capability: asked of vLLM's own Python (real processes), else the version table."""
import os
import sys
import textwrap

import pytest

from lookahead_runner.vllm.introspect import ask_speculative_config, parse_answer, vllm_python
from lookahead_runner.vllm.probe import (Capabilities, ScheduleCapability, probe_schedule, schedule_from_answer,
                                         schedule_from_version)
from lookahead_runner.vllm.schedule import form_of_annotation


@pytest.mark.parametrize("annotation, form", [
    ("list[tuple[int, int, int]] | None", "list"),
    ("typing.Optional[typing.List[typing.Tuple[int, int, int]]]", "list"),
    ("None | list[list[int]]", "list"),
    ("dict[str, int] | None", "dict"),
    ("Optional[Dict[str, int]]", "dict"),
    ("Union[collections.abc.Mapping[str, int], None]", "dict"),
    ("str | None", None),
])
def test_form_from_the_annotation_text(annotation, form):
    assert form_of_annotation(annotation) == form


def test_version_table_says_it_is_the_table():
    assert schedule_from_version("0.32.0") == ScheduleCapability(True, "list", "version-table", "vLLM 0.32.0 >= 0.24.0")
    old = schedule_from_version("0.10.2", "nobody answered")
    assert (old.supported, old.form, old.source) == (False, None, "version-table") and "nobody answered" in old.detail


def test_answer_without_the_field_is_an_asked_no():
    cap = schedule_from_answer({"vllm_version": "0.23.1", "has_field": False}, "interpreter /v/bin/python")
    assert (cap.supported, cap.form, cap.source) == (False, None, "asked")
    assert "0.23.1" in cap.detail and "/v/bin/python" in cap.detail


def test_capabilities_round_trip_keeps_how_the_schedule_was_found():
    asked = ScheduleCapability(True, "dict", "asked", "vLLM 0.25.0 asked via interpreter /v/bin/python")
    caps = Capabilities("0.25.0", frozenset({"--port"}), "--help=all", ("vllm",), asked)
    data = caps.to_dict()
    assert data["schedule_capability"] == {"supported": True, "form": "dict", "source": "asked",
                                           "detail": asked.detail}
    assert Capabilities.from_dict(data) == caps
    older_plan = {k: v for k, v in data.items() if k != "schedule_capability"}  # plan.json before issue 16
    assert Capabilities.from_dict(older_plan).schedule_capability.source == "version-table"


def test_which_interpreter_runs_vllm_in_a_command(tmp_path):
    assert vllm_python(["/v/bin/python3", "-m", "vllm.entrypoints.cli.main"]) == "/v/bin/python3"
    assert vllm_python(["python", "/v/bin/vllm"]) == "python"
    assert vllm_python([sys.executable, "-m", "lookahead_runner.sim"]) is None  # not vLLM's: ask the launcher
    bin_dir = tmp_path / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "vllm").write_text("#!/bin/sh\n")
    (bin_dir / "vllm").chmod(0o755)
    assert vllm_python([str(bin_dir / "vllm")]) is None
    (bin_dir / "python").symlink_to(sys.executable)
    assert vllm_python([str(bin_dir / "vllm")]) == str(bin_dir / "python")


def test_answer_is_found_among_warnings():
    out = 'Triton is installed\nLOOKAHEAD-CHECK {"vllm_version": "0.32.0", "has_field": true}\nbye\n'
    assert parse_answer(out) == {"vllm_version": "0.32.0", "has_field": True}
    assert parse_answer("usage: vllm ...\nerror: invalid choice: 'python'\n") is None


def _fake_vllm(root, annotation: str | None) -> None:
    """A `vllm` package whose SpeculativeConfig is a dataclass, the schedule field annotated as given."""
    pkg = root / "vllm"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text('__version__ = "0.25.0"\n')
    field = f"    num_speculative_tokens_per_batch_size: {annotation} = None\n" if annotation else ""
    (pkg / "config.py").write_text("from __future__ import annotations\nimport dataclasses\n\n@dataclasses.dataclass\n"
                                   "class SpeculativeConfig:\n    num_speculative_tokens: int | None = None\n" + field)


def test_a_venvs_vllm_is_asked_through_its_python(tmp_path):
    _fake_vllm(tmp_path / "site", "dict[str, int] | None")
    bin_dir = tmp_path / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "vllm").write_text("#!/bin/sh\nexit 2\n")
    (bin_dir / "vllm").chmod(0o755)
    (bin_dir / "python").symlink_to(sys.executable)
    cap = probe_schedule([str(bin_dir / "vllm")], "0.25.0", 60, {"PYTHONPATH": str(tmp_path / "site")})
    assert (cap.supported, cap.form, cap.source) == (True, "dict", "asked")
    assert f"interpreter {bin_dir / 'python'}" in cap.detail and "dict[str, int] | None" in cap.detail


def test_a_launcher_that_exposes_its_interpreter_is_asked(tmp_path):
    _fake_vllm(tmp_path / "site", "list[tuple[int, int, int]] | None")
    launcher = tmp_path / "my-vllm"
    launcher.write_text(textwrap.dedent(f"""\
        #!/bin/sh
        if [ "$1" = "python" ]; then shift; exec {sys.executable} "$@"; fi
        exit 2
        """))
    launcher.chmod(0o755)
    cap = probe_schedule([str(launcher)], "0.25.0", 60, {"PYTHONPATH": str(tmp_path / "site")})
    assert (cap.supported, cap.form, cap.source) == (True, "list", "asked") and "launcher" in cap.detail


def test_a_python_without_the_field_answers_no_and_nobody_answering_falls_back_to_the_table(tmp_path):
    _fake_vllm(tmp_path / "site", None)
    env = {"PYTHONPATH": str(tmp_path / "site")}
    cap = probe_schedule([sys.executable, "-m", "vllm.entrypoints.cli.main"], "0.25.0", 60, env)
    assert (cap.supported, cap.source) == (False, "asked")
    refusing = tmp_path / "vllm"
    refusing.write_text("#!/bin/sh\necho \"vllm: error: argument subparser: invalid choice: '$1'\" >&2\nexit 2\n")
    refusing.chmod(0o755)
    answer, why = ask_speculative_config([str(refusing)], 60, {"PATH": os.environ["PATH"]})
    assert answer is None and "no answer" in why
    cap = probe_schedule([str(refusing)], "0.32.0", 60)
    assert (cap.supported, cap.form, cap.source) == (True, "list", "version-table") and "not asked" in cap.detail


@pytest.mark.parametrize("version, expected", [("0.32.0", (True, "list")), ("0.10.2", (False, None)),
                                               ("0.6.6", (False, None))])
def test_the_simulator_answers_for_the_vllm_it_emulates(version, expected):
    cap = probe_schedule([sys.executable, "-m", "lookahead_runner.sim", "--sim-version", version], version, 60)
    assert (cap.supported, cap.form, cap.source) == (*expected, "asked"), cap.detail
