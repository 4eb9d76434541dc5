"""The start-up check of the package's own files (run/life/package_files.py): a damaged install is refused with one
line and exit 2 before anything starts, and `lookahead-runner locustfile` prints the locustfile the runner uses."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from lookahead_runner import cli
from lookahead_runner.run.life import load, package_files
from lookahead_runner.run.life.package_files import NEEDED, NEEDED_WITH_WEB, PackageFileError, check_package_files

EVERY_FILE = NEEDED | NEEDED_WITH_WEB


@pytest.fixture
def copied_package(tmp_path, monkeypatch) -> Path:
    """A copy of the package's needed files, which the check reads instead of the real package."""
    root = tmp_path / "lookahead_runner"
    for relative in EVERY_FILE.values():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(package_files.ROOT / relative, root / relative)
    monkeypatch.setattr(package_files, "ROOT", root)
    return root


def _refused(capsys, argv: list[str], out: Path) -> str:
    """Run the CLI; assert exit 2, one line on stderr, and no run folder; return that line.

    A run command gets --dry-run, so that a check that let the damage through fails this test at once (exit 0)."""
    assert cli.main(argv + ["--dry-run", "--out", str(out)] if argv[0] != "locustfile" else argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert not out.exists()  # nothing started: not even the run folder
    return err


def test_the_checkout_has_every_file_and_the_runner_uses_the_checked_locustfile(capsys):
    check_package_files(web=True)
    assert load.DEFAULT_LOCUSTFILE == package_files.ROOT / NEEDED["locustfile"]
    assert load.DEFAULT_LOCUSTFILE.read_text(encoding="utf-8").count("class StreamingCompletionsUser") == 1
    assert cli.main(["locustfile"]) == 0
    assert capsys.readouterr().out == f"{load.DEFAULT_LOCUSTFILE}\n"


@pytest.mark.parametrize("what", sorted(NEEDED))
def test_a_missing_file_is_refused_before_the_first_life(what, copied_package, tmp_path, capsys):
    missing = copied_package / NEEDED[what]
    missing.unlink()
    err = _refused(capsys, ["demo"], tmp_path / "runs")
    assert err.startswith(f"lookahead-runner: the installed package's {what} {missing} does not exist; reinstall")


def test_a_folder_in_the_place_of_a_file_is_refused(copied_package, tmp_path, capsys):
    template = copied_package / NEEDED["report template"]
    template.unlink()
    template.mkdir()
    err = _refused(capsys, ["sweep", "--config", "missing.toml"], tmp_path / "runs")
    assert f"report template {template} is not a file" in err  # before the config is even read


def test_an_unreadable_file_is_refused(copied_package, tmp_path, capsys, monkeypatch):
    locustfile = copied_package / NEEDED["locustfile"]
    real_open = Path.open

    def denied(self, *args, **kwargs):  # tests run as root, for whom a chmod 000 file stays readable
        if self == locustfile:
            raise PermissionError(13, "Permission denied")
        return real_open(self, *args, **kwargs)

    monkeypatch.setattr(Path, "open", denied)
    err = _refused(capsys, ["locustfile"], tmp_path / "runs")
    assert f"locustfile {locustfile} cannot be read (Permission denied)" in err


def test_the_live_charts_script_is_needed_with_web_only(copied_package, tmp_path, capsys):
    (copied_package / NEEDED_WITH_WEB["live charts' script"]).unlink()
    check_package_files(web=False)
    with pytest.raises(PackageFileError, match="live charts' script"):
        check_package_files(web=True)
    assert "live charts' script" in _refused(capsys, ["demo", "--web"], tmp_path / "runs")
