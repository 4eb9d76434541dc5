"""Ask the installed vLLM's own Python what `serve --help=all` cannot show: the keys inside
`--speculative-config`, here whether SpeculativeConfig has a per-batch-size schedule and its type.

Two ways, tried in order, each one process:
1. the command names vLLM's interpreter: `python -m vllm...` / `python .../vllm`, or a `vllm` script
   whose directory holds a `python` (a venv's bin/): run `PYTHON -c CHECK` with it;
2. a launcher the project owns answers `COMMAND python -c CHECK` with its interpreter
   (tests/vllm_cpu/vllm-cpu runs its venv's python; the simulator answers for the vLLM it emulates).
   A real `vllm` refuses the unknown subcommand: no answer, nothing else happens.
CHECK prints one JSON line; `ask_speculative_config` returns it (or why nobody answered).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

# Runs inside vLLM's Python: stdlib only, one JSON line out, never raises.
CHECK = r'''
import dataclasses, inspect, json
out = {}
try:
    import vllm
    from vllm.config import SpeculativeConfig as cls
    out["vllm_version"] = str(getattr(vllm, "__version__", ""))
    if dataclasses.is_dataclass(cls):
        fields = {f.name: f.type for f in dataclasses.fields(cls)}
    else:
        fields = {name: p.annotation for name, p in inspect.signature(cls.__init__).parameters.items()}
    key = "num_speculative_tokens_per_batch_size"
    out["has_field"] = key in fields
    if key in fields:
        kind = fields[key]
        out["annotation"] = kind if isinstance(kind, str) else str(kind).replace("typing.", "")
except Exception as err:
    out["error"] = f"{type(err).__name__}: {err}"[:300]
print("LOOKAHEAD-CHECK " + json.dumps(out))
'''
_MARK = "LOOKAHEAD-CHECK "


def _is_python(part: str) -> bool:
    return Path(part).name.startswith("python")


def vllm_python(command: list[str]) -> str | None:
    """The interpreter that runs vLLM in this command, where the command shows it; else None."""
    if not command:
        return None
    head = command[0]
    if _is_python(head):
        runs = command[2] if command[1:2] == ["-m"] and len(command) > 2 else (command[1] if len(command) > 1 else "")
        return head if runs.split(".")[0] == "vllm" or Path(runs).name == "vllm" else None
    found = shutil.which(head)
    if not found:
        return None
    for name in ("python", "python3"):
        sibling = Path(found).parent / name
        if sibling.is_file() and os.access(sibling, os.X_OK):
            return str(sibling)
    return None


def parse_answer(output: str) -> dict | None:
    """CHECK's JSON line from a process's output (warnings may surround it), or None."""
    for line in reversed(output.splitlines()):
        if line.startswith(_MARK):
            try:
                answer = json.loads(line[len(_MARK):])
            except ValueError:
                return None
            return answer if isinstance(answer, dict) else None
    return None


def _run(argv: list[str], timeout_s: float, env: dict[str, str] | None) -> str:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False,
                              env=os.environ | env if env else None, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"({type(err).__name__})"
    return done.stdout + done.stderr


def ask_speculative_config(command: list[str], timeout_s: float = 180.0,
                           env: dict[str, str] | None = None) -> tuple[dict | None, str]:
    """(CHECK's answer, how it was asked) from the first way that imports vLLM; (None, why not) else."""
    ways = []
    python = vllm_python(command)
    if python:
        ways.append(([python, "-c", CHECK], f"interpreter {python}"))
    ways.append(([*command, "python", "-c", CHECK], f"launcher `{' '.join(command)} python`"))
    tried = []
    for argv, how in ways:
        answer = parse_answer(_run(argv, timeout_s, env))
        if answer is not None and "error" not in answer:
            return answer, how
        tried.append(f"{how}: {answer['error'] if answer else 'no answer'}")
    return None, "; ".join(tried)
