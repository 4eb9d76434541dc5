"""The run folder: where every file of a sweep lives, written as soon as it exists (plan.json and
status.json, typed: plan.py).

    <out>/<run-id>/plan.json, <setting>/r<repeat>/{server.log, server.json, locust*, requests.csv,
    stages.csv, gpu.csv, server_metrics.csv, status.json}, confirm/r<repeat>/ (the confirmation life),
    summary.csv, lives.csv, decision.json, report.html; .cache/ (in the run folder and in each life's: typed
    copies of the CSVs and the performance model's fit, rebuilt from the CSVs whenever missing or older)
"""
from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pandas as pd

from ..config.masking import PLACEHOLDER_RE, looks_secret

NAME_FIELDS = {"api_key_env"}  # hold the name of a variable, not its value
CACHE_DIR = ".cache"           # what `report` keeps to read a run folder faster; the CSVs are the record


def new_run_dir(out_root: Path, name: str) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-.") or "sweep"  # no "..", no hidden folder
    run_dir = Path(out_root) / f"{stamp}-{safe}"
    suffix = 1
    while run_dir.exists():
        suffix += 1
        run_dir = Path(out_root) / f"{stamp}-{safe}-{suffix}"
    run_dir.mkdir(parents=True)
    return run_dir


def life_key(setting: str, repeat: int) -> str:
    """A life's name and its folder under the run folder: k4/r1."""
    return f"{setting}/r{repeat}"


def life_dir(run_dir: Path, setting: str, repeat: int) -> Path:
    return Path(run_dir) / life_key(setting, repeat)


def write_json(path: Path, data: dict) -> None:
    """Atomic: a reader (or a crash) never sees half a file."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    try:
        tmp.write_text(json.dumps(data, indent=1, default=str), encoding="utf-8")
    except OSError as err:  # a failed write() names no file: say which one (disk full, read-only)
        raise OSError(err.errno, err.strerror, os.fspath(path)) from None
    os.replace(tmp, path)


def read_json(path: Path) -> dict:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def redact(value):
    """Drop secret-looking values from anything headed for disk (an env key named like a secret); a
    `${NAME}` placeholder stays: it is a name, and a resumed run reads the value from there. Values the
    config marks as secrets are masked before (masking.Secrets.mask_value)."""
    if isinstance(value, dict):
        return {k: ("<redacted>" if isinstance(v, str) and looks_secret(str(k), v) and k not in NAME_FIELDS
                    and not PLACEHOLDER_RE.fullmatch(v) else redact(v)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact(v) for v in value]
    return value


def write_summary(run_dir: Path, summary: pd.DataFrame) -> Path:
    path = Path(run_dir) / "summary.csv"
    tmp = path.with_suffix(".csv.tmp")
    summary.to_csv(tmp, index=False)
    os.replace(tmp, path)
    return path


def read_csv(path: Path) -> pd.DataFrame:
    """A CSV that may be missing or empty (a life that died early): an empty frame then."""
    try:
        return pd.read_csv(path)
    except (OSError, pd.errors.EmptyDataError):
        return pd.DataFrame()


LIFE_COLUMNS = ("life", "setting", "k", "repeat", "status", "reason", "client_output_tokens",
                "server_generation_tokens", "difference", "cut_requests", "prompt_method", "prompt_note", "start_s",
                "measure_s")

WHERE_COLUMNS = ["node", "gpus", "slot", "t_start_s", "t_end_s"]


def write_lives(run_dir: Path, lives: list[dict]) -> Path:
    """lives.csv: one row per server life: its state, its server-seconds (start_s, measure_s) and the token
    accounting of its closed window; with workload variants, one row per life and variant, each variant's
    block being a closed window of its own; lives run on a Ray cluster add where and when each ran."""
    rows = []
    for l in lives:
        life = {"life": l["dir"], "setting": l["setting"], "k": l["k"], "repeat": l["repeat"],
                "status": l.get("status", "missing"), "reason": l.get("reason", ""),
                "start_s": l.get("start_s"), "measure_s": l.get("measure_s")}
        life |= {column: l[column] for column in WHERE_COLUMNS if column in l}
        blocks = l.get("variants") or [{"tokens": l.get("tokens", {})}]
        rows += [life | {"variant": block.get("variant", "")} | block.get("tokens", {}) for block in blocks]
    columns = list(LIFE_COLUMNS)
    if any(row["variant"] for row in rows):
        columns.insert(columns.index("status"), "variant")
    if any("slot" in row for row in rows):  # lives on a Ray cluster: where and when each ran (overlaps show)
        columns += WHERE_COLUMNS
    path = Path(run_dir) / "lives.csv"
    pd.DataFrame(rows, columns=columns).to_csv(path, index=False)
    return path
