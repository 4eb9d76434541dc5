"""One server life's load: headless Locust as a subprocess running the scenario's stages.

The runner never imports locust (it monkey-patches the process); it only builds the argv,
runs it under a deadline and hands back where the files are.
"""
from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

DEFAULT_LOCUSTFILE = Path(__file__).resolve().parents[1] / "locustfiles" / "completions.py"


@dataclass(frozen=True)
class LoadResult:
    exit_code: int
    timed_out: bool
    log_path: Path


def stages_arg(stages) -> str:
    return ",".join(f"{s.users}:{s.duration_s:g}" for s in stages)


def locust_argv(base_url: str, out_dir: Path, model: str, load, locustfile: Path = DEFAULT_LOCUSTFILE) -> list[str]:
    """The `locust --headless` command for one server life (all values as separate arguments)."""
    return [
        sys.executable, "-m", "locust", "-f", os.fspath(locustfile), "--headless",
        "--host", base_url,
        "--stages", stages_arg(load.stages),
        "--prompt-tokens", str(load.prompt_tokens),
        "--output-tokens", str(load.output_tokens),
        "--model", model,
        "--temperature", f"{load.temperature:g}",
        "--request-timeout-s", f"{load.request_timeout_s:g}",
        "--requests-csv", os.fspath(out_dir / "requests.csv"),
        "--stages-csv", os.fspath(out_dir / "stages.csv"),
        "--csv", os.fspath(out_dir / "locust"),
        # in-flight requests finish at the end (not cut), so the life's token count is a closed window
        "--stop-timeout", f"{load.request_timeout_s:g}",
        "--only-summary", "--loglevel", "WARNING",
        *(["--processes", str(load.processes)] if load.processes > 1 else []),
        *load.locust_extra_args,
    ]


def run_locust(argv: list[str], log_path: Path, deadline_s: float, env: dict[str, str] | None = None) -> LoadResult:
    """Run Locust to the end of its stages; kill its group if it overruns the deadline."""
    with open(log_path, "ab") as log:
        process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   env=os.environ | (env or {}), start_new_session=True)
        try:
            return LoadResult(process.wait(timeout=deadline_s), False, log_path)
        except subprocess.TimeoutExpired:
            _kill_group(process)
            return LoadResult(process.wait(), True, log_path)
        except BaseException:
            _kill_group(process)
            process.wait()
            raise


def _kill_group(process: subprocess.Popen) -> None:
    import signal

    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
