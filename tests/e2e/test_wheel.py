"""The wheel holds what an installed run needs: `python -m build --wheel` on a copy of the checkout, then its
contents read. Every file of the package folder (the locustfile, report template, corpus, presets, live script)
must be in it, so a new data file that pyproject's package-data misses fails here, not in a user's first sweep.
(.ci/run installs the wheel in a fresh venv and runs a sweep from it.)"""

from __future__ import annotations

import configparser
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib

from lookahead_runner.run.life.package_files import NEEDED, NEEDED_WITH_WEB

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
BUILD_TIMEOUT_S = 300


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> zipfile.ZipFile:
    """Built from a copy, so the checkout gets no build/ or egg-info folder."""
    source = tmp_path_factory.mktemp("source")
    for name in ("pyproject.toml", "README.md"):
        shutil.copyfile(REPO / name, source / name)
    shutil.copytree(REPO / "lookahead_runner", source / "lookahead_runner",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    dist = source / "dist"
    # --no-isolation: with this venv's setuptools (the test extra's), so the test needs no package index
    argv = [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(dist), str(source)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    (built,) = dist.glob("lookahead_runner-*.whl")
    with zipfile.ZipFile(built) as archive:
        yield archive


def test_the_wheel_holds_the_locustfile_templates_corpus_and_presets(wheel):
    names = set(wheel.namelist())
    for relative in (NEEDED | NEEDED_WITH_WEB).values():
        assert f"lookahead_runner/{relative}" in names, relative
    locustfile = f"lookahead_runner/{NEEDED['locustfile']}"
    assert wheel.read(locustfile) == (REPO / locustfile).read_bytes()


def test_the_wheel_holds_every_file_of_the_package_folder(wheel):
    source = {path.relative_to(REPO).as_posix() for path in (REPO / "lookahead_runner").rglob("*")
              if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"}
    assert {name for name in source if name.rsplit(".", 1)[-1] != "py"} >= {"lookahead_runner/presets/demo.toml"}
    assert source - set(wheel.namelist()) == set()


def test_the_wheel_installs_both_commands(wheel):
    (entry_points,) = [name for name in wheel.namelist() if name.endswith(".dist-info/entry_points.txt")]
    parser = configparser.ConfigParser()
    parser.read_string(wheel.read(entry_points).decode())
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"]
    assert {"lookahead-runner", "lookahead-sim-vllm"} <= set(scripts)
    assert dict(parser["console_scripts"]) == scripts
