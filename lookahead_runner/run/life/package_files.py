"""The package's own files a run needs, checked before anything starts: one line and exit 2 when one is missing.

A wheel that left one out (or a damaged install) would otherwise fail in every server life, for a cause
known before the first: Locust cannot load its locustfile, the report cannot render, the prompt cannot be
built. Files the config names (load.prompt_file) are checked where the config is read (config/loading.py).
"""
from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the lookahead_runner package folder, in a checkout or site-packages

# what each is for -> its path under the package (pyproject's package-data ships the non-Python ones)
NEEDED = {
    "locustfile": "workload/locustfile.py",
    "report template": "report/templates/report.html.j2",
    "built-in prompt corpus": "workload/corpus/builtin.txt",
    "demo preset": "presets/demo.toml",
}
NEEDED_WITH_WEB = {"live charts' script": "live/static/live_charts.js",
                   "live view's sweep script": "live/static/follow_sweep.js"}


class PackageFileError(RuntimeError):
    """A file of the installed package is missing or unreadable (exit code 2)."""


def package_file(relative: str) -> Path:
    return ROOT / relative


def check_package_files(web: bool = False) -> None:
    """Raise PackageFileError naming the first missing or unreadable file and the fix."""
    needed = NEEDED | (NEEDED_WITH_WEB if web else {})
    for what, relative in needed.items():
        path = package_file(relative)
        problem = _unreadable(path)
        if problem:
            raise PackageFileError(f"the installed package's {what} {path} {problem}; reinstall lookahead-runner "
                                   "(pip install --force-reinstall lookahead-runner, or pip install -e . in a checkout)")


def _unreadable(path: Path) -> str:
    """Why the file cannot be read ("" when it can)."""
    if not path.exists():
        return "does not exist"
    if not path.is_file():
        return "is not a file"
    try:
        with path.open("rb") as handle:
            handle.read(1)
    except OSError as err:
        return f"cannot be read ({err.strerror or err})"
    return ""
